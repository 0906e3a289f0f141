// Package fakedeploy is an in-memory fake of the parts of the Vercel REST
// API the deploy connector uses, faithful enough to run the connector's
// steps against in tests and in a sandbox mode.
//
// It serves the exact versioned paths Vercel documents for every
// deployment-platform endpoint of the product spec (deployments, projects,
// domains, environment variables, teams and members; the Route constants
// list them), under both the 2024 path versions the product spec uses and
// the 2025 ones where they differ (POST /v11/projects, GET
// /v10/projects/{idOrName}/env, GET /v3/teams/{teamId}/members), and
// answers any other path or version with Vercel's 404 envelope. State is
// kept, so a project, domain or variable created through the API can be
// read, changed and deleted through it. Requests carry "Authorization:
// Bearer <token>"; a missing or unknown token gets 403
// {"error":{"code":"forbidden","invalidToken":true}} as Vercel answers. A
// teamId (or slug) query parameter scopes a request to that team, and a
// team the token cannot access gets 403; without it the request acts on
// the user's personal scope, so team resources are not found.
//
// AddProject, AddDeployment, AddDomain and AddTeam seed state;
// SetDeploymentState and SetDomainVerified move it as Vercel would.
// Every endpoint has a rate-limit bucket per scope (default 1,000 requests
// a minute) reported in X-RateLimit-Limit, -Remaining and -Reset; a spent
// bucket answers 429 with Retry-After and Vercel's rate_limited body.
// Deployments start QUEUED and change state only through
// SetDeploymentState or the cancel endpoint. Failures can be injected per
// route, and every request is logged. Time comes from Options.Now, so tests
// control resets and timestamps.
//
// The package does not import testing: httptest.NewServer is the only test
// helper it uses.
package fakedeploy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Default identities of the default Authenticate.
const (
	DefaultUserID = "user_fake0001"
	DefaultTeamID = "team_fake0001"
)

// Route names one endpoint by its method and path pattern.
type Route string

// The routes the fake serves.
const (
	RouteListDeployments  Route = "GET /v6/deployments"
	RouteGetDeployment    Route = "GET /v13/deployments/{id}"
	RouteCreateDeployment Route = "POST /v13/deployments"
	RouteCancelDeployment Route = "PATCH /v12/deployments/{id}/cancel"
	RouteDeleteDeployment Route = "DELETE /v13/deployments/{id}"
	RouteListProjects     Route = "GET /v9/projects"
	RouteListProjectsV10  Route = "GET /v10/projects"
	RouteGetProject       Route = "GET /v9/projects/{idOrName}"
	RouteCreateProject    Route = "POST /v10/projects"
	RouteCreateProjectV11 Route = "POST /v11/projects"
	RouteUpdateProject    Route = "PATCH /v9/projects/{idOrName}"
	RouteDeleteProject    Route = "DELETE /v9/projects/{idOrName}"

	RouteListDomains         Route = "GET /v5/domains"
	RouteGetDomain           Route = "GET /v5/domains/{domain}"
	RouteListProjectDomains  Route = "GET /v9/projects/{idOrName}/domains"
	RouteGetProjectDomain    Route = "GET /v9/projects/{idOrName}/domains/{domain}"
	RouteAddProjectDomain    Route = "POST /v10/projects/{idOrName}/domains"
	RouteRemoveProjectDomain Route = "DELETE /v9/projects/{idOrName}/domains/{domain}"

	RouteListEnv    Route = "GET /v9/projects/{idOrName}/env"
	RouteListEnvV10 Route = "GET /v10/projects/{idOrName}/env"
	RouteGetEnv     Route = "GET /v1/projects/{idOrName}/env/{id}"
	RouteCreateEnv  Route = "POST /v10/projects/{idOrName}/env"
	RouteEditEnv    Route = "PATCH /v9/projects/{idOrName}/env/{id}"
	RouteDeleteEnv  Route = "DELETE /v9/projects/{idOrName}/env/{id}"

	RouteListTeams     Route = "GET /v2/teams"
	RouteGetTeam       Route = "GET /v2/teams/{teamId}"
	RouteListMembers   Route = "GET /v2/teams/{teamId}/members"
	RouteListMembersV3 Route = "GET /v3/teams/{teamId}/members"
)

// Deployment states (readyState).
const (
	StateQueued       = "QUEUED"
	StateInitializing = "INITIALIZING"
	StateBuilding     = "BUILDING"
	StateReady        = "READY"
	StateError        = "ERROR"
	StateCanceled     = "CANCELED"
)

// states lists every deployment state in Vercel's enum.
var states = []string{StateBuilding, StateError, StateInitializing, StateQueued, StateReady, StateCanceled}

// Default rate limit of every endpoint bucket.
const (
	DefaultRateLimit  = 1000
	DefaultRateWindow = time.Minute
)

// Options configures a Server.
type Options struct {
	// Authenticate resolves a bearer token to the user it belongs to and
	// the teams it may act for. Nil means any non-empty token is user
	// DefaultUserID in team DefaultTeamID.
	Authenticate func(token string) (userID string, teamIDs []string, ok bool)
	// Now is the fake's clock. Nil means time.Now.
	Now func() time.Time
}

// GitRepo is the Git repository a project is linked to.
type GitRepo struct {
	// Type is "github" (default), "gitlab" or "bitbucket".
	Type string
	// Org and Repo name the repository ("acme", "web").
	Org, Repo string
	// RepoID is the provider's numeric repository id (GitLab: project id).
	RepoID int64
	// ProductionBranch is the branch production deploys from (default
	// "main").
	ProductionBranch string
	// Branches, when not empty, are the only refs a deployment may use.
	Branches []string
}

// Project is a Vercel project.
type Project struct {
	// ID is "prj_…"; AddProject fills it when empty.
	ID string
	// Name is unique within its owner.
	Name string
	// OwnerID is the user or team id owning the project (default
	// DefaultUserID).
	OwnerID string
	// Link is the linked Git repository, nil for none.
	Link *GitRepo
	// CreatedAt defaults to the fake's clock. It is unique per fake (a
	// time already taken moves on by a millisecond), so the list's
	// timestamp cursor is exact.
	CreatedAt time.Time
	// UpdatedAt is the last change (CreatedAt when never changed).
	UpdatedAt time.Time
	// Framework and the build settings are the project's settings (empty
	// means Vercel's null: detected at build time).
	Framework, BuildCommand, DevCommand, InstallCommand, OutputDirectory, RootDirectory string
	// PublicSource makes /_src and /_logs public.
	PublicSource bool
	// CustomEnvironments are the project's custom environments (besides
	// production, preview and development), deployable by slug or id.
	CustomEnvironments []CustomEnvironment
	// Env are the project's environment variables.
	Env []EnvVar
	// Domains are the domains assigned to the project.
	Domains []ProjectDomain
}

// CustomEnvironment is a project's custom environment (a Pro feature),
// such as "staging".
type CustomEnvironment struct {
	// ID is "env_…"; AddProject fills it when empty.
	ID string
	// Slug names it in URLs and API calls.
	Slug string
}

// EnvVar is one environment variable of a project.
type EnvVar struct {
	// ID identifies the variable; filled when empty.
	ID string
	// Key is the variable's name.
	Key string
	// Value is the plain value, whatever the type.
	Value string
	// Type is plain, encrypted (the default), sensitive, secret or system.
	Type string
	// Target lists the environments: production, preview, development.
	Target []string
	// GitBranch restricts a preview variable to one branch.
	GitBranch string
	// Comment describes the variable.
	Comment string
	// CustomEnvironmentIDs are custom environments it applies to.
	CustomEnvironmentIDs []string
	// CreatedAt and UpdatedAt are filled from the clock.
	CreatedAt, UpdatedAt time.Time
	// CreatedBy and UpdatedBy are user ids.
	CreatedBy, UpdatedBy string
}

// ProjectDomain is a domain assigned to a project.
type ProjectDomain struct {
	// Name is the host name ("www.example.com").
	Name string
	// GitBranch, when set, serves that branch's latest preview.
	GitBranch string
	// Redirect and RedirectStatusCode make the domain redirect.
	Redirect           string
	RedirectStatusCode int
	// Verified says the owner proved control of the apex domain.
	Verified bool
	// CreatedAt and UpdatedAt are filled from the clock.
	CreatedAt, UpdatedAt time.Time
}

// Domain is a domain of an account (GET /v5/domains).
type Domain struct {
	// ID is "dom_…"; filled when empty.
	ID string
	// Name is the apex domain ("example.com").
	Name string
	// OwnerID is the user or team id owning it (default DefaultUserID).
	OwnerID string
	// CreatorID is the user who added it (default DefaultUserID).
	CreatorID string
	// Verified says the owner proved control of the domain.
	Verified bool
	// ServiceType is "zeit.world" (Vercel's nameservers), "external"
	// (default) or "na".
	ServiceType string
	// CreatedAt is unique per fake, so the list's cursor is exact.
	CreatedAt time.Time
}

// Team is a Vercel team.
type Team struct {
	// ID is "team_…".
	ID string
	// Slug names the team in URLs; Name is its display name.
	Slug, Name string
	// CreatorID is the user who created it (default DefaultUserID).
	CreatorID string
	// CreatedAt defaults to the clock.
	CreatedAt time.Time
	// Members are the team's members; the creator is added as OWNER when
	// missing.
	Members []Member
}

// Member is a member of a team.
type Member struct {
	// UID is the user id; Username, Email and Name describe the user.
	UID, Username, Email, Name string
	// Role is OWNER, MEMBER, DEVELOPER, SECURITY, BILLING, VIEWER,
	// VIEWER_FOR_PLUS or CONTRIBUTOR (default MEMBER).
	Role string
	// Confirmed is false for an invited member who has not joined.
	Confirmed bool
	// CreatedAt is when the user joined (default the clock), unique per
	// team so the member list's cursor is exact.
	CreatedAt time.Time
}

// Deployment is one deployment as the fake stores it.
type Deployment struct {
	// ID is "dpl_…"; AddDeployment fills it when empty.
	ID string
	// Name is the deployment (project) name.
	Name string
	// URL is the deployment's host name (no scheme).
	URL string
	// ProjectID and OwnerID say whose it is.
	ProjectID, OwnerID string
	// State is the readyState (QUEUED when added without one).
	State string
	// Target is "production", "staging" or "" (preview).
	Target string
	// CustomEnvironment is the custom environment deployed to, if any.
	CustomEnvironment *CustomEnvironment
	// Ref and SHA are the Git ref and commit deployed.
	Ref, SHA string
	// Repo is the repository deployed from (AddDeployment fills it from
	// the project's link when Ref is set).
	Repo *GitRepo
	// Meta is the deployment's metadata.
	Meta map[string]string
	// CreatorID is the user who created it.
	CreatorID string
	// CreatedAt is unique per fake and strictly increasing, so timestamp
	// pagination is exact.
	CreatedAt time.Time
	// CanceledAt is set when the deployment was canceled.
	CanceledAt time.Time
	// Request is the create request's body (nil for added deployments).
	Request json.RawMessage
}

// Failure is an injected failure.
type Failure struct {
	// Status is the HTTP status to answer (default 500).
	Status int
	// Code and Message fill Vercel's error envelope (defaults derive from
	// Status).
	Code, Message string
	// Empty sends no body at all, as Vercel sometimes does.
	Empty bool
	// RetryAfter, when positive, is sent as Retry-After (whole seconds).
	RetryAfter time.Duration
}

// Request is one request the fake received.
type Request struct {
	// Route is the endpoint that matched ("" for an unknown path).
	Route Route
	// Method and Path are the request's method and URL path.
	Method, Path string
	// Query is the parsed URL query.
	Query url.Values
	// Header is a copy of the request's headers.
	Header http.Header
	// Body is the request body.
	Body []byte
	// Time is the fake clock's time on arrival.
	Time time.Time
}

type rateLimit struct {
	limit  int
	window time.Duration
}

type bucketKey struct {
	route Route
	scope string
}

type bucket struct {
	used  int
	start time.Time
}

// Server is a fake Vercel API. It is safe for concurrent use.
type Server struct {
	auth func(string) (string, []string, bool)
	now  func() time.Time
	mux  *http.ServeMux

	mu          sync.Mutex
	seq         int
	projects    map[string]*Project // by id
	deployments map[string]*Deployment
	domains     map[string]*Domain // by name
	teams       map[string]*Team   // by id
	lastCreated time.Time
	// lastProject, lastDomain, lastTeam and lastMember are lastCreated
	// for projects, domains, teams and team members.
	lastProject, lastDomain, lastTeam, lastMember time.Time
	limits                                        map[Route]rateLimit
	defLimit                                      rateLimit
	buckets                                       map[bucketKey]*bucket
	failures                                      map[Route][]Failure
	log                                           []Request
	srv                                           *httptest.Server
}

// New returns a Server with no projects and no deployments.
func New(o Options) *Server {
	s := &Server{
		auth:        o.Authenticate,
		now:         o.Now,
		projects:    map[string]*Project{},
		deployments: map[string]*Deployment{},
		domains:     map[string]*Domain{},
		teams:       map[string]*Team{},
		limits:      map[Route]rateLimit{},
		defLimit:    rateLimit{limit: DefaultRateLimit, window: DefaultRateWindow},
		buckets:     map[bucketKey]*bucket{},
		failures:    map[Route][]Failure{},
	}
	if s.auth == nil {
		s.auth = func(token string) (string, []string, bool) {
			if token == "" {
				return "", nil, false
			}
			return DefaultUserID, []string{DefaultTeamID}, true
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	mux := http.NewServeMux()
	s.handle(mux, RouteListDeployments, s.listDeployments)
	s.handle(mux, RouteGetDeployment, s.getDeployment)
	s.handle(mux, RouteCreateDeployment, s.createDeployment)
	s.handle(mux, RouteCancelDeployment, s.cancelDeployment)
	s.handle(mux, RouteDeleteDeployment, s.deleteDeployment)
	s.handle(mux, RouteListProjects, s.listProjects)
	s.handle(mux, RouteListProjectsV10, s.listProjects)
	s.handle(mux, RouteGetProject, s.getProject)
	s.handle(mux, RouteCreateProject, s.createProject)
	s.handle(mux, RouteCreateProjectV11, s.createProject)
	s.handle(mux, RouteUpdateProject, s.updateProject)
	s.handle(mux, RouteDeleteProject, s.deleteProject)
	s.handle(mux, RouteListDomains, s.listDomains)
	s.handle(mux, RouteGetDomain, s.getDomain)
	s.handle(mux, RouteListProjectDomains, s.listProjectDomains)
	s.handle(mux, RouteGetProjectDomain, s.getProjectDomain)
	s.handle(mux, RouteAddProjectDomain, s.addProjectDomain)
	s.handle(mux, RouteRemoveProjectDomain, s.removeProjectDomain)
	s.handle(mux, RouteListEnv, s.listEnv)
	s.handle(mux, RouteListEnvV10, s.listEnv)
	s.handle(mux, RouteGetEnv, s.getEnv)
	s.handle(mux, RouteCreateEnv, s.createEnv)
	s.handle(mux, RouteEditEnv, s.editEnv)
	s.handle(mux, RouteDeleteEnv, s.deleteEnv)
	s.handle(mux, RouteListTeams, s.listTeams)
	s.handle(mux, RouteGetTeam, s.getTeam)
	s.handle(mux, RouteListMembers, s.listMembers)
	s.handle(mux, RouteListMembersV3, s.listMembers)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, "")
		writeError(w, http.StatusNotFound, "not_found", "The requested API endpoint was not found.")
	})
	s.mux = mux
	return s
}

// Handler returns the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Start serves the fake on a local port and returns its base URL. Calling
// it again returns the same URL.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		s.srv = httptest.NewServer(s.mux)
	}
	return s.srv.URL
}

// Close stops the server started by Start, if any.
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// AddProject stores p, filling ID, OwnerID, CreatedAt and the link's
// defaults, and returns the stored project.
func (s *Server) AddProject(p Project) Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.ID == "" {
		p.ID = "prj_" + s.nextID()
	}
	if p.OwnerID == "" {
		p.OwnerID = DefaultUserID
	}
	p.CreatedAt = s.projectCreated(p.CreatedAt)
	if p.UpdatedAt.Before(p.CreatedAt) {
		p.UpdatedAt = p.CreatedAt
	}
	p.CustomEnvironments = slices.Clone(p.CustomEnvironments)
	for i := range p.CustomEnvironments {
		if p.CustomEnvironments[i].ID == "" {
			p.CustomEnvironments[i].ID = "env_" + s.nextID()
		}
	}
	p.Env = slices.Clone(p.Env)
	for i := range p.Env {
		s.fillEnv(&p.Env[i], p.CreatedAt)
	}
	p.Domains = slices.Clone(p.Domains)
	for i := range p.Domains {
		d := &p.Domains[i]
		if d.CreatedAt.IsZero() {
			d.CreatedAt = p.CreatedAt
		}
		if d.UpdatedAt.IsZero() {
			d.UpdatedAt = d.CreatedAt
		}
	}
	if p.Link != nil {
		l := *p.Link
		if l.Type == "" {
			l.Type = "github"
		}
		if l.ProductionBranch == "" {
			l.ProductionBranch = "main"
		}
		l.Branches = slices.Clone(l.Branches)
		p.Link = &l
	}
	stored := p
	s.projects[p.ID] = &stored
	return cloneProject(stored)
}

// Project returns the project with this id or name (names are looked up
// across owners; the first match wins).
func (s *Server) Project(idOrName string) (Project, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.projects[idOrName]; ok {
		return cloneProject(*p), true
	}
	for _, p := range s.sortedProjects() {
		if p.Name == idOrName {
			return cloneProject(*p), true
		}
	}
	return Project{}, false
}

// AddDeployment stores d as if it had been created, filling ID, Name, URL,
// State, OwnerID (the project's) and CreatedAt, and returns it.
func (s *Server) AddDeployment(d Deployment) Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.ID == "" {
		d.ID = "dpl_" + s.nextID()
	}
	if p, ok := s.projects[d.ProjectID]; ok {
		if d.OwnerID == "" {
			d.OwnerID = p.OwnerID
		}
		if d.Name == "" {
			d.Name = p.Name
		}
	}
	if d.OwnerID == "" {
		d.OwnerID = DefaultUserID
	}
	if d.State == "" {
		d.State = StateQueued
	}
	if d.CreatorID == "" {
		d.CreatorID = DefaultUserID
	}
	if d.URL == "" {
		d.URL = deploymentHost(d.Name, d.ID, d.OwnerID)
	}
	if p, ok := s.projects[d.ProjectID]; ok && d.Repo == nil && d.Ref != "" && p.Link != nil {
		l := *p.Link
		d.Repo = &l
	}
	if d.Repo != nil {
		r := *d.Repo
		r.Branches = slices.Clone(r.Branches)
		d.Repo = &r
	}
	d.CreatedAt = s.created(d.CreatedAt)
	d.Meta = maps.Clone(d.Meta)
	stored := d
	s.deployments[d.ID] = &stored
	return cloneDeployment(stored)
}

// Deployment returns the deployment with this id.
func (s *Server) Deployment(id string) (Deployment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deployments[id]
	if !ok {
		return Deployment{}, false
	}
	return cloneDeployment(*d), true
}

// Deployments returns every deployment, newest first.
func (s *Server) Deployments() []Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Deployment, 0, len(s.deployments))
	for _, d := range s.sortedDeployments() {
		out = append(out, cloneDeployment(*d))
	}
	return out
}

// SetDeploymentState moves a deployment to state (one of Vercel's
// readyState values); the fake never advances states by itself.
func (s *Server) SetDeploymentState(id, state string) error {
	if !slices.Contains(states, state) {
		return fmt.Errorf("fakedeploy: unknown deployment state %q", state)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deployments[id]
	if !ok {
		return fmt.Errorf("fakedeploy: no deployment %q", id)
	}
	d.State = state
	if state == StateCanceled && d.CanceledAt.IsZero() {
		d.CanceledAt = s.now()
	}
	return nil
}

// SetRateLimit sets the budget of route's bucket (per scope) to limit
// requests per window and restarts its windows; route "" sets the default
// of every route without its own. A limit of 0 refuses every request.
func (s *Server) SetRateLimit(route Route, limit int, window time.Duration) {
	if window <= 0 {
		window = DefaultRateWindow
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if route == "" {
		s.defLimit = rateLimit{limit: max(limit, 0), window: window}
		clear(s.buckets)
		return
	}
	s.limits[route] = rateLimit{limit: max(limit, 0), window: window}
	for k := range s.buckets {
		if k.route == route {
			delete(s.buckets, k)
		}
	}
}

// FailNext makes the next n requests to route (any route when "") fail
// with f, before authentication and rate limiting.
func (s *Server) FailNext(route Route, n int, f Failure) {
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[route] = append(s.failures[route], f)
	}
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// RequestsTo returns the requests that matched route.
func (s *Server) RequestsTo(route Route) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.log {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// ClearRequests empties the request log.
func (s *Server) ClearRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// scope is who a request acts as.
type scope struct {
	userID string
	owner  string   // team id or user id
	teams  []string // the teams the token may act for
}

// handle registers route with the common prelude: log, injected failure,
// authentication, team scoping and rate limiting.
func (s *Server) handle(mux *http.ServeMux, route Route, h func(http.ResponseWriter, *http.Request, scope)) {
	mux.HandleFunc(string(route), func(w http.ResponseWriter, r *http.Request) {
		s.record(r, route)
		if f, ok := s.takeFailure(route); ok {
			writeFailure(w, f)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			writeForbiddenToken(w)
			return
		}
		userID, teams, ok := s.auth(token)
		if !ok {
			writeForbiddenToken(w)
			return
		}
		sc := scope{userID: userID, owner: userID, teams: teams}
		team := r.URL.Query().Get("teamId")
		if slug := r.URL.Query().Get("slug"); team == "" && slug != "" {
			team = s.teamIDBySlug(slug)
			if team == "" {
				writeError(w, http.StatusForbidden, "forbidden", "Not authorized")
				return
			}
		}
		if team != "" {
			if !slices.Contains(teams, team) {
				writeError(w, http.StatusForbidden, "forbidden", "Not authorized")
				return
			}
			sc.owner = team
		}
		if !s.charge(w, route, sc.owner) {
			return
		}
		h(w, r, sc)
	})
}

// record logs r and restores its body for the handler.
func (s *Server) record(r *http.Request, route Route) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 8<<20))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, Request{
		Route:  route,
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
		Time:   s.now(),
	})
}

func (s *Server) takeFailure(route Route) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []Route{route, ""} {
		if q := s.failures[k]; len(q) > 0 {
			f := q[0]
			s.failures[k] = q[1:]
			return f, true
		}
	}
	return Failure{}, false
}

// charge spends one request of the bucket and writes the rate-limit
// headers; when the bucket is spent it answers 429 and reports false.
func (s *Server) charge(w http.ResponseWriter, route Route, owner string) bool {
	s.mu.Lock()
	now := s.now()
	rl, ok := s.limits[route]
	if !ok {
		rl = s.defLimit
	}
	k := bucketKey{route: route, scope: owner}
	b := s.buckets[k]
	if b == nil || !now.Before(b.start.Add(rl.window)) {
		b = &bucket{start: now}
		s.buckets[k] = b
	}
	reset := b.start.Add(rl.window)
	allowed := b.used < rl.limit
	if allowed {
		b.used++
	}
	remaining := max(rl.limit-b.used, 0)
	s.mu.Unlock()

	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(rl.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(reset), 10))
	if allowed {
		return true
	}
	wait := int64(math.Ceil(reset.Sub(now).Seconds()))
	h.Set("Retry-After", strconv.FormatInt(max(wait, 1), 10))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"code":    "rate_limited",
		"message": "Rate limit exceeded",
		"limit": map[string]any{
			"remaining": 0,
			"reset":     ceilUnix(reset),
			"resetMs":   reset.UnixMilli(),
			"total":     rl.limit,
		},
	}})
	return false
}

// ceilUnix is t in epoch seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

// nextID returns a deterministic 24-character id suffix. Callers hold mu.
func (s *Server) nextID() string {
	s.seq++
	sum := sha256.Sum256([]byte("fakedeploy-" + strconv.Itoa(s.seq)))
	return hex.EncodeToString(sum[:12])
}

// created returns a deployment's creation time, after every earlier one.
// Callers hold mu.
func (s *Server) created(t time.Time) time.Time { return s.after(&s.lastCreated, t) }

// projectCreated is created for projects. Callers hold mu.
func (s *Server) projectCreated(t time.Time) time.Time { return s.after(&s.lastProject, t) }

// after returns t (now when zero) to the millisecond, or, when that is not
// after *last, *last plus a millisecond, and records it in *last: times
// that a timestamp cursor can page through without skipping any.
func (s *Server) after(last *time.Time, t time.Time) time.Time {
	if t.IsZero() {
		t = s.now()
	}
	t = t.Truncate(time.Millisecond)
	if !t.After(*last) {
		t = last.Add(time.Millisecond)
	}
	*last = t
	return t
}

// sortedDeployments lists deployments newest first. Callers hold mu.
func (s *Server) sortedDeployments() []*Deployment {
	out := slices.Collect(maps.Values(s.deployments))
	slices.SortFunc(out, func(a, b *Deployment) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out
}

// sortedProjects lists projects oldest first, by id on ties. Callers hold
// mu.
func (s *Server) sortedProjects() []*Project {
	out := slices.Collect(maps.Values(s.projects))
	slices.SortFunc(out, func(a, b *Project) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// findProject resolves an id or name within owner. Callers hold mu.
func (s *Server) findProject(owner, idOrName string) *Project {
	if p, ok := s.projects[idOrName]; ok && p.OwnerID == owner {
		return p
	}
	for _, p := range s.sortedProjects() {
		if p.OwnerID == owner && p.Name == idOrName {
			return p
		}
	}
	return nil
}

// findDeployment resolves an id or host name within owner. Callers hold
// mu.
func (s *Server) findDeployment(owner, idOrURL string) *Deployment {
	if d, ok := s.deployments[idOrURL]; ok && d.OwnerID == owner {
		return d
	}
	host := strings.TrimPrefix(strings.TrimPrefix(idOrURL, "https://"), "http://")
	for _, d := range s.deployments {
		if d.OwnerID == owner && d.URL == host {
			return d
		}
	}
	return nil
}

func cloneProject(p Project) Project {
	p.CustomEnvironments = slices.Clone(p.CustomEnvironments)
	p.Env = slices.Clone(p.Env)
	for i := range p.Env {
		p.Env[i].Target = slices.Clone(p.Env[i].Target)
		p.Env[i].CustomEnvironmentIDs = slices.Clone(p.Env[i].CustomEnvironmentIDs)
	}
	p.Domains = slices.Clone(p.Domains)
	if p.Link != nil {
		l := *p.Link
		l.Branches = slices.Clone(l.Branches)
		p.Link = &l
	}
	return p
}

func cloneDeployment(d Deployment) Deployment {
	if d.Repo != nil {
		r := *d.Repo
		r.Branches = slices.Clone(r.Branches)
		d.Repo = &r
	}
	if d.CustomEnvironment != nil {
		ce := *d.CustomEnvironment
		d.CustomEnvironment = &ce
	}
	d.Meta = maps.Clone(d.Meta)
	d.Request = slices.Clone(d.Request)
	return d
}

// deploymentHost makes a Vercel-looking host name.
func deploymentHost(name, id, owner string) string {
	slug := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(owner, "team_"), "user_"))
	suffix := strings.TrimPrefix(id, "dpl_")
	if len(suffix) > 9 {
		suffix = suffix[:9]
	}
	return fmt.Sprintf("%s-%s-%s.vercel.app", strings.ToLower(name), strings.ToLower(suffix), slug)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal_server_error","message":"encode failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// writeForbiddenToken answers a missing or unknown token as Vercel does.
func writeForbiddenToken(w http.ResponseWriter) {
	writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{
		"code": "forbidden", "message": "Not authorized", "invalidToken": true,
	}})
}

func writeFailure(w http.ResponseWriter, f Failure) {
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(f.RetryAfter.Seconds())), 10))
	}
	if f.Empty {
		w.WriteHeader(f.Status)
		return
	}
	code, msg := f.Code, f.Message
	if code == "" {
		code = defaultCode(f.Status)
	}
	if msg == "" {
		msg = http.StatusText(f.Status)
	}
	writeError(w, f.Status, code, msg)
}

func defaultCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusTooManyRequests:
		return "rate_limited"
	default:
		return "internal_server_error"
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
