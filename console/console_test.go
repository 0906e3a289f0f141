package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/tenants"
)

// These tests cover the console's security properties over plain HTTP,
// without a browser: sign-in, sessions, CSRF, the CSP, tenants apart,
// outside text escaped. browser_test.go drives the pages in Chromium.

const (
	keyA     = "key-of-tenant-a"
	keyB     = "key-of-tenant-b"
	adminKey = "the-admin-key"
	hostile  = `<img src=x onerror=alert(1)>`
)

type fakeAuth map[string]string

func (f fakeAuth) Authenticate(_ context.Context, key string) (string, error) {
	if t, ok := f[key]; ok {
		return t, nil
	}
	return "", tenants.ErrInvalidKey
}

type fakeAccounts struct{ accs []store.Account }

func (f *fakeAccounts) Start(context.Context, string, string, string) (string, error) {
	return "http://127.0.0.1:1/authorize", nil
}
func (f *fakeAccounts) List(_ context.Context, tid string) ([]store.Account, error) {
	var out []store.Account
	for _, a := range f.accs {
		if a.TenantID == tid {
			out = append(out, a)
		}
	}
	return out, nil
}
func (f *fakeAccounts) Get(_ context.Context, tid, id string) (store.Account, error) {
	for _, a := range f.accs {
		if a.TenantID == tid && a.ID == id {
			return a, nil
		}
	}
	return store.Account{}, accounts.ErrAccountNotFound
}
func (f *fakeAccounts) Remove(ctx context.Context, tid, id string) (store.Account, accounts.RemoveReport, error) {
	a, err := f.Get(ctx, tid, id)
	return a, accounts.RemoveReport{Revoked: true}, err
}

// fakeRegistry keeps triggers and agents in memory.
type fakeRegistry struct {
	mu       sync.Mutex
	triggers []store.Trigger
	agents   []store.Agent
}

func (f *fakeRegistry) CreateAgent(_ context.Context, tid string, in registry.AgentInput) (store.Agent, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := store.Agent{ID: "ag" + in.Name, TenantID: tid, Name: in.Name, Delivery: in.Delivery, Steps: in.Steps}
	f.agents = append(f.agents, a)
	return a, "once-shown-secret", nil
}
func (f *fakeRegistry) GetAgent(_ context.Context, tid, id string) (store.Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.agents {
		if a.TenantID == tid && a.ID == id {
			return a, nil
		}
	}
	return store.Agent{}, registry.ErrNotFound
}
func (f *fakeRegistry) ListAgents(_ context.Context, tid string) ([]store.Agent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Agent
	for _, a := range f.agents {
		if a.TenantID == tid {
			out = append(out, a)
		}
	}
	return out, nil
}
func (f *fakeRegistry) DeleteAgent(context.Context, string, string) error { return nil }
func (f *fakeRegistry) AgentEndpoint(context.Context, string, string) (store.Hook, bool, error) {
	return store.Hook{}, false, nil
}
func (f *fakeRegistry) HookActivity(context.Context, string) (store.HookActivity, error) {
	return store.HookActivity{}, nil
}
func (f *fakeRegistry) CreateTrigger(_ context.Context, tid string, in registry.TriggerInput) (store.Trigger, error) {
	return store.Trigger{}, registry.ErrInvalid
}
func (f *fakeRegistry) GetTrigger(_ context.Context, tid, id string) (store.Trigger, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.triggers {
		if t.TenantID == tid && t.ID == id {
			return t, nil
		}
	}
	return store.Trigger{}, registry.ErrNotFound
}
func (f *fakeRegistry) ListTriggers(_ context.Context, tid string) ([]store.Trigger, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.Trigger
	for _, t := range f.triggers {
		if t.TenantID == tid {
			out = append(out, t)
		}
	}
	return out, nil
}
func (f *fakeRegistry) SetEnabled(ctx context.Context, tid, id string, enabled bool) (store.Trigger, error) {
	return f.GetTrigger(ctx, tid, id)
}
func (f *fakeRegistry) DeleteTrigger(_ context.Context, tid, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, t := range f.triggers {
		if t.TenantID == tid && t.ID == id {
			f.triggers = append(f.triggers[:i], f.triggers[i+1:]...)
			return nil
		}
	}
	return registry.ErrNotFound
}
func (f *fakeRegistry) HooksOf(context.Context, store.Trigger) ([]store.Hook, error) { return nil, nil }
func (f *fakeRegistry) HookURL(h store.Hook) string                                  { return "http://x/" + h.ID }

// CoverageOf answers for new_issue triggers without parameters, which
// are on all the account's repositories.
func (f *fakeRegistry) CoverageOf(_ context.Context, t store.Trigger, _ []store.Hook) (*registry.Coverage, error) {
	if t.Kind != "new_issue" || len(t.Params) > 0 {
		return nil, nil
	}
	return &registry.Coverage{Hooks: 2, Organizations: []string{"octo-org"}, Repositories: 1, Lacking: []registry.Gap{
		{Scope: store.HookRepository, Target: "monalisa/octo-app", Reason: "octocat has push rights on it, not admin <b>"},
	}}, nil
}
func (f *fakeRegistry) AccountRemoving(context.Context, string, store.Account) error { return nil }

type fixture struct {
	srv  *httptest.Server
	c    *Console
	st   *boltstore.Store
	reg  *fakeRegistry
	logs *bytes.Buffer
	now  *time.Time
	mu   *sync.Mutex
}

func newFixture(t *testing.T, secure bool) *fixture {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	at := time.Now().Add(-time.Minute)
	for _, tid := range []string{"ta", "tb"} {
		if err := st.CreateTenant(ctx, store.Tenant{ID: tid, Name: "tenant " + tid}); err != nil {
			t.Fatal(err)
		}
		d := store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: tid, Connector: "codehost", DeliveryID: "dlv-" + tid,
			Hook: "h-" + tid, Event: "issues", Action: "opened", Answer: store.AnswerRefused, Status: 401,
			Code: "invalid_signature", Message: hostile, ReceivedAt: at}
		if err := st.PutDeliveries(ctx, []store.DeliveryRecord{d}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateRun(ctx, store.Run{ID: "run-" + tid, TenantID: tid, EventID: "ev-" + tid, TriggerID: "tr-" + tid,
			AgentID: "ag-" + tid, Kind: "new_issue", Summary: "#1 " + hostile, Status: store.RunFailed,
			Error: &store.RunError{Code: "x", Message: hostile}}); err != nil {
			t.Fatal(err)
		}
	}
	reg := &fakeRegistry{triggers: []store.Trigger{
		{ID: "tr-ta", TenantID: "ta", Kind: "new_issue", Enabled: true, Status: store.TriggerActive},
		{ID: "tr-tb", TenantID: "tb", Kind: "new_issue", Enabled: true, Status: store.TriggerActive},
	}}
	var logs bytes.Buffer
	now := time.Now()
	var mu sync.Mutex
	c, err := New(Options{
		Auth: fakeAuth{keyA: "ta", keyB: "tb"}, Accounts: &fakeAccounts{}, Registry: reg, Records: st,
		AdminKeys: []string{adminKey}, SecureCookies: secure,
		Logger: zerolog.New(&logs),
		Now:    func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, c: c, st: st, reg: reg, logs: &logs, now: &now, mu: &mu}
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.now = f.now.Add(d)
}

// client returns an HTTP client with a cookie jar that does not follow
// redirects.
func (f *fixture) client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var signInTokenField = regexp.MustCompile(`name="signin_token" value="([^"]+)"`)

// signInForm loads the sign-in page and returns its token.
func (f *fixture) signInForm(t *testing.T, cl *http.Client) string {
	t.Helper()
	_, page := get(t, cl, f.srv.URL+"/console/signin")
	m := signInTokenField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no sign-in token on the sign-in page")
	}
	return m[1]
}

func (f *fixture) signIn(t *testing.T, key string) (*http.Client, *http.Response) {
	t.Helper()
	cl := f.client(t)
	token := f.signInForm(t, cl)
	res, err := cl.PostForm(f.srv.URL+"/console/signin", url.Values{"api_key": {key}, "signin_token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return cl, res
}

func get(t *testing.T, cl *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfFrom(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF field on the page")
	}
	return m[1]
}

func TestSignInPage(t *testing.T) {
	f := newFixture(t, false)
	cl := f.client(t)
	res, _ := get(t, cl, f.srv.URL+"/console/deliveries")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/console/signin") {
		t.Fatalf("signed out: %d %s, want a redirect to sign in", res.StatusCode, res.Header.Get("Location"))
	}
	_, page := get(t, cl, f.srv.URL+"/console/signin")
	for _, want := range []string{`<label for="api_key">API key</label>`, `>Sign in</button>`, `data/default_tenant_key`} {
		if !strings.Contains(page, want) {
			t.Errorf("sign-in page lacks %q", want)
		}
	}
}

func TestSignInRefusesWrongKeyWithoutLogging(t *testing.T) {
	f := newFixture(t, false)
	cl := f.client(t)
	token := f.signInForm(t, cl)
	res, err := cl.PostForm(f.srv.URL+"/console/signin", url.Values{"api_key": {"not-a-key-s3cr3t"}, "signin_token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "not valid") {
		t.Errorf("wrong key: %d, want 401 with a message", res.StatusCode)
	}
	for _, ck := range res.Cookies() {
		if ck.Name == cookieName {
			t.Errorf("wrong key set a session cookie %v", ck)
		}
	}
	if f.logs.Len() != 0 {
		t.Errorf("a refused sign-in was logged: %s", f.logs.String())
	}
}

func TestSessionCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		f := newFixture(t, secure)
		_, res := f.signIn(t, keyA)
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", res.StatusCode)
		}
		var ck *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == cookieName {
				ck = c
			}
		}
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Secure != secure || ck.Path != Prefix {
			t.Errorf("secure %v: cookie %+v, want HttpOnly, SameSite=Lax, Secure %v, Path %s", secure, ck, secure, Prefix)
		}
		if strings.Contains(ck.Value, keyA) {
			t.Error("the cookie carries the API key")
		}
	}
}

func TestSessionIdleExpiryAndSignOut(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	if res, _ := get(t, cl, f.srv.URL+"/console/deliveries"); res.StatusCode != http.StatusOK {
		t.Fatalf("deliveries: %d", res.StatusCode)
	}
	f.advance(11 * time.Hour)
	if res, _ := get(t, cl, f.srv.URL+"/console/runs"); res.StatusCode != http.StatusOK {
		t.Fatalf("after 11 h idle: %d, want 200", res.StatusCode)
	}
	f.advance(11 * time.Hour) // 11 h after the last request: still in
	if res, _ := get(t, cl, f.srv.URL+"/console/runs"); res.StatusCode != http.StatusOK {
		t.Fatalf("11 h after the last request: %d, want 200", res.StatusCode)
	}
	f.advance(12*time.Hour + time.Minute)
	if res, _ := get(t, cl, f.srv.URL+"/console/runs"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after 12 h idle: %d, want a redirect to sign in", res.StatusCode)
	}

	cl, _ = f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/deliveries")
	res, err := cl.PostForm(f.srv.URL+"/console/signout", url.Values{"csrf": {csrfFrom(t, page)}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", res.StatusCode)
	}
	if res, _ := get(t, cl, f.srv.URL+"/console/deliveries"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("after Sign out: %d, want a redirect to sign in", res.StatusCode)
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/triggers/tr-ta")
	token := csrfFrom(t, page)
	for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
		res, err := cl.PostForm(f.srv.URL+"/console/triggers/tr-ta/delete", form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("POST with csrf %q: %d, want 403", form.Get("csrf"), res.StatusCode)
		}
		if _, err := f.reg.GetTrigger(t.Context(), "ta", "tr-ta"); err != nil {
			t.Fatalf("the trigger was deleted without a CSRF token: %v", err)
		}
	}
	// Another session's token is not this one's.
	other, _ := f.signIn(t, keyA)
	_, otherPage := get(t, other, f.srv.URL+"/console/triggers/tr-ta")
	res, _ := cl.PostForm(f.srv.URL+"/console/triggers/tr-ta/delete", url.Values{"csrf": {csrfFrom(t, otherPage)}})
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("POST with another session's token: %d, want 403", res.StatusCode)
	}
	res, _ = cl.PostForm(f.srv.URL+"/console/triggers/tr-ta/delete", url.Values{"csrf": {token}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST with the token: %d, want 303", res.StatusCode)
	}
	if _, err := f.reg.GetTrigger(t.Context(), "ta", "tr-ta"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("the trigger is still there after a POST with the token: %v", err)
	}
}

func TestCSPOnEveryAnswer(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	anon := f.client(t)
	for _, tc := range []struct {
		cl   *http.Client
		path string
	}{
		{anon, "/console/signin"}, {anon, "/console/deliveries"}, {anon, "/console/static/console.js"},
		{cl, "/console/"}, {cl, "/console/deliveries"}, {cl, "/console/runs/run-tb"}, {cl, "/console/nowhere"},
		{cl, "/console/static/console.css"},
	} {
		res, _ := get(t, tc.cl, f.srv.URL+tc.path)
		p := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(p, "script-src 'self'") || strings.Contains(p, "unsafe-inline") || strings.Contains(p, "unsafe-eval") ||
			!strings.Contains(p, "frame-ancestors 'none'") || strings.Contains(p, "http") {
			t.Errorf("%s: CSP %q", tc.path, p)
		}
	}
}

func TestTenantsApart(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	bDelivery, err := f.st.ListDeliveries(t.Context(), store.DeliveryFilter{TenantID: "tb"})
	if err != nil || len(bDelivery) != 1 {
		t.Fatal(bDelivery, err)
	}
	for _, p := range []string{
		"/console/deliveries/" + bDelivery[0].ID, "/console/runs/run-tb", "/console/triggers/tr-tb",
		"/console/events/ev-tb", "/console/events/ev-tb?delivery=" + bDelivery[0].ID, "/console/triggers/tr-tb/delete",
	} {
		if res, _ := get(t, cl, f.srv.URL+p); res.StatusCode != http.StatusNotFound {
			t.Errorf("tenant a GET %s: %d, want 404", p, res.StatusCode)
		}
	}
	_, list := get(t, cl, f.srv.URL+"/console/deliveries")
	if strings.Contains(list, "dlv-tb") || !strings.Contains(list, "dlv-ta") {
		t.Error("tenant a's deliveries list shows b's, or not its own")
	}
	token := csrfFrom(t, list)
	res, _ := cl.PostForm(f.srv.URL+"/console/triggers/tr-tb/delete", url.Values{"csrf": {token}})
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("tenant a deleting b's trigger: %d, want 404", res.StatusCode)
	}
	if _, err := f.reg.GetTrigger(t.Context(), "tb", "tr-tb"); err != nil {
		t.Errorf("b's trigger is gone: %v", err)
	}
}

func TestOutsideTextIsEscaped(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	// An issue titled with markup: its delivery, its event and its run
	// show the title in lists and on their pages.
	at := time.Now()
	accepted := store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: "ta", Connector: "codehost", DeliveryID: "dlv-title",
		Event: "issues", Action: "opened", Summary: "#1 " + hostile, Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at,
		Events: []store.DeliveryEvent{{ID: "ev-ta", Kind: "new_issue", Summary: "#1 " + hostile}}}
	if err := f.st.PutDeliveries(t.Context(), []store.DeliveryRecord{accepted}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutEvent(t.Context(), store.EventRecord{TenantID: "ta", EventID: "ev-ta", Kind: "new_issue", Summary: "#1 " + hostile,
		DeliveryID: "dlv-title", ReceivedAt: at, Outcomes: []store.Outcome{}}); err != nil {
		t.Fatal(err)
	}
	ds, _ := f.st.ListDeliveries(t.Context(), store.DeliveryFilter{TenantID: "ta", Answer: store.AnswerRefused})
	for _, p := range []string{"/console/deliveries/" + ds[0].ID, "/console/deliveries/" + accepted.ID, "/console/deliveries",
		"/console/events", "/console/events/ev-ta", "/console/runs", "/console/runs/run-ta", "/console/"} {
		_, page := get(t, cl, f.srv.URL+p)
		if strings.Contains(page, hostile) || !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s does not show the hostile text escaped", p)
		}
	}
}

func TestAdminSignIn(t *testing.T) {
	f := newFixture(t, false)
	_, res := f.signIn(t, adminKey)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != Prefix+"tenants" {
		t.Errorf("admin sign-in: %d %s, want a redirect to Tenants", res.StatusCode, res.Header.Get("Location"))
	}
	cl, _ := f.signIn(t, keyA)
	if res, _ := get(t, cl, f.srv.URL+"/console/tenants"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant on Tenants: %d, want 403", res.StatusCode)
	}
}

func TestNextIsConsolePathOnly(t *testing.T) {
	for next, want := range map[string]string{
		"/console/runs?status=failed": "/console/runs?status=failed",
		"//evil.example/console/":     Prefix,
		"https://evil.example/":       Prefix,
		"/console/\\evil":             Prefix,
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestLiveRefreshAfterSignOutStops(t *testing.T) {
	f := newFixture(t, false)
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/console/deliveries", nil)
	req.Header.Set(fragmentHeader, "live")
	res, err := f.client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent || res.Header.Get(signedOutHeader) == "" {
		t.Errorf("a signed-out live refresh: %d %v, want 204 with %s", res.StatusCode, res.Header, signedOutHeader)
	}
}

func (f *fakeRegistry) DraftTrigger(_ context.Context, tid string, in registry.TriggerInput) (store.Trigger, error) {
	return store.Trigger{TenantID: tid, Kind: in.Kind}, nil
}

// fakeDead keeps dead letters in memory.
type fakeDead struct {
	mu   sync.Mutex
	dead []bus.Dead
}

func (f *fakeDead) ListDead(_ context.Context, source string, from uint64, limit int) ([]bus.Dead, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []bus.Dead
	for _, d := range f.dead {
		if (source == "" || d.Source == source) && d.Seq >= from && len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeDead) Requeue(_ context.Context, seq uint64) (bus.Dead, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range f.dead {
		if d.Seq == seq {
			f.dead = append(f.dead[:i], f.dead[i+1:]...)
			return d, nil
		}
	}
	return bus.Dead{}, bus.ErrNotDead
}

// A tenant sees and requeues the dead letters whose message names it;
// another tenant's answer 404. The admin sees them all.
func TestDeadLettersPerTenant(t *testing.T) {
	f := newFixture(t, false)
	dead := &fakeDead{dead: []bus.Dead{
		{Seq: 1, Source: "dispatch", Stream: bus.EventsStream, Subject: "triggers.x", Reason: hostile,
			Data: []byte(`{"id":"e1","kind":"new_issue","scope":{"hook":"h","tenant":"ta"},"resource":{"title":"` + `\u003cb\u003e` + `"}}`)},
		{Seq: 2, Source: "dispatch-replay", Stream: "PUSH", Subject: "push.replay.x", Data: []byte(`{"tenant_id":"tb","event_id":"e2"}`)},
		{Seq: 3, Source: "dispatch", Stream: bus.EventsStream, Subject: "triggers.y", Data: []byte(`{"id":"e3","kind":"new_issue"}`)},
		{Seq: 4, Source: "dispatch-results", Stream: "AGENTS", Subject: "agents.r", Data: []byte(`{"run_id":"run-tb","status":"succeeded"}`)},
		{Seq: 5, Source: "dispatch", Stream: bus.EventsStream, Subject: "triggers.z", Data: []byte(`not json`)},
	}}
	f.c.o.Dead = dead
	// The shared endpoints' events (no scope) are tenant a's.
	f.c.o.SharedTenant = func(context.Context) (string, error) { return "ta", nil }
	a, _ := f.signIn(t, keyA)
	_, page := get(t, a, f.srv.URL+"/console/dead")
	for seq, want := range map[string]bool{"1": true, "2": false, "3": true, "4": false, "5": false} {
		if got := strings.Contains(page, `href="/console/dead/`+seq+`"`); got != want {
			t.Errorf("tenant a's dead letters list %s: %v, want %v", seq, got, want)
		}
	}
	if strings.Contains(page, hostile) {
		t.Error("a dead letter's reason is shown unescaped")
	}
	if res, body := get(t, a, f.srv.URL+"/console/dead/1"); res.StatusCode != http.StatusOK || !strings.Contains(body, "triggers.x") {
		t.Errorf("tenant a's own dead letter: %d", res.StatusCode)
	}
	for _, seq := range []string{"2", "4", "5", "99"} {
		if res, _ := get(t, a, f.srv.URL+"/console/dead/"+seq); res.StatusCode != http.StatusNotFound {
			t.Errorf("tenant a GET /console/dead/%s: %d, want 404", seq, res.StatusCode)
		}
	}
	res, _ := a.PostForm(f.srv.URL+"/console/dead/2/requeue", url.Values{"csrf": {csrfFrom(t, page)}})
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || len(dead.dead) != 5 {
		t.Errorf("tenant a requeueing b's: %d, %d left; want 404 and 5", res.StatusCode, len(dead.dead))
	}
	_, confirm := get(t, a, f.srv.URL+"/console/dead/requeue")
	if !strings.Contains(confirm, "Requeue 2 dead letter(s) of every source?") {
		t.Fatalf("tenant a's confirmation does not state its own count: %s", confirm)
	}
	res, _ = a.PostForm(f.srv.URL+"/console/dead/requeue?count=2", url.Values{"csrf": {csrfFrom(t, confirm)}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(dead.dead) != 3 || dead.dead[0].Seq != 2 {
		t.Errorf("tenant a requeue filtered: %d, left %+v; want 303 and 2, 4, 5", res.StatusCode, dead.dead)
	}
	b, _ := f.signIn(t, keyB)
	_, page = get(t, b, f.srv.URL+"/console/dead")
	if !strings.Contains(page, `href="/console/dead/2"`) || !strings.Contains(page, `href="/console/dead/4"`) || strings.Contains(page, `href="/console/dead/5"`) {
		t.Error("tenant b's list lacks its replay request or its agent's result, or shows a letter of no tenant")
	}
	admin, _ := f.signIn(t, adminKey)
	_, confirm = get(t, admin, f.srv.URL+"/console/dead/requeue?source=dispatch")
	if !strings.Contains(confirm, "Requeue 1 dead letter(s) of source dispatch?") {
		t.Fatalf("the admin's confirmation does not state the count: %s", confirm)
	}
	res, _ = admin.PostForm(f.srv.URL+"/console/dead/requeue?source=dispatch&count=1", url.Values{"csrf": {csrfFrom(t, confirm)}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(dead.dead) != 2 {
		t.Errorf("admin requeue filtered: %d, left %+v; want 303 and 2, 4", res.StatusCode, dead.dead)
	}
}

func TestSignInNeedsTheFormsToken(t *testing.T) {
	f := newFixture(t, false)
	cl := f.client(t)
	// Another site's form: no token cookie, or a token of its own.
	for _, form := range []url.Values{{"api_key": {keyA}}, {"api_key": {keyA}, "signin_token": {"forged-token-forged-token-forged-token"}}} {
		res, err := cl.PostForm(f.srv.URL+"/console/signin", form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("sign-in without the form's token: %d, want 403", res.StatusCode)
		}
		for _, ck := range res.Cookies() {
			if ck.Name == cookieName {
				t.Error("a sign-in without the form's token started a session")
			}
		}
	}
}

func TestAgentSecretShownOnceAfterARedirect(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/agents")
	res, err := cl.PostForm(f.srv.URL+"/console/agents", url.Values{"csrf": {csrfFrom(t, page)}, "name": {"bot"}, "delivery": {"nats"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create agent: %d, want a redirect", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	_, first := get(t, cl, f.srv.URL+loc)
	if !strings.Contains(first, "once-shown-secret") {
		t.Error("the agent's page after creation does not show its secret")
	}
	_, again := get(t, cl, f.srv.URL+loc)
	if strings.Contains(again, "once-shown-secret") {
		t.Error("the agent's secret is shown a second time")
	}
}

// realTenants is the tenants service over the fixture's store.
type realTenants struct {
	*tenants.Service
	st *boltstore.Store
}

func (r realTenants) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	return r.st.ListTenants(ctx)
}

func TestAdminManagesTenantsAndKeys(t *testing.T) {
	f := newFixture(t, false)
	f.c.o.Tenants = realTenants{tenants.New(f.st, nil), f.st}
	admin, _ := f.signIn(t, adminKey)
	_, page := get(t, admin, f.srv.URL+"/console/tenants")
	res, err := admin.PostForm(f.srv.URL+"/console/tenants", url.Values{"csrf": {csrfFrom(t, page)}, "name": {"acme"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || !strings.Contains(string(body), "shown this once") {
		t.Fatalf("create tenant: %d", res.StatusCode)
	}
	ts, _ := f.st.ListTenants(t.Context())
	var acme string
	for _, tn := range ts {
		if tn.Name == "acme" {
			acme = tn.ID
		}
	}
	keysURL := f.srv.URL + "/console/tenants/" + acme + "/keys"
	_, page = get(t, admin, keysURL)
	res, _ = admin.PostForm(keysURL, url.Values{"csrf": {csrfFrom(t, page)}, "name": {"ci"}})
	res.Body.Close()
	_, page = get(t, admin, keysURL)
	if !strings.Contains(page, "New API key, shown this once") {
		t.Error("the new key is not shown after its creation")
	}
	if _, again := get(t, admin, keysURL); strings.Contains(again, "shown this once") {
		t.Error("the new key is shown twice")
	}
	keys, _ := f.st.ListAPIKeys(t.Context(), acme)
	if len(keys) != 2 {
		t.Fatalf("acme has %d keys, want 2", len(keys))
	}
	res, _ = admin.PostForm(keysURL+"/"+keys[0].ID+"/revoke", url.Values{"csrf": {csrfFrom(t, page)}})
	res.Body.Close()
	if keys, _ := f.st.ListAPIKeys(t.Context(), acme); res.StatusCode != http.StatusSeeOther || len(keys) != 1 {
		t.Errorf("revoke: %d, %d keys left; want 303 and 1", res.StatusCode, len(keys))
	}
	// A tenant cannot reach any of it.
	tenantCl, _ := f.signIn(t, keyA)
	if res, _ := get(t, tenantCl, keysURL); res.StatusCode != http.StatusForbidden {
		t.Errorf("a tenant on another tenant's keys: %d, want 403", res.StatusCode)
	}
}

func TestErrorPagesSayWhereToGoOn(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	for path, want := range map[string][]string{
		"/console/deliveries?answer=bogus": {"Not possible as asked", `href="/console/deliveries">Back to Deliveries`},
		"/console/runs/nope":               {"Not found", `href="/console/runs">Back to Runs`},
		"/console/nowhere":                 {"Not found", `href="/console/">Back to the overview`},
		"/console/tenants":                 {"Refused", `href="/console/">Back to the overview`},
	} {
		_, page := get(t, cl, f.srv.URL+path)
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
	}
	if _, page := get(t, cl, f.srv.URL+"/console/tenants"); strings.Contains(page, "Back to Tenants") {
		t.Error("a refusal of Tenants offers to go back to Tenants")
	}
	admin, _ := f.signIn(t, adminKey)
	if _, page := get(t, admin, f.srv.URL+"/console/runs"); !strings.Contains(page, "Choose a tenant") || !strings.Contains(page, `href="/console/tenants">Go to Tenants`) {
		t.Errorf("the admin without a tenant on Runs is not sent to Tenants: %s", page)
	}
}

// A trigger on all repositories shows its hooks' count and, as text,
// where its account lacks the rights to one.
func TestTriggerPageShowsCoverage(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/triggers/tr-ta")
	for _, want := range []string{"Every repository the account reaches: 2 hooks registered, organisation octo-org, 1 repository on their own",
		"repository monalisa/octo-app", "not admin &lt;b&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("trigger page lacks %q", want)
		}
	}
	_, list := get(t, cl, f.srv.URL+"/console/triggers")
	if !strings.Contains(list, "every repository reached: 2 hooks · <span class=\"why\">1 without rights</span>") {
		t.Errorf("trigger list does not sum up the coverage")
	}
}

// The Overview's charts count what the store's activity counters hold:
// the tenant's own deliveries and runs, not another tenant's.
func TestOverviewCounts(t *testing.T) {
	f := newFixture(t, false)
	at := time.Now().Add(-2 * time.Minute)
	var ds []store.DeliveryRecord
	for i := range 4 {
		ds = append(ds, store.DeliveryRecord{ID: store.NewDeliveryID(at.Add(time.Duration(i))), TenantID: "ta", Connector: "codehost",
			Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at})
	}
	ds = append(ds, store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: "tb", Connector: "codehost",
		Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at})
	if err := f.st.PutDeliveries(t.Context(), ds); err != nil {
		t.Fatal(err)
	}
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/")
	for _, want := range []string{
		"Deliveries, last hour, per minute: 5 ", // 4 accepted, 1 refused
		"Deliveries, last day, per hour: 5 ",
		"Runs, last hour, per minute (by start): 1 ",
		"accepted 4 · refused 1", // the bar's title
		"failed 1",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
}

var (
	runLink   = regexp.MustCompile(`<a href="/console/runs/([^"]+)">`)
	olderLink = regexp.MustCompile(`<a href="([^"]+)">Older →</a>`)
)

// Runs reads a page at a time; each page's Older link goes on where it
// ended, until every run was listed once.
func TestRunsPages(t *testing.T) {
	f := newFixture(t, false)
	at := time.Now().Add(-time.Hour)
	const n = 2*pageSize + 7
	for i := range n {
		// Pairs created at the same time: the cursor orders them by id.
		if _, err := f.st.CreateRun(t.Context(), store.Run{ID: fmt.Sprintf("page-%03d", i), TenantID: "ta", EventID: "ev",
			TriggerID: "tr-ta", AgentID: "ag-ta", Kind: "new_issue", Status: store.RunSucceeded,
			CreatedAt: at.Add(time.Duration(i/2) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	cl, _ := f.signIn(t, keyA)
	seen := map[string]bool{}
	u, pages := "/console/runs", 0
	for ; u != "" && pages < 10; pages++ {
		res, page := get(t, cl, f.srv.URL+u)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", u, res.StatusCode)
		}
		for _, m := range runLink.FindAllStringSubmatch(page, -1) {
			if seen[m[1]] {
				t.Errorf("%s lists %s again", u, m[1])
			}
			seen[m[1]] = true
		}
		u = ""
		if m := olderLink.FindStringSubmatch(page); m != nil {
			u = html.UnescapeString(m[1])
		}
	}
	if pages != 3 || len(seen) != n+1 { // the fixture's run too
		t.Errorf("%d pages listed %d runs, want 3 pages of %d", pages, len(seen), n+1)
	}
	if res, _ := get(t, cl, f.srv.URL+"/console/runs?before=nonsense"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a malformed cursor: %d, want 400", res.StatusCode)
	}
}

// The trigger form shows each parameter typed: enumerations as
// checkboxes of their values, the column id as a number, organization
// required.
func TestTriggerFormParameters(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/triggers/new")
	for _, want := range []string{
		`<input type="checkbox" name="param_conclusions" value="success">`,
		`<input type="checkbox" name="param_review_states" value="approved">`,
		`<input type="checkbox" name="param_environments" value="production">`,
		`name="param_column_id" type="number"`,
		`Organization <span class="req"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the trigger form lacks %s", want)
		}
	}
}

// The agent form's pipeline editor: its rows become the agent's steps;
// an input that is not a JSON object is refused with a message.
func TestAgentPipelineRows(t *testing.T) {
	f := newFixture(t, false)
	cl, _ := f.signIn(t, keyA)
	_, page := get(t, cl, f.srv.URL+"/console/agents")
	for _, want := range []string{`name="pstep.name.0"`, `id="add-step"`, `<template id="pipeline-row">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the agents page lacks %s", want)
		}
	}
	form := url.Values{"csrf": {csrfFrom(t, page)}, "name": {"piped"}, "delivery": {"nats"},
		"pstep.name.0": {"comment"}, "pstep.step.0": {"codehost.create_comment"}, "pstep.account.0": {"acc1"},
		"pstep.input.0": {`{"body": "Thanks, {{ .event.sender }}"}`},
		"pstep.name.3":  {"label"}, "pstep.step.3": {"codehost.add_labels"}, "pstep.input.3": {`{"labels": ["triage"]}`}}
	res, err := cl.PostForm(f.srv.URL+"/console/agents", form)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", res.StatusCode)
	}
	as, _ := f.reg.ListAgents(t.Context(), "ta")
	if len(as) != 1 || len(as[0].Steps) != 2 || as[0].Steps[0].Name != "comment" || as[0].Steps[1].Step != "codehost.add_labels" ||
		!strings.Contains(string(as[0].Steps[0].Input), "{{ .event.sender }}") {
		t.Fatalf("agents %+v: want one with the two steps of the rows", as)
	}
	form.Set("pstep.input.3", `["triage"]`)
	res, err = cl.PostForm(f.srv.URL+"/console/agents", form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "must be a JSON object") {
		t.Errorf("an input that is an array: %d, want 400 saying it must be a JSON object", res.StatusCode)
	}
}
