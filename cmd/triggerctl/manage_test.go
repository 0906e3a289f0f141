package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTenantsAndAccountsCommands(t *testing.T) {
	dir := setTestEnv(t)
	os.WriteFile(filepath.Join(dir, "admin_key"), []byte("the-admin-key\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "default_tenant_key"), []byte("tdk_default\n"), 0o600)
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		switch {
		case r.URL.Path == "/v1/tenants" && r.Header.Get("Authorization") == "Bearer the-admin-key":
			var body struct{ Name string }
			json.NewDecoder(r.Body).Decode(&body)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"tenant": map[string]string{"name": body.Name}, "api_key": "tdk_new"})
		case strings.HasPrefix(r.URL.Path, "/v1/") && r.Header.Get("Authorization") == "Bearer tdk_default":
			json.NewEncoder(w).Encode(map[string]any{"ok": true})
		default:
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unauthorized", "message": "the API key is not valid"}})
		}
	}))
	defer srv.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"tenants", "--url", srv.URL, "--data-dir", dir, "create", "acme"}, &out, &errOut); code != 0 {
		t.Fatalf("tenants create: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"api_key":"tdk_new"`) || !strings.Contains(out.String(), "acme") {
		t.Fatalf("tenants create printed %q", out.String())
	}
	for _, args := range [][]string{{"list"}, {"get", "acc_1"}, {"connect", "codehost"}, {"remove", "acc_1"}} {
		out.Reset()
		if code := run(append([]string{"accounts", "--url", srv.URL, "--data-dir", dir}, args...), &out, &errOut); code != 0 {
			t.Fatalf("accounts %v: %d %s", args, code, errOut.String())
		}
	}
	want := []string{
		"POST /v1/tenants Bearer the-admin-key",
		"GET /v1/accounts Bearer tdk_default",
		"GET /v1/accounts/acc_1 Bearer tdk_default",
		"GET /v1/connect/codehost/start Bearer tdk_default",
		"DELETE /v1/accounts/acc_1 Bearer tdk_default",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// A wrong key surfaces the server's message.
	t.Setenv("TRIGGERD_API_KEY", "tdk_wrong")
	errOut.Reset()
	if code := run([]string{"accounts", "--url", srv.URL, "list"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "not valid") {
		t.Fatalf("wrong key: %d %q", code, errOut.String())
	}
}

func TestStepsCommand(t *testing.T) {
	dir := setTestEnv(t)
	os.WriteFile(filepath.Join(dir, "default_tenant_key"), []byte("tdk_default\n"), 0o600)
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
		}
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		json.NewEncoder(w).Encode(map[string]any{"ok": true})
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	for _, args := range [][]string{
		{"list"}, {"list", "create issue"}, {"show", "codehost.create_issue"},
		// As the README writes it: flags after the command's arguments.
		{"run", "codehost.create_issue", "--account", "acc_1", "--input", `{"title":"x"}`},
		{"run", "codehost.create_issue", "--account", "acc_1", "--input", "@" + writeFile(t, dir, "input.json", `{"title":"from a file"}`)},
	} {
		if code := run(append([]string{"steps", "--url", srv.URL, "--data-dir", dir}, args...), &out, &errOut); code != 0 {
			t.Fatalf("steps %v: %d %s", args, code, errOut.String())
		}
	}
	want := []string{
		"GET /v1/steps ",
		"GET /v1/steps?q=create+issue ",
		"GET /v1/steps/codehost.create_issue ",
		`POST /v1/steps/codehost.create_issue/run {"account":"acc_1","input":{"title":"x"}}`,
		`POST /v1/steps/codehost.create_issue/run {"account":"acc_1","input":{"title":"from a file"}}`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	if code := run([]string{"steps", "--url", srv.URL, "--data-dir", dir, "--input", "{", "run", "x"}, &out, &errOut); code != 2 {
		t.Fatalf("bad --input: exit %d, want 2", code)
	}
}

func TestDispatchCommands(t *testing.T) {
	dir := setTestEnv(t)
	os.WriteFile(filepath.Join(dir, "default_tenant_key"), []byte("tdk_default\n"), 0o600)
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent) // no body: must not be an error
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true})
	}))
	defer srv.Close()
	steps := filepath.Join(dir, "steps.json")
	os.WriteFile(steps, []byte(`[{"name":"c","step":"codehost.get_issue","account":"a1","input":{}}]`), 0o600)
	vercelSecrets := filepath.Join(dir, "vercel.secret")
	os.WriteFile(vercelSecrets, []byte("pJ7kq2ZQvN4xXw9mHc3tLb8R\nZm8nV4pQ2rT6yW1xK9cB3dF5\n"), 0o600)
	for _, args := range [][]string{
		{"agents", "create", "--name", "triage", "--steps", "@" + steps},
		{"agents", "create", "--name", "hook", "--webhook-url", "https://agent.example/runs"},
		{"agents", "endpoint", "ag1"},
		{"agents", "set-secrets", "ag1", "--secret-file", vercelSecrets},
		{"agents", "delete", "ag1"},
		{"triggers", "create", "--kind", "new_issue", "--account", "a1", "--agent", "ag1", "--repos", "o/r,o/s", "--params", `{"labels":["bug"]}`, "--filter", "true"},
		{"triggers", "disable", "t1"},
		{"triggers", "events", "t1", "--limit", "5"},
		{"triggers", "delete", "t1"},
		{"triggers", "test", "t1"},
		{"triggers", "test", "t1", "--filter", "", "--limit", "3"},
		{"triggers", "test", "--kind", "new_issue", "--account", "a1", "--agent", "ag1", "--repos", "o/r", "--filter", "event.action == 'opened'"},
		{"runs", "list", "--trigger", "t1", "--status", "failed"},
		{"runs", "get", "r1"},
		{"events", "get", "e1"},
		{"replay-event", "--trigger", "t1", "--bypass-filter", "e1"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append(args, "--url", srv.URL, "--data-dir", dir), &out, &errOut); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errOut.String())
		}
	}
	want := []string{
		`POST /v1/agents {"delivery":"nats","name":"triage","steps":[{"name":"c","step":"codehost.get_issue","account":"a1","input":{}}]}`,
		`POST /v1/agents {"delivery":"http","name":"hook","url":"https://agent.example/runs"}`,
		`GET /v1/agents/ag1/endpoint`,
		`PUT /v1/agents/ag1/endpoint/secrets {"secrets":["pJ7kq2ZQvN4xXw9mHc3tLb8R","Zm8nV4pQ2rT6yW1xK9cB3dF5"]}`,
		`DELETE /v1/agents/ag1`,
		`POST /v1/triggers {"account":"a1","agent":"ag1","enabled":true,"filter":"true","kind":"new_issue","params":{"labels":["bug"],"repositories":["o/r","o/s"]}}`,
		`PATCH /v1/triggers/t1 {"enabled":false}`,
		`GET /v1/triggers/t1/events?limit=5`,
		`DELETE /v1/triggers/t1`,
		`POST /v1/triggers/t1/test {"limit":20}`,
		`POST /v1/triggers/t1/test {"filter":"","limit":3}`,
		`POST /v1/triggers/test {"account":"a1","agent":"ag1","filter":"event.action == 'opened'","kind":"new_issue","limit":20,"params":{"repositories":["o/r"]}}`,
		`GET /v1/runs?limit=20&status=failed&trigger=t1`,
		`GET /v1/runs/r1`,
		`GET /v1/events/e1`,
		`POST /v1/events/e1/replay {"bypass_filter":true,"trigger_id":"t1"}`,
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
	// Mistakes are refused before anything is sent, naming what to fix.
	seen = nil
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"triggers", "create", "--kind", "new_issue", "--account", "a1"}, "create needs --kind, --account and --agent; missing: --agent"},
		{[]string{"triggers", "test", "--account", "a1"}, "missing: --kind, --agent"},
		{[]string{"triggers", "create", "--kind", "new_issue", "--account", "a1", "--agent", "ag1", "--repos", "o/r", "--params", `{"repositories":["o/s"]}`},
			"--repos and --params' repositories both name the repositories"},
		{[]string{"agents", "set-secrets", "ag1"}, "set-secrets needs --secret-file FILE"},
		{[]string{"agents", "set-secrets", "ag1", "--secret-file", filepath.Join(dir, "absent")}, "--secret-file " + filepath.Join(dir, "absent")},
	} {
		var out, errOut bytes.Buffer
		if code := run(append(c.args, "--url", srv.URL, "--data-dir", dir), &out, &errOut); code == 0 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want it to say %q", c.args, code, errOut.String(), c.want)
		}
	}
	if len(seen) > 0 {
		t.Errorf("sent %q for refused commands", seen)
	}
}
