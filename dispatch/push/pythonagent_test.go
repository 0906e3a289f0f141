package push_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/testenv"
)

// The Python receiver docs/agents.md shows verifies triggerd's signature,
// answers a result the Sender records, and refuses a run signed with
// another secret for good.
func TestPythonAgentExample(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3", err)
	}
	secret := newSecret(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "..", "docs", "examples", "http_agent.py"))
	cmd.Env = append(os.Environ(), "AGENT_SECRET="+secret, "PORT=0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	// The first line names the URL; reading it waits for the server.
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	var url string
	select {
	case line := <-lines:
		url = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	case <-time.After(20 * time.Second):
		t.Fatal("the Python agent did not say where it listens within 20 s")
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("the Python agent said %q, want its URL", url)
	}

	run := testRun()
	d, err := local().Send(ctx, url, secret, run)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if d.Status != http.StatusOK || d.Result == nil || d.Result.RunID != run.ID || d.Result.Status != agent.StatusSucceeded ||
		string(d.Result.Output) != `{"seen": "new_issue", "title": null}` {
		t.Fatalf("delivery %+v, result %+v", d, d.Result)
	}
	// A redelivery of the same run gets the same answer.
	again, err := local().Send(ctx, url, secret, run)
	if err != nil || again.Result == nil || !again.Result.FinishedAt.Equal(d.Result.FinishedAt) {
		t.Fatalf("redelivery: %+v, %v; want the first answer again", again.Result, err)
	}
	// Signed with another secret: refused, and not worth retrying.
	_, err = local().Send(ctx, url, newSecret(t), run)
	if se := sendErr(t, err); se.Status != http.StatusUnauthorized || !se.Permanent {
		t.Fatalf("another secret: %+v", se)
	}
}
