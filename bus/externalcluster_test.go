//go:build unix

package bus

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/testenv"
)

// docs/examples/nats-external-cluster.conf is the configuration the docs
// give operators of an external cluster: three servers started from that
// very file form a JetStream cluster; triggerd connects as its user and
// serves agents; an agent connects as itself, into an account of its own,
// takes a run and reports its result through the imports the file gives
// it, and reaches nothing else.
func TestExternalClusterConfig(t *testing.T) {
	const agentID = "ag_example"
	conf, err := filepath.Abs(filepath.Join("..", "docs", "examples", "nats-external-cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	// The example grants the agent what agent.Permissions and
	// agent.Imports say it needs, word for word.
	pub, sub := agent.Permissions(agentID)
	for _, s := range append(pub, sub...) {
		if !strings.Contains(string(text), strconv.Quote(s)) {
			t.Errorf("the example does not permit %s", s)
		}
	}
	for _, im := range agent.Imports(agentID) {
		want := `subject: ` + strconv.Quote(im.To) + `}`
		if im.From != im.To {
			want = `subject: ` + strconv.Quote(im.To) + `}, to: ` + strconv.Quote(im.From)
		}
		if !strings.Contains(string(text), want) {
			t.Errorf("the example does not import %s as %s", im.To, im.From)
		}
	}

	const triggerdPassword, agentPassword = "triggerd-secret", "agent-secret"
	c := testenv.StartNATSClusterFromConfig(t, conf, 3,
		"TRIGGERD_NATS_PASSWORD="+triggerdPassword, "AGENT_NATS_PASSWORD="+agentPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Connect(ctx, c.URL(), Options{User: OperatorUser, Password: triggerdPassword, ServeAgents: true})
	if err != nil {
		t.Fatalf("triggerd connecting as its user: %v", err)
	}
	defer b.Close()
	if b.Replicas() != 3 {
		t.Fatalf("replicas on the example's cluster: %d, want 3", b.Replicas())
	}

	run, _ := json.Marshal(agent.Run{ID: "run-1", Tenant: "t1", Agent: agentID, Kind: "new_issue", CreatedAt: time.Now(), Event: json.RawMessage(`{}`)})
	if err := b.Publish(ctx, agent.RunsSubject(agentID), "run-1", run); err != nil {
		t.Fatal(err)
	}
	nc, err := agent.Connect(c.URL(), agentID, agentPassword)
	if err != nil {
		t.Fatalf("the agent connecting into its account: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan agent.Run, 1)
	actx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() {
		consumed <- agent.Consume(actx, js, agentID, func(_ context.Context, r agent.Run) (agent.Result, error) {
			select {
			case got <- r:
			default:
			}
			return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"answered":true}`)}, nil
		})
	}()
	defer func() { stop(); <-consumed }()
	select {
	case r := <-got:
		if r.ID != "run-1" {
			t.Fatalf("the agent received run %q, want run-1", r.ID)
		}
	case err := <-consumed:
		t.Fatalf("the agent's consumer stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("the agent received no run")
	}
	agents, err := b.js.Stream(ctx, agent.Stream)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the agent's result stored in triggerd's account", func() bool {
		msg, err := agents.GetLastMsgForSubject(ctx, agent.ResultsSubject(agentID, "run-1"))
		return err == nil && strings.Contains(string(msg.Data), `"answered":true`)
	})

	// The agent's account reaches nothing but its own share: not the
	// events stream, not another agent's runs.
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if _, err := js.Stream(sctx, EventsStream); err == nil {
		t.Error("the agent read the events stream's info")
	}
}
