package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/testenv"
)

// TestEmbeddedNATSLetsInOnlyItsOperatorAndAgents runs the real process: its
// NATS refuses strangers, takes the operator password it generated, and
// takes an agent with the password shown at its creation, which then works
// through a run start to finish under its own permissions; a new password
// closes the agent's connection and refuses the old one.
func TestEmbeddedNATSLetsInOnlyItsOperatorAndAgents(t *testing.T) {
	dir := t.TempDir()
	// An empty variable counts as unset: the password is generated.
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir, "TRIGGERD_NATS_PASSWORD="}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)

	path := filepath.Join(dir, "nats_password")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the generated operator password: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	operatorPW := strings.TrimSpace(string(raw))

	for name, opts := range map[string][]nats.Option{
		"no user":                           nil,
		"a wrong operator password":         {nats.UserInfo(bus.OperatorUser, operatorPW+"x")},
		"the operator password as an agent": {nats.UserInfo("3f1c0a55-0000-4000-8000-000000000000", operatorPW)},
	} {
		if nc, err := nats.Connect(p.natsURL, append(opts, nats.MaxReconnects(0))...); err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	op, err := nats.Connect(p.natsURL, nats.UserInfo(bus.OperatorUser, operatorPW))
	if err != nil {
		t.Fatalf("the operator: %v", err)
	}
	op.Close()

	code, ag := api(http.MethodPost, "/v1/agents", `{"name": "nats-agent"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, ag)
	}
	id, _ := ag["id"].(string)
	pw, _ := ag["nats_password"].(string)
	if ag["nats_user"] != id || !strings.HasPrefix(pw, agent.NATSPasswordPrefix) || ag["nats_inbox_prefix"] != agent.InboxPrefix(id) {
		t.Fatalf("agent %v: want its NATS user, password and inbox prefix", ag)
	}
	if _, got := api(http.MethodGet, "/v1/agents/"+id, ""); got["nats_password"] != nil || got["nats_password_set_at"] == nil {
		t.Errorf("agent read back %v: want when the password was set, never the password", got)
	}

	// The agent takes a run and reports its result with no more than its
	// own permissions.
	closed := make(chan struct{})
	nc, err := agent.Connect(p.natsURL, id, pw, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	var consumeErrs []string
	go func() {
		consumed <- agent.Consume(ctx, js, id, func(context.Context, agent.Run) (agent.Result, error) {
			return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"seen":true}`)}, nil
		}, agent.WithErrorHandler(func(err error) { consumeErrs = append(consumeErrs, err.Error()) }))
	}()
	if code, tr := api(http.MethodPost, "/v1/triggers", `{"kind": "new_issue", "account": "`+ids["codehost"]+`", "agent": "`+id+`", "params": {"repositories": ["octocat/hello-world"]}}`); code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, tr)
	}
	if code, out := api(http.MethodPost, "/v1/steps/codehost.create_issue/run", `{"account":"`+ids["codehost"]+`","input":{"owner":"octocat","repo":"hello-world","title":"Over NATS"}}`); code != http.StatusOK {
		t.Fatalf("open an issue: %d %v", code, out)
	}
	testenv.Eventually(t, 30*time.Second, "the agent's result on its run", func() bool {
		_, body := api(http.MethodGet, "/v1/runs?agent="+id, "")
		runs, _ := body["runs"].([]any)
		if len(runs) != 1 {
			return false
		}
		res, _ := runs[0].(map[string]any)["result"].(map[string]any)
		return res["status"] == agent.StatusSucceeded
	})
	cancel()
	if err := <-consumed; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if len(consumeErrs) > 0 {
		t.Errorf("Consume met errors under the agent's permissions: %q", consumeErrs)
	}

	// A new password: the agent's connection is closed, and its
	// reconnects with the old password are refused.
	code, reset := api(http.MethodPost, "/v1/agents/"+id+"/nats-password", "")
	pw2, _ := reset["nats_password"].(string)
	if code != http.StatusOK || pw2 == "" || pw2 == pw {
		t.Fatalf("new password: %d %v", code, reset)
	}
	testenv.Eventually(t, 10*time.Second, "the old connection closed and refused", func() bool {
		return !nc.IsConnected() && errors.Is(nc.LastError(), nats.ErrAuthorization)
	})
	nc.Close()
	<-closed
	if nc2, err := agent.Connect(p.natsURL, id, pw2); err != nil {
		t.Errorf("the new password: %v", err)
	} else {
		nc2.Close()
	}

	logs := p.logs()
	for _, secret := range []string{operatorPW, pw, pw2} {
		if strings.Contains(logs, secret) {
			t.Fatal("a NATS password is in the logs")
		}
	}
	if !strings.Contains(logs, "NATS connection refused") || !strings.Contains(logs, "closed the agent's NATS connections") {
		t.Errorf("the logs say nothing of the refusals or the closed connection:\n%s", logs)
	}
}
