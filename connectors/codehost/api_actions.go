package codehost

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// The code host's GitHub Actions endpoints the actions steps call: one
// method per upstream request, each linking GitHub's documentation of
// it. A workflow is named by its numeric id or its file name (ci.yml).

// workflowPath is /repos/{owner}/{repo}/actions/workflows/{workflow}
// plus rest.
func workflowPath(owner, repo string, workflow workflowID, rest string) string {
	return repoPath(owner, repo, "/actions/workflows/", seg(string(workflow)), rest)
}

// EnableWorkflow enables a workflow.
//
// GitHub API docs: https://docs.github.com/rest/actions/workflows#enable-a-workflow
func (c *client) EnableWorkflow(ctx context.Context, owner, repo string, workflow workflowID) error {
	_, err := c.sendJSON(ctx, http.MethodPut, workflowPath(owner, repo, workflow, "/enable"), nil, nil)
	return err
}

// DisableWorkflow disables a workflow.
//
// GitHub API docs: https://docs.github.com/rest/actions/workflows#disable-a-workflow
func (c *client) DisableWorkflow(ctx context.Context, owner, repo string, workflow workflowID) error {
	_, err := c.sendJSON(ctx, http.MethodPut, workflowPath(owner, repo, workflow, "/disable"), nil, nil)
	return err
}

// workflowDispatch is the body of CreateWorkflowDispatch: Inputs is sent
// when not empty, ReturnRunDetails when true.
type workflowDispatch struct {
	Ref              string
	Inputs           map[string]json.RawMessage
	ReturnRunDetails bool
}

// ghDispatchResult is GitHub's answer to a dispatch; its fields are set
// only when return_run_details was asked for (newer GitHub only).
type ghDispatchResult struct {
	RunID   int64  `json:"workflow_run_id"`
	RunURL  string `json:"run_url"`
	HTMLURL string `json:"html_url"`
}

// CreateWorkflowDispatch triggers a workflow that accepts
// workflow_dispatch.
//
// GitHub API docs: https://docs.github.com/rest/actions/workflows#create-a-workflow-dispatch-event
func (c *client) CreateWorkflowDispatch(ctx context.Context, owner, repo string, workflow workflowID, in workflowDispatch) (*ghDispatchResult, error) {
	body := map[string]any{"ref": in.Ref}
	if len(in.Inputs) > 0 {
		body["inputs"] = in.Inputs
	}
	if in.ReturnRunDetails {
		body["return_run_details"] = true
	}
	var r ghDispatchResult
	if _, err := c.sendJSON(ctx, http.MethodPost, workflowPath(owner, repo, workflow, "/dispatches"), body, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetWorkflowRun reads a workflow run.
//
// GitHub API docs: https://docs.github.com/rest/actions/workflow-runs#get-a-workflow-run
func (c *client) GetWorkflowRun(ctx context.Context, owner, repo string, runID int64) (*ghRun, error) {
	var g ghRun
	if err := c.getJSON(ctx, repoPath(owner, repo, "/actions/runs/", strconv.FormatInt(runID, 10)), nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// runListOptions filters ListWorkflowRuns; empty fields are not sent.
type runListOptions struct {
	Branch, Event, Status, Actor, Created string
}

// ListWorkflowRuns lists a repository's runs, or one workflow's when
// workflow is not empty, newest first, reading at most maxItems; total is
// the count GitHub reports, more whether it had more.
//
// GitHub API docs: https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-repository
// and https://docs.github.com/rest/actions/workflow-runs#list-workflow-runs-for-a-workflow
func (c *client) ListWorkflowRuns(ctx context.Context, owner, repo string, workflow workflowID, o runListOptions, maxItems int) (runs []ghRun, total int, more bool, err error) {
	q := url.Values{}
	setQuery(q, "branch", o.Branch)
	setQuery(q, "event", o.Event)
	setQuery(q, "status", o.Status)
	setQuery(q, "actor", o.Actor)
	setQuery(q, "created", o.Created)
	path := repoPath(owner, repo, "/actions/runs")
	if workflow != "" {
		path = workflowPath(owner, repo, workflow, "/runs")
	}
	return listPages(ctx, c, path, q, maxItems, func(b []byte) (page[ghRun], error) {
		var r struct {
			TotalCount   int     `json:"total_count"`
			WorkflowRuns []ghRun `json:"workflow_runs"`
		}
		err := json.Unmarshal(b, &r)
		return page[ghRun]{items: r.WorkflowRuns, total: r.TotalCount}, err
	})
}

// GitHub's answers, as far as the steps read them.

type ghRun struct {
	Run
	Actor *ghUser `json:"actor"`
}
