package codehost

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// Issue is the structured output of the issue steps (a pull request seen
// through the issues API has is_pull_request true).
type Issue struct {
	Number        int        `json:"number"`
	ID            int64      `json:"id"`
	Repository    string     `json:"repository"`
	Title         string     `json:"title"`
	Body          string     `json:"body"`
	State         string     `json:"state"`
	StateReason   string     `json:"state_reason,omitempty"`
	User          string     `json:"user"`
	Labels        []string   `json:"labels"`
	Assignees     []string   `json:"assignees"`
	Milestone     *Milestone `json:"milestone,omitempty"`
	Comments      int        `json:"comments"`
	IsPullRequest bool       `json:"is_pull_request"`
	HTMLURL       string     `json:"html_url"`
	CreatedAt     string     `json:"created_at"`
	UpdatedAt     string     `json:"updated_at"`
	ClosedAt      string     `json:"closed_at,omitempty"`
}

// Milestone names an issue's milestone.
type Milestone struct {
	Number int    `json:"number"`
	Title  string `json:"title"`
}

func (g ghIssue) out() Issue {
	is := Issue{
		Number: g.Number, ID: g.ID, Repository: repoFromURL(g.RepositoryURL), Title: g.Title, Body: g.Body,
		State: g.State, StateReason: g.StateReason, User: g.User.login(), Labels: make([]string, 0, len(g.Labels)),
		Assignees: logins(g.Assignees), Milestone: g.Milestone, Comments: g.Comments,
		IsPullRequest: len(g.PullRequest) > 0 && string(g.PullRequest) != "null",
		HTMLURL:       g.HTMLURL, CreatedAt: g.CreatedAt, UpdatedAt: g.UpdatedAt, ClosedAt: g.ClosedAt,
	}
	for _, l := range g.Labels {
		is.Labels = append(is.Labels, l.Name)
	}
	return is
}

// repoFromURL reads owner/name from an API URL .../repos/{owner}/{name}.
func repoFromURL(u string) string {
	i := strings.LastIndex(u, "/repos/")
	if i < 0 {
		return ""
	}
	parts := strings.SplitN(u[i+len("/repos/"):], "/", 3)
	if len(parts) < 2 {
		return ""
	}
	owner, _ := url.PathUnescape(parts[0])
	name, _ := url.PathUnescape(parts[1])
	return owner + "/" + name
}

var issueSchema = schema.Object(schema.Props{
	"number": schema.Integer("Issue number."), "id": schema.Integer("Issue id."), "repository": schema.String("owner/name."),
	"title": schema.String("Title."), "body": schema.String("Body (may be empty)."), "state": schema.Enum("State.", "open", "closed"),
	"state_reason": schema.String("Why it is closed or was reopened: completed, not_planned, duplicate or reopened."),
	"user":         schema.String("Author's login."), "labels": schema.Array(schema.String(""), "Label names."), "assignees": schema.Array(schema.String(""), "Assignees' logins."),
	"milestone": schema.Object(schema.Props{"number": schema.Integer("Milestone number."), "title": schema.String("Milestone title.")}, "number", "title"),
	"comments":  schema.Integer("Number of comments."), "is_pull_request": schema.Boolean("Whether this is a pull request."),
	"html_url": schema.String("Web page."), "created_at": schema.String("Created (RFC 3339)."), "updated_at": schema.String("Last updated (RFC 3339)."),
	"closed_at": schema.String("Closed (RFC 3339); absent while open."),
}, "number", "id", "repository", "title", "body", "state", "user", "labels", "assignees", "comments", "is_pull_request",
	"html_url", "created_at", "updated_at")

var issueNumberProp = schema.Props{"issue_number": schema.Integer("Issue number.").Min(1)}

type createIssueInput struct {
	repoInput
	Title     string   `json:"title"`
	Body      string   `json:"body,omitempty"`
	Labels    []string `json:"labels,omitempty"`
	Assignees []string `json:"assignees,omitempty"`
	Milestone *int     `json:"milestone,omitempty"`
}

func (in *createIssueInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.required("title", in.Title)
	p.names("labels", in.Labels, false)
	p.names("assignees", in.Assignees, true)
	if in.Milestone != nil {
		p.positive("milestone", int64(*in.Milestone))
	}
	return p.err()
}

// names checks a list of labels or logins.
func (p *problems) names(field string, vs []string, logins bool) {
	for _, v := range vs {
		if logins {
			p.name(field+" entry", v)
		} else {
			p.required(field+" entry", v)
		}
	}
}

type issueNumberInput struct {
	repoInput
	IssueNumber int `json:"issue_number"`
}

func (in *issueNumberInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("issue_number", int64(in.IssueNumber))
	return p.err()
}

type commentInput struct {
	issueNumberInput
	Body string `json:"body"`
}

func (in *commentInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("issue_number", int64(in.IssueNumber))
	p.required("body", in.Body)
	return p.err()
}

type updateIssueInput struct {
	issueNumberInput
	Title       *string         `json:"title,omitempty"`
	Body        *string         `json:"body,omitempty"`
	State       string          `json:"state,omitempty"`
	StateReason string          `json:"state_reason,omitempty"`
	Labels      *[]string       `json:"labels,omitempty"`
	Assignees   *[]string       `json:"assignees,omitempty"`
	Milestone   json.RawMessage `json:"milestone,omitempty"`
}

func (in *updateIssueInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("issue_number", int64(in.IssueNumber))
	if in.Title != nil {
		p.required("title", *in.Title)
	}
	p.enum("state", in.State, "open", "closed")
	p.enum("state_reason", in.StateReason, "completed", "not_planned", "duplicate", "reopened")
	if in.Labels != nil {
		p.names("labels", *in.Labels, false)
	}
	if in.Assignees != nil {
		p.names("assignees", *in.Assignees, true)
	}
	if m := bytes.TrimSpace(in.Milestone); len(m) > 0 && string(m) != "null" {
		if n, err := strconv.Atoi(string(m)); err != nil || n < 1 {
			p.addf("milestone must be a milestone number or null")
		}
	}
	if in.Title == nil && in.Body == nil && in.State == "" && in.StateReason == "" && in.Labels == nil && in.Assignees == nil && in.Milestone == nil {
		p.addf("nothing to update: give title, body, state, state_reason, labels, assignees or milestone")
	}
	return p.err()
}

type searchInput struct {
	listInput
	Q     string `json:"q"`
	Sort  string `json:"sort,omitempty"`
	Order string `json:"order,omitempty"`
}

var searchSorts = []string{"comments", "reactions", "reactions-+1", "reactions--1", "reactions-smile", "reactions-thinking_face",
	"reactions-heart", "reactions-tada", "interactions", "created", "updated"}

func (in *searchInput) check() error {
	var p problems
	in.checkList(&p)
	p.required("q", in.Q)
	if len(in.Q) > 256 {
		p.addf("q is longer than GitHub's 256 characters")
	}
	p.enum("sort", in.Sort, searchSorts...)
	p.enum("order", in.Order, "asc", "desc")
	return p.err()
}

type listIssuesInput struct {
	repoInput
	listInput
	State     string   `json:"state,omitempty"`
	Labels    []string `json:"labels,omitempty"`
	Assignee  string   `json:"assignee,omitempty"`
	Creator   string   `json:"creator,omitempty"`
	Mentioned string   `json:"mentioned,omitempty"`
	Since     string   `json:"since,omitempty"`
	Sort      string   `json:"sort,omitempty"`
	Direction string   `json:"direction,omitempty"`
}

func (in *listIssuesInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	p.enum("state", in.State, "open", "closed", "all")
	p.names("labels", in.Labels, false)
	p.timestamp("since", in.Since)
	p.enum("sort", in.Sort, "created", "updated", "comments")
	p.enum("direction", in.Direction, "asc", "desc")
	return p.err()
}

func (k *kit) issueSteps() []connectors.Step {
	issueRequired := []string{"owner", "repo", "issue_number"}
	return []connectors.Step{
		define(k, "create_issue", "Create Issue",
			"Opens an issue in a repository, optionally with labels, assignees and a milestone.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"title":     schema.Text("Title."),
				"body":      schema.String("Body (Markdown)."),
				"labels":    schema.Array(schema.String(""), "Label names; missing labels are created."),
				"assignees": schema.Array(ghName("Login."), "Logins to assign (at most 10)."),
				"milestone": schema.Integer("Milestone number.").Min(1),
			}), "owner", "repo", "title"),
			issueSchema,
			func(ctx context.Context, c *client, in *createIssueInput) (any, error) {
				g, err := c.CreateIssue(ctx, in.Owner, in.Repo, issueCreate{in.Title, in.Body, in.Labels, in.Assignees, in.Milestone})
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "create_issue_comment", "Create Issue Comment",
			"Comments on an existing issue or pull request.",
			schema.Object(schema.Merge(repoProps, issueNumberProp, schema.Props{"body": schema.Text("Comment (Markdown).")}), "owner", "repo", "issue_number", "body"),
			schema.Object(schema.Props{
				"id": schema.Integer("Comment id."), "issue_number": schema.Integer("Issue number."), "body": schema.String("Comment."),
				"user": schema.String("Author's login."), "html_url": schema.String("Web page."), "created_at": schema.String("Created (RFC 3339)."),
			}, "id", "issue_number", "body", "user", "html_url", "created_at"),
			func(ctx context.Context, c *client, in *commentInput) (any, error) {
				g, err := c.CreateIssueComment(ctx, in.Owner, in.Repo, in.IssueNumber, in.Body)
				if err != nil {
					return nil, err
				}
				return struct {
					ID          int64  `json:"id"`
					IssueNumber int    `json:"issue_number"`
					Body        string `json:"body"`
					User        string `json:"user"`
					HTMLURL     string `json:"html_url"`
					CreatedAt   string `json:"created_at"`
				}{g.ID, in.IssueNumber, g.Body, g.User.login(), g.HTMLURL, g.CreatedAt}, nil
			}),
		define(k, "update_issue", "Update Issue",
			"Changes an issue's title, body, state, labels, assignees or milestone; lists given replace the current ones.",
			schema.Object(schema.Merge(repoProps, issueNumberProp, schema.Props{
				"title":        schema.Text("New title."),
				"body":         schema.String("New body."),
				"state":        schema.Enum("New state.", "open", "closed"),
				"state_reason": schema.Enum("Why it is closed or reopened.", "completed", "not_planned", "duplicate", "reopened"),
				"labels":       schema.Array(schema.String(""), "Label names, replacing the current ones ([] removes all)."),
				"assignees":    schema.Array(ghName("Login."), "Logins, replacing the current assignees ([] removes all)."),
				"milestone":    schema.Integer("Milestone number, or null to remove it.").Min(1).Nullable(),
			}), issueRequired...),
			issueSchema,
			func(ctx context.Context, c *client, in *updateIssueInput) (any, error) {
				g, err := c.UpdateIssue(ctx, in.Owner, in.Repo, in.IssueNumber, issueUpdate{
					Title: in.Title, Body: in.Body, State: in.State, StateReason: in.StateReason,
					Labels: in.Labels, Assignees: in.Assignees, Milestone: in.Milestone,
				})
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "get_issue_assignees", "Get Issue Assignees",
			"Lists the users assigned to an issue.",
			schema.Object(schema.Merge(repoProps, issueNumberProp), issueRequired...),
			schema.Object(schema.Props{
				"issue_number": schema.Integer("Issue number."),
				"assignees":    schema.Array(assignedUserSchema, "Assigned users."),
			}, "issue_number", "assignees"),
			func(ctx context.Context, c *client, in *issueNumberInput) (any, error) {
				g, err := c.GetIssue(ctx, in.Owner, in.Repo, in.IssueNumber)
				if err != nil {
					return nil, err
				}
				out := make([]AssignedUser, len(g.Assignees))
				for i, u := range g.Assignees {
					out[i] = AssignedUser(u)
				}
				return struct {
					IssueNumber int            `json:"issue_number"`
					Assignees   []AssignedUser `json:"assignees"`
				}{in.IssueNumber, out}, nil
			}),
		define(k, "search_issues_and_pull_requests", "Search Issues and Pull Requests",
			"Searches issues and pull requests across repositories with GitHub's search syntax (it has its own, smaller rate limit).",
			schema.Object(schema.Merge(maxItemsProp, schema.Props{
				"q":     schema.Text("Search query, e.g. repo:octocat/hello-world is:issue is:open label:bug.").MaxLength(256),
				"sort":  schema.Enum("Sort by (default: best match).", searchSorts...),
				"order": schema.Enum("Sort order (default desc).", "asc", "desc"),
			}), "q"),
			listOutput("items", issueSchema, schema.Props{
				"total_count":        schema.Integer("Matches GitHub found (it returns at most 1000)."),
				"incomplete_results": schema.Boolean("Whether GitHub's search timed out before finding everything."),
			}),
			func(ctx context.Context, c *client, in *searchInput) (any, error) {
				r, err := c.SearchIssues(ctx, in.Q, in.Sort, in.Order, in.MaxItems)
				if err != nil {
					return nil, err
				}
				return struct {
					TotalCount        int     `json:"total_count"`
					IncompleteResults bool    `json:"incomplete_results"`
					Items             []Issue `json:"items"`
					Count             int     `json:"count"`
					HasMore           bool    `json:"has_more"`
				}{r.Total, r.Incomplete, issuesOut(r.Items), len(r.Items), r.More}, nil
			}),
		define(k, "list_issues", "List Issues",
			"Lists a repository's issues (pull requests included, flagged is_pull_request), filtered by state, labels, assignee, creator or date.",
			schema.Object(schema.Merge(repoProps, maxItemsProp, schema.Props{
				"state":     schema.Enum("Which issues (default open).", "open", "closed", "all"),
				"labels":    schema.Array(schema.String(""), "Only issues with all these labels."),
				"assignee":  schema.String("Only issues assigned to this login; none for unassigned, * for any."),
				"creator":   schema.String("Only issues opened by this login."),
				"mentioned": schema.String("Only issues mentioning this login."),
				"since":     schema.DateTime("Only issues updated after this time (RFC 3339)."),
				"sort":      schema.Enum("Sort by (default created).", "created", "updated", "comments"),
				"direction": schema.Enum("Sort direction (default desc).", "asc", "desc"),
			}), "owner", "repo"),
			listOutput("issues", issueSchema, nil),
			func(ctx context.Context, c *client, in *listIssuesInput) (any, error) {
				items, more, err := c.ListIssues(ctx, in.Owner, in.Repo, issueListOptions{
					State: in.State, Labels: in.Labels, Assignee: in.Assignee, Creator: in.Creator,
					Mentioned: in.Mentioned, Since: in.Since, Sort: in.Sort, Direction: in.Direction,
				}, in.MaxItems)
				if err != nil {
					return nil, err
				}
				return struct {
					Issues  []Issue `json:"issues"`
					Count   int     `json:"count"`
					HasMore bool    `json:"has_more"`
				}{issuesOut(items), len(items), more}, nil
			}),
		define(k, "get_issue", "Get Issue",
			"Reads one issue (or pull request, through the issues API).",
			schema.Object(schema.Merge(repoProps, issueNumberProp), issueRequired...),
			issueSchema,
			func(ctx context.Context, c *client, in *issueNumberInput) (any, error) {
				g, err := c.GetIssue(ctx, in.Owner, in.Repo, in.IssueNumber)
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
	}
}

func issuesOut(gs []ghIssue) []Issue {
	out := make([]Issue, len(gs))
	for i, g := range gs {
		out[i] = g.out()
	}
	return out
}

func setQuery(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}
