package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// kindGroup is one of the spec's trigger categories.
type kindGroup struct {
	Label string
	Kinds []triggers.KindInfo
}

// categories maps each kind onto the product spec's categories.
var categories = []struct {
	label string
	kinds []triggers.Kind
}{
	{"Repository", []triggers.Kind{triggers.NewRepository, triggers.NewFork, triggers.NewStar, triggers.NewWatcher, triggers.NewTag}},
	{"Issue and pull request", []triggers.Kind{triggers.NewIssue, triggers.UpdatedIssue, triggers.NewPullRequest, triggers.UpdatedPullRequest,
		triggers.NewComment, triggers.NewIssueLabel, triggers.NewReviewRequest, triggers.NewPullRequestReview}},
	{"Commit and branch", []triggers.Kind{triggers.NewCommit, triggers.NewPush, triggers.NewBranch}},
	{"Workflow", []triggers.Kind{triggers.WorkflowRunCompleted, triggers.WorkflowJobCompleted}},
	{"Collaboration", []triggers.Kind{triggers.NewCollaborator, triggers.NewMention}},
	{"Project", []triggers.Kind{triggers.ProjectItemStatusChanged, triggers.NewProjectCard}},
	{"Other", []triggers.Kind{triggers.NewRelease, triggers.NewGist, triggers.NewDiscussion, triggers.NewDiscussionComment}},
	{"Deployment platform", []triggers.Kind{triggers.DeploymentStarted, triggers.DeploymentCompleted, triggers.DeploymentFailed, triggers.DeploymentCanceled}},
}

func kindGroups() []kindGroup {
	info := map[triggers.Kind]triggers.KindInfo{}
	for _, k := range triggers.Kinds() {
		info[k.Kind] = k
	}
	var out []kindGroup
	for _, c := range categories {
		g := kindGroup{Label: c.label}
		for _, k := range c.kinds {
			if i, ok := info[k]; ok {
				g.Kinds = append(g.Kinds, i)
				delete(info, k)
			}
		}
		out = append(out, g)
	}
	if len(info) > 0 { // a kind added since: listed rather than lost
		g := kindGroup{Label: "More"}
		for _, k := range triggers.Kinds() {
			if _, ok := info[k.Kind]; ok {
				g.Kinds = append(g.Kinds, k)
			}
		}
		out = append(out, g)
	}
	return out
}

// paramField is one trigger parameter on the create form.
type paramField struct {
	Name, Label, Hint string
	// Kinds are the kinds it applies to, space-separated, for the
	// script to show it only for them.
	Kinds string
	List  bool
	// Number is an integer parameter; Choices the values an enumerated
	// one takes (checkboxes, any number of them).
	Number  bool
	Choices []string
	// Required marks a parameter its kinds require (organization).
	Required bool
}

var paramFields = []paramField{
	{Name: "repositories", Label: "Repositories", Hint: "owner/repo, comma-separated; empty: every repository the account reaches", List: true},
	{Name: "organization", Label: "Organization", Hint: "the organisation's login", Required: true},
	{Name: "branches", Label: "Branches", Hint: "names or patterns (release/*), comma-separated", List: true},
	{Name: "labels", Label: "Labels", Hint: "comma-separated", List: true},
	{Name: "column_id", Label: "Column id", Hint: "the project column's number", Number: true},
	{Name: "conclusions", Label: "Conclusions", Hint: "success, failure, …", List: true},
	{Name: "review_states", Label: "Review states", Hint: "approved, changes_requested, commented", List: true},
	{Name: "environments", Label: "Environments", Hint: "production, preview, …", List: true},
	{Name: "mentioned", Label: "Mentioned logins", Hint: "comma-separated; * for anyone", List: true},
}

func fieldsWithKinds() []paramField {
	out := make([]paramField, len(paramFields))
	for i, f := range paramFields {
		var ks []string
		for _, k := range triggers.Kinds() {
			for _, p := range match.ParamsFor(k.Kind) {
				if p == f.Name {
					ks = append(ks, string(k.Kind))
				}
			}
		}
		f.Kinds = strings.Join(ks, " ")
		f.Choices = match.AllowedValues(f.Name)
		out[i] = f
	}
	return out
}

// triggerRow is a trigger with its hooks, for the list and its page.
type triggerRow struct {
	store.Trigger
	Account store.Account
	Agent   string
	Hooks   []hookRow
	// Coverage is set for a trigger on all the account's repositories.
	Coverage *registry.Coverage
}

type hookRow struct {
	store.Hook
	URL      string
	Activity store.HookActivity
}

func (c *Console) triggerRows(r *http.Request, tid string, ts []store.Trigger) ([]triggerRow, error) {
	ctx := r.Context()
	accs, err := c.o.Accounts.List(ctx, tid)
	if err != nil {
		return nil, err
	}
	agents, err := c.o.Registry.ListAgents(ctx, tid)
	if err != nil {
		return nil, err
	}
	var rows []triggerRow
	for _, t := range ts {
		row := triggerRow{Trigger: t}
		for _, a := range accs {
			if a.ID == t.AccountID {
				row.Account = a
			}
		}
		for _, a := range agents {
			if a.ID == t.AgentID {
				row.Agent = a.Name
			}
		}
		hooks, err := c.o.Registry.HooksOf(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, h := range hooks {
			act, err := c.o.Registry.HookActivity(ctx, h.ID)
			if err != nil {
				return nil, err
			}
			row.Hooks = append(row.Hooks, hookRow{Hook: h, URL: c.o.Registry.HookURL(h), Activity: act})
		}
		if row.Coverage, err = c.o.Registry.CoverageOf(ctx, t, hooks); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func (c *Console) triggersList(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	ts, err := c.o.Registry.ListTriggers(r.Context(), tid)
	if err != nil {
		return err
	}
	rows, err := c.triggerRows(r, tid, ts)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "triggers", "Triggers", map[string]any{"Triggers": rows})
	return nil
}

func (c *Console) trigger(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	t, err := c.o.Registry.GetTrigger(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	rows, err := c.triggerRows(r, tid, []store.Trigger{t})
	if err != nil {
		return err
	}
	runs, err := c.o.Records.ListRuns(r.Context(), store.RunFilter{TenantID: tid, TriggerID: t.ID, Limit: 10})
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "trigger", "Trigger "+t.Kind, map[string]any{"T": rows[0], "Runs": runs})
	return nil
}

func (c *Console) newTrigger(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.triggerForm(w, r, s, http.StatusOK, "", url.Values{}, nil)
}

// dryRunEvents is how many recent events "Test against recent events"
// reads at most.
const dryRunEvents = 20

func (c *Console) triggerForm(w http.ResponseWriter, r *http.Request, s *session, status int, problem string, in url.Values, report *dispatch.DryRunReport) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	accs, err := c.o.Accounts.List(r.Context(), tid)
	if err != nil {
		return err
	}
	var active []store.Account
	for _, a := range accs {
		if a.Status == store.StatusActive && (a.Connector == "codehost" || a.Connector == "deploy") {
			active = append(active, a)
		}
	}
	agents, err := c.o.Registry.ListAgents(r.Context(), tid)
	if err != nil {
		return err
	}
	c.render(w, r, s, status, "newtrigger", "New trigger", map[string]any{
		"Groups": kindGroups(), "Accounts": active, "Agents": agents, "Fields": fieldsWithKinds(),
		"Problem": problem, "In": in, "Report": report, "CanTest": c.o.DryRunner != nil,
	})
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *Console) createTrigger(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if err := r.ParseForm(); err != nil {
		return badRequest("the form could not be read")
	}
	kind := r.PostForm.Get("kind")
	params := map[string]any{}
	applies := match.ParamsFor(triggers.Kind(kind))
	for _, f := range fieldsWithKinds() {
		v := strings.TrimSpace(r.PostForm.Get("param_" + f.Name))
		if v == "" || !contains(applies, f.Name) {
			continue
		}
		switch {
		case len(f.Choices) > 0:
			// Checkboxes: one value each.
			params[f.Name] = r.PostForm["param_"+f.Name]
		case f.List:
			params[f.Name] = splitList(v)
		case f.Name == "column_id":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return c.triggerForm(w, r, s, http.StatusBadRequest, "Column id must be a number.", r.PostForm, nil)
			}
			params[f.Name] = n
		default:
			params[f.Name] = v
		}
	}
	raw, _ := json.Marshal(params)
	in := registry.TriggerInput{Kind: kind, Account: r.PostForm.Get("account"), Agent: r.PostForm.Get("agent"),
		Params: raw, Filter: strings.TrimSpace(r.PostForm.Get("filter"))}
	if r.PostForm.Get("action") == "test" && c.o.DryRunner != nil {
		// Test the draft against the latest events of its kind; nothing
		// is created.
		draft, err := c.o.Registry.DraftTrigger(r.Context(), tid, in)
		if err != nil {
			if msg := registryProblem(err); msg != "" {
				return c.triggerForm(w, r, s, http.StatusBadRequest, msg, r.PostForm, nil)
			}
			return err
		}
		report, err := c.o.DryRunner.DryRun(r.Context(), draft, dryRunEvents)
		if err != nil {
			return c.triggerForm(w, r, s, http.StatusBadRequest, "The test could not run: "+err.Error(), r.PostForm, nil)
		}
		return c.triggerForm(w, r, s, http.StatusOK, "", r.PostForm, &report)
	}
	t, err := c.o.Registry.CreateTrigger(r.Context(), tid, in)
	if err != nil {
		if msg := registryProblem(err); msg != "" {
			return c.triggerForm(w, r, s, http.StatusBadRequest, msg, r.PostForm, nil)
		}
		return err
	}
	redirect(w, r, Prefix+"triggers/"+url.PathEscape(t.ID), "Trigger created.")
	return nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// registryProblem returns the message of a refusal the user can fix, or
// "" for a failure.
func registryProblem(err error) string {
	for _, e := range []error{registry.ErrInvalid, registry.ErrConflict, registry.ErrHookRights, registry.ErrUpstream, registry.ErrNotFound} {
		if errors.Is(err, e) {
			return err.Error()
		}
	}
	return ""
}

func (c *Console) setTriggerEnabled(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	enabled := r.PostFormValue("enabled") == "true"
	t, err := c.o.Registry.SetEnabled(r.Context(), tid, r.PathValue("id"), enabled)
	if err != nil {
		return err
	}
	state := "disabled"
	if enabled {
		state = "enabled"
	}
	redirect(w, r, Prefix+"triggers/"+url.PathEscape(t.ID), fmt.Sprintf("Trigger %s.", state))
	return nil
}

func (c *Console) deleteTriggerPage(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	t, err := c.o.Registry.GetTrigger(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "confirm", "Delete trigger", map[string]any{
		"Question": "Delete this " + t.Kind + " trigger?",
		"Says":     []string{"It stops starting its agent at once.", "The webhooks triggerd registered only for it are deleted.", "Its past runs and events stay listed."},
		"Action":   Prefix + "triggers/" + t.ID + "/delete", "Button": "Delete", "Back": Prefix + "triggers/" + t.ID,
	})
	return nil
}

func (c *Console) deleteTrigger(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if err := c.o.Registry.DeleteTrigger(r.Context(), tid, r.PathValue("id")); err != nil {
		return err
	}
	redirect(w, r, Prefix+"triggers", "Trigger deleted.")
	return nil
}

func errorsIsNotFound(err error) bool {
	return errors.Is(err, registry.ErrNotFound) || errors.Is(err, store.ErrNotFound)
}
