package codehost

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// workflowID is a workflow's numeric id or its file name (ci.yml); the
// input may give either a JSON number or a string.
type workflowID string

// UnmarshalJSON accepts a number or a string.
func (w *workflowID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '"' {
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			return err
		}
		*w = workflowID(strconv.FormatInt(n, 10))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*w = workflowID(s)
	return nil
}

var workflowIDRE = regexp.MustCompile(`^([0-9]+|[A-Za-z0-9_.-]+\.ya?ml)$`)

var workflowIDSchema = schema.Any("The workflow's numeric id or its file name, e.g. ci.yml.").
	Types("integer", "string").Min(1).Pattern(`^([0-9]+|[A-Za-z0-9_.-]+\.ya?ml)$`)

type workflowInput struct {
	repoInput
	WorkflowID workflowID `json:"workflow_id"`
}

func (in *workflowInput) checkWorkflow(p *problems) {
	in.checkRepo(p)
	if !workflowIDRE.MatchString(string(in.WorkflowID)) {
		p.addf("workflow_id must be a numeric id or a .yml/.yaml file name")
	}
}

func (in *workflowInput) check() error {
	var p problems
	in.checkWorkflow(&p)
	return p.err()
}

type dispatchInput struct {
	workflowInput
	Ref              string                     `json:"ref"`
	Inputs           map[string]json.RawMessage `json:"inputs,omitempty"`
	ReturnRunDetails bool                       `json:"return_run_details,omitempty"`
}

func (in *dispatchInput) check() error {
	var p problems
	in.checkWorkflow(&p)
	p.required("ref", in.Ref)
	if len(in.Inputs) > 25 {
		p.addf("inputs has %d keys; GitHub allows at most 25", len(in.Inputs))
	}
	for k, v := range in.Inputs {
		var x any
		if json.Unmarshal(v, &x) != nil {
			continue
		}
		switch x.(type) {
		case string, float64, bool:
		default:
			p.addf("input %q must be a string, number or boolean", k)
		}
	}
	return p.err()
}

type runInput struct {
	repoInput
	RunID int64 `json:"run_id"`
}

func (in *runInput) check() error {
	var p problems
	in.checkRepo(&p)
	p.positive("run_id", in.RunID)
	return p.err()
}

type listRunsInput struct {
	repoInput
	listInput
	WorkflowID workflowID `json:"workflow_id,omitempty"`
	Branch     string     `json:"branch,omitempty"`
	Event      string     `json:"event,omitempty"`
	Status     string     `json:"status,omitempty"`
	Actor      string     `json:"actor,omitempty"`
	Created    string     `json:"created,omitempty"`
}

var runStatuses = []string{"completed", "action_required", "cancelled", "failure", "neutral", "skipped", "stale", "success",
	"timed_out", "in_progress", "queued", "requested", "waiting", "pending"}

func (in *listRunsInput) check() error {
	var p problems
	in.checkRepo(&p)
	in.checkList(&p)
	if in.WorkflowID != "" && !workflowIDRE.MatchString(string(in.WorkflowID)) {
		p.addf("workflow_id must be a numeric id or a .yml/.yaml file name")
	}
	p.enum("status", in.Status, runStatuses...)
	return p.err()
}

// Run is the structured output of the workflow run steps.
type Run struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	WorkflowID   int64  `json:"workflow_id"`
	RunNumber    int    `json:"run_number"`
	RunAttempt   int    `json:"run_attempt"`
	Event        string `json:"event"`
	Status       string `json:"status"`
	Conclusion   string `json:"conclusion,omitempty"`
	HeadBranch   string `json:"head_branch"`
	HeadSHA      string `json:"head_sha"`
	Actor        string `json:"actor"`
	DisplayTitle string `json:"display_title"`
	HTMLURL      string `json:"html_url"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`
}

func (g ghRun) out() Run {
	r := g.Run
	r.Actor = g.Actor.login()
	return r
}

var runSchema = schema.Object(schema.Props{
	"id": schema.Integer("Run id."), "name": schema.String("Workflow name."), "workflow_id": schema.Integer("Workflow id."),
	"run_number": schema.Integer("Run number within the workflow."), "run_attempt": schema.Integer("Attempt."),
	"event":       schema.String("What triggered it: push, workflow_dispatch, ..."),
	"status":      schema.String("queued, in_progress, completed, waiting, requested or pending."),
	"conclusion":  schema.String("Once completed: success, failure, cancelled, skipped, timed_out, action_required, neutral or stale."),
	"head_branch": schema.String("Branch."), "head_sha": schema.String("Commit sha."), "actor": schema.String("Login that triggered it."),
	"display_title": schema.String("Title shown for the run."), "html_url": schema.String("Web page."),
	"created_at": schema.String("Created (RFC 3339)."), "updated_at": schema.String("Last updated (RFC 3339)."),
}, "id", "name", "workflow_id", "run_number", "run_attempt", "event", "status", "head_branch", "head_sha", "actor",
	"display_title", "html_url", "created_at", "updated_at")

func (k *kit) actionSteps() []connectors.Step {
	workflowRequired := []string{"owner", "repo", "workflow_id"}
	workflowState := func(id, title, desc, state string, set func(*client, context.Context, string, string, workflowID) error) connectors.Step {
		return define(k, id, title, desc,
			schema.Object(schema.Merge(repoProps, schema.Props{"workflow_id": workflowIDSchema}), workflowRequired...),
			schema.Object(schema.Props{
				"workflow_id": schema.String("The workflow."), "state": schema.Enum("Its state now.", "active", "disabled_manually"),
			}, "workflow_id", "state"),
			func(ctx context.Context, c *client, in *workflowInput) (any, error) {
				if err := set(c, ctx, in.Owner, in.Repo, in.WorkflowID); err != nil {
					return nil, err
				}
				return struct {
					WorkflowID string `json:"workflow_id"`
					State      string `json:"state"`
				}{string(in.WorkflowID), state}, nil
			})
	}
	return []connectors.Step{
		define(k, "create_workflow_dispatch", "Create Workflow Dispatch",
			"Triggers a GitHub Actions workflow that accepts workflow_dispatch, on a branch or tag, with inputs.",
			schema.Object(schema.Merge(repoProps, schema.Props{
				"workflow_id":        workflowIDSchema,
				"ref":                schema.Text("Branch or tag to run on."),
				"inputs":             schema.Map(schema.Any("").Types("string", "number", "boolean"), "Workflow inputs (at most 25).").MaxProperties(25),
				"return_run_details": schema.Boolean("Ask GitHub for the new run's id (newer GitHub only)."),
			}), "owner", "repo", "workflow_id", "ref"),
			schema.Object(schema.Props{
				"workflow_id": schema.String("The workflow."), "ref": schema.String("The ref it runs on."), "dispatched": schema.Boolean("Always true."),
				"run_id": schema.Integer("The new run's id, with return_run_details."), "run_url": schema.String("The new run's API URL, with return_run_details."),
				"html_url": schema.String("The new run's web page, with return_run_details."),
			}, "workflow_id", "ref", "dispatched"),
			func(ctx context.Context, c *client, in *dispatchInput) (any, error) {
				r, err := c.CreateWorkflowDispatch(ctx, in.Owner, in.Repo, in.WorkflowID, workflowDispatch{
					Ref: in.Ref, Inputs: in.Inputs, ReturnRunDetails: in.ReturnRunDetails,
				})
				if err != nil {
					return nil, err
				}
				return struct {
					WorkflowID string `json:"workflow_id"`
					Ref        string `json:"ref"`
					Dispatched bool   `json:"dispatched"`
					RunID      int64  `json:"run_id,omitempty"`
					RunURL     string `json:"run_url,omitempty"`
					HTMLURL    string `json:"html_url,omitempty"`
				}{string(in.WorkflowID), in.Ref, true, r.RunID, r.RunURL, r.HTMLURL}, nil
			}),
		workflowState("enable_workflow", "Enable Workflow", "Enables a GitHub Actions workflow so that its triggers run it again.", "active", (*client).EnableWorkflow),
		workflowState("disable_workflow", "Disable Workflow", "Disables a GitHub Actions workflow so that nothing triggers it.", "disabled_manually", (*client).DisableWorkflow),
		define(k, "get_workflow_run", "Get Workflow Run",
			"Reads one GitHub Actions workflow run: its status and, once completed, its conclusion.",
			schema.Object(schema.Merge(repoProps, schema.Props{"run_id": schema.Integer("Run id.").Min(1)}), "owner", "repo", "run_id"),
			runSchema,
			func(ctx context.Context, c *client, in *runInput) (any, error) {
				g, err := c.GetWorkflowRun(ctx, in.Owner, in.Repo, in.RunID)
				if err != nil {
					return nil, err
				}
				return g.out(), nil
			}),
		define(k, "list_workflow_runs", "List Workflow Runs",
			"Lists a repository's (or one workflow's) GitHub Actions runs, newest first, filtered by branch, event, status or actor.",
			schema.Object(schema.Merge(repoProps, maxItemsProp, schema.Props{
				"workflow_id": workflowIDSchema,
				"branch":      schema.String("Only runs on this branch."),
				"event":       schema.String("Only runs triggered by this event, e.g. push."),
				"status":      schema.Enum("Only runs with this status or conclusion.", runStatuses...),
				"actor":       schema.String("Only runs triggered by this login."),
				"created":     schema.String("Only runs created in this range, GitHub search date syntax, e.g. >=2026-01-01."),
			}), "owner", "repo"),
			listOutput("runs", runSchema, schema.Props{"total_count": schema.Integer("Runs GitHub found.")}),
			func(ctx context.Context, c *client, in *listRunsInput) (any, error) {
				rs, total, more, err := c.ListWorkflowRuns(ctx, in.Owner, in.Repo, in.WorkflowID, runListOptions{
					Branch: in.Branch, Event: in.Event, Status: in.Status, Actor: in.Actor, Created: in.Created,
				}, in.MaxItems)
				if err != nil {
					return nil, err
				}
				out := make([]Run, len(rs))
				for i, r := range rs {
					out[i] = r.out()
				}
				return struct {
					TotalCount int   `json:"total_count"`
					Runs       []Run `json:"runs"`
					Count      int   `json:"count"`
					HasMore    bool  `json:"has_more"`
				}{total, out, len(out), more}, nil
			}),
	}
}
