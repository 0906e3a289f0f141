package codehost

import (
	"context"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// PullRequest is the structured output of the pull request steps.
type PullRequest struct {
	Number             int      `json:"number"`
	ID                 int64    `json:"id"`
	Title              string   `json:"title"`
	Body               string   `json:"body"`
	State              string   `json:"state"`
	Draft              bool     `json:"draft"`
	Merged             bool     `json:"merged"`
	Mergeable          *bool    `json:"mergeable,omitempty"`
	User               string   `json:"user"`
	Head               string   `json:"head"`
	HeadSHA            string   `json:"head_sha"`
	Base               string   `json:"base"`
	BaseSHA            string   `json:"base_sha"`
	Labels             []string `json:"labels"`
	Assignees          []string `json:"assignees"`
	RequestedReviewers []string `json:"requested_reviewers"`
	HTMLURL            string   `json:"html_url"`
	CreatedAt          string   `json:"created_at"`
	UpdatedAt          string   `json:"updated_at"`
	ClosedAt           string   `json:"closed_at,omitempty"`
	MergedAt           string   `json:"merged_at,omitempty"`
	MergeCommitSHA     string   `json:"merge_commit_sha,omitempty"`
}

func (g ghPull) out() PullRequest {
	p := PullRequest{
		Number: g.Number, ID: g.ID, Title: g.Title, Body: g.Body, State: g.State, Draft: g.Draft,
		Merged: g.Merged || g.MergedAt != "", Mergeable: g.Mergeable, User: g.User.login(),
		Head: g.Head.Ref, HeadSHA: g.Head.SHA, Base: g.Base.Ref, BaseSHA: g.Base.SHA,
		Labels: make([]string, 0, len(g.Labels)), Assignees: logins(g.Assignees), RequestedReviewers: logins(g.RequestedReviewers),
		HTMLURL: g.HTMLURL, CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, ClosedAt: g.ClosedAt, MergedAt: g.MergedAt,
	}
	if p.Merged {
		p.MergeCommitSHA = g.MergeCommitSHA
	}
	for _, l := range g.Labels {
		p.Labels = append(p.Labels, l.Name)
	}
	return p
}

var pullSchema = schema.Object(schema.Props{
	"number": schema.Integer("Pull request number."), "id": schema.Integer("Pull request id."), "title": schema.String("Title."), "body": schema.String("Body."),
	"state": schema.Enum("State.", "open", "closed"), "draft": schema.Boolean("Whether it is a draft."), "merged": schema.Boolean("Whether it is merged."),
	"mergeable": schema.Boolean("Whether GitHub can merge it; absent while GitHub is still computing it, and in lists."),
	"user":      schema.String("Author's login."), "head": schema.String("Head branch."), "head_sha": schema.String("Head commit sha."),
	"base": schema.String("Base branch."), "base_sha": schema.String("Base commit sha."), "labels": schema.Array(schema.String(""), "Label names."),
	"assignees": schema.Array(schema.String(""), "Assignees' logins."), "requested_reviewers": schema.Array(schema.String(""), "Logins asked to review."),
	"html_url": schema.String("Web page."), "created_at": schema.String("Created (RFC 3339)."), "updated_at": schema.String("Last updated (RFC 3339)."),
	"closed_at": schema.String("Closed (RFC 3339)."), "merged_at": schema.String("Merged (RFC 3339)."), "merge_commit_sha": schema.String("The merge commit's sha."),
}, "number", "id", "title", "body", "state", "draft", "merged", "user", "head", "head_sha", "base", "base_sha", "labels",
	"assignees", "requested_reviewers", "html_url", "created_at", "updated_at")

var pullNumberProp = schema.Props{"pull_number": schema.Integer("Pull request number.").Min(1)}

type pullNumberInput struct {
	repoInput
	PullNumber int `json:"pull_number"`
}

func (in *pullNumberInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("pull_number", int64(in.PullNumber))
	return p.err()
}

type createPullInput struct {
	repoInput
	Head                string `json:"head"`
	Base                string `json:"base"`
	Title               string `json:"title"`
	Body                string `json:"body,omitempty"`
	Draft               bool   `json:"draft,omitempty"`
	MaintainerCanModify *bool  `json:"maintainer_can_modify,omitempty"`
}

func (in *createPullInput) check() error {
	var p problems
	in.checkRepo(&p)
	head := in.Head
	if owner, branch, qualified := strings.Cut(head, ":"); qualified {
		p.name("head owner", owner)
		head = branch
	}
	p.branch("head", head, true)
	p.branch("base", in.Base, true)
	p.required("title", in.Title)
	return p.err()
}

type updatePullInput struct {
	pullNumberInput
	Title               *string `json:"title,omitempty"`
	Body                *string `json:"body,omitempty"`
	State               string  `json:"state,omitempty"`
	Base                string  `json:"base,omitempty"`
	MaintainerCanModify *bool   `json:"maintainer_can_modify,omitempty"`
}

func (in *updatePullInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("pull_number", int64(in.PullNumber))
	if in.Title != nil {
		p.required("title", *in.Title)
	}
	p.enum("state", in.State, "open", "closed")
	p.branch("base", in.Base, false)
	if in.Title == nil && in.Body == nil && in.State == "" && in.Base == "" && in.MaintainerCanModify == nil {
		p.addf("nothing to update: give title, body, state, base or maintainer_can_modify")
	}
	return p.err()
}

type mergeInput struct {
	pullNumberInput
	MergeMethod   string `json:"merge_method,omitempty"`
	CommitTitle   string `json:"commit_title,omitempty"`
	CommitMessage string `json:"commit_message,omitempty"`
	SHA           string `json:"sha,omitempty"`
}

func (in *mergeInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("pull_number", int64(in.PullNumber))
	p.enum("merge_method", in.MergeMethod, "merge", "squash", "rebase")
	p.sha("sha", in.SHA, false)
	return p.err()
}

type reviewersInput struct {
	pullNumberInput
	listInput
}

func (in *reviewersInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	p.positive("pull_number", int64(in.PullNumber))
	return p.err()
}

type listPullsInput struct {
	repoInput
	listInput
	State     string `json:"state,omitempty"`
	Head      string `json:"head,omitempty"`
	Base      string `json:"base,omitempty"`
	Sort      string `json:"sort,omitempty"`
	Direction string `json:"direction,omitempty"`
}

func (in *listPullsInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	p.enum("state", in.State, "open", "closed", "all")
	p.enum("sort", in.Sort, "created", "updated", "popularity", "long-running")
	p.enum("direction", in.Direction, "asc", "desc")
	return p.err()
}

// Review is one submitted review in Get Reviewers.
type Review struct {
	ID          int64  `json:"id"`
	Reviewer    string `json:"reviewer"`
	State       string `json:"state"`
	Body        string `json:"body"`
	SubmittedAt string `json:"submitted_at,omitempty"`
}

type projectItemInput struct {
	ProjectID string `json:"project_id"`
	ItemID    string `json:"item_id"`
	FieldID   string `json:"field_id"`
	OptionID  string `json:"option_id"`
}

func (in *projectItemInput) check() error {
	var p problems
	p.required("project_id", in.ProjectID)
	p.required("item_id", in.ItemID)
	p.required("field_id", in.FieldID)
	p.required("option_id", in.OptionID)
	return p.err()
}

// projectFieldInput names a Projects (v2) field by its node id.
type projectFieldInput struct {
	FieldID string `json:"field_id"`
}

func (in *projectFieldInput) check() error {
	var p problems
	p.required("field_id", in.FieldID)
	return p.err()
}

// ProjectField is a Projects (v2) field: its name, its type (GraphQL's
// ProjectV2FieldType: SINGLE_SELECT, TEXT, ...) and, for a single-select
// field, its options.
type ProjectField struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	DataType string          `json:"data_type"`
	Options  []ProjectOption `json:"options"`
}

// ProjectOption is one option of a single-select field.
type ProjectOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (k *kit) pullSteps() []connectors.Step {
	pullRequired := []string{"owner", "repo", "pull_number"}
	return []connectors.Step{
		define(k, "create_pull_request", "Create Pull Request",
			"Opens a pull request from a head branch into a base branch.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"head":                  schema.Text("Branch with the changes; owner:branch for a fork."),
				"base":                  schema.Text("Branch to merge into."),
				"title":                 schema.Text("Title."),
				"body":                  schema.String("Description (Markdown)."),
				"draft":                 schema.Boolean("Open it as a draft."),
				"maintainer_can_modify": schema.Boolean("Let maintainers push to the head branch (default true)."),
			}), "owner", "repo", "head", "base", "title"),
			pullSchema,
			func(ctx context.Context, c *client, in *createPullInput) (any, error) {
				g, err := c.CreatePullRequest(ctx, in.Owner, in.Repo, pullCreate{in.Head, in.Base, in.Title, in.Body, in.Draft, in.MaintainerCanModify})
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "get_reviewers", "Get Reviewers",
			"Lists who is asked to review a pull request and the reviews submitted, with their state.",
			schema.Object(schema.Merge(repoProps, pullNumberProp, maxItemsProp), pullRequired...),
			schema.Object(schema.Props{
				"pull_number":     schema.Integer("Pull request number."),
				"requested_users": schema.Array(schema.String(""), "Logins asked to review."),
				"requested_teams": schema.Array(schema.String(""), "Team slugs asked to review."),
				"reviews": schema.Array(schema.Object(schema.Props{
					"id": schema.Integer("Review id."), "reviewer": schema.String("Reviewer's login."),
					"state":        schema.Enum("Review state.", "APPROVED", "CHANGES_REQUESTED", "COMMENTED", "DISMISSED", "PENDING"),
					"body":         schema.String("Review comment."),
					"submitted_at": schema.String("Submitted (RFC 3339); absent while pending."),
				}, "id", "reviewer", "state", "body"), "Submitted reviews, oldest first."),
				"has_more": hasMoreProp,
			}, "pull_number", "requested_users", "requested_teams", "reviews", "has_more"),
			func(ctx context.Context, c *client, in *reviewersInput) (any, error) {
				req, err := c.ListRequestedReviewers(ctx, in.Owner, in.Repo, in.PullNumber)
				if err != nil {
					return nil, err
				}
				rs, more, err := c.ListReviews(ctx, in.Owner, in.Repo, in.PullNumber, in.MaxItems)
				if err != nil {
					return nil, err
				}
				teams := make([]string, len(req.Teams))
				for i, t := range req.Teams {
					teams[i] = t.Slug
				}
				reviews := make([]Review, len(rs))
				for i, r := range rs {
					reviews[i] = Review{ID: r.ID, Reviewer: r.User.login(), State: r.State, Body: r.Body, SubmittedAt: r.SubmittedAt}
				}
				return struct {
					PullNumber     int      `json:"pull_number"`
					RequestedUsers []string `json:"requested_users"`
					RequestedTeams []string `json:"requested_teams"`
					Reviews        []Review `json:"reviews"`
					HasMore        bool     `json:"has_more"`
				}{in.PullNumber, logins(req.Users), teams, reviews, more}, nil
			}),
		define(k, "get_project_v2_field", "Get Project (V2) Field",
			"Reads a Projects (v2) field by its node id: its name, type and, for a single-select field such as Status, its options (GraphQL node).",
			schema.Object(schema.Props{
				"field_id": schema.Text("Node id of the field (PVTSSF_... or PVTF_...), as a projects_v2_item event's resource.field_id gives it."),
			}, "field_id"),
			schema.Object(schema.Props{
				"id": schema.String("Field node id."), "name": schema.String("Field name, e.g. Status."),
				"data_type": schema.String("Field type: SINGLE_SELECT, TEXT, NUMBER, DATE, ITERATION, ..."),
				"options": schema.Array(schema.Object(schema.Props{"id": schema.String("Option id."), "name": schema.String("Option name.")}, "id", "name"),
					"The options of a single-select field; empty for other types."),
			}, "id", "name", "data_type", "options"),
			func(ctx context.Context, c *client, in *projectFieldInput) (any, error) {
				f, err := c.GetProjectV2Field(ctx, in.FieldID)
				if err != nil {
					return nil, err
				}
				return *f, nil
			}),
		define(k, "update_project_v2_item_status", "Update Project (V2) Item Status",
			"Sets a Projects (v2) item's single-select field, such as Status, to one of its options (GraphQL updateProjectV2ItemFieldValue).",
			schema.Object(schema.Props{
				"project_id": schema.Text("Node id of the project (PVT_...)."),
				"item_id":    schema.Text("Node id of the item (PVTI_...)."),
				"field_id":   schema.Text("Node id of the single-select field, e.g. Status (PVTSSF_...)."),
				"option_id":  schema.Text("Id of the option to set."),
			}, "project_id", "item_id", "field_id", "option_id"),
			schema.Object(schema.Props{
				"project_id": schema.String("Project node id."), "item_id": schema.String("Item node id."),
				"field_id": schema.String("Field node id."), "option_id": schema.String("The option now set."),
			}, "project_id", "item_id", "field_id", "option_id"),
			func(ctx context.Context, c *client, in *projectItemInput) (any, error) {
				itemID, err := c.SetProjectV2ItemOption(ctx, in.ProjectID, in.ItemID, in.FieldID, in.OptionID)
				if err != nil {
					return nil, err
				}
				return projectItemInput{ProjectID: in.ProjectID, ItemID: itemID, FieldID: in.FieldID, OptionID: in.OptionID}, nil
			}),
		define(k, "merge_pull_request", "Merge Pull Request",
			"Merges a pull request by merge commit, squash or rebase, optionally only if its head is still the given sha.",
			schema.Object(schema.Merge(repoProps, pullNumberProp, schema.Props{
				"merge_method":   schema.Enum("How to merge (default merge).", "merge", "squash", "rebase"),
				"commit_title":   schema.String("Title of the merge commit."),
				"commit_message": schema.String("Extra detail for the merge commit."),
				"sha":            schema.String("Merge only if the head is still this sha.").Pattern(shaPattern),
			}), pullRequired...),
			schema.Object(schema.Props{
				"pull_number": schema.Integer("Pull request number."), "merged": schema.Boolean("Whether it was merged."),
				"sha": schema.String("The merge commit's sha."), "message": schema.String("GitHub's message."),
			}, "pull_number", "merged", "sha", "message"),
			func(ctx context.Context, c *client, in *mergeInput) (any, error) {
				r, err := c.MergePullRequest(ctx, in.Owner, in.Repo, in.PullNumber, pullMerge{
					MergeMethod: in.MergeMethod, CommitTitle: in.CommitTitle, CommitMessage: in.CommitMessage, SHA: in.SHA,
				})
				if err != nil {
					return nil, err
				}
				return struct {
					PullNumber int    `json:"pull_number"`
					Merged     bool   `json:"merged"`
					SHA        string `json:"sha"`
					Message    string `json:"message"`
				}{in.PullNumber, r.Merged, r.SHA, r.Message}, nil
			}),
		define(k, "list_pull_requests", "List Pull Requests",
			"Lists a repository's pull requests, filtered by state, head or base branch.",
			schema.Object(schema.Merge(repoProps, maxItemsProp, schema.Props{
				"state":     schema.Enum("Which pull requests (default open).", "open", "closed", "all"),
				"head":      schema.String("Only this head, as owner:branch."),
				"base":      schema.String("Only into this base branch."),
				"sort":      schema.Enum("Sort by (default created).", "created", "updated", "popularity", "long-running"),
				"direction": schema.Enum("Sort direction (default desc).", "asc", "desc"),
			}), "owner", "repo"),
			listOutput("pull_requests", pullSchema, nil),
			func(ctx context.Context, c *client, in *listPullsInput) (any, error) {
				ps, more, err := c.ListPullRequests(ctx, in.Owner, in.Repo, pullListOptions{
					State: in.State, Head: in.Head, Base: in.Base, Sort: in.Sort, Direction: in.Direction,
				}, in.MaxItems)
				if err != nil {
					return nil, err
				}
				out := make([]PullRequest, len(ps))
				for i, p := range ps {
					out[i] = p.out()
				}
				return struct {
					PullRequests []PullRequest `json:"pull_requests"`
					Count        int           `json:"count"`
					HasMore      bool          `json:"has_more"`
				}{out, len(out), more}, nil
			}),
		define(k, "get_pull_request", "Get Pull Request",
			"Reads one pull request, including whether it is merged and mergeable.",
			schema.Object(schema.Merge(repoProps, pullNumberProp), pullRequired...),
			pullSchema,
			func(ctx context.Context, c *client, in *pullNumberInput) (any, error) {
				g, err := c.GetPullRequest(ctx, in.Owner, in.Repo, in.PullNumber)
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "update_pull_request", "Update Pull Request",
			"Changes a pull request's title, body, base branch or state (close or reopen).",
			schema.Object(schema.Merge(repoProps, pullNumberProp, schema.Props{
				"title":                 schema.Text("New title."),
				"body":                  schema.String("New body."),
				"state":                 schema.Enum("New state.", "open", "closed"),
				"base":                  schema.String("New base branch."),
				"maintainer_can_modify": schema.Boolean("Let maintainers push to the head branch."),
			}), pullRequired...),
			pullSchema,
			func(ctx context.Context, c *client, in *updatePullInput) (any, error) {
				g, err := c.UpdatePullRequest(ctx, in.Owner, in.Repo, in.PullNumber, pullUpdate{
					Title: in.Title, Body: in.Body, State: in.State, Base: in.Base, MaintainerCanModify: in.MaintainerCanModify,
				})
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
	}
}
