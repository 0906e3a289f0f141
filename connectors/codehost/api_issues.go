package codehost

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The code host's issue endpoints the issue steps call: one method per
// upstream request, each linking GitHub's documentation of it.

// issuePath is /repos/{owner}/{repo}/issues/{number} plus rest.
func issuePath(owner, repo string, number int, rest ...string) string {
	return repoPath(owner, repo, append([]string{"/issues/", strconv.Itoa(number)}, rest...)...)
}

// issueCreate is the body of CreateIssue.
type issueCreate struct {
	Title     string   `json:"title"`
	Body      string   `json:"body,omitempty"`
	Labels    []string `json:"labels,omitempty"`
	Assignees []string `json:"assignees,omitempty"`
	Milestone *int     `json:"milestone,omitempty"`
}

// CreateIssue opens an issue.
//
// GitHub API docs: https://docs.github.com/rest/issues/issues#create-an-issue
func (c *client) CreateIssue(ctx context.Context, owner, repo string, in issueCreate) (*ghIssue, error) {
	var g ghIssue
	if _, err := c.sendJSON(ctx, http.MethodPost, repoPath(owner, repo, "/issues"), in, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// ghComment is an issue comment as GitHub answers it.
type ghComment struct {
	ID        int64   `json:"id"`
	Body      string  `json:"body"`
	User      *ghUser `json:"user"`
	HTMLURL   string  `json:"html_url"`
	CreatedAt string  `json:"created_at"`
}

// CreateIssueComment comments on an issue or pull request.
//
// GitHub API docs: https://docs.github.com/rest/issues/comments#create-an-issue-comment
func (c *client) CreateIssueComment(ctx context.Context, owner, repo string, number int, body string) (*ghComment, error) {
	var g ghComment
	if _, err := c.sendJSON(ctx, http.MethodPost, issuePath(owner, repo, number, "/comments"), map[string]string{"body": body}, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// issueUpdate is the body of UpdateIssue: nil and empty fields are not
// sent; Milestone is sent as given (a number, or null to remove it).
type issueUpdate struct {
	Title, Body        *string
	State, StateReason string
	Labels, Assignees  *[]string
	Milestone          json.RawMessage
}

// UpdateIssue changes an issue; lists given replace the current ones.
//
// GitHub API docs: https://docs.github.com/rest/issues/issues#update-an-issue
func (c *client) UpdateIssue(ctx context.Context, owner, repo string, number int, in issueUpdate) (*ghIssue, error) {
	body := map[string]any{}
	if in.Title != nil {
		body["title"] = *in.Title
	}
	if in.Body != nil {
		body["body"] = *in.Body
	}
	setIf(body, "state", in.State)
	setIf(body, "state_reason", in.StateReason)
	if in.Labels != nil {
		body["labels"] = *in.Labels
	}
	if in.Assignees != nil {
		body["assignees"] = *in.Assignees
	}
	if in.Milestone != nil {
		body["milestone"] = in.Milestone
	}
	var g ghIssue
	if _, err := c.sendJSON(ctx, http.MethodPatch, issuePath(owner, repo, number), body, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// GetIssue reads an issue (or a pull request, through the issues API).
//
// GitHub API docs: https://docs.github.com/rest/issues/issues#get-an-issue
func (c *client) GetIssue(ctx context.Context, owner, repo string, number int) (*ghIssue, error) {
	var g ghIssue
	if err := c.getJSON(ctx, issuePath(owner, repo, number), nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// issueSearch is one search's answer, over the pages read.
type issueSearch struct {
	Items      []ghIssue
	Total      int
	Incomplete bool
	More       bool
}

// SearchIssues searches issues and pull requests with GitHub's search
// syntax, reading at most maxItems matches; sort and order may be empty.
//
// GitHub API docs: https://docs.github.com/rest/search/search#search-issues-and-pull-requests
func (c *client) SearchIssues(ctx context.Context, query, sort, order string, maxItems int) (*issueSearch, error) {
	q := url.Values{"q": {query}}
	setQuery(q, "sort", sort)
	setQuery(q, "order", order)
	incomplete := false
	items, total, more, err := listPages(ctx, c, "/search/issues", q, maxItems, func(b []byte) (page[ghIssue], error) {
		var r struct {
			TotalCount        int       `json:"total_count"`
			IncompleteResults bool      `json:"incomplete_results"`
			Items             []ghIssue `json:"items"`
		}
		err := json.Unmarshal(b, &r)
		incomplete = incomplete || r.IncompleteResults
		return page[ghIssue]{items: r.Items, total: r.TotalCount}, err
	})
	if err != nil {
		return nil, err
	}
	return &issueSearch{Items: items, Total: total, Incomplete: incomplete, More: more}, nil
}

// issueListOptions filters ListIssues; empty fields are not sent.
type issueListOptions struct {
	State, Assignee, Creator, Mentioned, Since, Sort, Direction string
	Labels                                                      []string
}

// ListIssues lists a repository's issues (pull requests included),
// reading at most maxItems; more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/issues/issues#list-repository-issues
func (c *client) ListIssues(ctx context.Context, owner, repo string, o issueListOptions, maxItems int) (issues []ghIssue, more bool, err error) {
	q := url.Values{}
	setQuery(q, "state", o.State)
	setQuery(q, "labels", strings.Join(o.Labels, ","))
	setQuery(q, "assignee", o.Assignee)
	setQuery(q, "creator", o.Creator)
	setQuery(q, "mentioned", o.Mentioned)
	setQuery(q, "since", o.Since)
	setQuery(q, "sort", o.Sort)
	setQuery(q, "direction", o.Direction)
	issues, _, more, err = listPages[ghIssue](ctx, c, repoPath(owner, repo, "/issues"), q, maxItems, nil)
	return issues, more, err
}

// GitHub's answers, as far as the steps read them.

type ghLabel struct {
	Name string `json:"name"`
}

type ghIssue struct {
	Number        int             `json:"number"`
	ID            int64           `json:"id"`
	RepositoryURL string          `json:"repository_url"`
	Title         string          `json:"title"`
	Body          string          `json:"body"`
	State         string          `json:"state"`
	StateReason   string          `json:"state_reason"`
	User          *ghUser         `json:"user"`
	Labels        []ghLabel       `json:"labels"`
	Assignees     []ghUser        `json:"assignees"`
	Milestone     *Milestone      `json:"milestone"`
	Comments      int             `json:"comments"`
	PullRequest   json.RawMessage `json:"pull_request"`
	HTMLURL       string          `json:"html_url"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	ClosedAt      string          `json:"closed_at"`
}
