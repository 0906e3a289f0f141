package fakedeploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// projectName is Vercel's rule for project names: up to 100 lower-case
// letters, digits, ".", "_" and "-", with no "---".
var projectName = regexp.MustCompile(`^[a-z0-9._-]{1,100}$`)

// projectBody is the body of POST /v10/projects and PATCH
// /v9/projects/{idOrName}: the settings the fake keeps. Vercel refuses
// properties it does not know; so does the fake, for those outside
// projectKnown.
type projectBody struct {
	Name            *string `json:"name"`
	Framework       *string `json:"framework"`
	BuildCommand    *string `json:"buildCommand"`
	DevCommand      *string `json:"devCommand"`
	InstallCommand  *string `json:"installCommand"`
	OutputDirectory *string `json:"outputDirectory"`
	RootDirectory   *string `json:"rootDirectory"`
	PublicSource    *bool   `json:"publicSource"`
	GitRepository   *struct {
		Type string `json:"type"`
		Repo string `json:"repo"`
	} `json:"gitRepository"`
	EnvironmentVariables []envBody `json:"environmentVariables"`
}

// projectKnown are the properties Vercel's create and update bodies take
// (the settings the fake does not keep are accepted and ignored).
var projectKnown = []string{
	"name", "framework", "buildCommand", "devCommand", "installCommand", "outputDirectory", "rootDirectory",
	"publicSource", "gitRepository", "environmentVariables", "serverlessFunctionRegion", "skipGitConnectDuringLink",
	"commandForIgnoringBuildStep", "nodeVersion", "autoExposeSystemEnvs", "autoAssignCustomDomains",
	"directoryListing", "enableAffectedProjectsDeployments", "enablePreviewFeedback", "enableProductionFeedback",
	"gitForkProtection", "gitLFS", "previewDeploymentsDisabled", "serverlessFunctionZeroConfigFailover",
	"skewProtectionMaxAge", "sourceFilesOutsideRootDirectory", "ssoProtection", "passwordProtection",
	"trustedIps", "oidcTokenConfig", "resourceConfig", "customerSupportCodeVisibility", "protectionBypass",
}

// frameworks are a part of Vercel's framework enum: the fake accepts these.
var frameworks = []string{
	"nextjs", "gatsby", "remix", "astro", "hexo", "eleventy", "docusaurus-2", "docusaurus", "preact",
	"solidstart-1", "solidstart", "dojo", "ember", "vue", "scully", "ionic-angular", "angular", "polymer",
	"svelte", "sveltekit", "sveltekit-1", "ionic-react", "create-react-app", "gridsome", "umijs", "sapper",
	"saber", "stencil", "nuxtjs", "redwoodjs", "hugo", "jekyll", "brunch", "middleman", "zola", "hydrogen",
	"vite", "vitepress", "vuepress", "parcel", "fasthtml", "sanity-v3", "sanity", "storybook", "nitro",
	"hono", "express", "h3", "nestjs", "elysia", "fastify", "xmcp", "python", "fastapi", "flask",
}

// decodeStrict decodes raw into v, answering Vercel's 400 itself (ok
// false) for a body that is not JSON or names a property outside known.
func decodeStrict(w http.ResponseWriter, raw []byte, v any, known []string) bool {
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid JSON body")
		return false
	}
	for k := range props {
		if !slices.Contains(known, k) {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: should NOT have additional property `%s`.", k))
			return false
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: "+err.Error())
		return false
	}
	return true
}

// apply copies the settings of b onto p, or returns Vercel's message for a
// wrong one. Callers hold mu.
func (b *projectBody) apply(p *Project) string {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	if b.Framework != nil && *b.Framework != "" && !slices.Contains(frameworks, *b.Framework) {
		return fmt.Sprintf("Invalid request: `framework` should be equal to one of the allowed values, got %q.", *b.Framework)
	}
	set(&p.Framework, b.Framework)
	set(&p.BuildCommand, b.BuildCommand)
	set(&p.DevCommand, b.DevCommand)
	set(&p.InstallCommand, b.InstallCommand)
	set(&p.OutputDirectory, b.OutputDirectory)
	set(&p.RootDirectory, b.RootDirectory)
	if b.PublicSource != nil {
		p.PublicSource = *b.PublicSource
	}
	return ""
}

func checkProjectName(name string) string {
	if !projectName.MatchString(name) || strings.Contains(name, "---") {
		return "Project names can be up to 100 characters long and must be lowercase. They can include letters, digits, and the following characters: '.', '_', '-'. However, they cannot contain the sequence '---'."
	}
	return ""
}

// createProject is POST /v10/projects (and /v11): 200 with the project;
// 409 when the owner has a project of that name.
func (s *Server) createProject(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	var b projectBody
	if !decodeStrict(w, raw, &b, projectKnown) {
		return
	}
	if b.Name == nil || *b.Name == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: missing required property `name`.")
		return
	}
	if msg := checkProjectName(*b.Name); msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findProject(sc.owner, *b.Name) != nil {
		writeError(w, http.StatusConflict, "conflict", "A project with the provided name already exists.")
		return
	}
	now := s.now()
	p := &Project{ID: "prj_" + s.nextID(), Name: *b.Name, OwnerID: sc.owner}
	p.CreatedAt = s.projectCreated(now)
	p.UpdatedAt = p.CreatedAt
	if msg := b.apply(p); msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	if g := b.GitRepository; g != nil {
		link, msg := s.linkFor(g.Type, g.Repo)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		p.Link = link
	}
	for i, eb := range b.EnvironmentVariables {
		env, msg := eb.toEnv(fmt.Sprintf("environmentVariables[%d]", i), p, nil)
		if msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		if slices.ContainsFunc(p.Env, func(e EnvVar) bool { return envClash(e, env) }) {
			writeError(w, http.StatusBadRequest, "ENV_ALREADY_EXISTS", fmt.Sprintf("A variable with the name `%s` already exists for the target %s on branch %s", env.Key, strings.Join(env.Target, ","), branchName(env.GitBranch)))
			return
		}
		env.CreatedBy, env.UpdatedBy = sc.userID, sc.userID
		s.fillEnv(&env, p.CreatedAt)
		p.Env = append(p.Env, env)
	}
	s.projects[p.ID] = p
	writeJSON(w, http.StatusOK, p.toJSON())
}

// linkFor makes the Git link of a project created with gitRepository
// {type, repo: "owner/name"}: the repository id is the one a project of
// the fake already links to, else a stable number derived from the name.
// Callers hold mu.
func (s *Server) linkFor(typ, repo string) (*GitRepo, string) {
	switch typ {
	case "github", "gitlab", "bitbucket":
	default:
		return nil, "Invalid request: `gitRepository.type` should be equal to one of the allowed values \"github\", \"gitlab\", \"bitbucket\"."
	}
	org, name, ok := strings.Cut(repo, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") && typ != "gitlab" {
		return nil, fmt.Sprintf("Invalid request: `gitRepository.repo` should be owner/name, got %q.", repo)
	}
	for _, p := range s.sortedProjects() {
		if l := p.Link; l != nil && l.Type == typ && l.Org == org && l.Repo == name {
			return &GitRepo{Type: typ, Org: org, Repo: name, RepoID: l.RepoID, ProductionBranch: l.ProductionBranch, Branches: slices.Clone(l.Branches)}, ""
		}
	}
	id, _ := strconv.ParseInt(sha256Hex(typ + ":" + repo)[:8], 16, 64)
	return &GitRepo{Type: typ, Org: org, Repo: name, RepoID: id, ProductionBranch: "main"}, ""
}

// updateProject is PATCH /v9/projects/{idOrName}: 200 with the project;
// 409 when the new name is taken.
func (s *Server) updateProject(w http.ResponseWriter, r *http.Request, sc scope) {
	raw, _ := io.ReadAll(r.Body)
	var b projectBody
	known := slices.DeleteFunc(slices.Clone(projectKnown), func(k string) bool {
		return k == "gitRepository" || k == "environmentVariables"
	})
	if !decodeStrict(w, raw, &b, known) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	if b.Name != nil && *b.Name != p.Name {
		if msg := checkProjectName(*b.Name); msg != "" {
			writeError(w, http.StatusBadRequest, "bad_request", msg)
			return
		}
		if s.findProject(sc.owner, *b.Name) != nil {
			writeError(w, http.StatusConflict, "conflict", "A project with the provided name already exists.")
			return
		}
	}
	next := *p
	if msg := b.apply(&next); msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	if b.Name != nil {
		next.Name = *b.Name
	}
	next.UpdatedAt = s.now()
	*p = next
	writeJSON(w, http.StatusOK, p.toJSON())
}

// deleteProject is DELETE /v9/projects/{idOrName}: 204, and the project's
// deployments go with it.
func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request, sc scope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.findProject(sc.owner, r.PathValue("idOrName"))
	if p == nil {
		writeError(w, http.StatusNotFound, "not_found", "Project not found")
		return
	}
	delete(s.projects, p.ID)
	for id, d := range s.deployments {
		if d.ProjectID == p.ID {
			delete(s.deployments, id)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// customEnvironment finds a project's custom environment by slug or id.
func (p *Project) customEnvironment(slugOrID string) (CustomEnvironment, bool) {
	for _, ce := range p.CustomEnvironments {
		if ce.ID == slugOrID || ce.Slug == slugOrID {
			return ce, true
		}
	}
	return CustomEnvironment{}, false
}

// page cuts a newest-first list of items with ms timestamps at limit and
// returns the page with Vercel's pagination object: next is the last
// item's timestamp when more remain, else null.
func page[T any](items []T, limit int, ms func(T) int64) ([]T, paginationJSON) {
	out := items[:min(len(items), limit)]
	pg := paginationJSON{Count: len(out)}
	if len(out) > 0 {
		prev := ms(out[0])
		pg.Prev = &prev
		if len(items) > len(out) {
			next := ms(out[len(out)-1])
			pg.Next = &next
		}
	}
	return out, pg
}

// listLimit reads limit (default def, at most maxLimit), answering 400
// itself (ok false) for a malformed one.
func listLimit(w http.ResponseWriter, r *http.Request, def, maxLimit int64) (int, bool) {
	limit, set, msg := queryInt(r, "limit")
	if msg != "" {
		writeError(w, http.StatusBadRequest, "bad_request", msg)
		return 0, false
	}
	switch {
	case !set:
		limit = def
	case limit < 1:
		writeError(w, http.StatusBadRequest, "bad_request", "Invalid request: `limit` should be >= 1")
		return 0, false
	case limit > maxLimit:
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("Invalid request: `limit` should be <= %d", maxLimit))
		return 0, false
	}
	return int(limit), true
}

// inWindow reports whether ms lies in the list's since/until window.
func (win window) inWindow(ms int64) bool {
	return (!win.hasSince || ms >= win.since) && (!win.hasUntil || ms < win.until)
}
