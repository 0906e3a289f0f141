package match

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/triggerd/triggerd/triggers"
)

// Params are a trigger's per-kind parameters. Which of them apply to which
// kind is given by ParamsFor; an empty list (or a zero ColumnID) means no
// restriction.
type Params struct {
	// Repositories restricts the trigger to these "owner/repo" repositories,
	// compared case-insensitively.
	Repositories []string `json:"repositories,omitempty"`
	// Branches are branch names or path.Match patterns ("release/*") the
	// event's branch (Resource.Ref) must match; an event about a tag
	// (Resource.RefType "tag", a tag push) matches none.
	Branches []string `json:"branches,omitempty"`
	// Labels restricts the trigger to events carrying at least one of these
	// labels, compared case-insensitively.
	Labels []string `json:"labels,omitempty"`
	// ColumnID restricts new_project_card to cards created in this column.
	ColumnID int64 `json:"column_id,omitempty"`
	// Conclusions restricts workflow kinds to these conclusions.
	Conclusions []string `json:"conclusions,omitempty"`
	// ReviewStates restricts new_pull_request_review to these review states.
	ReviewStates []string `json:"review_states,omitempty"`
	// Environments restricts deployment kinds to these targets.
	Environments []string `json:"environments,omitempty"`
	// Organization is the organisation whose hook serves the
	// organisation-level kinds: required for project_item_status_changed;
	// for new_repository, without it the repositories the account itself
	// creates are polled (GitHub has no webhook for a personal account).
	Organization string `json:"organization,omitempty"`
	// Mentioned restricts new_mention from repositories to mentions of
	// these logins (Resource.Mentioned), compared case-insensitively;
	// AnyLogin takes every mention. The registry sets it to the account's
	// own login when a trigger is created without it.
	Mentioned []string `json:"mentioned,omitempty"`
}

// AnyLogin in Params.Mentioned takes a mention of anyone.
const AnyLogin = "*"

// Parameter names, as they appear in JSON and in ParamsFor.
const (
	paramRepositories = "repositories"
	paramBranches     = "branches"
	paramLabels       = "labels"
	paramColumnID     = "column_id"
	paramConclusions  = "conclusions"
	paramReviewStates = "review_states"
	paramEnvironments = "environments"
	paramOrganization = "organization"
	paramMentioned    = "mentioned"
)

// paramOrder is the order ParamsFor lists parameters in.
var paramOrder = []string{paramRepositories, paramBranches, paramLabels, paramColumnID,
	paramConclusions, paramReviewStates, paramEnvironments, paramOrganization, paramMentioned}

// noRepositoryKinds are the code-hosting kinds that take no repositories:
// new_repository and project_item_status_changed are organisation-level
// (the repository does not exist yet, or a project belongs to no
// repository), and new_gist is polled from the account's gists.
var noRepositoryKinds = map[triggers.Kind]bool{
	triggers.NewRepository:            true,
	triggers.ProjectItemStatusChanged: true,
	triggers.NewGist:                  true,
}

// paramKinds lists, for every parameter but repositories, the kinds it
// applies to, in catalogue order.
var paramKinds = map[string][]triggers.Kind{
	paramBranches: {triggers.NewPullRequest, triggers.UpdatedPullRequest, triggers.NewCommit, triggers.NewPush,
		triggers.NewBranch, triggers.WorkflowRunCompleted, triggers.WorkflowJobCompleted},
	paramLabels: {triggers.NewIssue, triggers.UpdatedIssue, triggers.NewIssueLabel, triggers.NewPullRequest,
		triggers.UpdatedPullRequest},
	paramColumnID:     {triggers.NewProjectCard},
	paramConclusions:  {triggers.WorkflowRunCompleted, triggers.WorkflowJobCompleted},
	paramReviewStates: {triggers.NewPullRequestReview},
	paramEnvironments: {triggers.DeploymentStarted, triggers.DeploymentCompleted, triggers.DeploymentFailed,
		triggers.DeploymentCanceled},
	paramOrganization: {triggers.NewRepository, triggers.ProjectItemStatusChanged},
	paramMentioned:    {triggers.NewMention},
}

// OrgKinds reports whether k is organisation-level: served by the hook of
// the organisation its organization parameter names. Only
// project_item_status_changed requires the parameter; new_repository
// without it is polled from the account's own repositories.
func OrgKinds(k triggers.Kind) bool {
	return k == triggers.NewRepository || k == triggers.ProjectItemStatusChanged
}

// AllRepositories reports whether a trigger of kind k with params p takes
// the events of every repository its account can reach: a code-hosting
// kind that takes repositories, given none. (new_mention without
// repositories is the account's own mentions, polled from its
// notifications, and is not one.)
func AllRepositories(k triggers.Kind, p Params) bool {
	return len(p.Repositories) == 0 && k != triggers.NewMention && appliesTo(paramRepositories, k, k.Connector())
}

// allowedValues are the accepted values of the enumerated parameters, in
// lower case.
var allowedValues = map[string][]string{
	paramConclusions: {"success", "failure", "cancelled", "neutral", "skipped", "stale", "timed_out",
		"action_required", "startup_failure"},
	paramReviewStates: {"approved", "changes_requested", "commented"},
	// A deployment's target: production, preview (Vercel's null) or a
	// custom environment such as staging. "development" names no
	// deployment, but triggers stored with it stay valid.
	paramEnvironments: {"production", "preview", "staging", "development"},
}

// AllowedValues returns the values parameter p accepts (conclusions,
// review_states, environments), nil for a parameter that takes any.
func AllowedValues(p string) []string {
	return append([]string(nil), allowedValues[p]...)
}

// kindParams is the catalogue: the parameters each kind takes.
var kindParams = func() map[triggers.Kind][]string {
	m := make(map[triggers.Kind][]string)
	for _, info := range triggers.Kinds() {
		var ps []string
		for _, p := range paramOrder {
			if appliesTo(p, info.Kind, info.Connector) {
				ps = append(ps, p)
			}
		}
		m[info.Kind] = ps
	}
	return m
}()

// appliesTo reports whether parameter p applies to kind k of connector c.
func appliesTo(p string, k triggers.Kind, c triggers.Connector) bool {
	if p == paramRepositories {
		return c == triggers.CodeHost && !noRepositoryKinds[k]
	}
	for _, pk := range paramKinds[p] {
		if pk == k {
			return true
		}
	}
	return false
}

// kindsTaking lists the kinds parameter p applies to, in catalogue order.
func kindsTaking(p string) []string {
	var out []string
	for _, info := range triggers.Kinds() {
		if appliesTo(p, info.Kind, info.Connector) {
			out = append(out, string(info.Kind))
		}
	}
	return out
}

// ParamsFor returns the names of the parameters that apply to kind k, in a
// fixed order (repositories, branches, labels, column_id, conclusions,
// review_states, environments, organization, mentioned), or nil for an unknown kind or a kind that
// takes none.
//
// Repositories apply to every code-hosting kind except the organisation-level
// new_repository and project_item_status_changed and the polled new_gist;
// branches to the pull request, commit, push, branch and workflow kinds;
// labels to the issue and pull request kinds; column_id to new_project_card;
// conclusions to the workflow kinds; review_states to
// new_pull_request_review; environments to the deployment kinds;
// organization to new_repository (optional: without it, the account's own
// new repositories are polled) and project_item_status_changed
// (required); mentioned to new_mention with repositories.
//
// A kind that takes repositories, given none, takes every repository the
// account can reach (AllRepositories), except new_mention, which then
// takes the account's own mentions.
func ParamsFor(k triggers.Kind) []string {
	ps := kindParams[k]
	if ps == nil {
		return nil
	}
	return append([]string(nil), ps...)
}

// ValidateParams checks that every parameter set in p applies to kind k and
// holds valid values: repositories of the form owner/repo, well-formed
// branch patterns, non-empty labels, a positive column id, and known
// conclusions, review states and environments (case-insensitively).
func ValidateParams(k triggers.Kind, p Params) error {
	if !k.Valid() {
		return fmt.Errorf("unknown trigger kind %q", k)
	}
	c := k.Connector()
	var errs []error
	check := func(name string, set bool, validate func() error) {
		if !set {
			return
		}
		if !appliesTo(name, k, c) {
			errs = append(errs, notApplicable(name, k))
			return
		}
		if err := validate(); err != nil {
			errs = append(errs, err)
		}
	}
	check(paramRepositories, len(p.Repositories) > 0, func() error { return validateRepositories(p.Repositories) })
	check(paramBranches, len(p.Branches) > 0, func() error { return validateBranches(p.Branches) })
	check(paramLabels, len(p.Labels) > 0, func() error { return validateNonEmpty(paramLabels, p.Labels) })
	check(paramColumnID, p.ColumnID != 0, func() error {
		if p.ColumnID < 0 {
			return fmt.Errorf("column_id %d is not a positive column id", p.ColumnID)
		}
		return nil
	})
	check(paramConclusions, len(p.Conclusions) > 0, func() error { return validateEnum(paramConclusions, p.Conclusions) })
	check(paramReviewStates, len(p.ReviewStates) > 0, func() error { return validateEnum(paramReviewStates, p.ReviewStates) })
	check(paramEnvironments, len(p.Environments) > 0, func() error { return validateEnum(paramEnvironments, p.Environments) })
	check(paramOrganization, p.Organization != "", func() error {
		if !validOwner(p.Organization) {
			return fmt.Errorf("organization %q is not an organisation login", p.Organization)
		}
		return nil
	})
	check(paramMentioned, len(p.Mentioned) > 0, func() error {
		if len(p.Repositories) == 0 {
			return errors.New("mentioned applies to new_mention with repositories; without them the account's own notifications are polled, which are about its own login")
		}
		for _, m := range p.Mentioned {
			if m != AnyLogin && !validOwner(m) {
				return fmt.Errorf("mentioned %q is not a login (or %q for anyone)", m, AnyLogin)
			}
		}
		return nil
	})
	if k == triggers.ProjectItemStatusChanged && p.Organization == "" {
		errs = append(errs, fmt.Errorf("%s needs the organization parameter: it is served by an organisation hook (GitHub sends no event for a user's projects)", k))
	}
	return errors.Join(errs...)
}

// notApplicable says that parameter name does not apply to k, and where it
// does.
func notApplicable(name string, k triggers.Kind) error {
	verb, pron, verb2 := "do", "they", "apply"
	if name == paramColumnID {
		verb, pron, verb2 = "does", "it", "applies"
	}
	return fmt.Errorf("%s %s not apply to %s; %s %s to %s", name, verb, k, pron, verb2,
		strings.Join(kindsTaking(name), ", "))
}

// validateRepositories checks that every entry looks like owner/repo.
func validateRepositories(repos []string) error {
	for _, r := range repos {
		owner, name, ok := strings.Cut(r, "/")
		if !ok || !validOwner(owner) || !validRepoName(name) {
			return fmt.Errorf("repository %q does not look like owner/repo", r)
		}
	}
	return nil
}

// validOwner reports whether s can be a user or organisation login: letters,
// digits and hyphens (underscores too, as enterprise logins have them).
func validOwner(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// validRepoName reports whether s can be a repository name: letters, digits,
// '-', '_' and '.', and not "." or "..".
func validRepoName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validateBranches checks that every entry is a bare branch name or a
// well-formed path.Match pattern.
func validateBranches(branches []string) error {
	for _, b := range branches {
		switch {
		case strings.TrimSpace(b) == "":
			return errors.New("branches must not hold an empty branch name")
		case strings.HasPrefix(b, "refs/"):
			return fmt.Errorf("branch %q must be a bare branch name (%q), not a ref", b, strings.TrimPrefix(strings.TrimPrefix(b, "refs/"), "heads/"))
		}
		if _, err := path.Match(b, ""); err != nil {
			return fmt.Errorf("branch pattern %q is malformed: %v", b, err)
		}
	}
	return nil
}

// validateNonEmpty checks that no entry of a list parameter is blank.
func validateNonEmpty(name string, vs []string) error {
	for _, v := range vs {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s must not hold an empty value", name)
		}
	}
	return nil
}

// validateEnum checks that every entry is one of the parameter's allowed
// values, case-insensitively.
func validateEnum(name string, vs []string) error {
	allowed := allowedValues[name]
	for _, v := range vs {
		if !containsFold(allowed, v) {
			return fmt.Errorf("%s: %q is not one of %s", name, v, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// containsFold reports whether list holds v, ignoring case.
func containsFold(list []string, v string) bool {
	for _, s := range list {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}
