package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// The document builds and is valid OpenAPI 3.1.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	if err := apitest.Validate(); err != nil {
		t.Fatal(err)
	}
	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi %q, %v; want 3.1.x", doc.OpenAPI, err)
	}
}

// GET /v1/openapi.json answers the document to anyone: a client needs it
// before it has a key.
func TestOpenAPIServedWithoutKey(t *testing.T) {
	v, _ := newBoltEnv(t)
	code, body, rec := v.send(http.MethodGet, "/v1/openapi.json", "", "")
	want, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), want) || body["openapi"] != "3.1.0" {
		t.Fatalf("GET /v1/openapi.json without a key: %d %.200s", code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
}

// noDryRuns and noReplays stand in for the dispatcher: the route test
// needs only the routes they add.
type noDryRuns struct{}

func (noDryRuns) DryRun(context.Context, store.Trigger, int) (dispatch.DryRunReport, error) {
	return dispatch.DryRunReport{}, nil
}

type noReplays struct{}

func (noReplays) Replay(context.Context, string, string, string, bool) ([]dispatch.ReplayPlan, error) {
	return nil, nil
}

type noCommits struct{}

func (noCommits) Commit(context.Context, triggers.Capture, []triggers.Event) (bool, error) {
	return false, nil
}

type noHooks struct{}

func (noHooks) Hook(context.Context, triggers.Connector, string) (triggers.Scope, *ingest.Verifier, error) {
	return triggers.Scope{}, nil, ingest.ErrUnknownHook
}

// Every route the server registers under /v1 and /webhooks, with every
// optional part of the API on, is in the document, and every path and
// method of the document is a route: neither can gain one alone.
func TestOpenAPIPathsAreTheRoutes(t *testing.T) {
	v, _ := newBoltEnv(t)
	a, err := api.New(api.Options{
		Accounts: v.accounts, Auth: v.tenants, Tenants: v.tenants, Steps: fakeSteps{}, Registry: newRegistry(t, v),
		Records: v.store, Replayer: noReplays{}, DryRunner: noDryRuns{}, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	codeHost, _ := ingest.NewVerifier(ingest.CodeHostScheme, "s")
	deploy, _ := ingest.NewVerifier(ingest.DeployScheme, "s")
	ing, err := ingest.New(ingest.Options{Committer: noCommits{}, CodeHost: codeHost, Deploy: deploy, Hooks: noHooks{},
		Registerer: prometheus.NewRegistry(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	a.Register(e)
	ing.Register(e)

	param := regexp.MustCompile(`:([a-z_]+)`)
	routes := map[string]bool{}
	for _, r := range e.Routes() {
		if (!strings.HasPrefix(r.Path, "/v1/") && !strings.HasPrefix(r.Path, "/webhooks/")) || r.Method == echo.RouteNotFound {
			continue
		}
		routes[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}

	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// The generated per-step run paths are instances of the templated one.
	stepRun := regexp.MustCompile(`^/v1/steps/[a-z0-9_]+\.[a-z0-9_]+/run$`)
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		if stepRun.MatchString(path) {
			path = "/v1/steps/{id}/run"
		}
		for method := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	for _, r := range slices.Sorted(maps.Keys(routes)) {
		if !documented[r] {
			t.Errorf("route %s is served but not in api/openapi.yaml", r)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(documented)) {
		if !routes[d] {
			t.Errorf("%s is in the OpenAPI document but no route serves it", d)
		}
	}
	if len(routes) < 30 {
		t.Fatalf("only %d routes found: %v", len(routes), routes)
	}
}

// The answers holding a once-shown secret carry Cache-Control: no-store
// in the document.
func TestOpenAPIOnceShownSecretsAreNoStore(t *testing.T) {
	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	paths := doc["paths"].(map[string]any)
	for _, c := range []struct{ path, method, status string }{
		{"/v1/tenants", "post", "201"},
		{"/v1/keys", "post", "201"},
		{"/v1/agents", "post", "201"},
		{"/v1/agents/{id}/nats-password", "post", "200"},
		{"/v1/agents/{id}/endpoint", "get", "200"},
		{"/v1/triggers", "post", "201"},
	} {
		resp := paths[c.path].(map[string]any)[c.method].(map[string]any)["responses"].(map[string]any)[c.status].(map[string]any)
		h, _ := resp["headers"].(map[string]any)
		if h["Cache-Control"] == nil {
			t.Errorf("%s %s %s: no Cache-Control header in the document", c.method, c.path, c.status)
		}
	}
}

func mustVault(t *testing.T) *accounts.Vault {
	t.Helper()
	vault, err := accounts.NewVault(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return vault
}

// Each step's run has its own path in the document, checked against that
// step's own input and output schemas, not the generic run path's.
func TestOpenAPIStepRunsUseTheStepsSchemas(t *testing.T) {
	check := apitest.New(t)
	exchange := func(body string, status int, answer string) error {
		req := httptest.NewRequest(http.MethodPost, "/v1/steps/codehost.create_issue/run", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}}
		return check.Verify(req, []byte(body), resp, []byte(answer))
	}
	const good = `{"account":"acc_1","input":{"owner":"octocat","repo":"hello-world","title":"Bug"}}`
	raw, err := api.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Components.Schemas["codehost.create_issue.input"] == nil || doc.Components.Schemas["codehost.create_issue.output"] == nil {
		t.Fatal("the document lacks codehost.create_issue's schemas")
	}
	// The good input passes and the answer is what is refused: the error
	// must be the answer's, not a refused request's "answered 200".
	const answerRefused, requestRefused = "the answer is not one the document lists", "the request is not one the document takes"
	if err := exchange(good, http.StatusOK, `{"step":"codehost.create_issue","output":{"nope":true}}`); err == nil || !strings.Contains(err.Error(), answerRefused) {
		t.Errorf("an output outside the step's output schema passed: %v", err)
	}
	if err := exchange(`{"account":"acc_1","input":{"owner":"octocat"}}`, http.StatusOK, `{"step":"codehost.create_issue","output":{}}`); err == nil || !strings.Contains(err.Error(), requestRefused) {
		t.Errorf("an input outside the step's input schema answered 200 passed: %v", err)
	}
	if err := exchange(`{"account":"acc_1","input":{"owner":"octocat"}}`, http.StatusBadRequest, `{"error":{"code":"validation","message":"title is required","retryable":false}}`); err != nil {
		t.Errorf("a refused bad input: %v", err)
	}
}
