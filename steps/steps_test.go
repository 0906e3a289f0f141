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
	"testing"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

// fakeAccounts hands out clients for a fixed set of accounts.
type fakeAccounts struct {
	accounts map[string]store.Account
	errs     map[string]error
}

func (f fakeAccounts) Client(_ context.Context, tenant, id string) (*http.Client, store.Account, error) {
	if err := f.errs[id]; err != nil {
		return nil, store.Account{}, err
	}
	acc, ok := f.accounts[id]
	if !ok || acc.TenantID != tenant {
		return nil, store.Account{}, &accounts.AccountError{AccountID: id}
	}
	return &http.Client{}, acc, nil
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
		{"missing field", "codehost.greet", "acc_gh", `{}`, connectors.CodeValidation, "name"},
		{"extra field", "codehost.greet", "acc_gh", `{"name":"a","x":1}`, connectors.CodeValidation, "x"},
		{"wrong type", "codehost.greet", "acc_gh", `{"name":3}`, connectors.CodeValidation, "/name"},
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
	for q, want := range map[string]int{"": 1, "greet": 1, "CODEHOST": 1, "hello api": 1, "deploy": 0, "greet deploy": 0} {
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
