package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// TestPythonAgentInTheSandbox follows docs/agents.md: the Python HTTP
// agent of docs/examples receives the run a sandbox trigger starts,
// verifies its signature, and its answer becomes the run's result.
func TestPythonAgentInTheSandbox(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3", err)
	}
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox", "--allow-private-agent-urls")
	api, ids := sandboxAPI(t, &p, dir)

	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	code, ag := api(http.MethodPost, "/v1/agents", `{"name": "python", "delivery": "http", "url": "http://`+addr+`/runs"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, ag)
	}
	secret, _ := ag["webhook_secret"].(string)
	agentID, _ := ag["id"].(string)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "..", "docs", "examples", "http_agent.py"))
	cmd.Env = append(os.Environ(), "AGENT_SECRET="+secret, "PORT="+port)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	testenv.Eventually(t, 20*time.Second, "the Python agent listening on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	code, tr := api(http.MethodPost, "/v1/triggers", `{"kind": "new_issue", "account": "`+ids["codehost"]+`", "agent": "`+agentID+`", "params": {"repositories": ["octocat/hello-world"]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, tr)
	}
	code, out := api(http.MethodPost, "/v1/steps/codehost.create_issue/run", `{"account":"`+ids["codehost"]+`","input":{"owner":"octocat","repo":"hello-world","title":"Python, are you there?"}}`)
	if code != http.StatusOK {
		t.Fatalf("create issue: %d %v", code, out)
	}
	var run map[string]any
	testenv.Eventually(t, 30*time.Second, "the run's result from the Python agent", func() bool {
		_, out := api(http.MethodGet, "/v1/runs?agent="+agentID, "")
		list, _ := out["runs"].([]any)
		if len(list) == 0 {
			return false
		}
		run, _ = list[0].(map[string]any)
		return run["result"] != nil
	})
	b, _ := json.Marshal(run["result"])
	var res struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Output struct {
			Seen  string `json:"seen"`
			Title string `json:"title"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if run["delivery_status"] != "delivered" || res.RunID != run["id"] || res.Status != "succeeded" ||
		res.Output.Seen != "new_issue" || res.Output.Title != "Python, are you there?" {
		t.Fatalf("run %v, result %s", run, b)
	}
}
