package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

type fakeAuth map[string]string

func (f fakeAuth) Authenticate(_ context.Context, key string) (string, error) {
	if key == "broken" {
		return "", errors.New("store down")
	}
	if id, ok := f[key]; ok {
		return id, nil
	}
	return "", tenants.ErrInvalidKey
}

type fakeAccounts struct {
	mu   sync.Mutex
	accs map[string][]store.Account
}

func (f *fakeAccounts) List(_ context.Context, tenantID string) ([]store.Account, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.Account(nil), f.accs[tenantID]...), nil
}

func (f *fakeAccounts) add(a store.Account) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accs[a.TenantID] = append(f.accs[a.TenantID], a)
}

// fakeSteps runs "demo" steps: the input's "fail" is the error code to
// fail with; otherwise the output echoes the tenant, account and input.
type fakeSteps struct{}

var demoSteps = []connectors.Step{
	{ID: "demo.get_thing", Name: "Get Thing", Connector: "demo", Description: "Reads a thing.",
		Input:  json.RawMessage(`{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"fail":{"type":"string"}}}`),
		Output: json.RawMessage(`{"type":"object","properties":{"tenant":{"type":"string"},"account":{"type":"string"}}}`)},
	{ID: "demo.delete_thing", Name: "Delete Thing", Connector: "demo", Description: "Deletes a thing.",
		Input: json.RawMessage(`{"type":"object","properties":{}}`), Output: json.RawMessage(`{"$ref":"#/$defs/x","$defs":{"x":{"type":"object"}}}`)},
	{ID: "ga.create_property", Name: "Create Property", Connector: "ga", Description: "Creates a property in an account.",
		Input: json.RawMessage(`{"type":"object","required":["account"],"properties":{"account":{"type":"string"}}}`)},
}

func (fakeSteps) List(string) []connectors.Step { return demoSteps }

func (f fakeSteps) Run(_ context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error) {
	var in map[string]any
	json.Unmarshal(input, &in)
	if code, _ := in["fail"].(string); code != "" {
		return nil, &connectors.Error{Code: connectors.ErrorCode(code), Message: "it failed", RetryAfter: 42 * time.Second, Status: 503}
	}
	if accountID != "acc-1" && accountID != "acc-2" && accountID != "acc-ga" {
		return nil, connectors.Errorf(connectors.CodeNotFound, "no connected account %s in this tenant", accountID)
	}
	return json.Marshal(map[string]any{"tenant": tenantID, "account": accountID, "input": in})
}

func newTestServer(t *testing.T) (*httptest.Server, *Server, *fakeAccounts) {
	t.Helper()
	accs := &fakeAccounts{accs: map[string][]store.Account{
		"t1": {{ID: "acc-1", TenantID: "t1", Connector: "demo", Login: "octocat", Status: store.StatusActive},
			{ID: "acc-old", TenantID: "t1", Connector: "demo", Login: "gone", Status: store.StatusRemoved}},
	}}
	s, err := New(Options{Auth: fakeAuth{"key-1": "t1"}, Accounts: accs, Steps: fakeSteps{}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s, accs
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url string, changed chan<- struct{}) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, HTTPClient: &http.Client{Transport: bearer("key-1")}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func tools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res, res.Content[0].(*mcp.TextContent).Text
}

// The tools are the steps of connectors with an active account, each
// with its accounts; they follow the accounts, and sessions are told.
func TestToolsFollowAccounts(t *testing.T) {
	srv, s, accs := newTestServer(t)
	changed := make(chan struct{}, 4)
	cs := connect(t, srv.URL, changed)
	list := tools(t, cs)
	if len(list) != 2 || list["demo_get_thing"] == nil || list["demo_delete_thing"] == nil {
		t.Fatalf("tools %v, want the demo steps only", keys(list))
	}
	get := list["demo_get_thing"]
	props := get.InputSchema.(map[string]any)["properties"].(map[string]any)
	arg := props["account"].(map[string]any)
	if fmt.Sprint(arg["enum"]) != "[acc-1]" || !strings.Contains(arg["description"].(string), "acc-1 = octocat") {
		t.Fatalf("account argument %v: want the active account only, by login", arg)
	}
	if req := fmt.Sprint(get.InputSchema.(map[string]any)["required"]); req != "[name]" {
		t.Fatalf("required %s: one account may be left out", req)
	}
	if out := list["demo_delete_thing"].OutputSchema.(map[string]any); out["type"] != "object" {
		t.Fatalf("a $ref output schema is typed %v, want object", out["type"])
	}

	accs.add(store.Account{ID: "acc-2", TenantID: "t1", Connector: "demo", Login: "hubot", Status: store.StatusActive})
	accs.add(store.Account{ID: "acc-ga", TenantID: "t1", Connector: "ga", Login: "", ExternalID: "ga-7", Status: store.StatusActive})
	s.AccountsChanged(context.Background(), "t1")
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no tools/list_changed")
	}
	list = tools(t, cs)
	get = list["demo_get_thing"]
	if req := fmt.Sprint(get.InputSchema.(map[string]any)["required"]); req != "[name account]" {
		t.Fatalf("required %s with two accounts, want the account too", req)
	}
	ga := list["ga_create_property"]
	if ga == nil {
		t.Fatal("no tool for the connector just connected")
	}
	gaProps := ga.InputSchema.(map[string]any)["properties"].(map[string]any)
	if _, ok := gaProps["connected_account"]; !ok || gaProps["account"].(map[string]any)["enum"] != nil {
		t.Fatalf("ga properties %v: the step's own account stays, the connected one is connected_account", gaProps)
	}
	if !strings.Contains(gaProps["connected_account"].(map[string]any)["description"].(string), "acc-ga = ga-7") {
		t.Fatal("an account without a login is described by its external id")
	}

	// Two accounts: the account must be named.
	res, text := call(t, cs, "demo_get_thing", map[string]any{"name": "x"})
	if !res.IsError || !strings.HasPrefix(text, "validation: at /account: missing") {
		t.Fatalf("no account among two: %q", text)
	}
	res, text = call(t, cs, "demo_get_thing", map[string]any{"name": "x", "account": "acc-2"})
	out, _ := res.StructuredContent.(map[string]any)
	if res.IsError || out["account"] != "acc-2" || out["tenant"] != "t1" || out["input"].(map[string]any)["account"] != nil {
		t.Fatalf("run as acc-2: %q %v; want the account passed apart from the input", text, res.StructuredContent)
	}
	if !strings.HasPrefix(text, "Get Thing succeeded as hubot (acc-2).") {
		t.Fatalf("text %q", text)
	}
	res, _ = call(t, cs, "ga_create_property", map[string]any{"account": "accounts/1"})
	if out, _ := res.StructuredContent.(map[string]any); res.IsError || out["account"] != "acc-ga" || out["input"].(map[string]any)["account"] != "accounts/1" {
		t.Fatalf("ga: %v", res.StructuredContent)
	}
}

// A failed step is a tool result with isError, its code, and what to do.
func TestFailuresAreResults(t *testing.T) {
	srv, _, _ := newTestServer(t)
	cs := connect(t, srv.URL, make(chan struct{}, 1))
	for code, next := range map[string]string{
		"validation":        "call the tool again",
		"not_found":         "do not retry unchanged",
		"permission_denied": "another connected account",
		"rate_limited":      "Wait 42 seconds",
		"account_removed":   "reconnect",
		"needs_reauth":      "reconnect the account",
		"upstream":          "report the failure",
		"unavailable":       "try again in 42 seconds",
	} {
		res, text := call(t, cs, "demo_get_thing", map[string]any{"name": "x", "fail": code})
		if !res.IsError || !strings.HasPrefix(text, code+": it failed") || !strings.Contains(text, next) {
			t.Errorf("%s: isError %t, %q; want the code and %q", code, res.IsError, text, next)
		}
		meta, _ := res.Meta["triggerd/error"].(map[string]any)
		if meta["code"] != code || meta["retry_after_seconds"] != float64(42) || meta["upstream_status"] != float64(503) {
			t.Errorf("%s: meta %v", code, res.Meta)
		}
	}
	res, text := call(t, cs, "demo_get_thing", map[string]any{"name": "x", "account": "acc-of-another-tenant"})
	if !res.IsError || !strings.HasPrefix(text, "not_found") {
		t.Fatalf("another tenant's account: %q", text)
	}
}

func TestAuthentication(t *testing.T) {
	srv, _, _ := newTestServer(t)
	post := func(auth, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for auth, want := range map[string]string{
		"":            `Bearer realm="triggerd"`,
		"Bearer nope": `Bearer realm="triggerd", error="invalid_token"`,
		"Token key-1": `Bearer realm="triggerd"`,
		"Bearer    ":  `Bearer realm="triggerd"`,
	} {
		resp := post(auth, init)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
			t.Errorf("auth %q: %d %q, want 401 %q", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
		}
	}
	if resp := post("Bearer broken", init); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a key that cannot be checked: %d, want 503", resp.StatusCode)
	}
	if resp := post("Bearer key-1", init); resp.StatusCode != http.StatusOK {
		t.Errorf("a good key: %d", resp.StatusCode)
	}
	// Through a reverse proxy on the same host: loopback, with the
	// public name as Host.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(init))
	req.Host = "triggerd.example.com"
	req.Header.Set("Authorization", "Bearer key-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("through a proxy on the same host: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 11<<20) + `"}}`
	if resp := post("Bearer key-1", big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an 11 MiB body: %d, want 413", resp.StatusCode)
	}
}

func TestAnnotations(t *testing.T) {
	for id, want := range map[string][3]bool{ // readOnly, destructive, idempotent
		"codehost.get_issue":                       {true, false, true},
		"codehost.search_issues_and_pull_requests": {true, false, true},
		"analytics.run_reports":                    {true, false, true},
		"codehost.create_issue":                    {false, false, false},
		"codehost.update_issue":                    {false, false, true},
		"codehost.delete_file":                     {false, true, false},
		"deploy.cancel_deployment":                 {false, true, true},
		"codehost.remove_collaborator":             {false, true, true},
		"codehost.star_repo":                       {false, false, true},
		"analytics.create_key_events":              {false, false, true},
		"codehost.merge_pull_request":              {false, false, false},
		"codehost.api_call":                        {false, true, false},
	} {
		a := annotations(connectors.Step{ID: id})
		got := [3]bool{a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint}
		if got != want || a.OpenWorldHint == nil || !*a.OpenWorldHint {
			t.Errorf("%s: %v open %v, want %v and openWorldHint", id, got, a.OpenWorldHint, want)
		}
	}
	if !validName.MatchString(toolName("codehost.create_or_update_file_contents")) || validName.MatchString(strings.Repeat("x", 65)) {
		t.Fatal("tool names")
	}
}

// The text repeating a long output is cut on a character's boundary.
func TestSuccessCutsText(t *testing.T) {
	// {"st":" is 7 bytes and each é 2: maxText, even, falls inside one.
	out, _ := json.Marshal(map[string]string{"st": strings.Repeat("é", maxText)})
	res := success("ok.", out)
	text := res.Content[0].(*mcp.TextContent).Text
	if !utf8.ValidString(text) || len(text) > maxText+100 || !strings.HasSuffix(text, "the structured content has all of it)") {
		t.Fatalf("cut text: valid %t, %d bytes", utf8.ValidString(text), len(text))
	}
	if string(res.StructuredContent.(json.RawMessage)) != string(out) {
		t.Fatal("the structured content must be whole")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
