package codehost

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// The code host's pull request and Projects (v2) endpoints the pull
// request steps call: one method per upstream request, each linking
// GitHub's documentation of it.

// pullPath is /repos/{owner}/{repo}/pulls/{number} plus rest.
func pullPath(owner, repo string, number int, rest ...string) string {
	return repoPath(owner, repo, append([]string{"/pulls/", strconv.Itoa(number)}, rest...)...)
}

type ghRef struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

type ghPull struct {
	Number             int       `json:"number"`
	ID                 int64     `json:"id"`
	Title              string    `json:"title"`
	Body               string    `json:"body"`
	State              string    `json:"state"`
	Draft              bool      `json:"draft"`
	Merged             bool      `json:"merged"`
	Mergeable          *bool     `json:"mergeable"`
	User               *ghUser   `json:"user"`
	Head               ghRef     `json:"head"`
	Base               ghRef     `json:"base"`
	Labels             []ghLabel `json:"labels"`
	Assignees          []ghUser  `json:"assignees"`
	RequestedReviewers []ghUser  `json:"requested_reviewers"`
	HTMLURL            string    `json:"html_url"`
	CreatedAt          string    `json:"created_at"`
	UpdatedAt          string    `json:"updated_at"`
	ClosedAt           string    `json:"closed_at"`
	MergedAt           string    `json:"merged_at"`
	MergeCommitSHA     string    `json:"merge_commit_sha"`
}

// pullCreate is the body of CreatePullRequest.
type pullCreate struct {
	Head                string `json:"head"`
	Base                string `json:"base"`
	Title               string `json:"title"`
	Body                string `json:"body,omitempty"`
	Draft               bool   `json:"draft,omitempty"`
	MaintainerCanModify *bool  `json:"maintainer_can_modify,omitempty"`
}

// CreatePullRequest opens a pull request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#create-a-pull-request
func (c *client) CreatePullRequest(ctx context.Context, owner, repo string, in pullCreate) (*ghPull, error) {
	var g ghPull
	if _, err := c.sendJSON(ctx, http.MethodPost, repoPath(owner, repo, "/pulls"), in, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// GetPullRequest reads a pull request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#get-a-pull-request
func (c *client) GetPullRequest(ctx context.Context, owner, repo string, number int) (*ghPull, error) {
	var g ghPull
	if err := c.getJSON(ctx, pullPath(owner, repo, number), nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// pullUpdate is the body of UpdatePullRequest: nil and empty fields are
// not sent.
type pullUpdate struct {
	Title, Body         *string
	State, Base         string
	MaintainerCanModify *bool
}

// UpdatePullRequest changes a pull request's title, body, state or base.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#update-a-pull-request
func (c *client) UpdatePullRequest(ctx context.Context, owner, repo string, number int, in pullUpdate) (*ghPull, error) {
	body := map[string]any{}
	if in.Title != nil {
		body["title"] = *in.Title
	}
	if in.Body != nil {
		body["body"] = *in.Body
	}
	setIf(body, "state", in.State)
	setIf(body, "base", in.Base)
	if in.MaintainerCanModify != nil {
		body["maintainer_can_modify"] = *in.MaintainerCanModify
	}
	var g ghPull
	if _, err := c.sendJSON(ctx, http.MethodPatch, pullPath(owner, repo, number), body, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// pullListOptions filters ListPullRequests; empty fields are not sent.
type pullListOptions struct {
	State, Head, Base, Sort, Direction string
}

// ListPullRequests lists a repository's pull requests, reading at most
// maxItems; more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#list-pull-requests
func (c *client) ListPullRequests(ctx context.Context, owner, repo string, o pullListOptions, maxItems int) (pulls []ghPull, more bool, err error) {
	q := url.Values{}
	setQuery(q, "state", o.State)
	setQuery(q, "head", o.Head)
	setQuery(q, "base", o.Base)
	setQuery(q, "sort", o.Sort)
	setQuery(q, "direction", o.Direction)
	pulls, _, more, err = listPages[ghPull](ctx, c, repoPath(owner, repo, "/pulls"), q, maxItems, nil)
	return pulls, more, err
}

// pullMerge is the body of MergePullRequest: empty fields are not sent.
type pullMerge struct {
	MergeMethod, CommitTitle, CommitMessage, SHA string
}

// ghMergeResult is GitHub's answer to a merge.
type ghMergeResult struct {
	SHA     string `json:"sha"`
	Merged  bool   `json:"merged"`
	Message string `json:"message"`
}

// MergePullRequest merges a pull request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#merge-a-pull-request
func (c *client) MergePullRequest(ctx context.Context, owner, repo string, number int, in pullMerge) (*ghMergeResult, error) {
	body := map[string]any{}
	setIf(body, "merge_method", in.MergeMethod)
	setIf(body, "commit_title", in.CommitTitle)
	setIf(body, "commit_message", in.CommitMessage)
	setIf(body, "sha", in.SHA)
	var r ghMergeResult
	if _, err := c.sendJSON(ctx, http.MethodPut, pullPath(owner, repo, number, "/merge"), body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ghRequestedReviewers are the users and teams asked to review.
type ghRequestedReviewers struct {
	Users []ghUser `json:"users"`
	Teams []struct {
		Slug string `json:"slug"`
	} `json:"teams"`
}

// ListRequestedReviewers reads who is asked to review a pull request.
//
// GitHub API docs: https://docs.github.com/rest/pulls/review-requests#get-all-requested-reviewers-for-a-pull-request
func (c *client) ListRequestedReviewers(ctx context.Context, owner, repo string, number int) (*ghRequestedReviewers, error) {
	var r ghRequestedReviewers
	if err := c.getJSON(ctx, pullPath(owner, repo, number, "/requested_reviewers"), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ghReview is a submitted review.
type ghReview struct {
	ID          int64   `json:"id"`
	User        *ghUser `json:"user"`
	State       string  `json:"state"`
	Body        string  `json:"body"`
	SubmittedAt string  `json:"submitted_at"`
}

// ListReviews lists a pull request's reviews, oldest first, reading at
// most maxItems; more reports whether GitHub had more.
//
// GitHub API docs: https://docs.github.com/rest/pulls/reviews#list-reviews-for-a-pull-request
func (c *client) ListReviews(ctx context.Context, owner, repo string, number, maxItems int) (reviews []ghReview, more bool, err error) {
	reviews, _, more, err = listPages[ghReview](ctx, c, pullPath(owner, repo, number, "/reviews"), nil, maxItems, nil)
	return reviews, more, err
}

// GetProjectV2Field reads a Projects (v2) field by its node id: a node
// query on the ProjectV2FieldCommon interface. A node that is not a field
// is a CodeValidation error; no node, CodeNotFound.
//
// GitHub API docs: https://docs.github.com/graphql/reference/interfaces#projectv2fieldcommon
func (c *client) GetProjectV2Field(ctx context.Context, fieldID string) (*ProjectField, error) {
	var data struct {
		Node *struct {
			Typename string          `json:"__typename"`
			ID       string          `json:"id"`
			Name     string          `json:"name"`
			DataType string          `json:"dataType"`
			Options  []ProjectOption `json:"options"`
		} `json:"node"`
	}
	if err := c.graphql(ctx, projectFieldQuery, map[string]any{"id": fieldID}, &data); err != nil {
		return nil, err
	}
	n := data.Node
	switch {
	case n == nil:
		return nil, connectors.Errorf(connectors.CodeNotFound, "GitHub GraphQL: no node with the global id %q", fieldID)
	case n.Name == "":
		return nil, connectors.Errorf(connectors.CodeValidation, "%q is a %s, not a Projects (v2) field", fieldID, n.Typename)
	}
	f := ProjectField{ID: n.ID, Name: n.Name, DataType: n.DataType, Options: n.Options}
	if f.Options == nil {
		f.Options = []ProjectOption{}
	}
	return &f, nil
}

// SetProjectV2ItemOption sets a single-select field (such as Status) of a
// Projects (v2) item to one of its options, and returns the item's id as
// GitHub reports it.
//
// GitHub API docs: https://docs.github.com/graphql/reference/mutations#updateprojectv2itemfieldvalue
func (c *client) SetProjectV2ItemOption(ctx context.Context, projectID, itemID, fieldID, optionID string) (string, error) {
	vars := map[string]any{"input": map[string]any{
		"projectId": projectID, "itemId": itemID, "fieldId": fieldID,
		"value": map[string]string{"singleSelectOptionId": optionID},
	}}
	var data struct {
		Update *struct {
			Item struct {
				ID string `json:"id"`
			} `json:"projectV2Item"`
		} `json:"updateProjectV2ItemFieldValue"`
	}
	if err := c.graphql(ctx, updateItemMutation, vars, &data); err != nil {
		return "", err
	}
	if data.Update == nil {
		return "", connectors.Errorf(connectors.CodeUpstream, "GitHub GraphQL answered without the updated item")
	}
	return data.Update.Item.ID, nil
}

// projectFieldQuery reads a field by node id. ProjectV2FieldCommon is the
// interface every field type implements; only single-select fields have
// options.
const projectFieldQuery = `query($id: ID!) {
  node(id: $id) {
    __typename
    ... on ProjectV2FieldCommon { id name dataType }
    ... on ProjectV2SingleSelectField { options { id name } }
  }
}`

// updateItemMutation sets a single-select field (a Status) of a Projects
// (v2) item.
const updateItemMutation = `mutation($input: UpdateProjectV2ItemFieldValueInput!) {
  updateProjectV2ItemFieldValue(input: $input) { projectV2Item { id } }
}`

// gqlError is one of the errors[] of a GraphQL answer.
type gqlError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// graphql posts a GraphQL query or mutation and decodes the answer's data
// into data. GitHub answers GraphQL errors with HTTP 200 and errors[]:
// they become a *connectors.Error (graphqlError).
func (c *client) graphql(ctx context.Context, query string, vars map[string]any, data any) error {
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if _, err := c.sendJSON(ctx, http.MethodPost, "/graphql", map[string]any{"query": query, "variables": vars}, &r); err != nil {
		return err
	}
	if len(r.Errors) > 0 {
		return graphqlError(r.Errors)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		return connectors.Errorf(connectors.CodeUpstream, "GitHub GraphQL answered with data that does not decode: %v", err)
	}
	return nil
}

// graphqlError maps the errors[] of a GraphQL answer (sent with HTTP 200).
func graphqlError(errs []gqlError) error {
	e := errs[0]
	code := connectors.CodeUpstream
	switch e.Type {
	case "NOT_FOUND":
		code = connectors.CodeNotFound
	case "FORBIDDEN", "INSUFFICIENT_SCOPES":
		code = connectors.CodePermissionDenied
	case "RATE_LIMITED":
		return &connectors.Error{Code: connectors.CodeRateLimited, Message: "GitHub GraphQL: " + e.Message, RetryAfter: secondaryWait, Retryable: true}
	case "UNPROCESSABLE", "":
		code = connectors.CodeValidation
	}
	return &connectors.Error{Code: code, Message: "GitHub GraphQL: " + provhttp.Clip(e.Message)}
}
