package deploy

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// Step ids of the deploy toolkit.
const (
	StepCreateDeployment = "deploy.create_deployment"
	StepListDeployments  = "deploy.list_deployments"
	StepCancelDeployment = "deploy.cancel_deployment"
)

// Deployment environments: the targets Vercel deploys to (production,
// preview, staging), and the one it does not (development, the local
// environment of vercel dev).
const (
	EnvProduction  = "production"
	EnvPreview     = "preview"
	EnvStaging     = "staging"
	EnvDevelopment = "development"
)

// errDevelopment says why no step deploys to, or lists deployments of,
// Vercel's Development environment.
const errDevelopment = "vercel's development environment is the local one of vercel dev: it holds environment variables and takes no deployment"

// List Deployments bounds.
const (
	defaultListLimit = 20
	maxListLimit     = 1000
	maxPageSize      = 100
)

// cancelable are the states a deployment can be canceled in.
var cancelable = []string{"QUEUED", "INITIALIZING", "BUILDING"}

// reservedConfig are the body keys Create Deployment sets itself; the
// custom configuration may not set them.
var reservedConfig = []string{"name", "project", "target", "customEnvironmentSlugOrId", "gitSource", "meta"}

// ToolkitOptions configures NewToolkit.
type ToolkitOptions struct {
	// APIBaseURL is the Vercel REST API root (default
	// https://api.vercel.com).
	APIBaseURL string
	// Now is the clock used for rate-limit resets (default time.Now).
	Now func() time.Time

	// retryBase is the first retry's nominal wait (default 250 ms); tests
	// shorten it.
	retryBase time.Duration
}

// toolkit holds what the deploy steps share.
type toolkit struct {
	base   string
	now    func() time.Time
	policy *policy
}

// NewToolkit returns the deploy connector's steps (Create Deployment, List
// Deployments, Cancel Deployment) and its HTTP policy.
//
// The policy (Toolkit.Wrap) tracks Vercel's X-RateLimit-Limit, -Remaining
// and -Reset per connected account and endpoint and refuses, without
// sending, a request whose bucket is known to be spent (CodeRateLimited
// with RetryAfter up to the reset); it retries idempotent requests (GET,
// HEAD, OPTIONS, PUT, DELETE or with an Idempotency-Key) on network errors
// and 5xx answers, at most three attempts with jittered exponential
// backoff and never past the context's deadline. A 429 is not retried: it
// becomes CodeRateLimited with RetryAfter from Retry-After or the reset.
//
// Steps add ?teamId= to every request of an account whose metadata has a
// team_id; Wrap cannot, as it knows only the account id, so an API Call
// step must add it the same way.
func NewToolkit(o ToolkitOptions) connectors.Toolkit {
	tk := &toolkit{base: strings.TrimRight(o.APIBaseURL, "/"), now: o.Now}
	if tk.base == "" {
		tk.base = DefaultAPIBaseURL
	}
	if tk.now == nil {
		tk.now = time.Now
	}
	rb := o.retryBase
	if rb <= 0 {
		rb = defaultRetryBase
	}
	tk.policy = newPolicy(tk.now, rb)
	return connectors.Toolkit{
		Connector: name,
		Steps: []connectors.Step{
			{
				ID:          StepCreateDeployment,
				Name:        "Create Deployment",
				Connector:   name,
				Description: "Creates a new deployment of a project from a branch of its linked Git repository, to production or preview, with optional custom configuration.",
				Input:       schema.Root(createDeploymentInput),
				Output:      schema.Root(deploymentOutput),
				Run:         tk.createDeployment,
			},
			{
				ID:          StepListDeployments,
				Name:        "List Deployments",
				Connector:   name,
				Description: "Lists deployments, newest first, filtered by project, environment, state, branch and creation time.",
				Input:       schema.Root(listDeploymentsInput),
				Output:      schema.Root(listDeploymentsOutput),
				Run:         tk.listDeployments,
			},
			{
				ID:          StepCancelDeployment,
				Name:        "Cancel Deployment",
				Connector:   name,
				Description: "Cancels a queued or ongoing deployment by its id.",
				Input:       schema.Root(cancelDeploymentInput),
				Output:      schema.Root(deploymentOutput),
				Run:         tk.cancelDeployment,
			},
		},
		Wrap: tk.policy.wrap,
	}
}

// Deployment is a step's structured view of a Vercel deployment.
type Deployment struct {
	// ID is the deployment id (dpl_…).
	ID   string `json:"id"`
	Name string `json:"name"`
	// URL is https://<deployment host>, nil while Vercel has none.
	URL *string `json:"url"`
	// State is Vercel's readyState: QUEUED, INITIALIZING, BUILDING, READY,
	// ERROR, CANCELED (DELETED in lists).
	State string `json:"state"`
	// Target is "production", "preview" (Vercel's null), "staging" or a
	// custom environment's slug (its id when Vercel gives no slug).
	Target    string `json:"target"`
	ProjectID string `json:"project_id"`
	// CreatedAt, ReadyAt and CanceledAt are RFC 3339 UTC times.
	CreatedAt  string  `json:"created_at"`
	ReadyAt    *string `json:"ready_at,omitempty"`
	CanceledAt *string `json:"canceled_at,omitempty"`
	// Creator is who created the deployment, nil when Vercel says nothing.
	Creator *Creator `json:"creator"`
	// Meta is the deployment's metadata (Vercel adds githubCommitRef and
	// friends for Git deployments).
	Meta map[string]string `json:"meta"`
	// Branch and CommitSHA are the Git ref and commit, when known.
	Branch       string `json:"branch,omitempty"`
	CommitSHA    string `json:"commit_sha,omitempty"`
	InspectorURL string `json:"inspector_url,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// Creator is the user who created a deployment.
type Creator struct {
	ID       string `json:"id"`
	Username string `json:"username,omitempty"`
}

// DeploymentList is the output of List Deployments.
type DeploymentList struct {
	Deployments []Deployment `json:"deployments"`
	Count       int          `json:"count"`
	// Next is the cursor to continue from (pass it as until), nil when
	// there is nothing more.
	Next *int64 `json:"next"`
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// toDeployment shapes a Vercel deployment for a step's output.
func toDeployment(v vercelDeployment) Deployment {
	d := Deployment{
		ID:           firstOf(v.ID, v.UID),
		Name:         v.Name,
		State:        firstOf(v.ReadyState, v.State, v.Status),
		Target:       EnvPreview,
		ProjectID:    v.ProjectID,
		CreatedAt:    msTime(firstInt(v.CreatedAt, v.Created)),
		Meta:         map[string]string{},
		InspectorURL: v.InspectorURL,
		ErrorCode:    v.ErrorCode,
		ErrorMessage: v.ErrorMessage,
	}
	if v.URL != nil && *v.URL != "" {
		u := *v.URL
		if !strings.Contains(u, "://") {
			u = "https://" + u
		}
		d.URL = &u
	}
	switch {
	case v.Target != nil && *v.Target != "":
		d.Target = *v.Target
	case v.CustomEnvironment != nil:
		d.Target = firstOf(v.CustomEnvironment.Slug, v.CustomEnvironment.ID, EnvPreview)
	}
	if v.Ready != nil && *v.Ready > 0 {
		t := msTime(*v.Ready)
		d.ReadyAt = &t
	}
	if v.CanceledAt != nil && *v.CanceledAt > 0 {
		t := msTime(*v.CanceledAt)
		d.CanceledAt = &t
	}
	if v.Creator != nil && v.Creator.UID != "" {
		d.Creator = &Creator{ID: v.Creator.UID, Username: v.Creator.Username}
	}
	for k, val := range v.Meta {
		switch x := val.(type) {
		case string:
			d.Meta[k] = x
		case nil:
		default:
			b, _ := json.Marshal(x)
			d.Meta[k] = string(b)
		}
	}
	if v.GitSource != nil {
		d.Branch, d.CommitSHA = v.GitSource.Ref, v.GitSource.SHA
	}
	d.Branch = firstOf(d.Branch, d.Meta["githubCommitRef"], d.Meta["gitlabCommitRef"], d.Meta["bitbucketCommitRef"], d.Meta["gitCommitRef"])
	d.CommitSHA = firstOf(d.CommitSHA, d.Meta["githubCommitSha"], d.Meta["gitlabCommitSha"], d.Meta["bitbucketCommitSha"], d.Meta["gitCommitSha"])
	return d
}

// firstOf returns the first non-empty string.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstInt(a, b int64) int64 {
	if a != 0 {
		return a
	}
	return b
}

// gitSource builds POST /v13/deployments' gitSource for ref in the
// project's linked repository.
func gitSource(project string, l *projectLink, ref, sha string) (map[string]any, error) {
	gs := map[string]any{"type": l.Type, "ref": ref}
	switch l.Type {
	case "github", "github-limited":
		switch {
		case l.RepoID != "" && l.RepoID != "0":
			gs["repoId"] = l.RepoID
		case l.Org != "" && l.Repo != "":
			gs["org"], gs["repo"] = l.Org, l.Repo
		default:
			return nil, connectors.Errorf(connectors.CodeUpstream, "project %s is linked to a github repository vercel does not identify", project)
		}
	case "gitlab":
		if l.ProjectID == "" {
			return nil, connectors.Errorf(connectors.CodeUpstream, "project %s is linked to a gitlab project vercel does not identify", project)
		}
		gs["projectId"] = l.ProjectID
	case "bitbucket":
		switch {
		case l.Owner != "" && l.Slug != "":
			gs["owner"], gs["slug"] = l.Owner, l.Slug
		case l.UUID != "":
			gs["repoUuid"] = l.UUID
			if l.WorkspaceUUID != "" {
				gs["workspaceUuid"] = l.WorkspaceUUID
			}
		default:
			return nil, connectors.Errorf(connectors.CodeUpstream, "project %s is linked to a bitbucket repository vercel does not identify", project)
		}
	default:
		return nil, connectors.Errorf(connectors.CodeValidation, "project %s is linked to a %q repository, which this step cannot deploy; use the API Call step", project, l.Type)
	}
	if sha != "" {
		gs["sha"] = sha
	}
	return gs, nil
}

type createInput struct {
	Project           string            `json:"project"`
	Branch            string            `json:"branch"`
	SHA               string            `json:"sha"`
	Environment       string            `json:"environment"`
	CustomEnvironment string            `json:"custom_environment"`
	Name              string            `json:"name"`
	Meta              map[string]string `json:"meta"`
	Config            map[string]any    `json:"config"`
}

// createDeployment runs Create Deployment: it reads the project (GET
// /v9/projects/{id}) for its id, name and Git link, then POSTs
// /v13/deployments with the custom configuration, the name, the project,
// the target ("production" or "staging"; omitted for preview, Vercel's
// default) or customEnvironmentSlugOrId, the meta and a gitSource for the
// branch (default: the link's production branch).
//
// Environment "development" is refused: Vercel's Development environment
// is the local one (vercel dev and its environment variables); no
// deployment can target it, and Vercel refuses the target.
func (tk *toolkit) createDeployment(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in createInput
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	in.Project = strings.TrimSpace(in.Project)
	if in.Project == "" {
		return nil, connectors.Errorf(connectors.CodeValidation, "project is required: a project name or id")
	}
	switch in.Environment {
	case "", EnvPreview, EnvProduction, EnvStaging:
	case EnvDevelopment:
		return nil, connectors.Errorf(connectors.CodeValidation, "environment development cannot be deployed to: %s; use preview, production, staging or a custom_environment", errDevelopment)
	default:
		return nil, connectors.Errorf(connectors.CodeValidation, "environment %q is not one of preview, production, staging; name a custom environment in custom_environment", in.Environment)
	}
	in.CustomEnvironment = strings.TrimSpace(in.CustomEnvironment)
	if in.CustomEnvironment != "" && in.Environment != "" && in.Environment != EnvPreview {
		return nil, connectors.Errorf(connectors.CodeValidation, "custom_environment %s and environment %s name two environments; a deployment goes to one: give one of them", in.CustomEnvironment, in.Environment)
	}
	for _, k := range reservedConfig {
		if _, ok := in.Config[k]; ok {
			return nil, connectors.Errorf(connectors.CodeValidation, "config may not set %q: use the step's own fields (project, branch, environment, name, meta)", k)
		}
	}
	if len(in.Meta) > 100 {
		return nil, connectors.Errorf(connectors.CodeValidation, "meta has %d keys; vercel allows at most 100", len(in.Meta))
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	proj, err := c.GetProject(ctx, in.Project)
	if err != nil {
		return nil, err
	}
	body := maps.Clone(in.Config)
	if body == nil {
		body = map[string]any{}
	}
	body["name"] = firstOf(in.Name, proj.Name, in.Project)
	body["project"] = firstOf(proj.ID, in.Project)
	switch {
	case in.CustomEnvironment != "":
		body["customEnvironmentSlugOrId"] = in.CustomEnvironment
	case in.Environment == EnvProduction, in.Environment == EnvStaging:
		body["target"] = in.Environment
	}
	if len(in.Meta) > 0 {
		body["meta"] = in.Meta
	}
	uploaded := in.Config["files"] != nil || in.Config["deploymentId"] != nil
	switch {
	case uploaded && (in.Branch != "" || in.SHA != ""):
		return nil, connectors.Errorf(connectors.CodeValidation, "branch and sha deploy from git; they cannot be combined with files or deploymentId in config")
	case uploaded:
		// Files or a redeploy: no gitSource.
	case proj.Link != nil && proj.Link.Type != "":
		ref := firstOf(in.Branch, proj.Link.ProductionBranch, "main")
		gs, err := gitSource(in.Project, proj.Link, ref, in.SHA)
		if err != nil {
			return nil, err
		}
		body["gitSource"] = gs
	case in.Branch != "" || in.SHA != "":
		return nil, connectors.Errorf(connectors.CodeValidation, "project %s has no linked git repository, so a branch cannot be deployed; link one in vercel or pass files in config", in.Project)
	default:
		return nil, connectors.Errorf(connectors.CodeValidation, "project %s has no linked git repository; link one in vercel, or pass files or deploymentId in config", in.Project)
	}
	d, err := c.CreateDeployment(ctx, in.Project, body)
	if err != nil {
		return nil, err
	}
	return toDeployment(*d), nil
}

type listInput struct {
	Project     string          `json:"project"`
	Environment string          `json:"environment"`
	State       []string        `json:"state"`
	Branch      string          `json:"branch"`
	Since       json.RawMessage `json:"since"`
	Until       json.RawMessage `json:"until"`
	Limit       *int            `json:"limit"`
}

var listStates = []string{"BUILDING", "ERROR", "INITIALIZING", "QUEUED", "READY", "CANCELED"}

// msInput parses a time bound given as epoch milliseconds or an RFC 3339
// string.
func msInput(field string, raw json.RawMessage) (int64, bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil && !strings.HasPrefix(strings.TrimSpace(string(raw)), `"`) {
		v, err := n.Int64()
		if err != nil || v < 0 {
			return 0, false, connectors.Errorf(connectors.CodeValidation, "%s: want epoch milliseconds (a non-negative integer) or an RFC 3339 time", field)
		}
		return v, true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, false, connectors.Errorf(connectors.CodeValidation, "%s: want epoch milliseconds or an RFC 3339 time", field)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, false, connectors.Errorf(connectors.CodeValidation, "%s: %q is not an RFC 3339 time", field, s)
	}
	return t.UnixMilli(), true, nil
}

// listDeployments runs List Deployments: GET /v6/deployments with the
// filters, following pagination.next (passed as until) until limit
// deployments are read or there are no more.
func (tk *toolkit) listDeployments(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in listInput
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	limit := defaultListLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	if limit < 1 || limit > maxListLimit {
		return nil, connectors.Errorf(connectors.CodeValidation, "limit %d is outside 1..%d", limit, maxListLimit)
	}
	q := url.Values{}
	if p := strings.TrimSpace(in.Project); p != "" {
		q.Set("projectId", p)
	}
	switch in.Environment {
	case "":
	case EnvProduction, EnvPreview, EnvStaging:
		q.Set("target", in.Environment)
	case EnvDevelopment:
		return nil, connectors.Errorf(connectors.CodeValidation, "environment development lists nothing: %s; use production, preview or staging", errDevelopment)
	default:
		return nil, connectors.Errorf(connectors.CodeValidation, "environment %q is not one of production, preview, staging", in.Environment)
	}
	if len(in.State) > 0 {
		for _, s := range in.State {
			if !slices.Contains(listStates, s) {
				return nil, connectors.Errorf(connectors.CodeValidation, "state %q is not one of %s", s, strings.Join(listStates, ", "))
			}
		}
		q.Set("state", strings.Join(in.State, ","))
	}
	if in.Branch != "" {
		q.Set("branch", in.Branch)
	}
	since, hasSince, err := msInput("since", in.Since)
	if err != nil {
		return nil, err
	}
	until, hasUntil, err := msInput("until", in.Until)
	if err != nil {
		return nil, err
	}
	if hasSince && hasUntil && since >= until {
		return nil, connectors.Errorf(connectors.CodeValidation, "since must be before until")
	}
	if hasSince {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	out := DeploymentList{Deployments: []Deployment{}}
	cursor, hasCursor := until, hasUntil
	for len(out.Deployments) < limit {
		q.Set("limit", strconv.Itoa(min(limit-len(out.Deployments), maxPageSize)))
		if hasCursor {
			q.Set("until", strconv.FormatInt(cursor, 10))
		}
		page, err := c.ListDeployments(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, d := range page.Deployments {
			if len(out.Deployments) < limit {
				out.Deployments = append(out.Deployments, toDeployment(d))
			}
		}
		next := page.Pagination.Next
		if next == nil || len(page.Deployments) == 0 {
			out.Next = nil
			break
		}
		out.Next = next
		if hasCursor && *next >= cursor {
			return nil, connectors.Errorf(connectors.CodeUpstream, "list deployments: vercel's pagination cursor did not advance (%d after %d)", *next, cursor)
		}
		cursor, hasCursor = *next, true
	}
	out.Count = len(out.Deployments)
	return out, nil
}

type cancelInput struct {
	ID string `json:"id"`
}

// cancelDeployment runs Cancel Deployment: it reads the deployment (GET
// /v13/deployments/{id}) and, when it is QUEUED, INITIALIZING or BUILDING,
// cancels it (PATCH /v12/deployments/{id}/cancel); any other state is a
// CodeValidation error and nothing is changed.
func (tk *toolkit) cancelDeployment(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in cancelInput
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id := strings.TrimSpace(in.ID)
	if id == "" {
		return nil, connectors.Errorf(connectors.CodeValidation, "id is required: the deployment id (dpl_…)")
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	cur, err := c.GetDeployment(ctx, id)
	if err != nil {
		return nil, err
	}
	state := firstOf(cur.ReadyState, cur.State, cur.Status)
	if !slices.Contains(cancelable, state) {
		return nil, connectors.Errorf(connectors.CodeValidation, "deployment %s is already %s; only QUEUED, INITIALIZING or BUILDING deployments can be canceled", id, state)
	}
	d, err := c.CancelDeployment(ctx, firstOf(cur.ID, cur.UID, id), id)
	if err != nil {
		return nil, err
	}
	return toDeployment(*d), nil
}
