package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/triggerd/triggerd/internal/testenv"
)

// bearerTransport adds a tenant's key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpNotes collects what a client session is told.
type mcpNotes struct {
	toolsChanged     chan struct{}
	resourcesChanged chan struct{}
	updated          chan *mcp.ResourceUpdatedNotificationParams
}

// mcpVersions are the protocol revisions the tests speak: the SDK's
// latest (stateless, SEP-2575) and the one most clients in use speak
// (sessions, a GET stream).
var mcpVersions = []string{"2026-07-28", "2025-06-18"}

// mcpConnect opens a session with the SDK's client, as the tenant of key,
// asking for protocol revision version.
func mcpConnect(t *testing.T, baseURL, key, version string) (*mcp.ClientSession, *mcpNotes) {
	t.Helper()
	notes := &mcpNotes{toolsChanged: make(chan struct{}, 16), resourcesChanged: make(chan struct{}, 16), updated: make(chan *mcp.ResourceUpdatedNotificationParams, 16)}
	c := mcp.NewClient(&mcp.Implementation{Name: "triggerd-test", Version: "1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			select {
			case notes.resourcesChanged <- struct{}{}:
			default:
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case notes.toolsChanged <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			notes.updated <- r.Params
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: baseURL + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{key}}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, notes
}

// callTool calls a tool and returns its result and its text.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return res, text.String()
}

// listTools returns the session's tools by name.
func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("list tools: %v", err)
		}
		tools[tool.Name] = tool
	}
	return tools
}

// compileSchema compiles a tool's schema as JSON Schema.
func compileSchema(t *testing.T, name string, schema any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: schema is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://"+name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem://" + name)
	if err != nil {
		t.Fatalf("%s: not a valid JSON Schema: %v\n%s", name, err, b)
	}
	return s
}

// wait returns the next value from ch, failing after d.
func wait[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %s", what, d)
		panic("unreachable")
	}
}

var mcpToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// TestMCPSandbox drives triggerd --sandbox with the SDK's own client:
// the step tools, their results and failures, account changes, trigger
// tools, resources and subscriptions; in each protocol revision.
func TestMCPSandbox(t *testing.T) {
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) { testMCPSandbox(t, v) })
	}
}

func testMCPSandbox(t *testing.T, version string) {
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)
	key := readKey(t, dir)

	// No key, or a wrong one: 401 with a challenge, and nothing more.
	for _, auth := range []string{"", "Bearer not-a-key", "Basic " + key} {
		req, _ := http.NewRequest(http.MethodPost, p.httpURL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Fatalf("auth %q: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", auth, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if strings.Contains(string(body), "tenant_") || strings.Contains(string(body), "serverInfo") {
			t.Fatalf("auth %q: the 401 says more than it should: %s", auth, body)
		}
	}

	cs, notes := mcpConnect(t, p.httpURL, key, version)
	tools := listTools(t, cs)

	// Every step of the catalogue is a tool (the sandbox has an account
	// of each connector), with a valid name and valid schemas.
	_, catalogue := api(http.MethodGet, "/v1/steps", "")
	steps := catalogue["steps"].([]any)
	if len(steps) < 50 {
		t.Fatalf("the catalogue lists %d steps", len(steps))
	}
	for _, raw := range steps {
		s := raw.(map[string]any)
		name := strings.ReplaceAll(s["id"].(string), ".", "_")
		tool := tools[name]
		if tool == nil {
			t.Fatalf("step %s has no tool %s", s["id"], name)
		}
		if tool.Title != s["name"] || !strings.HasPrefix(tool.Description, s["description"].(string)) {
			t.Fatalf("tool %s: title %q, description %q; want the step's", name, tool.Title, tool.Description)
		}
		if tool.Annotations == nil || tool.Annotations.OpenWorldHint == nil || !*tool.Annotations.OpenWorldHint {
			t.Fatalf("tool %s: annotations %+v, want openWorldHint", name, tool.Annotations)
		}
		compileSchema(t, name+"/input", tool.InputSchema)
		if tool.OutputSchema == nil {
			t.Fatalf("tool %s declares no output schema", name)
		}
		if out := tool.OutputSchema.(map[string]any); out["type"] != "object" {
			t.Fatalf("tool %s: output schema of type %v, want object", name, out["type"])
		}
		compileSchema(t, name+"/output", tool.OutputSchema)
		props := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
		arg, _ := props["account"].(map[string]any)
		if c, ok := props["connected_account"].(map[string]any); ok {
			arg = c
		}
		if arg == nil || !slices.Contains(arg["enum"].([]any), any(ids[s["connector"].(string)])) {
			t.Fatalf("tool %s: account argument %v, want an enum holding %s", name, arg, ids[s["connector"].(string)])
		}
	}
	for name := range tools {
		if !mcpToolName.MatchString(name) {
			t.Fatalf("tool name %q is not one clients accept", name)
		}
	}
	for name, want := range map[string]struct{ readOnly, destructive, idempotent bool }{
		"codehost_get_issue":           {true, false, true},
		"codehost_create_issue":        {false, false, false},
		"codehost_update_issue":        {false, false, true},
		"codehost_delete_file":         {false, true, false},
		"deploy_cancel_deployment":     {false, true, true},
		"analytics_run_reports":        {true, false, true},
		"codehost_remove_collaborator": {false, true, true},
	} {
		a := tools[name].Annotations
		if a.ReadOnlyHint != want.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != want.destructive || a.IdempotentHint != want.idempotent {
			t.Fatalf("tool %s: annotations readOnly %t destructive %v idempotent %t; want %+v", name, a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint, want)
		}
	}

	// Create Issue: the output as structured content, valid against the
	// declared schema, and a text rendering.
	res, text := callTool(t, cs, "codehost_create_issue", map[string]any{"owner": "octocat", "repo": "hello-world", "title": "Opened over MCP"})
	if res.IsError {
		t.Fatalf("create issue failed: %s", text)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["title"] != "Opened over MCP" || out["number"] == nil {
		t.Fatalf("structured content %v, want the issue", res.StructuredContent)
	}
	if err := compileSchema(t, "create_issue/output", tools["codehost_create_issue"].OutputSchema).Validate(res.StructuredContent); err != nil {
		t.Fatalf("the output does not match the declared schema: %v", err)
	}
	if !strings.Contains(text, "Create Issue succeeded") || !strings.Contains(text, "Opened over MCP") {
		t.Fatalf("text %q", text)
	}
	// The run is audited as /v1's are, saying it came through MCP.
	testenv.Eventually(t, 5*time.Second, "the audit line of the MCP step run", func() bool {
		logs := p.logs()
		return strings.Contains(logs, `"step":"codehost.create_issue","account":"`+ids["codehost"]+`","via":"mcp","result":"ok"`)
	})

	// A validation failure is a tool result with isError, naming the
	// field, and saying what to do.
	res, text = callTool(t, cs, "codehost_create_issue", map[string]any{"owner": "octocat", "repo": "hello-world"})
	if !res.IsError || !strings.Contains(text, "validation") || !strings.Contains(text, "title") || !strings.Contains(text, "call the tool again") {
		t.Fatalf("missing title: isError %t, %q", res.IsError, text)
	}
	// An account of another connector, or of no one, is refused.
	for _, acc := range []string{ids["deploy"], "acc_of_nobody"} {
		res, text = callTool(t, cs, "codehost_get_repository_info", map[string]any{"owner": "octocat", "repo": "hello-world", "account": acc})
		if !res.IsError {
			t.Fatalf("account %s: %q, want a refusal", acc, text)
		}
	}
	// A provider's not-found is typed too.
	res, text = callTool(t, cs, "codehost_get_issue", map[string]any{"owner": "octocat", "repo": "hello-world", "issue_number": 999999})
	if !res.IsError || !strings.HasPrefix(text, "not_found") || res.Meta["triggerd/error"] == nil {
		t.Fatalf("missing issue: isError %t, %q, meta %v", res.IsError, text, res.Meta)
	}

	// Triggers: create one through the tool, subscribe to it, open an
	// issue through a tool, and hear of the run.
	code, agent := api(http.MethodPost, "/v1/agents", `{"name": "mcp-agent"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, agent)
	}
	res, text = callTool(t, cs, "triggers_create", map[string]any{"kind": "new_issue", "account": ids["codehost"], "agent": agent["id"], "params": map[string]any{"repositories": []string{"octocat/nope nope"}}})
	if !res.IsError || !strings.HasPrefix(text, "validation") {
		t.Fatalf("a bad repository: isError %t, %q; want the API's validation", res.IsError, text)
	}
	res, text = callTool(t, cs, "triggers_create", map[string]any{"kind": "new_issue", "account": ids["codehost"], "agent": agent["id"], "params": map[string]any{"repositories": []string{"octocat/hello-world"}}})
	if res.IsError {
		t.Fatalf("create trigger: %s", text)
	}
	triggerID := res.StructuredContent.(map[string]any)["id"].(string)
	uri := "triggerd://triggers/" + triggerID
	wait(t, notes.resourcesChanged, 10*time.Second, "notifications/resources/list_changed after a trigger was created")
	ctx := context.Background()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	// (From 2026-07-28 on, the SDK's client subscribes on a stream of
	// its own and does not report the server's refusal.)
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "triggerd://triggers/trg_of_nobody"}); err == nil && version < "2026-07-28" {
		t.Fatal("subscribing to no trigger succeeded")
	}
	if res, text = callTool(t, cs, "codehost_create_issue", map[string]any{"owner": "octocat", "repo": "hello-world", "title": "Wakes the trigger"}); res.IsError {
		t.Fatalf("create issue: %s", text)
	}
	up := wait(t, notes.updated, 30*time.Second, "notifications/resources/updated for the trigger")
	runID, _ := up.Meta["triggerd/run_id"].(string)
	eventID, _ := up.Meta["triggerd/event_id"].(string)
	if up.URI != uri || runID == "" || eventID == "" {
		t.Fatalf("update %+v, want the trigger's URI with run and event ids", up)
	}
	if code, run := api(http.MethodGet, "/v1/runs/"+runID, ""); code != http.StatusOK || run["trigger_id"] != triggerID || run["event_id"] != eventID {
		t.Fatalf("run %s: %d %v", runID, code, run)
	}
	// The event's resource holds its outcomes; the trigger's its
	// latest events.
	read := func(uri string) string {
		t.Helper()
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		return r.Contents[0].Text
	}
	if ev := read(up.Meta["triggerd/event_uri"].(string)); !strings.Contains(ev, triggerID) || !strings.Contains(ev, `"outcomes"`) {
		t.Fatalf("event resource: %s", ev)
	}
	testenv.Eventually(t, 10*time.Second, "the event in the trigger's resource", func() bool {
		return strings.Contains(read(uri), eventID)
	})
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "triggerd://events/evt_of_nobody"}); err == nil {
		t.Fatal("reading no event succeeded")
	}
	listed, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range listed.Resources {
		uris = append(uris, r.URI)
	}
	if !slices.Contains(uris, uri) || !slices.Contains(uris, "triggerd://events/"+eventID) {
		t.Fatalf("resources %v, want the trigger and its event", uris)
	}

	// The trigger tools: test against recent events, disable, enable,
	// delete.
	res, text = callTool(t, cs, "triggers_test", map[string]any{"id": triggerID})
	if res.IsError || res.StructuredContent.(map[string]any)["matched"].(float64) < 1 {
		t.Fatalf("test trigger: %s", text)
	}
	res, text = callTool(t, cs, "triggers_test", map[string]any{"id": triggerID, "filter": "event.title ==="})
	if !res.IsError || !strings.HasPrefix(text, "validation") {
		t.Fatalf("a bad filter: %s", text)
	}
	for _, name := range []string{"triggers_disable", "triggers_enable"} {
		res, text = callTool(t, cs, name, map[string]any{"id": triggerID})
		if res.IsError || res.StructuredContent.(map[string]any)["enabled"] != (name == "triggers_enable") {
			t.Fatalf("%s: %s", name, text)
		}
	}
	for _, name := range []string{"triggers_list_kinds", "triggers_list", "agents_list"} {
		if res, text = callTool(t, cs, name, nil); res.IsError {
			t.Fatalf("%s: %s", name, text)
		}
	}

	// Removing an account drops its connector's tools, and the session
	// is told.
	drain(notes.toolsChanged)
	if code, out := api(http.MethodDelete, "/v1/accounts/"+ids["deploy"], ""); code != http.StatusOK {
		t.Fatalf("remove account: %d %v", code, out)
	}
	wait(t, notes.toolsChanged, 10*time.Second, "notifications/tools/list_changed")
	after := listTools(t, cs)
	for name := range tools {
		if strings.HasPrefix(name, "deploy_") == (after[name] != nil) {
			t.Fatalf("after removing the deploy account, tool %s listed: %t", name, after[name] != nil)
		}
	}
	if res, text = callTool(t, cs, "triggers_delete", map[string]any{"id": triggerID}); res.IsError {
		t.Fatalf("delete: %s", text)
	}
	if res, text = callTool(t, cs, "triggers_delete", map[string]any{"id": triggerID}); !res.IsError || !strings.HasPrefix(text, "not_found") {
		t.Fatalf("delete again: %s", text)
	}
}

func drain[T any](ch chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func readKey(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "default_tenant_key"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestMCPTenants: each tenant sees its own accounts' tools, cannot run a
// step as another tenant's account nor use another tenant's session, and
// a session hears of an account connected meanwhile.
func TestMCPTenants(t *testing.T) {
	const admin = "test-admin-key-0123456789"
	v := newE2EWith(t, nil, []string{"TRIGGERD_ADMIN_KEY=" + admin})
	base := "http://" + v.httpAddr
	call := func(key, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, created := call(admin, http.MethodPost, "/v1/tenants", `{"name": "other"}`)
	if code != http.StatusCreated {
		t.Fatalf("create tenant: %d %v", code, created)
	}
	otherKey := created["api_key"].(string)

	// Sessions exist in the revisions before 2026-07-28.
	csA, _ := mcpConnect(t, base, v.key, "2025-06-18")
	csB, notesB := mcpConnect(t, base, otherKey, "2025-06-18")
	if tools := listTools(t, csB); tools["codehost_create_issue"] != nil || tools["triggers_list"] == nil {
		t.Fatalf("a tenant without accounts lists the step tools, or not the trigger tools: %d tools", len(tools))
	}

	// The other tenant connects an account of its own; its session is
	// told, and its tools act as that account only.
	_, start := call(otherKey, http.MethodGet, "/v1/connect/codehost/start", "")
	query, err := v.auth.SignIn(context.Background(), start["authorize_url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	code, cb := call("", http.MethodGet, "/v1/connect/codehost/callback?"+query.Encode(), "")
	if code != http.StatusOK {
		t.Fatalf("callback: %d %v", code, cb)
	}
	accB := cb["account"].(map[string]any)["id"].(string)
	loginB := cb["account"].(map[string]any)["login"].(string)
	wait(t, notesB.toolsChanged, 10*time.Second, "notifications/tools/list_changed after an account was connected")
	tool := listTools(t, csB)["codehost_create_issue"]
	if tool == nil {
		t.Fatal("no codehost tools after the account was connected")
	}
	arg := tool.InputSchema.(map[string]any)["properties"].(map[string]any)["account"].(map[string]any)
	if enum := arg["enum"].([]any); len(enum) != 1 || enum[0] != accB || !strings.Contains(arg["description"].(string), accB+" = "+loginB) {
		t.Fatalf("account argument %v, want only the tenant's own account, described by its login", arg)
	}
	res, text := callTool(t, csB, "codehost_get_repository_info", map[string]any{"owner": "octocat", "repo": "hello-world", "account": v.account})
	if !res.IsError || !strings.HasPrefix(text, "not_found") {
		t.Fatalf("another tenant's account: isError %t, %q; want not_found", res.IsError, text)
	}

	// A session belongs to the tenant that opened it.
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+otherKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", csA.ID())
	req.Header.Set("Mcp-Protocol-Version", csA.InitializeResult().ProtocolVersion)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "codehost_") {
		t.Fatalf("another tenant's session: %d %s; want 403", resp.StatusCode, body)
	}
}

// TestMCPStdioBridge runs "triggerctl mcp" as MCP clients that start a
// local command do, with the SDK's client over its stdin and stdout.
func TestMCPStdioBridge(t *testing.T) {
	ctl := filepath.Join(t.TempDir(), "triggerctl")
	if out, err := exec.Command("go", "build", "-o", ctl, "../triggerctl").CombinedOutput(); err != nil {
		t.Fatalf("building triggerctl: %v\n%s", err, out)
	}
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) { testMCPStdioBridge(t, ctl, v) })
	}
}

func testMCPStdioBridge(t *testing.T, ctl, version string) {
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)
	connect := func(key string) (*mcp.ClientSession, *mcpNotes, *testenv.Buffer, error) {
		notes := &mcpNotes{toolsChanged: make(chan struct{}, 16), updated: make(chan *mcp.ResourceUpdatedNotificationParams, 16)}
		c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case notes.toolsChanged <- struct{}{}:
				default:
				}
			},
			ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { notes.updated <- r.Params },
		})
		cmd := exec.Command(ctl, "mcp", "--url", p.httpURL)
		cmd.Env = append(cleanEnv(), "TRIGGERD_API_KEY="+key, "HOME="+t.TempDir())
		stderr := &testenv.Buffer{}
		cmd.Stderr = stderr
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err == nil && cs.InitializeResult().ProtocolVersion != version {
			t.Fatalf("negotiated %s through the bridge, want %s\n%s", cs.InitializeResult().ProtocolVersion, version, stderr.String())
		}
		return cs, notes, stderr, err
	}

	if _, _, stderr, err := connect("not-a-key"); err == nil || !strings.Contains(stderr.String(), "401") {
		t.Fatalf("a wrong key: %v, stderr %q; want the connection refused, saying why", err, stderr.String())
	}

	cs, notes, stderr, err := connect(readKey(t, dir))
	if err != nil {
		t.Fatalf("connect through the bridge: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	tools := listTools(t, cs)
	if tools["codehost_create_issue"] == nil || tools["deploy_list_deployments"] == nil {
		t.Fatalf("tools through the bridge: %d", len(tools))
	}
	_, agent := api(http.MethodPost, "/v1/agents", `{"name": "bridge-agent"}`)
	code, trigger := api(http.MethodPost, "/v1/triggers", `{"kind": "new_issue", "account": "`+ids["codehost"]+`", "agent": "`+agent["id"].(string)+`", "params": {"repositories": ["octocat/hello-world"]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trigger)
	}
	uri := "triggerd://triggers/" + trigger["id"].(string)
	ctx := context.Background()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	res, text := callTool(t, cs, "codehost_create_issue", map[string]any{"owner": "octocat", "repo": "hello-world", "title": "Through the bridge"})
	if res.IsError || res.StructuredContent.(map[string]any)["title"] != "Through the bridge" {
		t.Fatalf("create issue through the bridge: %s", text)
	}
	up := wait(t, notes.updated, 30*time.Second, "the trigger's update through the bridge")
	if up.URI != uri || up.Meta["triggerd/run_id"] == nil {
		t.Fatalf("update %+v", up)
	}
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: up.Meta["triggerd/event_uri"].(string)})
	if err != nil || !strings.Contains(r.Contents[0].Text, trigger["id"].(string)) {
		t.Fatalf("read the event through the bridge: %v", err)
	}
	if code, _ := api(http.MethodDelete, "/v1/accounts/"+ids["analytics"], ""); code != http.StatusOK {
		t.Fatalf("remove account: %d", code)
	}
	wait(t, notes.toolsChanged, 10*time.Second, "tools/list_changed through the bridge")
	if tools := listTools(t, cs); tools["analytics_run_reports"] != nil {
		t.Fatal("the removed account's tools are still listed")
	}
	if err := cs.Close(); err != nil {
		t.Fatalf("close: %v\n%s", err, stderr.String())
	}
}
