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

// Wire shapes of Vercel's answers.
type (
	creatorJSON struct {
		UID      string `json:"uid"`
		Username string `json:"username"`
	}
	// deploymentJSON is GET /v13/deployments/{id} and the create answer.
	deploymentJSON struct {
		ID            string            `json:"id"`
		Name          string            `json:"name"`
		URL           string            `json:"url"`
		ProjectID     string            `json:"projectId"`
		OwnerID       string            `json:"ownerId"`
		ReadyState    string            `json:"readyState"`
		Status        string            `json:"status"`
		Target        *string           `json:"target"`
		Type          string            `json:"type"`
		Version       int               `json:"version"`
		CreatedAt     int64             `json:"createdAt"`
		BuildingAt    int64             `json:"buildingAt"`
		Ready         *int64            `json:"ready,omitempty"`
		CanceledAt    *int64            `json:"canceledAt,omitempty"`
		Creator       creatorJSON       `json:"creator"`
		Meta          map[string]string `json:"meta"`
		GitSource     map[string]any    `json:"gitSource,omitempty"`
		Alias         []string          `json:"alias"`
		AliasAssigned bool              `json:"aliasAssigned"`
		Regions       []string          `json:"regions"`
		InspectorURL  string            `json:"inspectorUrl"`
		ErrorCode     string            `json:"errorCode,omitempty"`
		ErrorMessage  string            `json:"errorMessage,omitempty"`
	}
	// listItemJSON is one item of GET /v6/deployments: "uid", not "id".
	listItemJSON struct {
		UID          string            `json:"uid"`
		Name         string            `json:"name"`
		ProjectID    string            `json:"projectId"`
		URL          string            `json:"url"`
		Created      int64             `json:"created"`
		CreatedAt    int64             `json:"createdAt"`
		BuildingAt   int64             `json:"buildingAt"`
		Ready        *int64            `json:"ready,omitempty"`
		State        string            `json:"state"`
		ReadyState   string            `json:"readyState"`
		Type         string            `json:"type"`
		Creator      creatorJSON       `json:"creator"`
		Meta         map[string]string `json:"meta"`
		Target       *string           `json:"target"`
		InspectorURL string            `json:"inspectorUrl"`
		Source       string            `json:"source"`
	}
	paginationJSON struct {
		Count int    `json:"count"`
		Next  *int64 `json:"next"`
		Prev  *int64 `json:"prev"`
	}
	linkJSON struct {
		Type             string `json:"type"`
		Org              string `json:"org,omitempty"`
		Repo             string `json:"repo,omitempty"`
		RepoID           int64  `json:"repoId,omitempty"`
		ProjectID        string `json:"projectId,omitempty"`
		ProductionBranch string `json:"productionBranch"`
		CreatedAt        int64  `json:"createdAt"`
		UpdatedAt        int64  `json:"updatedAt"`
		Sourceless       bool   `json:"sourceless"`
		DeployHooks      []any  `json:"deployHooks"`
	}
	projectJSON struct {
		ID        string    `json:"id"`
		Name      string    `json:"name"`
		AccountID string    `json:"accountId"`
		Framework *string   `json:"framework"`
		CreatedAt int64     `json:"createdAt"`
		UpdatedAt int64     `json:"updatedAt"`
		Link      *linkJSON `json:"link,omitempty"`
	}
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

func (d *Deployment) readyMs() *int64 {
	if d.State != StateReady {
		return nil
	}
	v := d.CreatedAt.UnixMilli() + 1
	return &v
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

func (d *Deployment) toJSON() deploymentJSON {
	out := deploymentJSON{
		ID:           d.ID,
		Name:         d.Name,
		URL:          d.URL,
		ProjectID:    d.ProjectID,
		OwnerID:      d.OwnerID,
		ReadyState:   d.State,
		Status:       d.State,
		Target:       targetPtr(d.Target),
		Type:         "LAMBDAS",
		Version:      2,
		CreatedAt:    d.CreatedAt.UnixMilli(),
		BuildingAt:   d.CreatedAt.UnixMilli(),
		Ready:        d.readyMs(),
		Creator:      creatorJSON{UID: d.CreatorID, Username: username(d.CreatorID)},
		Meta:         d.metaJSON(),
		Alias:        []string{},
		Regions:      []string{"iad1"},
		InspectorURL: d.inspectorURL(),
	}
	if !d.CanceledAt.IsZero() {
		v := d.CanceledAt.UnixMilli()
		out.CanceledAt = &v
	}
	if d.Ref != "" {
		out.GitSource = map[string]any{"type": "github", "ref": d.Ref, "sha": d.SHA}
	}
	if d.State == StateError {
		out.ErrorCode = "BUILD_FAILED"
		out.ErrorMessage = "The build failed."
	}
	return out
}

func (d *Deployment) toListItem() listItemJSON {
	return listItemJSON{
		UID:          d.ID,
		Name:         d.Name,
		ProjectID:    d.ProjectID,
		URL:          d.URL,
		Created:      d.CreatedAt.UnixMilli(),
		CreatedAt:    d.CreatedAt.UnixMilli(),
		BuildingAt:   d.CreatedAt.UnixMilli(),
		Ready:        d.readyMs(),
		State:        d.State,
		ReadyState:   d.State,
		Type:         "LAMBDAS",
		Creator:      creatorJSON{UID: d.CreatorID, Username: username(d.CreatorID)},
		Meta:         d.metaJSON(),
		Target:       targetPtr(d.Target),
		InspectorURL: d.inspectorURL(),
		Source:       "git",
	}
}

func (p *Project) toJSON() projectJSON {
	out := projectJSON{
		ID:        p.ID,
		Name:      p.Name,
		AccountID: p.OwnerID,
		CreatedAt: p.CreatedAt.UnixMilli(),
		UpdatedAt: p.CreatedAt.UnixMilli(),
	}
	if l := p.Link; l != nil {
		lj := &linkJSON{
			Type:             l.Type,
			ProductionBranch: l.ProductionBranch,
			CreatedAt:        p.CreatedAt.UnixMilli(),
			UpdatedAt:        p.CreatedAt.UnixMilli(),
			Sourceless:       true,
			DeployHooks:      []any{},
		}
		switch l.Type {
		case "gitlab":
			lj.ProjectID = strconv.FormatInt(l.RepoID, 10)
			lj.Repo = l.Repo
		default:
			lj.Org, lj.Repo, lj.RepoID = l.Org, l.Repo, l.RepoID
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
		case target == "preview" && d.Target != "":
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
	target := ""
	if body.Target != nil {
		switch *body.Target {
		case "production", "staging":
			target = *body.Target
		default:
			writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `target` should be equal to one of the allowed values \"staging\", \"production\" or a custom environment")
			return
		}
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
	d := &Deployment{
		Name:      *body.Name,
		ProjectID: p.ID,
		OwnerID:   sc.owner,
		State:     StateQueued,
		Target:    target,
		CreatorID: sc.userID,
		Meta:      meta,
		Request:   raw,
	}
	switch {
	case body.GitSource != nil:
		ref, sha, gitMeta, msg := s.checkGitSource(sc.owner, body.GitSource)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		d.Ref, d.SHA = ref, sha
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
func (s *Server) checkGitSource(owner string, gs map[string]json.RawMessage) (ref, sha string, meta map[string]string, msg string) {
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
		return "", "", nil, "Invalid request: `gitSource.ref` is required"
	}
	var repo *GitRepo
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
			return "", "", nil, "Invalid request: `gitSource.type` should be one of github, github-limited, gitlab, bitbucket"
		}
		if repo != nil {
			break
		}
	}
	if repo == nil {
		return "", "", nil, "The repository in `gitSource` was not found or the integration has no access to it"
	}
	if len(repo.Branches) > 0 && !slices.Contains(repo.Branches, ref) {
		return "", "", nil, fmt.Sprintf("Could not find a branch, tag or commit named %q in %s/%s", ref, repo.Org, repo.Repo)
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
	return ref, sha, meta, ""
}
