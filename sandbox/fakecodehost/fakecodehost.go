// Package fakecodehost is a faithful in-process fake of api.github.com for
// the REST and GraphQL endpoints the codehost tool steps call. Tests use
// it, and so can a sandbox mode of triggerd: it does not depend on package
// testing.
//
// The fake keeps its state in memory, seeded with one user (octocat, plus
// hubot and monalisa), an organisation octo-org that octocat owns, a
// repository octocat/hello-world with a default branch main, a few issues,
// a pull request, two workflows with a run, two releases, a gist and a
// Projects (v2) board. It behaves the way the reference notes describe
// GitHub:
//
//   - exact methods, paths and success statuses; {"message",
//     "documentation_url"} errors, 422 "Validation Failed" with errors[],
//     404 for unknown and for private resources the caller cannot see;
//   - a User-Agent is required (403 without), Accept must be absent, */*,
//     application/json, application/vnd.github+json or a custom
//     application/vnd.github.<param>[+json] type (415 otherwise), and
//     X-GitHub-Api-Version must be 2022-11-28 or 2026-03-10 when present
//     (400 otherwise);
//   - per-token x-ratelimit-* headers on every authenticated response, with
//     separate core (Options.RateLimit per hour), search (30 per minute)
//     and graphql buckets; a 304 and GET /rate_limit cost nothing; a spent
//     budget answers 403 (or 429) with x-ratelimit-remaining 0;
//   - an ETag on every successful GET and 304 Not Modified on a matching
//     If-None-Match;
//   - Link pagination with per_page (default 30, at most 100) and page.
//
// It also serves GitHub's webhook and polling surface: repository and
// organisation webhooks (admins only, 404 for everyone else), which it
// delivers to like GitHub does (signed, asynchronously, a ping on
// creation, issues, issue_comment and pull_request events when its API
// changes them, and any payload through Deliver); the authenticated user's
// gists (GET /gists); and notifications (GET /notifications, with
// Last-Modified, If-Modified-Since and X-Poll-Interval), mentions in issue
// and comment bodies creating them.
//
// Every route can be made to fail (before or after doing its work), hang
// or answer a secondary rate limit for its next calls, and every request
// is logged.
package fakecodehost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Documentation URLs used in error bodies.
const (
	docsURL          = "https://docs.github.com/rest"
	primaryLimitDocs = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-primary-rate-limits"
	// SecondaryLimitDocs is the documentation_url of a secondary rate
	// limit answer; clients recognise the limit by its suffix.
	SecondaryLimitDocs = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#secondary-rate-limits"
)

// Rate limit resources.
const (
	ResourceCore    = "core"
	ResourceSearch  = "search"
	ResourceGraphQL = "graphql"
)

const maxBody = 10 << 20

// Route names one endpoint of the fake by method and GitHub's documented
// path template, e.g. "GET /repos/{owner}/{repo}/issues/{issue_number}".
// Routes lists them all.
type Route string

// Options configures a Server. The zero value is usable.
type Options struct {
	// Authenticate maps a bearer token to a login. Nil means any non-empty
	// token is the user octocat.
	Authenticate func(token string) (login string, ok bool)
	// Now is the fake's clock (default time.Now). Rate limit windows,
	// timestamps and workflow run progress follow it.
	Now func() time.Time
	// RateLimit is each token's core budget per hour (default 5000).
	RateLimit int
	// SearchRateLimit is each token's search budget per minute (default
	// 30).
	SearchRateLimit int
	// ExhaustedStatus is the status of a spent primary budget: 403
	// (default) or 429; GitHub sends either.
	ExhaustedStatus int
	// LogLimit bounds the request log, and the delivery log, to their most
	// recent entries (default 10000).
	LogLimit int
	// MaxPerPage caps per_page below GitHub's 100 (and its own smaller
	// caps), so tests can make short lists span pages (default 100).
	MaxPerPage int
	// DeliveryClient sends webhook deliveries. Nil means a client that
	// gives up after DeliveryTimeout and does not follow redirects, as
	// GitHub's deliveries do not.
	DeliveryClient *http.Client
	// DeliveryTimeout bounds one delivery (default 10 s, GitHub's).
	DeliveryTimeout time.Duration
	// EnterpriseOrgs names the organisations on GitHub Enterprise Cloud:
	// only they may create repositories with visibility internal; others
	// answer 422, as GitHub does (api.github.com's description has no
	// internal, Enterprise Cloud's has).
	EnterpriseOrgs []string
}

// Request is one request the fake received.
type Request struct {
	// Route is the endpoint that matched ("" for an unknown path).
	Route Route
	// Method and Path are the request's method and URL path; Query is its
	// parsed query.
	Method, Path string
	Query        url.Values
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// Status is the status answered (0 for a request left hanging).
	Status int
}

// fault is one injected answer.
type fault struct {
	status     int
	hang       bool
	secondary  bool
	retryAfter time.Duration
	// after: the route's handler runs (a write lands) before status is
	// answered in place of its reply.
	after bool
}

type bucketKey struct{ token, resource string }

type bucket struct {
	limit int
	used  int
	reset time.Time
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	o      Options
	routes []route

	mu       sync.Mutex
	st       *state
	buckets  map[bucketKey]*bucket
	faults   map[Route][]fault
	log      []Request
	requests int
	srv      *httptest.Server
	latency  time.Duration

	closing   chan struct{}
	closeOnce sync.Once

	// Webhook deliveries in flight (guarded by mu): idle is closed when
	// inflight drops to zero and replaced when it rises again.
	inflight   int
	idle       chan struct{}
	closed     bool
	deliveries []Delivery
}

// New returns a fake with its seeded state; call Start to serve it on a
// local port, or mount Handler yourself.
func New(o Options) *Server {
	if o.Authenticate == nil {
		o.Authenticate = func(token string) (string, bool) { return "octocat", token != "" }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RateLimit <= 0 {
		o.RateLimit = 5000
	}
	if o.SearchRateLimit <= 0 {
		o.SearchRateLimit = 30
	}
	if o.ExhaustedStatus != http.StatusTooManyRequests {
		o.ExhaustedStatus = http.StatusForbidden
	}
	if o.LogLimit <= 0 {
		o.LogLimit = 10000
	}
	if o.MaxPerPage <= 0 || o.MaxPerPage > 100 {
		o.MaxPerPage = 100
	}
	if o.DeliveryTimeout <= 0 {
		o.DeliveryTimeout = 10 * time.Second
	}
	if o.DeliveryClient == nil {
		o.DeliveryClient = &http.Client{
			Timeout:       o.DeliveryTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	idle := make(chan struct{})
	close(idle)
	s := &Server{
		o:       o,
		st:      seed(),
		buckets: map[bucketKey]*bucket{},
		faults:  map[Route][]fault{},
		closing: make(chan struct{}),
		idle:    idle,
	}
	s.routes = s.table()
	return s
}

// SetLatency delays every answer from now on by d after the request is
// served, as the round trip to GitHub does (tens to hundreds of
// milliseconds), so that a client's concurrency can be measured against
// the fake; other requests are served meanwhile. The wait ends early
// when the request's context ends or the fake closes. 0 (the default)
// answers at once.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = max(d, 0)
}

// Handler returns the fake's HTTP handler.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Start serves the fake on a local port and returns its base URL
// (http://127.0.0.1:port). It starts at most one server.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		s.srv = httptest.NewServer(s.Handler())
	}
	return s.srv.URL
}

// URL returns the base URL of the started server, or "" before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return ""
	}
	return s.srv.URL
}

// Close releases hanging requests, waits for the webhook deliveries in
// flight (each gives up after DeliveryTimeout), refuses further ones and
// stops the server started by Start. It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.mu.Lock()
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	_ = s.WaitDeliveries(context.Background())
	if srv != nil {
		srv.Close()
	}
}

// Routes lists every route the fake serves.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, r := range s.routes {
		out[i] = r.name
	}
	return out
}

func (s *Server) knownRoute(r Route) error {
	for _, rt := range s.routes {
		if rt.name == r {
			return nil
		}
	}
	return fmt.Errorf("fakecodehost: unknown route %q", r)
}

// FailNext makes the next n calls to route answer status (e.g. 503) with
// GitHub's error body. Injected answers queue behind earlier ones.
func (s *Server) FailNext(route Route, n, status int) error {
	return s.inject(route, n, fault{status: status})
}

// FailNextAfterApplying makes the next n calls to route do their work
// (a write lands) and then answer status (e.g. 502) with GitHub's error
// body instead of the real reply, as when GitHub's front end times out on
// a request its back end completed. Injected answers queue behind earlier
// ones.
func (s *Server) FailNextAfterApplying(route Route, n, status int) error {
	return s.inject(route, n, fault{status: status, after: true})
}

// HangNext makes the next n calls to route hang until the client gives up
// or the server closes.
func (s *Server) HangNext(route Route, n int) error {
	return s.inject(route, n, fault{hang: true})
}

// SecondaryLimitNext makes the next n calls to route answer a secondary
// rate limit: 403, a message saying so, a documentation_url ending in
// #secondary-rate-limits and, when retryAfter > 0, Retry-After in seconds.
func (s *Server) SecondaryLimitNext(route Route, n int, retryAfter time.Duration) error {
	return s.inject(route, n, fault{status: http.StatusForbidden, secondary: true, retryAfter: retryAfter})
}

func (s *Server) inject(route Route, n int, f fault) error {
	if err := s.knownRoute(route); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[route] = append(s.faults[route], f)
	}
	return nil
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// RequestsTo returns the logged requests that matched route.
func (s *Server) RequestsTo(route Route) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// RequestCount returns how many requests the fake has received, including
// those the bounded log no longer holds.
func (s *Server) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// ResetLog empties the request log and the request count.
func (s *Server) ResetLog() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.requests = nil, 0
}

// RateLimit reports token's budget for resource (core, search or graphql)
// as the next response would show it.
func (s *Server) RateLimit(token, resource string) (limit, remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucketLocked(token, resource, s.o.Now())
	return b.limit, b.limit - b.used, b.reset
}

// SetRemaining sets token's remaining budget for resource, e.g. to 0 to
// exhaust it.
func (s *Server) SetRemaining(token, resource string, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bucketLocked(token, resource, s.o.Now())
	b.used = min(b.limit, max(0, b.limit-remaining))
}

func (s *Server) bucketLocked(token, resource string, now time.Time) *bucket {
	k := bucketKey{token, resource}
	b := s.buckets[k]
	if b == nil || !now.Before(b.reset) {
		limit, window := s.o.RateLimit, time.Hour
		switch {
		case strings.HasPrefix(token, "anonymous:"):
			limit = 60
		case resource == ResourceSearch:
			limit, window = s.o.SearchRateLimit, time.Minute
		}
		b = &bucket{limit: limit, reset: now.Add(window).Truncate(time.Second)}
		s.buckets[k] = b
	}
	return b
}

// reply is what a route handler answers.
type reply struct {
	status int
	body   any
	header http.Header
}

func (r *reply) set(k, v string) *reply {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(k, v)
	return r
}

func okBody(v any) *reply  { return &reply{status: http.StatusOK, body: v} }
func created(v any) *reply { return &reply{status: http.StatusCreated, body: v} }
func noContent() *reply    { return &reply{status: http.StatusNoContent} }
func errorf(status int, format string, a ...any) *reply {
	return &reply{status: status, body: M{"message": fmt.Sprintf(format, a...), "documentation_url": docsURL, "status": strconv.Itoa(status)}}
}
func notFound() *reply { return errorf(http.StatusNotFound, "Not Found") }

// invalid is GitHub's 422 with one errors[] entry.
func invalid(resource, field, code string) *reply {
	return validation(M{"resource": resource, "field": field, "code": code})
}

func validation(errs ...M) *reply {
	return &reply{status: http.StatusUnprocessableEntity, body: M{
		"message": "Validation Failed", "errors": errs, "documentation_url": docsURL, "status": "422",
	}}
}

// M is a JSON object.
type M = map[string]any

// call is one request being served.
type call struct {
	s     *Server
	r     *http.Request
	p     map[string]string
	body  []byte
	login string
	now   time.Time
	base  string
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		http.Error(w, `{"message":"Request body too large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	path := r.URL.EscapedPath()
	rt, params := s.match(r.Method, path)
	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	if rt != nil {
		rec.Route = rt.name
	}
	s.mu.Lock()
	rep, hang := s.serveLocked(r, rt, params, body)
	if hang {
		s.recordLocked(rec)
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return
	}
	rec.Status = rep.status
	s.recordLocked(rec)
	latency := s.latency
	s.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-s.closing:
		}
		t.Stop()
	}
	write(w, rep)
}

func (s *Server) recordLocked(rec Request) {
	s.requests++
	if len(s.log) >= s.o.LogLimit {
		s.log = slices.Delete(s.log, 0, len(s.log)-s.o.LogLimit+1)
	}
	s.log = append(s.log, rec)
}

// encoded holds a reply's final bytes.
func write(w http.ResponseWriter, rep *reply) {
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	if rep.body == nil || rep.status == http.StatusNoContent || rep.status == http.StatusNotModified {
		w.WriteHeader(rep.status)
		return
	}
	b, _ := rep.body.([]byte)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(rep.status)
	_, _ = w.Write(b)
}

var acceptedVersions = map[string]bool{"2022-11-28": true, "2026-03-10": true}

// serveLocked runs the checks every request goes through and the route
// handler. The body of the returned reply is encoded JSON.
func (s *Server) serveLocked(r *http.Request, rt *route, params map[string]string, body []byte) (*reply, bool) {
	now := s.o.Now()
	if strings.TrimSpace(r.Header.Get("User-Agent")) == "" {
		return encode(errorf(http.StatusForbidden, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.")), false
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && !acceptedVersions[v] {
		return encode(errorf(http.StatusBadRequest, "API version %s is not supported.", clip(v))), false
	}
	if a := r.Header.Get("Accept"); !acceptable(a) {
		return encode(errorf(http.StatusUnsupportedMediaType, "Unsupported 'Accept' header: %q. Must accept 'application/json'.", clip(a))), false
	}
	token, login, authed := s.authenticate(r)
	resource := ResourceCore
	switch {
	case strings.HasPrefix(r.URL.Path, "/search/"):
		resource = ResourceSearch
	case r.URL.Path == "/graphql":
		resource = ResourceGraphQL
	}
	b := s.bucketLocked(token, resource, now)
	rep := func() *reply {
		if !authed {
			return errorf(http.StatusUnauthorized, "Bad credentials")
		}
		if b.used >= b.limit && r.URL.Path != "/rate_limit" {
			return &reply{status: s.o.ExhaustedStatus, body: M{
				"message":           fmt.Sprintf("API rate limit exceeded for user %s.", login),
				"documentation_url": primaryLimitDocs,
			}}
		}
		if rt != nil {
			if q := s.faults[rt.name]; len(q) > 0 {
				f := q[0]
				s.faults[rt.name] = q[1:]
				if f.after {
					c := &call{s: s, r: r, p: params, body: body, login: login, now: now, base: baseURL(r)}
					rt.h(c)
					return errorf(f.status, "%s", http.StatusText(f.status))
				}
				if f.hang {
					return nil
				}
				if f.secondary {
					rep := &reply{status: f.status, body: M{
						"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.",
						"documentation_url": SecondaryLimitDocs,
					}}
					if f.retryAfter > 0 {
						rep.set("Retry-After", strconv.Itoa(int((f.retryAfter+time.Second-1)/time.Second)))
					}
					return rep
				}
				return errorf(f.status, "%s", http.StatusText(f.status))
			}
		}
		if rt == nil {
			return notFound()
		}
		c := &call{s: s, r: r, p: params, body: body, login: login, now: now, base: baseURL(r)}
		return rt.h(c)
	}()
	if rep == nil {
		return nil, true
	}
	rep = encode(rep)
	if r.Method == http.MethodGet && rep.status == http.StatusOK {
		sum := sha256.Sum256(rep.body.([]byte))
		etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
		rep.set("ETag", etag)
		if matchETag(r.Header.Get("If-None-Match"), etag) {
			rep.status, rep.body = http.StatusNotModified, nil
		}
	}
	// A 304, GET /rate_limit and the refusal of a spent budget are free.
	free := rep.status == http.StatusNotModified || r.URL.Path == "/rate_limit" ||
		(authed && b.used >= b.limit && rep.status == s.o.ExhaustedStatus)
	if !free {
		b.used++
	}
	rep.set("X-RateLimit-Limit", strconv.Itoa(b.limit))
	rep.set("X-RateLimit-Remaining", strconv.Itoa(b.limit-b.used))
	rep.set("X-RateLimit-Used", strconv.Itoa(b.used))
	rep.set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
	rep.set("X-RateLimit-Resource", resource)
	rep.set("X-GitHub-Media-Type", "github.v3; format=json")
	rep.set("X-GitHub-Api-Version-Selected", "2022-11-28")
	if authed {
		rep.set("X-OAuth-Scopes", "admin:org_hook, gist, project, read:org, repo, workflow")
	}
	rep.set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	return rep, false
}

func encode(rep *reply) *reply {
	if rep.body == nil {
		return rep
	}
	if _, done := rep.body.([]byte); done {
		return rep
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rep.body); err != nil {
		return encode(errorf(http.StatusInternalServerError, "encode: %v", err))
	}
	rep.body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return rep
}

func (s *Server) authenticate(r *http.Request) (token, login string, ok bool) {
	h := r.Header.Get("Authorization")
	for _, p := range []string{"Bearer ", "bearer ", "token "} {
		if v, found := strings.CutPrefix(h, p); found {
			token = strings.TrimSpace(v)
			break
		}
	}
	if token == "" {
		host := r.RemoteAddr
		if i := strings.LastIndexByte(host, ':'); i > 0 {
			host = host[:i]
		}
		return "anonymous:" + host, "", false
	}
	login, ok = s.o.Authenticate(token)
	if !ok || s.st.users[strings.ToLower(login)] == nil {
		return "anonymous:" + token, "", false
	}
	return token, s.st.users[strings.ToLower(login)].login, true
}

// acceptable reports whether GitHub would serve JSON for this Accept.
func acceptable(h string) bool {
	if strings.TrimSpace(h) == "" {
		return true
	}
	for _, part := range strings.Split(h, ",") {
		mt, _, _ := strings.Cut(part, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
		switch {
		case mt == "*/*", mt == "application/*", mt == "application/json", mt == "application/vnd.github+json":
			return true
		case strings.HasPrefix(mt, "application/vnd.github."):
			return true
		}
	}
	return false
}

func matchETag(h, etag string) bool {
	if h == "" {
		return false
	}
	weak := strings.TrimPrefix(etag, "W/")
	for _, v := range strings.Split(h, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || v == etag || strings.TrimPrefix(v, "W/") == weak {
			return true
		}
	}
	return false
}

func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100]
	}
	return s
}

// decode reads the JSON object body into v, answering GitHub's 400s.
func (c *call) decode(v any) *reply {
	b := bytes.TrimSpace(c.body)
	if len(b) == 0 {
		b = []byte("{}")
	}
	if !json.Valid(b) {
		return errorf(http.StatusBadRequest, "Problems parsing JSON")
	}
	if b[0] != '{' {
		return errorf(http.StatusBadRequest, "Body should be a JSON object")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return errorf(http.StatusUnprocessableEntity, "Invalid request.\n\nFor '%s', the value is not a %s.", te.Field, te.Type)
		}
		return errorf(http.StatusBadRequest, "Problems parsing JSON")
	}
	return nil
}

// page answers one page of items with GitHub's Link header. With wrap, the
// page is an object {total_count, <wrap>: items}.
func (c *call) page(items []any, wrap string) *reply {
	return c.pageOf(items, wrap, 30, 100)
}

// perPage is the request's per_page, defPer if it has none, at most maxPer
// and Options.MaxPerPage.
func (c *call) perPage(defPer, maxPer int) int {
	maxPer = min(maxPer, c.s.o.MaxPerPage)
	if v, err := strconv.Atoi(c.r.URL.Query().Get("per_page")); err == nil && v > 0 {
		return min(v, maxPer)
	}
	return min(defPer, maxPer)
}

// pageOf is page with the endpoint's own default and largest per_page
// (Options.MaxPerPage may cap it further).
func (c *call) pageOf(items []any, wrap string, defPer, maxPer int) *reply {
	q := c.r.URL.Query()
	per := c.perPage(defPer, maxPer)
	pg := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		pg = v
	}
	last := max(1, (len(items)+per-1)/per)
	lo := min(len(items), (pg-1)*per)
	hi := min(len(items), lo+per)
	out := items[lo:hi]
	if out == nil {
		out = []any{}
	}
	var rep *reply
	if wrap == "" {
		rep = okBody(out)
	} else {
		m := M{"total_count": len(items), wrap: out}
		if wrap == "items" {
			m["incomplete_results"] = false
			m["search_type"] = "lexical"
		}
		rep = okBody(m)
	}
	if last > 1 {
		link := func(n int, rel string) string {
			q.Set("page", strconv.Itoa(n))
			q.Set("per_page", strconv.Itoa(per))
			return fmt.Sprintf(`<%s%s?%s>; rel="%s"`, c.base, c.r.URL.EscapedPath(), q.Encode(), rel)
		}
		var links []string
		if pg > 1 {
			links = append(links, link(min(pg-1, last), "prev"))
		}
		if pg < last {
			links = append(links, link(pg+1, "next"), link(last, "last"))
		}
		if pg > 1 {
			links = append(links, link(1, "first"))
		}
		rep.set("Link", strings.Join(links, ", "))
	}
	return rep
}

// route is one row of the routing table.
type route struct {
	name   Route
	method string
	segs   []string
	rest   bool // the last segment is {name...}: one or more segments
	h      func(*call) *reply
}

func newRoute(name Route, h func(*call) *reply) route {
	method, path, _ := strings.Cut(string(name), " ")
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	rt := route{name: name, method: method, segs: segs, h: h}
	if last := segs[len(segs)-1]; strings.HasSuffix(last, "...}") {
		rt.rest = true
		rt.segs[len(segs)-1] = strings.TrimSuffix(last, "...}") + "}"
	}
	return rt
}

// match finds the route for method and escaped path. Each segment is
// unescaped on its own, so %2F stays inside one parameter. A path under
// /repositories/{id} is matched as the repository's /repos/{owner}/{repo}
// path.
func (s *Server) match(method, escaped string) (*route, map[string]string) {
	if escaped == "" || escaped[0] != '/' {
		return nil, nil
	}
	raw := strings.Split(escaped[1:], "/")
	segs := make([]string, len(raw))
	for i, r := range raw {
		v, err := url.PathUnescape(r)
		if err != nil {
			return nil, nil
		}
		segs[i] = v
	}
	if len(segs) >= 2 && segs[0] == "repositories" {
		id, err := strconv.ParseInt(segs[1], 10, 64)
		if err != nil {
			return nil, nil
		}
		s.mu.Lock()
		rp := s.st.repoByID(id)
		s.mu.Unlock()
		if rp == nil {
			return nil, nil
		}
		segs = append([]string{"repos", rp.owner, rp.name}, segs[2:]...)
	}
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.method != method {
			continue
		}
		if p, ok := rt.matchSegs(segs); ok {
			return rt, p
		}
	}
	return nil, nil
}

func (rt *route) matchSegs(segs []string) (map[string]string, bool) {
	n := len(rt.segs)
	if len(segs) < n || (!rt.rest && len(segs) != n) {
		return nil, false
	}
	p := map[string]string{}
	for i, want := range rt.segs {
		got := segs[i]
		if got == "" {
			return nil, false
		}
		if strings.HasPrefix(want, "{") {
			key := want[1 : len(want)-1]
			if rt.rest && i == n-1 {
				rest := segs[i:]
				if slices.Contains(rest, "") {
					return nil, false
				}
				p[key] = strings.Join(rest, "/")
				return p, true
			}
			p[key] = got
			continue
		}
		if got != want {
			return nil, false
		}
	}
	return p, true
}
