package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

// fakeAccounts hands out tokens for a fixed set of accounts: "tok-<id>",
// or what rej says after a rejection.
type fakeAccounts struct {
	accounts map[string]store.Account
	errs     map[string]error
	rej      *rejections
}

// rejections records Rejected calls and answers them with next (or err).
type rejections struct {
	mu       sync.Mutex
	rejected []string
	next     string
	err      error
}

func (f fakeAccounts) Token(_ context.Context, tenant, id string) (*oauth2.Token, store.Account, error) {
	if err := f.errs[id]; err != nil {
		return nil, store.Account{}, err
	}
	acc, ok := f.accounts[id]
	if !ok || acc.TenantID != tenant {
		return nil, store.Account{}, &accounts.AccountError{AccountID: id}
	}
	return &oauth2.Token{AccessToken: "tok-" + id}, acc, nil
}

func (f fakeAccounts) Rejected(_ context.Context, tenant, id, accessToken string) (*oauth2.Token, error) {
	if f.rej == nil {
		return nil, errors.New("unexpected rejection")
	}
	f.rej.mu.Lock()
	defer f.rej.mu.Unlock()
	f.rej.rejected = append(f.rej.rejected, accessToken)
	if f.rej.err != nil {
		return nil, f.rej.err
	}
	return &oauth2.Token{AccessToken: f.rej.next}, nil
}

func greetStep(srvURL string) connectors.Step {
	return connectors.Step{
		ID: "codehost.greet", Name: "Greet Someone", Connector: "codehost", Description: "Says hello through the API.",
		Input:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","minLength":1}},"required":["name"],"additionalProperties":false}`),
		Output: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
			var in struct{ Name string }
			json.Unmarshal(input, &in)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srvURL+"/hello/"+in.Name, nil)
			resp, err := env.HTTP.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusTooManyRequests {
				return nil, &connectors.Error{Code: connectors.CodeRateLimited, Message: "slow down", Status: 429}
			}
			return map[string]string{"greeting": string(b), "as": env.Account.Login}, nil
		},
	}
}

func newRunner(t *testing.T) (*Runner, *int) {
	t.Helper()
	wrapped := new(int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/busy") {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintf(w, "hello %s (%s)", strings.TrimPrefix(r.URL.Path, "/hello/"), r.Header.Get("X-Policy"))
	}))
	t.Cleanup(srv.Close)
	tk := connectors.Toolkit{
		Connector: "codehost",
		Steps:     []connectors.Step{greetStep(srv.URL)},
		Wrap: func(accountID string, base http.RoundTripper) http.RoundTripper {
			*wrapped++
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Policy", "policy-for-"+accountID)
				return base.RoundTrip(r)
			})
		},
	}
	r, err := New(Options{Toolkits: []connectors.Toolkit{tk}, Accounts: fakeAccounts{
		accounts: map[string]store.Account{
			"acc_gh": {ID: "acc_gh", TenantID: "t1", Connector: "codehost", Login: "octocat"},
			"acc_vc": {ID: "acc_vc", TenantID: "t1", Connector: "deploy"},
		},
		errs: map[string]error{
			"acc_gone":   &accounts.AccountError{AccountID: "acc_gone", Status: store.StatusRemoved},
			"acc_reauth": &accounts.AccountError{AccountID: "acc_reauth", Status: store.StatusNeedsReauth},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r, wrapped
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRun(t *testing.T) {
	r, wrapped := newRunner(t)
	out, err := r.Run(context.Background(), "t1", "codehost.greet", "acc_gh", json.RawMessage(`{"name":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	json.Unmarshal(out, &got)
	if got["greeting"] != "hello world (policy-for-acc_gh)" || got["as"] != "octocat" {
		t.Fatalf("output %s: the step must run through the connector's policy as the account", out)
	}
	if *wrapped != 1 {
		t.Fatalf("policy wrapped %d times", *wrapped)
	}
}

func TestRunErrors(t *testing.T) {
	r, _ := newRunner(t)
	for _, tc := range []struct {
		name, step, account, input string
		code                       connectors.ErrorCode
		mention                    string
	}{
		{"unknown step", "codehost.nope", "acc_gh", `{}`, connectors.CodeNotFound, "GET /v1/steps"},
		{"missing field", "codehost.greet", "acc_gh", `{}`, connectors.CodeValidation, "at /: missing property 'name'"},
		{"extra field", "codehost.greet", "acc_gh", `{"name":"a","x":1}`, connectors.CodeValidation, "at /: additional properties 'x' not allowed"},
		{"wrong type", "codehost.greet", "acc_gh", `{"name":3}`, connectors.CodeValidation, "at /name: got number, want string"},
		{"not JSON", "codehost.greet", "acc_gh", `{`, connectors.CodeValidation, "not JSON"},
		{"no account", "codehost.greet", "", `{"name":"a"}`, connectors.CodeValidation, "codehost account"},
		{"unknown account", "codehost.greet", "acc_x", `{"name":"a"}`, connectors.CodeNotFound, "acc_x"},
		{"another tenant's account", "codehost.greet", "acc_other", `{"name":"a"}`, connectors.CodeNotFound, ""},
		{"wrong connector", "codehost.greet", "acc_vc", `{"name":"a"}`, connectors.CodeValidation, "deploy account"},
		{"removed", "codehost.greet", "acc_gone", `{"name":"a"}`, connectors.CodeAccountRemoved, "reconnect"},
		{"needs reauth", "codehost.greet", "acc_reauth", `{"name":"a"}`, connectors.CodeNeedsReauth, "reconnect"},
		{"step's own error", "codehost.greet", "acc_gh", `{"name":"busy"}`, connectors.CodeRateLimited, "slow down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Run(context.Background(), "t1", tc.step, tc.account, json.RawMessage(tc.input))
			var ce *connectors.Error
			if !errors.As(err, &ce) || ce.Code != tc.code || !strings.Contains(ce.Message, tc.mention) {
				t.Fatalf("err = %v, want code %s mentioning %q", err, tc.code, tc.mention)
			}
		})
	}
}

func TestListSearches(t *testing.T) {
	r, _ := newRunner(t)
	// The spec: "Searching the tool step search bar for the connector name
	// lists them", by the names users know: "Code hosting", "GitHub".
	for q, want := range map[string]int{"": 1, "greet": 1, "CODEHOST": 1, "hello api": 1, "deploy": 0, "greet deploy": 0,
		"Code hosting": 1, "github": 1, "Vercel": 0, "web analytics": 0} {
		if got := len(r.List(q)); got != want {
			t.Errorf("List(%q) = %d steps, want %d", q, got, want)
		}
	}
	if _, ok := r.Get("codehost.greet"); !ok {
		t.Fatal("Get by id failed")
	}
}

func TestNewRefusesBadCatalogues(t *testing.T) {
	s := greetStep("http://x")
	bad := s
	bad.Input = json.RawMessage(`{"type":"nonsense"}`)
	for name, steps := range map[string][]connectors.Step{
		"duplicate id":  {s, s},
		"broken schema": {bad},
		"no run":        {{ID: "x.y", Input: s.Input}},
	} {
		if _, err := New(Options{Extra: steps, Accounts: fakeAccounts{}}); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// A token the provider refuses (401) is reported to the accounts service:
// the step runs again once with the token it hands back when nothing but
// reads or refused requests reached the provider; a step whose write may
// have taken effect is not run again; an account that can get no other
// token fails with needs_reauth and says it is now marked.
func TestRefusedTokenIsReplacedOrMarked(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path != "/free" && r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	// call sends each request in order and fails at the first 401.
	call := func(id string, reqs ...string) connectors.Step {
		return connectors.Step{
			ID: id, Name: id, Connector: "codehost", Description: id,
			Input: json.RawMessage(`{"type":"object"}`), Output: json.RawMessage(`{"type":"object"}`),
			Run: func(ctx context.Context, env connectors.Env, _ json.RawMessage) (any, error) {
				for _, r := range reqs {
					method, path, _ := strings.Cut(r, " ")
					req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, nil)
					resp, err := env.HTTP.Do(req)
					if err != nil {
						return nil, err
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusUnauthorized {
						return nil, &connectors.Error{Code: connectors.CodeNeedsReauth, Status: 401, Message: "GitHub refused the account's token on " + r}
					}
				}
				return map[string]int{"requests": len(reqs)}, nil
			},
		}
	}
	rej := &rejections{next: "fresh"}
	// A refusal whose message says to reconnect already, as Vercel's and
	// Google's do.
	saysHow := call("codehost.read_says_how", "GET /a")
	plain := saysHow.Run
	saysHow.Run = func(ctx context.Context, env connectors.Env, in json.RawMessage) (any, error) {
		out, err := plain(ctx, env, in)
		var ce *connectors.Error
		if errors.As(err, &ce) {
			ce.Message = "vercel refused the account's token; reconnect the account (401)"
		}
		return out, err
	}
	r, err := New(Options{
		Extra: []connectors.Step{
			saysHow,
			call("codehost.read", "GET /a", "GET /b"),
			call("codehost.write", "POST /a"),
			call("codehost.write_twice", "POST /free", "POST /b"),
		},
		Accounts: fakeAccounts{accounts: map[string]store.Account{"acc_gh": {ID: "acc_gh", TenantID: "t1", Connector: "codehost"}}, rej: rej},
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(step string) ([]string, error) {
		mu.Lock()
		seen = nil
		mu.Unlock()
		_, err := r.Run(context.Background(), "t1", step, "acc_gh", json.RawMessage(`{}`))
		mu.Lock()
		defer mu.Unlock()
		return seen, err
	}

	for _, step := range []string{"codehost.read", "codehost.write"} {
		got, err := run(step)
		if err != nil {
			t.Fatalf("%s: %v; want it run again with the new token", step, err)
		}
		if last := got[len(got)-1]; !strings.HasSuffix(last, "Bearer fresh") || !strings.HasSuffix(got[0], "Bearer tok-acc_gh") {
			t.Fatalf("%s: requests %q; want the refused token first, then the new one", step, got)
		}
	}
	got, err := run("codehost.write_twice")
	var ce *connectors.Error
	if !errors.As(err, &ce) || ce.Code != connectors.CodeNeedsReauth || len(got) != 2 {
		t.Fatalf("write after a write: requests %q, err %v; want needs_reauth and no second run", got, err)
	}
	rej.mu.Lock()
	n := len(rej.rejected)
	for _, tok := range rej.rejected {
		if tok != "tok-acc_gh" {
			t.Errorf("rejected %q, want the token the step used", tok)
		}
	}
	rej.err = &accounts.AccountError{AccountID: "acc_gh", Status: store.StatusNeedsReauth}
	rej.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d rejections reported, want 3", n)
	}

	got, err = run("codehost.read")
	if !errors.As(err, &ce) || ce.Code != connectors.CodeNeedsReauth || ce.Status != 401 ||
		!strings.Contains(ce.Message, "account acc_gh is now marked needs_reauth: reconnect it") || len(got) != 1 {
		t.Fatalf("unrefreshable: requests %q, err %v; want needs_reauth saying the account is marked", got, err)
	}
	// The answer (a 409 through the API) says once how to proceed.
	_, err = run("codehost.read_says_how")
	if !errors.As(err, &ce) || ce.Code != connectors.CodeNeedsReauth ||
		ce.Message != "vercel refused the account's token; reconnect the account (401); account acc_gh is now marked needs_reauth" {
		t.Fatalf("unrefreshable, the provider saying to reconnect: %v; want it said once", err)
	}
}

// Every run is audited, with who asked for it and how it ended, whatever
// ended it.
func TestRunsAreAudited(t *testing.T) {
	r, _ := newRunner(t)
	var got []Audit
	r.audit = func(a Audit) { got = append(got, a) }
	// The runner's clock (Options.Now) ticks a second a reading: a run
	// timed by any other clock would last less.
	var clock time.Time
	r.breaker.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	ctx := connectors.WithCaller(context.Background(), "mcp")
	r.Run(ctx, "t1", "codehost.greet", "acc_gh", json.RawMessage(`{"name":"world"}`))
	r.Run(ctx, "t1", "codehost.greet", "acc_gh", json.RawMessage(`{}`))
	r.Run(context.Background(), "t1", "codehost.greet", "acc_gh", json.RawMessage(`{"name":"busy"}`))
	want := []Audit{
		{Tenant: "t1", Step: "codehost.greet", Account: "acc_gh", Caller: "mcp", Code: "ok"},
		{Tenant: "t1", Step: "codehost.greet", Account: "acc_gh", Caller: "mcp", Code: "validation"},
		{Tenant: "t1", Step: "codehost.greet", Account: "acc_gh", Caller: "", Code: "rate_limited"},
	}
	if len(got) != len(want) {
		t.Fatalf("audited %d runs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Duration < time.Second {
			t.Fatalf("run %d: duration %s, not timed by Options.Now", i, got[i].Duration)
		}
		got[i].Duration = 0
		if got[i] != want[i] {
			t.Fatalf("run %d audited as %+v, want %+v", i, got[i], want[i])
		}
	}
}
