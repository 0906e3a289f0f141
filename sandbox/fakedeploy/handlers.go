package fakedeploy

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Wire shapes of Vercel's answers, with the fields Vercel's OpenAPI
// description requires (vercel-spec.json in vercel/sdk; the conformance
// test holds them against it).
type (
	creatorJSON struct {
		UID      string `json:"uid"`
		Username string `json:"username"`
	}
	customEnvJSON struct {
		ID   string `json:"id"`
		Slug string `json:"slug,omitempty"`
	}
	// deploymentJSON is GET /v13/deployments/{id} and the create and
	// cancel answers.
	deploymentJSON struct {
		ID                        string              `json:"id"`
		Name                      string              `json:"name"`
		URL                       string              `json:"url"`
		ProjectID                 string              `json:"projectId"`
		OwnerID                   string              `json:"ownerId"`
		ReadyState                string              `json:"readyState"`
		ReadySubstate             string              `json:"readySubstate,omitempty"`
		Status                    string              `json:"status"`
		Target                    *string             `json:"target"`
		CustomEnvironment         *customEnvJSON      `json:"customEnvironment,omitempty"`
		Type                      string              `json:"type"`
		Version                   int                 `json:"version"`
		CreatedAt                 int64               `json:"createdAt"`
		CreatedIn                 string              `json:"createdIn"`
		BuildingAt                int64               `json:"buildingAt"`
		BootedAt                  int64               `json:"bootedAt"`
		Ready                     *int64              `json:"ready,omitempty"`
		CanceledAt                *int64              `json:"canceledAt,omitempty"`
		Creator                   creatorJSON         `json:"creator"`
		Meta                      map[string]string   `json:"meta"`
		GitSource                 map[string]any      `json:"gitSource,omitempty"`
		Source                    string              `json:"source"`
		Alias                     []string            `json:"alias"`
		AliasAssigned             bool                `json:"aliasAssigned"`
		Regions                   []string            `json:"regions"`
		InspectorURL              string              `json:"inspectorUrl"`
		ErrorCode                 string              `json:"errorCode,omitempty"`
		ErrorMessage              string              `json:"errorMessage,omitempty"`
		Build                     buildJSON           `json:"build"`
		BuildSkipped              bool                `json:"buildSkipped"`
		Env                       []string            `json:"env"`
		IsInConcurrentBuildsQueue bool                `json:"isInConcurrentBuildsQueue"`
		IsInSystemBuildsQueue     bool                `json:"isInSystemBuildsQueue"`
		Plan                      string              `json:"plan"`
		ProjectSettings           projectSettingsJSON `json:"projectSettings"`
		Public                    bool                `json:"public"`
		Routes                    []any               `json:"routes"`
	}
	buildJSON struct {
		Env []string `json:"env"`
	}
	projectSettingsJSON struct {
		Framework       *string `json:"framework"`
		BuildCommand    *string `json:"buildCommand"`
		DevCommand      *string `json:"devCommand"`
		InstallCommand  *string `json:"installCommand"`
		OutputDirectory *string `json:"outputDirectory"`
		RootDirectory   *string `json:"rootDirectory"`
	}
	// listItemJSON is one item of GET /v6/deployments: "uid", not "id".
	listItemJSON struct {
		UID               string              `json:"uid"`
		Name              string              `json:"name"`
		ProjectID         string              `json:"projectId"`
		URL               string              `json:"url"`
		Created           int64               `json:"created"`
		CreatedAt         int64               `json:"createdAt"`
		BuildingAt        int64               `json:"buildingAt"`
		Ready             *int64              `json:"ready,omitempty"`
		State             string              `json:"state"`
		ReadyState        string              `json:"readyState"`
		ReadySubstate     string              `json:"readySubstate,omitempty"`
		Type              string              `json:"type"`
		Creator           creatorJSON         `json:"creator"`
		Meta              map[string]string   `json:"meta"`
		Target            *string             `json:"target"`
		CustomEnvironment *customEnvJSON      `json:"customEnvironment,omitempty"`
		InspectorURL      string              `json:"inspectorUrl"`
		Source            string              `json:"source"`
		AliasAssigned     bool                `json:"aliasAssigned"`
		IsRollbackCand    bool                `json:"isRollbackCandidate"`
		ProjectSettings   projectSettingsJSON `json:"projectSettings"`
	}
	paginationJSON struct {
		Count int    `json:"count"`
		Next  *int64 `json:"next"`
		Prev  *int64 `json:"prev"`
	}
	linkJSON struct {
		Type                     string `json:"type"`
		Org                      string `json:"org,omitempty"`
		Repo                     string `json:"repo,omitempty"`
		RepoID                   int64  `json:"repoId,omitempty"`
		RepoOwnerID              int64  `json:"repoOwnerId,omitempty"`
		ProjectID                string `json:"projectId,omitempty"`
		ProjectName              string `json:"projectName,omitempty"`
		ProjectNamespace         string `json:"projectNamespace,omitempty"`
		ProjectNameWithNamespace string `json:"projectNameWithNamespace,omitempty"`
		ProjectURL               string `json:"projectUrl,omitempty"`
		Name                     string `json:"name,omitempty"`
		Owner                    string `json:"owner,omitempty"`
		Slug                     string `json:"slug,omitempty"`
		UUID                     string `json:"uuid,omitempty"`
		WorkspaceUUID            string `json:"workspaceUuid,omitempty"`
		GitCredentialID          string `json:"gitCredentialId"`
		ProductionBranch         string `json:"productionBranch"`
		CreatedAt                int64  `json:"createdAt"`
		UpdatedAt                int64  `json:"updatedAt"`
		Sourceless               bool   `json:"sourceless"`
		DeployHooks              []any  `json:"deployHooks"`
	}
	resourceConfigJSON struct {
		FunctionDefaultRegions []string `json:"functionDefaultRegions"`
		FunctionDefaultTimeout int      `json:"functionDefaultTimeout"`
		Fluid                  bool     `json:"fluid"`
	}
	expirationJSON struct {
		ExpirationDays           int `json:"expirationDays"`
		ExpirationDaysProduction int `json:"expirationDaysProduction"`
		ExpirationDaysCanceled   int `json:"expirationDaysCanceled"`
		ExpirationDaysErrored    int `json:"expirationDaysErrored"`
		DeploymentsToKeep        int `json:"deploymentsToKeep"`
	}
	customEnvironmentJSON struct {
		ID          string `json:"id"`
		Slug        string `json:"slug"`
		Type        string `json:"type"`
		Description string `json:"description"`
		CreatedAt   int64  `json:"createdAt"`
		UpdatedAt   int64  `json:"updatedAt"`
	}
	projectJSON struct {
		ID                       string                  `json:"id"`
		Name                     string                  `json:"name"`
		AccountID                string                  `json:"accountId"`
		Framework                *string                 `json:"framework"`
		BuildCommand             *string                 `json:"buildCommand"`
		DevCommand               *string                 `json:"devCommand"`
		InstallCommand           *string                 `json:"installCommand"`
		OutputDirectory          *string                 `json:"outputDirectory"`
		RootDirectory            *string                 `json:"rootDirectory"`
		PublicSource             *bool                   `json:"publicSource"`
		NodeVersion              string                  `json:"nodeVersion"`
		ServerlessFunctionRegion string                  `json:"serverlessFunctionRegion"`
		DirectoryListing         bool                    `json:"directoryListing"`
		Live                     bool                    `json:"live"`
		Alias                    []any                   `json:"alias"`
		DefaultResourceConfig    resourceConfigJSON      `json:"defaultResourceConfig"`
		ResourceConfig           resourceConfigJSON      `json:"resourceConfig"`
		DeploymentExpiration     expirationJSON          `json:"deploymentExpiration"`
		CustomEnvironments       []customEnvironmentJSON `json:"customEnvironments,omitempty"`
		CreatedAt                int64                   `json:"createdAt"`
		UpdatedAt                int64                   `json:"updatedAt"`
		Link                     *linkJSON               `json:"link,omitempty"`
	}
)

// Fixed facts of the fake's answers.
const (
	region      = "iad1"
	nodeVersion = "22.x"
)

func username(userID string) string {
	return strings.TrimPrefix(userID, "user_")
}

func targetPtr(t string) *string {
	if t == "" {
		return nil
	}
	return &t
}

// nullable is s, or nil (JSON null) when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (d *Deployment) readyMs() *int64 {
	if d.State != StateReady {
		return nil
	}
	v := d.CreatedAt.UnixMilli() + 1
	return &v
}

// readySubstate is PROMOTED for a ready production deployment, as Vercel
// reports it, and "" otherwise.
func (d *Deployment) readySubstate() string {
	if d.State == StateReady && d.Target == "production" {
		return "PROMOTED"
	}
	return ""
}

// inspectorURL is the deployment's page on vercel.com.
func (d *Deployment) inspectorURL() string {
	return "https://vercel.com/" + username(d.OwnerID) + "/" + d.Name + "/" + strings.TrimPrefix(d.ID, "dpl_")
}

// metaJSON is a copy of the deployment's meta, {} rather than null.
func (d *Deployment) metaJSON() map[string]string {
	if d.Meta == nil {
		return map[string]string{}
	}
	return maps.Clone(d.Meta)
}

func (d *Deployment) customEnvJSON() *customEnvJSON {
	if d.CustomEnvironment == nil {
		return nil
	}
	return &customEnvJSON{ID: d.CustomEnvironment.ID, Slug: d.CustomEnvironment.Slug}
}

// source is how Vercel says the deployment was made.
func (d *Deployment) source() string {
	if d.Ref != "" {
		return "git"
	}
	return "cli"
}

// gitSourceJSON is the deployment's gitSource in the variant of its
// repository's provider.
func (d *Deployment) gitSourceJSON() map[string]any {
	if d.Ref == "" {
		return nil
	}
	repo := d.Repo
	if repo == nil {
		repo = &GitRepo{Type: "github"}
	}
	gs := map[string]any{"type": repo.Type, "ref": d.Ref, "sha": d.SHA}
	switch repo.Type {
	case "gitlab":
		gs["projectId"] = repo.RepoID
	case "bitbucket":
		gs["owner"], gs["slug"] = repo.Org, repo.Repo
		gs["repoUuid"], gs["workspaceUuid"] = bitbucketUUID("repo", repo), bitbucketUUID("workspace", repo)
	default:
		gs["repoId"] = repo.RepoID
		gs["org"], gs["repo"] = repo.Org, repo.Repo
	}
	return gs
}

// bitbucketUUID is a stable {uuid} for a Bitbucket repository or its
// workspace.
func bitbucketUUID(kind string, r *GitRepo) string {
	h := sha256Hex(kind + ":" + r.Org + "/" + r.Repo)
	return "{" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32] + "}"
}

// plan is the owner's plan: pro for teams, hobby for personal accounts.
func plan(owner string) string {
	if strings.HasPrefix(owner, "team_") {
		return "pro"
	}
	return "hobby"
}

func (d *Deployment) toJSON() deploymentJSON {
	out := deploymentJSON{
		ID:                d.ID,
		Name:              d.Name,
		URL:               d.URL,
		ProjectID:         d.ProjectID,
		OwnerID:           d.OwnerID,
		ReadyState:        d.State,
		ReadySubstate:     d.readySubstate(),
		Status:            d.State,
		Target:            targetPtr(d.Target),
		CustomEnvironment: d.customEnvJSON(),
		Type:              "LAMBDAS",
		Version:           2,
		CreatedAt:         d.CreatedAt.UnixMilli(),
		CreatedIn:         region,
		BuildingAt:        d.CreatedAt.UnixMilli(),
		BootedAt:          d.CreatedAt.UnixMilli(),
		Ready:             d.readyMs(),
		Creator:           creatorJSON{UID: d.CreatorID, Username: username(d.CreatorID)},
		Meta:              d.metaJSON(),
		GitSource:         d.gitSourceJSON(),
		Source:            d.source(),
		Alias:             []string{},
		AliasAssigned:     d.State == StateReady,
		Regions:           []string{region},
		InspectorURL:      d.inspectorURL(),
		Build:             buildJSON{Env: []string{}},
		Env:               []string{},
		Plan:              plan(d.OwnerID),
		ProjectSettings:   projectSettingsJSON{},
	}
	if !d.CanceledAt.IsZero() {
		v := d.CanceledAt.UnixMilli()
		out.CanceledAt = &v
	}
	if d.State == StateError {
		out.ErrorCode = "BUILD_FAILED"
		out.ErrorMessage = "The build failed."
	}
	return out
}

func (d *Deployment) toListItem() listItemJSON {
	return listItemJSON{
		UID:               d.ID,
		Name:              d.Name,
		ProjectID:         d.ProjectID,
		URL:               d.URL,
		Created:           d.CreatedAt.UnixMilli(),
		CreatedAt:         d.CreatedAt.UnixMilli(),
		BuildingAt:        d.CreatedAt.UnixMilli(),
		Ready:             d.readyMs(),
		State:             d.State,
		ReadyState:        d.State,
		ReadySubstate:     d.readySubstate(),
		Type:              "LAMBDAS",
		Creator:           creatorJSON{UID: d.CreatorID, Username: username(d.CreatorID)},
		Meta:              d.metaJSON(),
		Target:            targetPtr(d.Target),
		CustomEnvironment: d.customEnvJSON(),
		InspectorURL:      d.inspectorURL(),
		Source:            d.source(),
		AliasAssigned:     d.State == StateReady,
		IsRollbackCand:    d.State == StateReady && d.Target == "production",
		ProjectSettings:   projectSettingsJSON{},
	}
}

func (p *Project) toJSON() projectJSON {
	rc := resourceConfigJSON{FunctionDefaultRegions: []string{region}, FunctionDefaultTimeout: 300, Fluid: true}
	out := projectJSON{
		ID:                       p.ID,
		Name:                     p.Name,
		AccountID:                p.OwnerID,
		Framework:                nullable(p.Framework),
		BuildCommand:             nullable(p.BuildCommand),
		DevCommand:               nullable(p.DevCommand),
		InstallCommand:           nullable(p.InstallCommand),
		OutputDirectory:          nullable(p.OutputDirectory),
		RootDirectory:            nullable(p.RootDirectory),
		NodeVersion:              nodeVersion,
		ServerlessFunctionRegion: region,
		Alias:                    []any{},
		DefaultResourceConfig:    rc,
		ResourceConfig:           rc,
		DeploymentExpiration: expirationJSON{ExpirationDays: 180, ExpirationDaysProduction: 365,
			ExpirationDaysCanceled: 30, ExpirationDaysErrored: 90, DeploymentsToKeep: 10},
		CreatedAt: p.CreatedAt.UnixMilli(),
		UpdatedAt: max(p.UpdatedAt.UnixMilli(), p.CreatedAt.UnixMilli()),
	}
	if p.PublicSource {
		t := true
		out.PublicSource = &t
	}
	for _, ce := range p.CustomEnvironments {
		out.CustomEnvironments = append(out.CustomEnvironments, customEnvironmentJSON{
			ID: ce.ID, Slug: ce.Slug, Type: "preview", Description: "",
			CreatedAt: p.CreatedAt.UnixMilli(), UpdatedAt: p.CreatedAt.UnixMilli(),
		})
	}
	if l := p.Link; l != nil {
		lj := &linkJSON{
			Type:             l.Type,
			GitCredentialID:  "cred_" + sha256Hex(p.OwnerID + l.Type)[:24],
			ProductionBranch: l.ProductionBranch,
			CreatedAt:        p.CreatedAt.UnixMilli(),
			UpdatedAt:        p.CreatedAt.UnixMilli(),
			Sourceless:       true,
			DeployHooks:      []any{},
		}
		switch l.Type {
		case "gitlab":
			lj.ProjectID = strconv.FormatInt(l.RepoID, 10)
			lj.ProjectName = l.Repo
			lj.ProjectNamespace = l.Org
			lj.ProjectNameWithNamespace = l.Org + " / " + l.Repo
			lj.ProjectURL = "https://gitlab.com/" + l.Org + "/" + l.Repo
		case "bitbucket":
			lj.Name, lj.Owner, lj.Slug = l.Repo, l.Org, l.Repo
			lj.UUID, lj.WorkspaceUUID = bitbucketUUID("repo", l), bitbucketUUID("workspace", l)
		default:
			lj.Org, lj.Repo, lj.RepoID = l.Org, l.Repo, l.RepoID
			lj.RepoOwnerID = int64(len(l.Org)) + 1000
		}
		out.Link = lj
	}
	return out
}

// queryInt parses an optional integer query parameter; on failure it
// returns Vercel's message.
// window is a list's since and until query parameters (ms timestamps).
type window struct {
	since, until       int64
	hasSince, hasUntil bool
}

// timeWindow reads since and the first of untilNames present, answering
// 400 itself (ok false) for a malformed one.
func timeWindow(w http.ResponseWriter, r *http.Request, untilNames ...string) (win window, ok bool) {
	var msg string
	if win.since, win.hasSince, msg = queryInt(r, "since"); msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return win, false
	}
	for _, name := range untilNames {
		if win.until, win.hasUntil, msg = queryInt(r, name); msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return win, false
		}
		if win.hasUntil {
			break
		}
	}
	return win, true
}

func queryInt(r *http.Request, name string) (int64, bool, string) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, false, ""
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Sprintf("Invalid request: `%s` should be integer", name)
	}
	return n, true, ""
}

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request, sc scope) {
	q := r.URL.Query()
	limit, set, msg := queryInt(r, "limit")
	if msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	switch {
	case !set:
		limit = 20
	case limit < 1:
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `limit` should be >= 1")
		return
	case limit > 100:
		limit = 100
	}
	win, ok := timeWindow(w, r, "until")
	if !ok {
		return
	}
	var wantStates []string
	if v := q.Get("state"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			st = strings.TrimSpace(st)
			if !slices.Contains(states, st) && st != "DELETED" {
				writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `state` should be a comma-separated list of BUILDING, ERROR, INITIALIZING, QUEUED, READY, CANCELED, DELETED")
				return
			}
			wantStates = append(wantStates, st)
		}
	}
	target := q.Get("target")
	branch := q.Get("branch")

	s.mu.Lock()
	defer s.mu.Unlock()
	projectID := ""
	if v := q.Get("projectId"); v != "" {
		p := s.findProject(sc.owner, v)
		if p == nil {
			writeError(w, http.StatusNotFound, "not_found", "Project not found")
			return
		}
		projectID = p.ID
	}
	var matched []*Deployment
	for _, d := range s.sortedDeployments() {
		ms := d.CreatedAt.UnixMilli()
		switch {
		case d.OwnerID != sc.owner:
		case projectID != "" && d.ProjectID != projectID:
		case target == "preview" && (d.Target != "" || d.CustomEnvironment != nil):
		case target != "" && target != "preview" && d.Target != target:
		case len(wantStates) > 0 && !slices.Contains(wantStates, d.State):
		case branch != "" && d.Ref != branch:
		case win.hasSince && ms < win.since:
		case win.hasUntil && ms >= win.until:
		default:
			matched = append(matched, d)
		}
	}
	page := matched[:min(len(matched), int(limit))]
	items := make([]listItemJSON, 0, len(page))
	for _, d := range page {
		items = append(items, d.toListItem())
	}
	pg := paginationJSON{Count: len(items)}
	if len(page) > 0 {
		prev := page[0].CreatedAt.UnixMilli()
		pg.Prev = &prev
		if len(matched) > len(page) {
			next := page[len(page)-1].CreatedAt.UnixMilli()
			pg.Next = &next
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deployments": items, "pagination": pg})
}

func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.findDeployment(sc.owner, r.PathValue("id"))
	if d == nil {
		writeError(w, http.StatusNotFound, "not_found", "The deployment could not be found.")
		return
	}
	writeJSON(w, http.StatusOK, d.toJSON())
}

func (s *Server) deleteDeployment(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.findDeployment(sc.owner, r.PathValue("id"))
	if d == nil {
		writeError(w, http.StatusNotFound, "not_found", "The deployment could not be found.")
		return
	}
	delete(s.deployments, d.ID)
	writeJSON(w, http.StatusOK, map[string]string{"uid": d.ID, "state": "DELETED"})
}

func (s *Server) cancelDeployment(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.findDeployment(sc.owner, r.PathValue("id"))
	if d == nil {
		writeError(w, http.StatusNotFound, "not_found", "The deployment could not be found.")
		return
	}
	switch d.State {
	case StateQueued, StateInitializing, StateBuilding:
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "Cannot cancel a deployment that is "+d.State)
		return
	}
	d.State = StateCanceled
	d.CanceledAt = s.now()
	writeJSON(w, http.StatusOK, d.toJSON())
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	writeJSON(w, http.StatusOK, p.toJSON())
}

// listProjects lists the owner's projects newest first, a page at a time:
// pagination.next is the last item's createdAt (ms), and passing it back
// as until (or from, the newer spelling; the fake's tokens are those
// timestamps) returns the projects created before it; since keeps those
// created at or after it.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, sc scope) {
	limit, set, msg := queryInt(r, "limit")
	if msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	if !set || limit < 1 {
		limit = 20
	}
	limit = min(limit, 100)
	win, ok := timeWindow(w, r, "until", "from")
	if !ok {
		return
	}
	search := r.URL.Query().Get("search")
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*Project
	all := s.sortedProjects()
	slices.Reverse(all) // newest first
	for _, p := range all {
		ms := p.CreatedAt.UnixMilli()
		switch {
		case p.OwnerID != sc.owner:
		case search != "" && !strings.Contains(p.Name, search):
		case win.hasSince && ms < win.since:
		case win.hasUntil && ms >= win.until:
		default:
			matched = append(matched, p)
		}
	}
	page := matched[:min(len(matched), int(limit))]
	items := make([]projectJSON, 0, len(page))
	for _, p := range page {
		items = append(items, p.toJSON())
	}
	pg := paginationJSON{Count: len(items)}
	if len(page) > 0 {
		prev := page[0].CreatedAt.UnixMilli()
		pg.Prev = &prev
		if len(matched) > len(page) {
			next := page[len(page)-1].CreatedAt.UnixMilli()
			pg.Next = &next
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": items, "pagination": pg})
}

// createBody is the part of POST /v13/deployments the fake checks.
type createBody struct {
	Name         *string                    `json:"name"`
	Project      *string                    `json:"project"`
	Target       *string                    `json:"target"`
	GitSource    map[string]json.RawMessage `json:"gitSource"`
	Files        []json.RawMessage          `json:"files"`
	DeploymentID *string                    `json:"deploymentId"`
	Meta         map[string]json.RawMessage `json:"meta"`
	// CustomEnvironmentSlugOrID deploys to a custom environment.
	CustomEnvironmentSlugOrID *string `json:"customEnvironmentSlugOrId"`
}

func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	var body createBody
	if err := json.Unmarshal(raw, &body); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid JSON body")
		return
	}
	if body.Name == nil || *body.Name == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: missing required property `name`")
		return
	}
	target, customEnv := "", ""
	if body.Target != nil {
		switch *body.Target {
		case "production", "staging":
			target = *body.Target
		case "preview", "development":
			// Preview is the default (target omitted); Development is the
			// local environment of vercel dev and takes no deployments.
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: `target` %q is not deployable: omit `target` for preview, or use \"staging\", \"production\" or a custom environment", *body.Target))
			return
		default:
			customEnv = *body.Target // a custom environment's id or slug
		}
	}
	if body.CustomEnvironmentSlugOrID != nil && *body.CustomEnvironmentSlugOrID != "" {
		if target != "" || customEnv != "" {
			writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `customEnvironmentSlugOrId` cannot be combined with `target`")
			return
		}
		customEnv = *body.CustomEnvironmentSlugOrID
	}
	meta := map[string]string{}
	if len(body.Meta) > 100 {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `meta` should NOT have more than 100 properties")
		return
	}
	for k, v := range body.Meta {
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: `meta.%s` should be string", k))
			return
		}
		meta[k] = str
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	projectRef := *body.Name
	if body.Project != nil {
		projectRef = *body.Project
	}
	p := s.findProject(sc.owner, projectRef)
	if p == nil {
		if body.Project != nil {
			writeError(w, http.StatusNotFound, "not_found", "Project not found")
			return
		}
		// Vercel creates a project named after the deployment.
		p = &Project{ID: "prj_" + s.nextID(), Name: *body.Name, OwnerID: sc.owner, CreatedAt: s.now()}
		s.projects[p.ID] = p
	}
	var ce *CustomEnvironment
	if customEnv != "" {
		found, ok := p.customEnvironment(customEnv)
		if !ok {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: `target` should be equal to one of the allowed values \"staging\", \"production\" or a custom environment of project %s; %q is none of them", p.Name, customEnv))
			return
		}
		ce = &found
	}
	d := &Deployment{
		CustomEnvironment: ce,
		Name:              *body.Name,
		ProjectID:         p.ID,
		OwnerID:           sc.owner,
		State:             StateQueued,
		Target:            target,
		CreatorID:         sc.userID,
		Meta:              meta,
		Request:           raw,
	}
	switch {
	case body.GitSource != nil:
		ref, sha, repo, gitMeta, msg := s.checkGitSource(sc.owner, body.GitSource)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		d.Ref, d.SHA = ref, sha
		r := *repo
		r.Branches = slices.Clone(r.Branches)
		d.Repo = &r
		maps.Copy(d.Meta, gitMeta)
	case len(body.Files) > 0, body.DeploymentID != nil:
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: missing `files` or `gitSource`")
		return
	}
	d.ID = "dpl_" + s.nextID()
	d.URL = deploymentHost(d.Name, d.ID, d.OwnerID)
	d.CreatedAt = s.created(time.Time{})
	s.deployments[d.ID] = d
	writeJSON(w, http.StatusOK, d.toJSON())
}

// checkGitSource validates a gitSource against the repositories linked to
// owner's projects and returns the ref, a commit sha, the git meta Vercel
// adds, or a message saying what is wrong.
func (s *Server) checkGitSource(owner string, gs map[string]json.RawMessage) (ref, sha string, repo *GitRepo, meta map[string]string, msg string) {
	str := func(k string) string {
		var v string
		json.Unmarshal(gs[k], &v)
		return v
	}
	num := func(k string) (int64, bool) {
		var n json.Number
		if err := json.Unmarshal(gs[k], &n); err == nil {
			if v, err := n.Int64(); err == nil {
				return v, true
			}
		}
		if v, err := strconv.ParseInt(str(k), 10, 64); err == nil {
			return v, true
		}
		return 0, false
	}
	typ := str("type")
	ref = str("ref")
	if ref == "" {
		return "", "", nil, nil, "Invalid request: `gitSource.ref` is required"
	}
	for _, p := range s.sortedProjects() {
		l := p.Link
		if p.OwnerID != owner || l == nil {
			continue
		}
		switch typ {
		case "github", "github-limited":
			if l.Type != "github" {
				continue
			}
			if id, ok := num("repoId"); ok && id == l.RepoID {
				repo = l
			} else if str("org") == l.Org && str("repo") == l.Repo && l.Org != "" {
				repo = l
			}
		case "gitlab":
			if id, ok := num("projectId"); ok && l.Type == "gitlab" && id == l.RepoID {
				repo = l
			}
		case "bitbucket":
			if l.Type == "bitbucket" && str("slug") == l.Repo && str("owner") == l.Org {
				repo = l
			}
		default:
			return "", "", nil, nil, "Invalid request: `gitSource.type` should be one of github, github-limited, gitlab, bitbucket"
		}
		if repo != nil {
			break
		}
	}
	if repo == nil {
		return "", "", nil, nil, "The repository in `gitSource` was not found or the integration has no access to it"
	}
	if len(repo.Branches) > 0 && !slices.Contains(repo.Branches, ref) {
		return "", "", nil, nil, fmt.Sprintf("Could not find a branch, tag or commit named %q in %s/%s", ref, repo.Org, repo.Repo)
	}
	sha = str("sha")
	if sha == "" {
		sum := sha256Hex(repo.Org + "/" + repo.Repo + "@" + ref)
		sha = sum[:40]
	}
	meta = map[string]string{
		"githubCommitRef": ref,
		"githubCommitSha": sha,
		"githubOrg":       repo.Org,
		"githubRepo":      repo.Repo,
		"githubRepoId":    strconv.FormatInt(repo.RepoID, 10),
	}
	if repo.Type != "github" {
		meta = map[string]string{"gitCommitRef": ref, "gitCommitSha": sha}
	}
	return ref, sha, repo, meta, ""
}
