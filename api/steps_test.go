package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

type fakeSteps struct{ err error }

// fakeStepID is the fake catalogue's one step, named outside the real
// catalogue so that its runs are checked against the document's generic
// run path, not a real step's schemas.
const fakeStepID = "example.create_thing"

func (f fakeSteps) List(q string) []connectors.Step {
	return []connectors.Step{{ID: fakeStepID, Name: "Create Thing", Connector: "example", Description: "Creates a thing."}}
}
func (f fakeSteps) Get(id string) (connectors.Step, bool) {
	return connectors.Step{ID: id, Name: "Create Thing", Connector: "example", Description: "Creates a thing.",
		Input: json.RawMessage(`{"type":"object"}`), Output: json.RawMessage(`{"type":"object"}`)}, id == fakeStepID
}
func (f fakeSteps) Run(_ context.Context, tenant, id, account string, input json.RawMessage) (json.RawMessage, error) {
	if f.err != nil {
		return nil, f.err
	}
	return json.RawMessage(`{"number":7,"tenant":"` + tenant + `","account":"` + account + `"}`), nil
}

type keyAuth struct{}

func (keyAuth) Authenticate(_ context.Context, key string) (string, error) { return "t-" + key, nil }

type noAccounts struct{}

func (noAccounts) Start(context.Context, string, string, string) (string, error) { return "", nil }
func (noAccounts) Callback(context.Context, string, url.Values) (store.Account, string, error) {
	return store.Account{}, "", nil
}
func (noAccounts) List(context.Context, string) ([]store.Account, error) { return nil, nil }
func (noAccounts) Get(context.Context, string, string) (store.Account, error) {
	return store.Account{}, nil
}
func (noAccounts) Remove(context.Context, string, string) (store.Account, accounts.RemoveReport, error) {
	return store.Account{}, accounts.RemoveReport{}, nil
}

// stepsServer is the API over a fake step catalogue, with a Checker of
// the exchanges with it.
type stepsServer struct {
	e     *echo.Echo
	check *apitest.Checker
}

func newStepsServer(t *testing.T, runner fakeSteps) stepsServer {
	t.Helper()
	a, err := api.New(api.Options{Accounts: noAccounts{}, Auth: keyAuth{}, Tenants: noTenants{}, Steps: runner, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	a.Register(e)
	return stepsServer{e: e, check: apitest.New(t)}
}

// noTenants creates empty tenants; the steps tests use nothing else of it.
type noTenants struct{}

func (noTenants) Create(context.Context, string) (store.Tenant, string, error) {
	return store.Tenant{}, "", nil
}
func (noTenants) Keys(context.Context, string) ([]tenants.Key, error) { return nil, nil }
func (noTenants) CreateKey(context.Context, string, string) (tenants.Key, string, error) {
	return tenants.Key{}, "", nil
}
func (noTenants) Revoke(context.Context, string, string) error { return nil }

func (s stepsServer) call(method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	return s.check.Serve(s.e, req)
}

func TestStepsEndpoints(t *testing.T) {
	e := newStepsServer(t, fakeSteps{})
	if rec := e.call(http.MethodGet, "/v1/steps?q=thing", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"`+fakeStepID+`"`) {
		t.Fatalf("list: %d %s", rec.Code, rec.Body)
	}
	if rec := e.call(http.MethodGet, "/v1/steps/example.nope", ""); rec.Code != 404 {
		t.Fatalf("unknown step: %d", rec.Code)
	}
	rec := e.call(http.MethodPost, "/v1/steps/"+fakeStepID+"/run", `{"account":"acc_1","input":{"title":"x"}}`)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"tenant":"t-k1"`) || !strings.Contains(rec.Body.String(), `"account":"acc_1"`) {
		t.Fatalf("run: %d %s", rec.Code, rec.Body)
	}
	if rec := e.call(http.MethodPost, "/v1/steps/"+fakeStepID+"/run", `not json`); rec.Code != 400 {
		t.Fatalf("bad body: %d", rec.Code)
	}
	// Bodies are one object of the documented fields, within the limit.
	for body, want := range map[string]int{
		`{"account":"acc_1","input":{},"bogus":1}`:                          400,
		`{"account":"acc_1","input":{}}{"account":"acc_2"`:                  400,
		`{"account":"acc_1","input":{}}` + "\n":                             200,
		`{"account":"acc_1","input":"` + strings.Repeat("a", 11<<20) + `"}`: 413,
	} {
		if rec := e.call(http.MethodPost, "/v1/steps/"+fakeStepID+"/run", body); rec.Code != want {
			t.Errorf("%.60s: %d %s, want %d", body, rec.Code, rec.Body.String(), want)
		}
	}
}

func TestStepErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		err    *connectors.Error
		status int
	}{
		{&connectors.Error{Code: connectors.CodeValidation, Message: "m"}, 400},
		{&connectors.Error{Code: connectors.CodeNotFound, Message: "m", Status: 404}, 404},
		{&connectors.Error{Code: connectors.CodePermissionDenied, Message: "m"}, 403},
		{&connectors.Error{Code: connectors.CodeRateLimited, Message: "m", RetryAfter: 1500 * time.Millisecond, Retryable: true}, 429},
		{&connectors.Error{Code: connectors.CodeAccountRemoved, Message: "m"}, 409},
		{&connectors.Error{Code: connectors.CodeNeedsReauth, Message: "m"}, 409},
		{&connectors.Error{Code: connectors.CodeUpstream, Message: "m", Status: 500}, 502},
		{&connectors.Error{Code: connectors.CodeUnavailable, Message: "m", RetryAfter: 1500 * time.Millisecond, Retryable: true}, 503},
	} {
		rec := newStepsServer(t, fakeSteps{err: tc.err}).call(http.MethodPost, "/v1/steps/"+fakeStepID+"/run", `{"account":"a","input":{}}`)
		var body struct {
			Error map[string]any `json:"error"`
		}
		json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != tc.status || body.Error["code"] != string(tc.err.Code) {
			t.Fatalf("%s: %d %s, want %d", tc.err.Code, rec.Code, rec.Body, tc.status)
		}
		if tc.err.RetryAfter > 0 && (rec.Header().Get("Retry-After") != "2" || body.Error["retry_after_seconds"] != float64(2)) {
			t.Fatalf("%s: Retry-After %q body %v, want 2 (rounded up)", tc.err.Code, rec.Header().Get("Retry-After"), body.Error)
		}
	}
}
