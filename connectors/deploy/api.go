package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
)

// The Vercel REST API endpoints the deploy steps call: one client method
// per upstream request, each linking Vercel's documentation of it. Every
// request carries ?teamId= for a team account (see client.do).

// GetProject reads a project by id or name, with its Git link.
//
// Vercel API docs: https://vercel.com/docs/rest-api/projects/find-a-project-by-id-or-name
func (c *client) GetProject(ctx context.Context, idOrName string) (*vercelProject, error) {
	var p vercelProject
	if err := c.do(ctx, "read project "+idOrName, http.MethodGet, "/v9/projects/"+url.PathEscape(idOrName), nil, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// CreateDeployment creates a deployment from body, the whole POST body
// (name, project, target, meta, gitSource and any custom configuration);
// project names the project in error messages.
//
// Vercel API docs: https://vercel.com/docs/rest-api/deployments/create-a-new-deployment
func (c *client) CreateDeployment(ctx context.Context, project string, body map[string]any) (*vercelDeployment, error) {
	var d vercelDeployment
	if err := c.do(ctx, "create deployment of project "+project, http.MethodPost, "/v13/deployments", nil, body, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// deploymentPage is one page of ListDeployments; Next, when not nil, is
// the until of the next page.
type deploymentPage struct {
	Deployments []vercelDeployment `json:"deployments"`
	Pagination  struct {
		Next *int64 `json:"next"`
	} `json:"pagination"`
}

// ListDeployments reads one page of deployments; q holds the filters
// (projectId, target, state, branch, since), the page's limit and until.
//
// Vercel API docs: https://vercel.com/docs/rest-api/deployments/list-deployments
func (c *client) ListDeployments(ctx context.Context, q url.Values) (*deploymentPage, error) {
	var p deploymentPage
	if err := c.do(ctx, "list deployments", http.MethodGet, "/v6/deployments", q, nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// GetDeployment reads a deployment by id or URL.
//
// Vercel API docs: https://vercel.com/docs/rest-api/deployments/get-a-deployment-by-id-or-url
func (c *client) GetDeployment(ctx context.Context, idOrURL string) (*vercelDeployment, error) {
	var d vercelDeployment
	if err := c.do(ctx, "read deployment "+idOrURL, http.MethodGet, "/v13/deployments/"+url.PathEscape(idOrURL), nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// CancelDeployment cancels the deployment id (dpl_…), one Vercel is still
// queueing or building; asked is how the caller named it (an id or URL),
// for error messages.
//
// Vercel API docs: https://vercel.com/docs/rest-api/deployments/cancel-a-deployment
func (c *client) CancelDeployment(ctx context.Context, id, asked string) (*vercelDeployment, error) {
	var d vercelDeployment
	if err := c.do(ctx, "cancel deployment "+asked, http.MethodPatch, "/v12/deployments/"+url.PathEscape(id)+"/cancel", nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Vercel's answers, as far as the steps read them.

// vercelDeployment decodes a deployment from GET or POST /v13/deployments
// (id, readyState) and from a GET /v6/deployments item (uid, state).
type vercelDeployment struct {
	ID         string  `json:"id"`
	UID        string  `json:"uid"`
	Name       string  `json:"name"`
	URL        *string `json:"url"`
	ProjectID  string  `json:"projectId"`
	ReadyState string  `json:"readyState"`
	State      string  `json:"state"`
	Status     string  `json:"status"`
	Target     *string `json:"target"`
	// CustomEnvironment is set for a deployment to a custom environment.
	CustomEnvironment *struct {
		ID   string `json:"id"`
		Slug string `json:"slug"`
	} `json:"customEnvironment"`
	CreatedAt    int64          `json:"createdAt"`
	Created      int64          `json:"created"`
	Ready        *int64         `json:"ready"`
	CanceledAt   *int64         `json:"canceledAt"`
	InspectorURL string         `json:"inspectorUrl"`
	ErrorCode    string         `json:"errorCode"`
	ErrorMessage string         `json:"errorMessage"`
	Meta         map[string]any `json:"meta"`
	Creator      *struct {
		UID      string `json:"uid"`
		Username string `json:"username"`
	} `json:"creator"`
	GitSource *struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"gitSource"`
}

// projectLink is the Git link of GET /v9/projects/{id}.
type projectLink struct {
	Type             string      `json:"type"`
	Org              string      `json:"org"`
	Repo             string      `json:"repo"`
	RepoID           json.Number `json:"repoId"`
	ProjectID        json.Number `json:"projectId"`
	Owner            string      `json:"owner"`
	Slug             string      `json:"slug"`
	UUID             string      `json:"uuid"`
	WorkspaceUUID    string      `json:"workspaceUuid"`
	ProductionBranch string      `json:"productionBranch"`
}

type vercelProject struct {
	ID   string       `json:"id"`
	Name string       `json:"name"`
	Link *projectLink `json:"link"`
}
