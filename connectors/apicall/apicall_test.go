package apicall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

const (
	testToken  = "test-token"
	testBearer = "Bearer " + testToken
	mediaType  = DefaultCodeHostMediaType
)

// recorded is one request a fake API received.
type recorded struct {
	Method  string
	Path    string // escaped path as received
	Query   url.Values
	Header  http.Header
	Body    []byte
	BadAuth bool
}

// fakeAPI is an httptest server that records every request and answers
// with respond (200 {"ok":true} by default).
type fakeAPI struct {
	srv     *httptest.Server
	prefix  string
	mu      sync.Mutex
	reqs    []recorded
	respond func(w http.ResponseWriter, r *http.Request)
}

func newFakeAPI(t *testing.T, prefix string) *fakeAPI {
	t.Helper()
	f := &fakeAPI{prefix: prefix}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec := recorded{
			Method: r.Method,
			Path:   r.URL.EscapedPath(),
			Query:  r.URL.Query(),
			Header: r.Header.Clone(),
			Body:   body,
			// The only Authorization the API may see is the one the
			// platform's transport sets.
			BadAuth: !slices.Equal(r.Header.Values("Authorization"), []string{testBearer}),
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, rec)
		respond := f.respond
		f.mu.Unlock()
		if respond != nil {
			respond(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) host() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeAPI) setRespond(fn func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.respond = fn
}

func (f *fakeAPI) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func (f *fakeAPI) count() int { return len(f.requests()) }

// authTransport plays the platform's authorised transport: it adds the
// account's bearer token and refuses (and counts) any host it does not
// allow.
type authTransport struct {
	allowed map[string]bool
	base    http.RoundTripper
	mu      sync.Mutex
	refused int
}

func (a *authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !a.allowed[r.URL.Host] {
		a.mu.Lock()
		a.refused++
		a.mu.Unlock()
		return nil, errors.New("test transport: host not allowed")
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", testBearer)
	return a.base.RoundTrip(r2)
}

func (a *authTransport) refusedCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// harness is a pinned code-host/deployment/analytics-data API (under the
// path prefix /api), a pinned analytics-admin API (under /admin-api) and a
// canary that must never be reached.
type harness struct {
	api, admin, canary *fakeAPI
	rt                 *authTransport
	env                connectors.Env
}

// newHarness builds the fakes. With reachableCanary the transport would
// let a request through to the canary, so that a followed redirect would
// show; the canary must still get nothing.
func newHarness(t *testing.T, reachableCanary bool) *harness {
	t.Helper()
	h := &harness{
		api:    newFakeAPI(t, "/api"),
		admin:  newFakeAPI(t, "/admin-api"),
		canary: newFakeAPI(t, ""),
	}
	h.rt = &authTransport{
		allowed: map[string]bool{h.api.host(): true, h.admin.host(): true},
		base:    h.api.srv.Client().Transport,
	}
	if reachableCanary {
		h.rt.allowed[h.canary.host()] = true
	}
	h.env = connectors.Env{
		HTTP:    &http.Client{Transport: h.rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Account: connectors.AccountInfo{ID: "acc_1", Metadata: map[string]string{}},
	}
	t.Cleanup(func() {
		if n := h.canary.count(); n != 0 {
			t.Errorf("the canary received %d requests; want 0", n)
		}
		if n := h.rt.refusedCount(); n != 0 {
			t.Errorf("the transport was asked for another host %d times; want 0", n)
		}
		for _, f := range []*fakeAPI{h.api, h.admin} {
			for _, r := range f.requests() {
				if r.BadAuth {
					t.Errorf("%s %s arrived with Authorization %q; want only the platform's", r.Method, r.Path, r.Header.Values("Authorization"))
				}
				if !strings.HasPrefix(r.Path, f.prefix+"/") {
					t.Errorf("%s arrived outside the base path %s", r.Path, f.prefix)
				}
			}
		}
	})
	return h
}

func (h *harness) codeHost() connectors.Step {
	return CodeHost(CodeHostOptions{BaseURL: h.api.srv.URL + "/api/"})
}

func (h *harness) deploy() connectors.Step {
	return Deploy(DeployOptions{BaseURL: h.api.srv.URL + "/api"})
}

func (h *harness) analytics() connectors.Step {
	return Analytics(AnalyticsOptions{DataBaseURL: h.api.srv.URL + "/api/", AdminBaseURL: h.admin.srv.URL + "/admin-api"})
}

func (h *harness) sent() int { return h.api.count() + h.admin.count() + h.canary.count() }

// run marshals input, runs step and checks that any error is a
// *connectors.Error without the token.
func run(t *testing.T, step connectors.Step, env connectors.Env, input any) (Output, *connectors.Error) {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	out, err := step.Run(context.Background(), env, raw)
	if err != nil {
		var ce *connectors.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: error %T %v; want *connectors.Error", step.ID, err, err)
		}
		if strings.Contains(err.Error(), testToken) {
			t.Fatalf("%s: error contains the token: %v", step.ID, err)
		}
		if out != nil {
			t.Fatalf("%s: output %v with error %v", step.ID, out, err)
		}
		return Output{}, ce
	}
	o, ok := out.(Output)
	if !ok {
		t.Fatalf("%s: output %T; want Output", step.ID, out)
	}
	if _, err := json.Marshal(o); err != nil {
		t.Fatalf("%s: output does not marshal: %v", step.ID, err)
	}
	return o, nil
}

func chInput(method, endpoint string) map[string]any {
	return map[string]any{"method": method, "endpoint": endpoint, "headers": map[string]string{"accept": mediaType}}
}

func wantCode(t *testing.T, what string, err *connectors.Error, code connectors.ErrorCode) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error; want %s", what, code)
	}
	if err.Code != code {
		t.Fatalf("%s: code %s (%v); want %s", what, err.Code, err, code)
	}
}

// hostileEndpoints are refused by every step.
func hostileEndpoints() []string {
	return []string{
		"https://evil.test/x",
		"//evil.test/x",
		`/\evil.test`,
		`\\evil.test`,
		"/repos/../../admin",
		"/repos/%2e%2e/%2e%2e/admin",
		"/%2E%2E/x",
		"/.%2e/x",
		"/%252e%252e/x",
		"/repos/o/r%2F..%2F..%2Fadmin",
		"@evil.test",
		"/x@evil.test",
		"/x%0d%0aHost:evil",
		"/x%0D%0AHost:evil",
		"/x\r\nHost: evil",
		"http://169.254.169.254/latest",
		"/[::1]/x",
		"",
		"#frag",
		"/" + strings.Repeat("a", 4999),
		// More of the same families.
		"HTTPS://evil.test/x",
		"javascript:alert(1)",
		"///evil.test/x",
		"/x/..",
		"/x/.",
		"/./x",
		"/x/%2e",
		"/x/..;/admin",
		"/x/%252E%252E/admin",
		"/x/%25252e%25252e/admin",
		"/x%2F%2Fevil.test",
		"/x%5cevil.test",
		"/x%255cevil.test",
		"/x%40evil.test",
		"/x?y=1#frag",
		"/x?y=%0d%0aHost:evil",
		"/x?y=%250a",
		"/x\x00",
		"/x\x7f",
		"/x\tHost",
		"/ x",
		"/repos/{owner}/{repo}",
		"/x%zz",
		"/x%2",
		"?x=1",
		"x/y",
		"/x?a=1;b=2",
		"/\u00e9",
		"/x/%c0%ae%c0%ae/admin",
		"/x/%25c0%25ae/admin",
	}
}

// canaryEndpoints aim straight at the canary.
func canaryEndpoints(h *harness) []string {
	return []string{
		h.canary.srv.URL + "/x",
		"//" + h.canary.host() + "/x",
		`/\` + h.canary.host() + "/x",
		"@" + h.canary.host() + "/x",
		"/x@" + h.canary.host(),
	}
}

func TestHostileEndpointsAreRefusedBeforeAnyRequest(t *testing.T) {
	h := newHarness(t, true)
	h.env.Account.Metadata["team_id"] = "team_1"
	endpoints := append(hostileEndpoints(), canaryEndpoints(h)...)
	for _, e := range endpoints {
		name := fmt.Sprintf("%.40q", e)
		t.Run(name, func(t *testing.T) {
			_, err := run(t, h.codeHost(), h.env, chInput("GET", e))
			wantCode(t, "codehost", err, connectors.CodeValidation)

			_, err = run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": e})
			wantCode(t, "deploy", err, connectors.CodeValidation)

			for _, api := range []string{"data", "admin"} {
				_, err = run(t, h.analytics(), h.env, map[string]any{"method": "GET", "api": api, "endpoint": e})
				wantCode(t, "analytics "+api, err, connectors.CodeValidation)
			}
			if strings.HasPrefix(e, "/") {
				// Behind a valid version segment, so that Resolve, not
				// the version check, must refuse.
				_, err = run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": "/v13" + e})
				wantCode(t, "deploy /v13"+e, err, connectors.CodeValidation)
				_, err = run(t, h.analytics(), h.env, map[string]any{"method": "GET", "api": "data", "endpoint": "v1beta" + e})
				wantCode(t, "analytics v1beta"+e, err, connectors.CodeValidation)
				_, err = run(t, h.codeHost(), h.env, chInput("GET", "/repos/o/r"+e))
				wantCode(t, "codehost /repos/o/r"+e, err, connectors.CodeValidation)
			}
			if n := h.sent(); n != 0 {
				t.Fatalf("%d requests were sent; want 0", n)
			}
		})
	}
}

func TestResolveRefusesHostileEndpoints(t *testing.T) {
	for _, b := range []string{"https://api.github.com", "http://127.0.0.1:1234/api/"} {
		base, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range hostileEndpoints() {
			for _, allowSlash := range []bool{false, true} {
				u, err := resolve(base, e, allowSlash)
				if err == nil {
					t.Errorf("resolve(%s, %q, %v) = %s; want a refusal", b, e, allowSlash, u)
					continue
				}
				var ce *connectors.Error
				if !errors.As(err, &ce) || ce.Code != connectors.CodeValidation {
					t.Errorf("resolve(%s, %q): %v; want CodeValidation", b, e, err)
				}
			}
		}
	}
}

func TestResolveJoinsOntoTheBase(t *testing.T) {
	tests := []struct {
		base, endpoint, want string
		allowSlash           bool
	}{
		{"https://api.github.com", "/repos/o/r/issues", "https://api.github.com/repos/o/r/issues", false},
		{"https://api.github.com/", "/repos/o/r/issues?state=open&per_page=2", "https://api.github.com/repos/o/r/issues?per_page=2&state=open", false},
		{"http://127.0.0.1:1234/api/", "/x", "http://127.0.0.1:1234/api/x", false},
		{"http://127.0.0.1:1234/api", "/x/", "http://127.0.0.1:1234/api/x/", false},
		{"http://127.0.0.1:1234/api", "/", "http://127.0.0.1:1234/api/", false},
		{"https://analyticsdata.googleapis.com", "/v1beta/properties/123:runReport", "https://analyticsdata.googleapis.com/v1beta/properties/123:runReport", false},
		{"https://analyticsadmin.googleapis.com", "/v1beta/properties?filter=parent:accounts/1", "https://analyticsadmin.googleapis.com/v1beta/properties?filter=parent%3Aaccounts%2F1", false},
		{"https://api.github.com", "/repos/o/r/contents/docs/a%20b.md", "https://api.github.com/repos/o/r/contents/docs/a%20b.md", false},
		{"https://api.github.com", "/repos/o/r/labels/type%2Fbug", "https://api.github.com/repos/o/r/labels/type%2Fbug", true},
		{"https://api.github.com", "/search/issues?q=a+b%20c", "https://api.github.com/search/issues?q=a+b+c", false},
		{"https://api.github.com", "/x?q=%C3%A9&q=\u00e9", "https://api.github.com/x?q=%C3%A9&q=%C3%A9", false},
		{"https://api.github.com", "/x?", "https://api.github.com/x", false},
		{"https://api.github.com", "/repos/o/r/.github", "https://api.github.com/repos/o/r/.github", false},
		{"https://api.github.com", "/x/a..b/...x", "https://api.github.com/x/a..b/...x", false},
	}
	for _, tt := range tests {
		base, err := url.Parse(tt.base)
		if err != nil {
			t.Fatal(err)
		}
		u, err := resolve(base, tt.endpoint, tt.allowSlash)
		if err != nil {
			t.Errorf("resolve(%s, %q): %v", tt.base, tt.endpoint, err)
			continue
		}
		if got := u.String(); got != tt.want {
			t.Errorf("resolve(%s, %q) = %s; want %s", tt.base, tt.endpoint, got, tt.want)
		}
	}
	base, _ := url.Parse("https://api.github.com")
	if _, err := Resolve(base, "/repos/o/r/labels/type%2Fbug"); err == nil {
		t.Error("Resolve accepted %2F; want a refusal")
	}
}

func TestResolveRefusesBadBases(t *testing.T) {
	for _, b := range []string{"", "api.github.com", "ftp://api.github.com", "https://user:pw@api.github.com", "https://api.github.com?x=1", "https://api.github.com#x", "https:///x", "https://h/a/../b"} {
		base, err := url.Parse(b)
		if err != nil {
			continue
		}
		if u, err := Resolve(base, "/x"); err == nil {
			t.Errorf("Resolve(%q) = %s; want an error", b, u)
		}
	}
	if _, err := Resolve(nil, "/x"); err == nil {
		t.Error("Resolve(nil) succeeded")
	}
	h := newHarness(t, false)
	_, err := run(t, CodeHost(CodeHostOptions{BaseURL: "https://u:p@api.github.com"}), h.env, chInput("GET", "/x"))
	wantCode(t, "misconfigured base", err, connectors.CodeUpstream)
}

func TestHeadersAreAllowListed(t *testing.T) {
	h := newHarness(t, false)
	bad := []struct{ name, value string }{
		{"Authorization", "Bearer stolen"},
		{"authorization", "Bearer stolen"},
		{"AUTHORIZATION", "Bearer stolen"},
		{"Cookie", "a=b"},
		{"Host", "evil.test"},
		{"Proxy-Authorization", "Basic eA=="},
		{"Proxy-Foo", "x"},
		{"Transfer-Encoding", "chunked"},
		{"Connection", "close"},
		{"Keep-Alive", "timeout=5"},
		{"TE", "trailers"},
		{"Trailer", "X"},
		{"Upgrade", "websocket"},
		{"Content-Length", "0"},
		{"Forwarded", "for=1.2.3.4"},
		{"X-Forwarded-For", "1.2.3.4"},
		{"x-forwarded-host", "evil.test"},
		{"X-HTTP-Method-Override", "DELETE"},
		{"X-Original-URL", "/admin"},
		{"X-Custom", "a\r\nHost: evil.test"},
		{"X-Custom", "a\nb"},
		{"X-Custom", "a\x00b"},
		{"X Custom", "x"},
		{"X-Custom:", "x"},
		{"X_Custom", "x"},
		{"", "x"},
	}
	for _, b := range bad {
		headers := map[string]string{"accept": mediaType, b.name: b.value}
		_, err := run(t, h.codeHost(), h.env, map[string]any{"method": "GET", "endpoint": "/x", "headers": headers})
		wantCode(t, "codehost header "+b.name, err, connectors.CodeValidation)
		if len(b.value) > 3 && strings.Contains(err.Message, b.value) {
			t.Errorf("the refusal of %s echoes its value: %s", b.name, err.Message)
		}
		if validHeaderName(b.name) && !strings.Contains(err.Message, b.name) {
			t.Errorf("the refusal does not name %q: %s", b.name, err.Message)
		}
		delete(headers, "accept")
		_, err = run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": "/v13/deployments", "headers": headers})
		wantCode(t, "deploy header "+b.name, err, connectors.CodeValidation)
	}
	_, err := run(t, h.codeHost(), h.env, map[string]any{"method": "GET", "endpoint": "/x", "headers": map[string]string{"accept": mediaType, "Accept": mediaType}})
	wantCode(t, "duplicate accept", err, connectors.CodeValidation)
	if !strings.Contains(h.codeHost().Description, mediaType) {
		t.Error("the description does not name the media type")
	}
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}

	// Allowed headers arrive; Authorization is only the platform's.
	headers := map[string]string{
		"Accept":               mediaType,
		"If-None-Match":        `"abc"`,
		"X-GitHub-Api-Version": "2022-11-28",
		"X-Custom-1":           "v",
	}
	out, err := run(t, h.codeHost(), h.env, map[string]any{"method": "GET", "endpoint": "/rate_limit", "headers": headers})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != 200 {
		t.Fatalf("status %d", out.Status)
	}
	r := h.api.requests()[0]
	for name, v := range headers {
		if got := r.Header.Get(name); got != v {
			t.Errorf("%s = %q; want %q", name, got, v)
		}
	}
	if got := r.Header.Values("Authorization"); !slices.Equal(got, []string{testBearer}) {
		t.Errorf("Authorization = %q", got)
	}
	if r.Header.Get("User-Agent") == "" {
		t.Error("no User-Agent")
	}
}

func TestMethodAllowList(t *testing.T) {
	h := newHarness(t, false)
	for _, m := range []string{"", "get", "HEAD", "OPTIONS", "TRACE", "CONNECT", "GET ", "GET\r\n"} {
		_, err := run(t, h.codeHost(), h.env, chInput(m, "/x"))
		wantCode(t, "codehost "+m, err, connectors.CodeValidation)
		_, err = run(t, h.deploy(), h.env, map[string]any{"method": m, "path": "/v1/x"})
		wantCode(t, "deploy "+m, err, connectors.CodeValidation)
		_, err = run(t, h.analytics(), h.env, map[string]any{"method": m, "api": "data", "endpoint": "v1beta/x"})
		wantCode(t, "analytics "+m, err, connectors.CodeValidation)
	}
	_, err := run(t, h.analytics(), h.env, map[string]any{"method": "PUT", "api": "data", "endpoint": "v1beta/x"})
	wantCode(t, "analytics PUT", err, connectors.CodeValidation)
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}
}

func TestCodeHostAccept(t *testing.T) {
	h := newHarness(t, false)
	for _, headers := range []map[string]string{
		nil,
		{},
		{"X-GitHub-Api-Version": "2022-11-28"},
		{"accept": "application/json"},
		{"accept": "application/vnd.github+json"},
		{"accept": " " + mediaType},
		{"accept": strings.ToUpper(mediaType)},
	} {
		_, err := run(t, h.codeHost(), h.env, map[string]any{"method": "GET", "endpoint": "/x", "headers": headers})
		wantCode(t, fmt.Sprint(headers), err, connectors.CodeValidation)
		for _, want := range []string{`"accept"`, mediaType, "headers"} {
			if !strings.Contains(err.Message, want) {
				t.Errorf("%v: message %q does not contain %q", headers, err.Message, want)
			}
		}
		if strings.Contains(err.Message, "response_body") {
			t.Errorf("message mentions response_body: %s", err.Message)
		}
	}
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}
	for _, name := range []string{"accept", "Accept", "ACCEPT"} {
		out, err := run(t, h.codeHost(), h.env, map[string]any{"method": "GET", "endpoint": "/x", "headers": map[string]string{name: mediaType}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.Status != 200 {
			t.Fatalf("%s: status %d", name, out.Status)
		}
	}
	for _, r := range h.api.requests() {
		if got := r.Header.Values("Accept"); !slices.Equal(got, []string{mediaType}) {
			t.Errorf("Accept = %q", got)
		}
	}

	// A custom media type.
	step := CodeHost(CodeHostOptions{BaseURL: h.api.srv.URL + "/api", MediaType: "application/vnd.github+json"})
	if _, err := run(t, step, h.env, chInput("GET", "/x")); err == nil {
		t.Fatal("the default media type was accepted by a step configured with another")
	}
	if _, err := run(t, step, h.env, map[string]any{"method": "GET", "endpoint": "/x", "headers": map[string]string{"Accept": "application/vnd.github+json"}}); err != nil {
		t.Fatal(err)
	}
}

func TestCodeHostGetWithQuery(t *testing.T) {
	h := newHarness(t, false)
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Type", "application/json; charset=utf-8")
		hd.Set("ETag", `"e1"`)
		hd.Set("Link", `<`+h.api.srv.URL+`/api/repos/o/r/issues?page=2>; rel="next"`)
		hd.Set("X-RateLimit-Limit", "5000")
		hd.Set("X-RateLimit-Remaining", "4999")
		hd.Set("X-RateLimit-Reset", "1700000000")
		hd.Set("X-RateLimit-Used", "1")
		hd.Set("X-RateLimit-Resource", "core")
		hd.Set("X-GitHub-Request-Id", "ABCD")
		hd.Add("Set-Cookie", "session=secret; HttpOnly")
		hd.Set("Location", "https://elsewhere.test/x")
		hd.Set("X-OAuth-Scopes", "repo")
		hd.Set("Server", "fake")
		_, _ = io.WriteString(w, `[{"number":1,"big":12345678901234567890}]`)
	})
	out, err := run(t, h.codeHost(), h.env, chInput("GET", "/repos/o/r/issues?state=open&per_page=2"))
	if err != nil {
		t.Fatal(err)
	}
	r := h.api.requests()[0]
	if r.Method != "GET" || r.Path != "/api/repos/o/r/issues" || r.Query.Get("state") != "open" || r.Query.Get("per_page") != "2" {
		t.Fatalf("got %s %s %v", r.Method, r.Path, r.Query)
	}
	if len(r.Body) != 0 {
		t.Errorf("GET carried a body %q", r.Body)
	}
	if out.Status != 200 {
		t.Fatalf("status %d", out.Status)
	}
	raw, ok := out.Body.(json.RawMessage)
	if !ok || !strings.Contains(string(raw), "12345678901234567890") {
		t.Fatalf("body %T %s; want the JSON as sent", out.Body, out.Body)
	}
	want := map[string]string{
		"content-type":          "application/json; charset=utf-8",
		"etag":                  `"e1"`,
		"link":                  `<` + h.api.srv.URL + `/api/repos/o/r/issues?page=2>; rel="next"`,
		"x-ratelimit-limit":     "5000",
		"x-ratelimit-remaining": "4999",
		"x-ratelimit-reset":     "1700000000",
		"x-ratelimit-used":      "1",
		"x-ratelimit-resource":  "core",
		"x-github-request-id":   "ABCD",
	}
	if len(out.Headers) != len(want) {
		t.Errorf("headers %v; want %v", out.Headers, want)
	}
	for k, v := range want {
		if out.Headers[k] != v {
			t.Errorf("header %s = %q; want %q", k, out.Headers[k], v)
		}
	}
	b, _ := json.Marshal(out)
	if strings.Contains(strings.ToLower(string(b)), "set-cookie") || strings.Contains(string(b), "secret") {
		t.Errorf("the output carries the cookie: %s", b)
	}
}

func TestCodeHostPostJSONBody(t *testing.T) {
	h := newHarness(t, false)
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"number":7}`)
	})
	in := chInput("POST", "/repos/o/r/issues")
	in["body"] = map[string]any{"title": "Hello", "labels": []string{"bug"}}
	out, err := run(t, h.codeHost(), h.env, in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != http.StatusCreated {
		t.Fatalf("status %d", out.Status)
	}
	r := h.api.requests()[0]
	if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(r.Body, &got); err != nil || got["title"] != "Hello" {
		t.Fatalf("body %s (%v)", r.Body, err)
	}

	// Bodies that are refused.
	for _, body := range []any{[]int{1}, "text", 3} {
		in["body"] = body
		_, err := run(t, h.codeHost(), h.env, in)
		wantCode(t, fmt.Sprint(body), err, connectors.CodeValidation)
	}
	get := chInput("GET", "/x")
	get["body"] = map[string]any{"a": 1}
	_, err = run(t, h.codeHost(), h.env, get)
	wantCode(t, "GET with body", err, connectors.CodeValidation)
	xml := chInput("POST", "/x")
	xml["headers"] = map[string]string{"accept": mediaType, "Content-Type": "text/xml"}
	xml["body"] = map[string]any{"a": 1}
	_, err = run(t, h.codeHost(), h.env, xml)
	wantCode(t, "non-JSON content type", err, connectors.CodeValidation)
	if n := h.api.count(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

func TestUpstreamStatusesAreOutput(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct {
		status      int
		contentType string
		body        string
		wantBody    any
	}{
		{404, "application/json", `{"message":"Not Found"}`, json.RawMessage(`{"message":"Not Found"}`)},
		{422, "application/json", `{"message":"Validation Failed"}`, json.RawMessage(`{"message":"Validation Failed"}`)},
		{403, "application/json", `{"message":"Resource not accessible"}`, json.RawMessage(`{"message":"Resource not accessible"}`)},
		{500, "text/plain", "boom", "boom"},
		{200, "application/json", "not json", "not json"},
		{204, "", "", nil},
		{304, "", "", nil},
	} {
		h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
			if tc.contentType != "" {
				w.Header().Set("Content-Type", tc.contentType)
			}
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		})
		out, err := run(t, h.codeHost(), h.env, chInput("GET", "/repos/o/r"))
		if err != nil {
			t.Fatalf("%d: %v", tc.status, err)
		}
		if out.Status != tc.status {
			t.Fatalf("status %d; want %d", out.Status, tc.status)
		}
		gotJSON, _ := json.Marshal(out.Body)
		wantJSON, _ := json.Marshal(tc.wantBody)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("%d: body %s; want %s", tc.status, gotJSON, wantJSON)
		}
	}
}

func TestRateLimits(t *testing.T) {
	h := newHarness(t, false)
	reset := time.Now().Add(120 * time.Second).Unix()
	for _, tc := range []struct {
		name     string
		step     connectors.Step
		input    map[string]any
		status   int
		headers  map[string]string
		body     string
		min, max time.Duration
	}{
		{"429 retry-after", h.codeHost(), chInput("GET", "/x"), 429, map[string]string{"Retry-After": "30"}, "", 30 * time.Second, 30 * time.Second},
		{"deploy 429", h.deploy(), map[string]any{"method": "GET", "path": "/v6/deployments"}, 429, map[string]string{"Retry-After": "3"}, `{"error":{"code":"rate_limited"}}`, 3 * time.Second, 3 * time.Second},
		{"analytics 429 no header", h.analytics(), map[string]any{"method": "POST", "api": "data", "endpoint": "v1beta/properties/1:runReport", "body": map[string]any{}}, 429, nil, `{"error":{"status":"RESOURCE_EXHAUSTED"}}`, defaultRetryAfter, defaultRetryAfter},
		{"github 403 remaining 0", h.codeHost(), chInput("GET", "/x"), 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(reset, 10)}, `{"message":"API rate limit exceeded"}`, 100 * time.Second, 121 * time.Second},
		{"github 403 secondary", h.codeHost(), chInput("GET", "/x"), 403, nil, `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`, defaultRetryAfter, defaultRetryAfter},
		{"github 403 retry-after", h.codeHost(), chInput("GET", "/x"), 403, map[string]string{"Retry-After": "7"}, "", 7 * time.Second, 7 * time.Second},
	} {
		h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
			for k, v := range tc.headers {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		})
		_, err := run(t, tc.step, h.env, tc.input)
		wantCode(t, tc.name, err, connectors.CodeRateLimited)
		if !err.Retryable || err.Status != tc.status {
			t.Errorf("%s: retryable %v status %d", tc.name, err.Retryable, err.Status)
		}
		if err.RetryAfter < tc.min || err.RetryAfter > tc.max {
			t.Errorf("%s: RetryAfter %s; want within [%s, %s]", tc.name, err.RetryAfter, tc.min, tc.max)
		}
	}

	// A 403 with remaining quota is the caller's answer; a deployment 403
	// with remaining 0 is not a GitHub rate limit.
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "10")
		w.WriteHeader(403)
	})
	out, err := run(t, h.codeHost(), h.env, chInput("GET", "/x"))
	if err != nil || out.Status != 403 {
		t.Fatalf("403 with quota: %v %d", err, out.Status)
	}
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.WriteHeader(403)
	})
	out, err = run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": "/v6/deployments"})
	if err != nil || out.Status != 403 {
		t.Fatalf("deploy 403: %v %d", err, out.Status)
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"12"}}, 12 * time.Second},
		{http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{http.Header{"Retry-After": {"0"}}, time.Second},
		{http.Header{"Retry-After": {"99999999999"}}, maxRetryAfter},
		{http.Header{"Retry-After": {"soon"}}, defaultRetryAfter},
		{http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(5*time.Minute).Unix(), 10)}}, 5 * time.Minute},
		{http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)}}, time.Second},
		{http.Header{}, defaultRetryAfter},
	} {
		if got := retryAfter(tc.h, now); got != tc.want {
			t.Errorf("retryAfter(%v) = %s; want %s", tc.h, got, tc.want)
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	h := newHarness(t, true)
	// The account's client would follow redirects; the step must not.
	h.env.HTTP = &http.Client{Transport: h.rt}
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/same") {
			w.Header().Set("Location", "/api/repos/o/r2")
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		http.Redirect(w, r, h.canary.srv.URL+"/steal", http.StatusFound)
	})
	for _, step := range []struct {
		s  connectors.Step
		in map[string]any
	}{
		{h.codeHost(), chInput("GET", "/repos/o/r")},
		{h.deploy(), map[string]any{"method": "POST", "path": "/v13/deployments", "body": map[string]any{"name": "x"}}},
		{h.analytics(), map[string]any{"method": "GET", "api": "data", "endpoint": "v1beta/properties/1/metadata"}},
	} {
		out, err := run(t, step.s, h.env, step.in)
		if err != nil {
			t.Fatalf("%s: %v", step.s.ID, err)
		}
		if out.Status != http.StatusFound {
			t.Fatalf("%s: status %d; want 302", step.s.ID, out.Status)
		}
		if _, ok := out.Headers["location"]; ok {
			t.Errorf("%s: the off-host Location was passed back: %v", step.s.ID, out.Headers)
		}
	}
	out, err := run(t, h.codeHost(), h.env, chInput("GET", "/repos/o/r/same"))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != http.StatusMovedPermanently || out.Headers["location"] != "/api/repos/o/r2" {
		t.Fatalf("on-host redirect: %d %v", out.Status, out.Headers)
	}
	if n := h.canary.count(); n != 0 {
		t.Fatalf("the canary got %d requests", n)
	}
}

func TestLocationFilter(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:1234/api/")
	req, _ := url.Parse("http://127.0.0.1:1234/api/repos/o/r")
	for loc, want := range map[string]bool{
		"/api/repos/o/r2":                       true,
		"r2":                                    true,
		"http://127.0.0.1:1234/api/x":           true,
		"https://127.0.0.1:1234/api/x":          false,
		"http://127.0.0.1:9999/api/x":           false,
		"//evil.test/api/x":                     false,
		"/other":                                false,
		"/api/../other":                         false,
		"http://u@127.0.0.1:1234/api/x":         false,
		"/\\evil.test":                          false,
		"https://evil.test/x":                   false,
		"http://127.0.0.1:1234.evil.test/api/x": false,
	} {
		if got := onPinnedHost(loc, req, base, "/api"); got != want {
			t.Errorf("onPinnedHost(%q) = %v; want %v", loc, got, want)
		}
	}
}

func TestResponseTooLarge(t *testing.T) {
	h := newHarness(t, false)
	h.api.setRespond(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := strings.Repeat("x", 1<<20)
		for range MaxResponseBytes >> 20 {
			_, _ = io.WriteString(w, chunk)
		}
		_, _ = io.WriteString(w, "y")
	})
	_, err := run(t, h.codeHost(), h.env, chInput("GET", "/x"))
	wantCode(t, "large", err, connectors.CodeUpstream)
	if !strings.Contains(err.Message, "response too large") {
		t.Errorf("message %q", err.Message)
	}
}

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused while holding " + testBearer)}
}

func TestNetworkErrors(t *testing.T) {
	h := newHarness(t, false)
	env := h.env
	env.HTTP = &http.Client{Transport: failingTransport{}}
	_, err := run(t, h.codeHost(), env, chInput("GET", "/x"))
	wantCode(t, "network", err, connectors.CodeUpstream)
	if !err.Retryable {
		t.Error("a network error is not retryable")
	}
	env.HTTP = nil
	_, err = run(t, h.codeHost(), env, chInput("GET", "/x"))
	wantCode(t, "no client", err, connectors.CodeUpstream)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	raw, _ := json.Marshal(chInput("GET", "/x"))
	_, e := h.codeHost().Run(ctx, h.env, raw)
	var ce *connectors.Error
	if !errors.As(e, &ce) || ce.Code != connectors.CodeUpstream || !ce.Retryable {
		t.Fatalf("cancelled: %v", e)
	}
}

func TestCodeHostEncodedSlash(t *testing.T) {
	h := newHarness(t, false)
	if _, err := run(t, h.codeHost(), h.env, chInput("DELETE", "/repos/o/r/issues/1/labels/type%2Fbug")); err != nil {
		t.Fatal(err)
	}
	if got := h.api.requests()[0].Path; got != "/api/repos/o/r/issues/1/labels/type%2Fbug" {
		t.Fatalf("path %s", got)
	}
	_, err := run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": "/v9/projects/a%2Fb"})
	wantCode(t, "deploy %2F", err, connectors.CodeValidation)
	_, err = run(t, h.analytics(), h.env, map[string]any{"method": "GET", "api": "admin", "endpoint": "v1beta/properties/1%2F2"})
	wantCode(t, "analytics %2F", err, connectors.CodeValidation)
	if n := h.sent(); n != 1 {
		t.Fatalf("%d requests; want 1", n)
	}
}

func TestBaseWithoutPrefix(t *testing.T) {
	h := newHarness(t, false)
	h.api.prefix = ""
	step := CodeHost(CodeHostOptions{BaseURL: h.api.srv.URL})
	if _, err := run(t, step, h.env, chInput("GET", "/rate_limit")); err != nil {
		t.Fatal(err)
	}
	if got := h.api.requests()[0].Path; got != "/rate_limit" {
		t.Fatalf("path %s", got)
	}
}

func TestDeployVersionedPath(t *testing.T) {
	h := newHarness(t, false)
	for _, p := range []string{"/deployments", "/deployments/v13", "/v/x", "/V13/deployments", "/v13x/deployments", "/", "/?teamId=1"} {
		_, err := run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": p})
		wantCode(t, p, err, connectors.CodeValidation)
		if !strings.Contains(err.Message, "/v13/deployments") {
			t.Errorf("%s: message %q does not show the fix", p, err.Message)
		}
	}
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}
	for _, p := range []string{"/v13/deployments", "/v2/teams", "/v13", "/v6/deployments?limit=5"} {
		if _, err := run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": p}); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func TestDeployTeamID(t *testing.T) {
	h := newHarness(t, false)
	get := func(path string) recorded {
		t.Helper()
		before := h.api.count()
		if _, err := run(t, h.deploy(), h.env, map[string]any{"method": "GET", "path": path, "headers": map[string]string{"X-Custom": "1"}}); err != nil {
			t.Fatal(err)
		}
		reqs := h.api.requests()
		if len(reqs) != before+1 {
			t.Fatalf("%d requests", len(reqs))
		}
		return reqs[before]
	}
	r := get("/v6/deployments?limit=5")
	if r.Query.Has("teamId") || r.Query.Get("limit") != "5" || r.Header.Get("X-Custom") != "1" {
		t.Fatalf("personal account: %v %v", r.Query, r.Header)
	}
	h.env.Account.Metadata["team_id"] = "team_abc"
	r = get("/v6/deployments?limit=5")
	if got := r.Query["teamId"]; !slices.Equal(got, []string{"team_abc"}) || r.Query.Get("limit") != "5" {
		t.Fatalf("team account: %v", r.Query)
	}
	r = get("/v13/deployments/dpl_1")
	if r.Path != "/api/v13/deployments/dpl_1" || r.Query.Get("teamId") != "team_abc" {
		t.Fatalf("team account: %s %v", r.Path, r.Query)
	}
	r = get("/v6/deployments?teamId=team_given")
	if got := r.Query["teamId"]; !slices.Equal(got, []string{"team_given"}) {
		t.Fatalf("caller's teamId: %v", got)
	}
	// POST with a body.
	if _, err := run(t, h.deploy(), h.env, map[string]any{"method": "POST", "path": "/v13/deployments", "body": map[string]any{"name": "site"}}); err != nil {
		t.Fatal(err)
	}
	last := h.api.requests()[h.api.count()-1]
	if last.Method != "POST" || last.Header.Get("Content-Type") != "application/json" || string(last.Body) != `{"name":"site"}` {
		t.Fatalf("POST: %s %q %s", last.Method, last.Header.Get("Content-Type"), last.Body)
	}
}

func TestAnalyticsEndpoint(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct {
		api, endpoint string
		mentions      string
	}{
		{"data", "/v1beta/properties/1:runReport", "must not start"},
		{"data", "properties/1:runReport", "version"},
		{"admin", "properties", "version"},
		{"admin", "beta/properties", "version"},
		{"data", "", "empty"},
		{"data", "https://analyticsdata.googleapis.com/v1beta/x", "absolute"},
		{"other", "v1beta/properties", "api"},
		{"", "v1beta/properties/1:runReprot", "set api"},
		{"", "v1beta/widgets", "set api"},
		{"admin", "v1beta/properties/1:runReport", "contradicts"},
		{"admin", "v1beta/properties/1/metadata", "Data API"},
		{"data", "v1beta/properties/1/keyEvents", "contradicts"},
		{"data", "v1beta/accountSummaries", "Admin API"},
		{"data", "v1beta/../v1/x", ""},
		{"data", "v1beta//x", ""},
	} {
		_, err := run(t, h.analytics(), h.env, map[string]any{"method": "GET", "api": tc.api, "endpoint": tc.endpoint})
		wantCode(t, tc.api+" "+tc.endpoint, err, connectors.CodeValidation)
		if !strings.Contains(err.Message, tc.mentions) {
			t.Errorf("%q: message %q does not mention %q", tc.endpoint, err.Message, tc.mentions)
		}
	}
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}

	body := map[string]any{"dateRanges": []any{map[string]string{"startDate": "30daysAgo", "endDate": "today"}}, "metrics": []any{map[string]string{"name": "sessions"}}}
	if _, err := run(t, h.analytics(), h.env, map[string]any{"method": "POST", "api": "data", "endpoint": "v1beta/properties/123:runReport", "body": body}); err != nil {
		t.Fatal(err)
	}
	if h.api.count() != 1 || h.admin.count() != 0 {
		t.Fatalf("data call: api %d admin %d", h.api.count(), h.admin.count())
	}
	r := h.api.requests()[0]
	if r.Method != "POST" || r.Path != "/api/v1beta/properties/123:runReport" || r.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(r.Body), "30daysAgo") {
		t.Fatalf("data call: %s %s %q %s", r.Method, r.Path, r.Header.Get("Content-Type"), r.Body)
	}

	if _, err := run(t, h.analytics(), h.env, map[string]any{"method": "GET", "api": "admin", "endpoint": "v1beta/properties?filter=parent:accounts/42"}); err != nil {
		t.Fatal(err)
	}
	if h.api.count() != 1 || h.admin.count() != 1 {
		t.Fatalf("admin call: api %d admin %d", h.api.count(), h.admin.count())
	}
	r = h.admin.requests()[0]
	if r.Path != "/admin-api/v1beta/properties" || r.Query.Get("filter") != "parent:accounts/42" {
		t.Fatalf("admin call: %s %v", r.Path, r.Query)
	}
	for _, e := range []string{"v1/x", "v1alpha/x", "v2beta1/x"} {
		if _, err := run(t, h.analytics(), h.env, map[string]any{"method": "DELETE", "api": "admin", "endpoint": e}); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}

// The spec's input has no api: the endpoint alone chooses the host, and
// an explicit api that agrees changes nothing.
func TestAnalyticsAPIIsInferredFromTheEndpoint(t *testing.T) {
	h := newHarness(t, false)
	for _, tc := range []struct {
		method, endpoint string
		admin            bool
	}{
		{"POST", "v1beta/properties/123:runReport", false},
		{"POST", "v1beta/properties/123:batchRunReports", false},
		{"POST", "v1beta/properties/123:runPivotReport", false},
		{"POST", "v1beta/properties/123:batchRunPivotReports", false},
		{"POST", "v1beta/properties/123:runRealtimeReport", false},
		{"POST", "v1beta/properties/123:checkCompatibility", false},
		{"GET", "v1beta/properties/123/metadata", false},
		{"GET", "v1beta/properties/0/metadata", false},
		{"GET", "v1beta/properties/123/audienceExports?pageSize=5", false},
		{"POST", "v1beta/properties/123/audienceExports/9:query", false},
		{"POST", "v1alpha:runReport", false},
		{"POST", "v1beta/properties/123%3ArunReport", false},
		{"GET", "v1beta/accountSummaries", true},
		{"GET", "v1beta/accounts", true},
		{"POST", "v1beta/accounts:provisionAccountTicket", true},
		{"GET", "v1beta/properties?filter=parent:accounts/42", true},
		{"POST", "v1beta/properties", true},
		{"GET", "v1beta/properties/123", true},
		{"PATCH", "v1beta/properties/123?updateMask=display_name", true},
		{"DELETE", "v1beta/properties/123", true},
		{"POST", "v1beta/properties/123:runAccessReport", true},
		{"GET", "v1beta/properties/123/keyEvents", true},
		{"POST", "v1beta/properties/123/dataStreams", true},
		{"PATCH", "v1beta/properties/123/dataStreams/7?updateMask=display_name", true},
		{"GET", "v1beta/properties/123/customDimensions", true},
		{"GET", "v1alpha/properties/123/audiences", true},
	} {
		for _, api := range []string{"", "data", "admin"} {
			if api != "" && (api == "admin") != tc.admin {
				continue
			}
			in := map[string]any{"method": tc.method, "endpoint": tc.endpoint}
			if api != "" {
				in["api"] = api
			}
			if tc.method != "GET" && tc.method != "DELETE" {
				in["body"] = map[string]any{}
			}
			dataBefore, adminBefore := h.api.count(), h.admin.count()
			if _, err := run(t, h.analytics(), h.env, in); err != nil {
				t.Errorf("%s %s (api %q): %v", tc.method, tc.endpoint, api, err)
				continue
			}
			gotAdmin := h.admin.count() == adminBefore+1 && h.api.count() == dataBefore
			gotData := h.api.count() == dataBefore+1 && h.admin.count() == adminBefore
			if tc.admin && !gotAdmin || !tc.admin && !gotData {
				t.Errorf("%s %s (api %q): data %d→%d, admin %d→%d; want the %s",
					tc.method, tc.endpoint, api, dataBefore, h.api.count(), adminBefore, h.admin.count(), map[bool]string{true: "Admin API", false: "Data API"}[tc.admin])
			}
		}
	}
}

func TestInputIsDecodedStrictly(t *testing.T) {
	h := newHarness(t, false)
	for _, raw := range []string{
		`{"method":"GET","endpoint":"/x","headers":{"accept":"` + mediaType + `"},"url":"https://evil.test"}`,
		`{"method":"GET","endpoint":"/x","headers":{"accept":"` + mediaType + `"}} {}`,
		`[]`,
		`{"method":"GET","endpoint":"/x","headers":{"accept":1}}`,
	} {
		_, err := h.codeHost().Run(context.Background(), h.env, json.RawMessage(raw))
		var ce *connectors.Error
		if !errors.As(err, &ce) || ce.Code != connectors.CodeValidation {
			t.Errorf("%s: %v; want CodeValidation", raw, err)
		}
	}
	if n := h.sent(); n != 0 {
		t.Fatalf("%d requests were sent; want 0", n)
	}
}

func TestStepsDescribeThemselves(t *testing.T) {
	for _, tc := range []struct {
		step           connectors.Step
		id, name, conn string
	}{
		{CodeHost(CodeHostOptions{}), "codehost.api_call", "GitHub-style API Call", "codehost"},
		{Deploy(DeployOptions{}), "deploy.api_call", "Vercel-style API Call", "deploy"},
		{Analytics(AnalyticsOptions{}), "analytics.api_call", "Analytics API Call", "analytics"},
	} {
		s := tc.step
		if s.ID != tc.id || s.Name != tc.name || s.Connector != tc.conn || s.Description == "" || s.Run == nil {
			t.Errorf("%+v", s)
		}
		for _, sch := range []json.RawMessage{s.Input, s.Output} {
			var m map[string]any
			if err := json.Unmarshal(sch, &m); err != nil || m["type"] != "object" || m["$schema"] == nil {
				t.Errorf("%s: schema %s (%v)", s.ID, sch, err)
			}
		}
	}
}
