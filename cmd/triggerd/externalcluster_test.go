//go:build unix

package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/testenv"
)

// TestExternalClusterExample runs triggerd on three nats-servers started
// from docs/examples/nats-external-cluster.conf, as an operator of their
// own cluster would: triggerd connects as its user, the operator adds the
// account of a new agent as the file says (its block for ag_example,
// copied with the agent's id) and restarts the servers, and the agent,
// connected into that account, receives the run of an event and answers.
func TestExternalClusterExample(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "examples", "nats-external-cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, text, 0o600); err != nil {
		t.Fatal(err)
	}
	const triggerdPassword, agentPassword = "triggerd-example-secret", "agent-example-secret"
	c := testenv.StartNATSClusterFromConfig(t, conf, 3,
		"TRIGGERD_NATS_PASSWORD="+triggerdPassword, "AGENT_NATS_PASSWORD="+agentPassword)
	var urls []string
	for _, node := range c.Nodes {
		urls = append(urls, strings.Replace(node.URL, "nats://", "nats://triggerd:"+triggerdPassword+"@", 1))
	}

	rig := newAgentRig(t)
	const secret = "example-secret"
	dir := t.TempDir()
	p := startTriggerd(t, append([]string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret}, rig.env...),
		append([]string{"--nats-url", strings.Join(urls, ","), "--data-dir", dir}, rig.Args(0)...)...)
	rig.Setup(dir)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.logs())
			for _, n := range c.Nodes {
				t.Log(n.Output())
			}
		}
	})

	// The operator's step for the new agent: its block, then the
	// servers restarted one at a time (a reload lets the agent in, but
	// nats-server 2.15.2 leaves the imports of an account added by a
	// reload unanswered: "no responders").
	block, err := exampleAgentBlock(string(text))
	if err != nil {
		t.Fatal(err)
	}
	mine := strings.ReplaceAll(block, "ag_example", rig.agentID)
	if err := os.WriteFile(conf, []byte(strings.Replace(string(text), block, block+mine, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, node := range c.Nodes {
		c.Restart(t, node)
		c.WaitHealthy(t, 30*time.Second)
	}
	for _, node := range c.Nodes {
		nc, err := agent.Connect(node.URL, rig.agentID, agentPassword)
		if err != nil {
			t.Fatalf("the agent connecting to %s into its account: %v", node.Name, err)
		}
		// Its consumer creation reaches triggerd's gateway from every
		// server, which refuses this one (no stream named).
		m, err := nc.Request(agent.ConsumerCreateSubject(rig.agentID), []byte("{}"), 5*time.Second)
		nc.Close()
		if err != nil || !strings.Contains(string(m.Data), "triggerd: ") {
			t.Fatalf("the agent's consumer creation through %s: %v %s", node.Name, err, msgData(m))
		}
	}
	rig.Consume(c.URL(), rig.agentID, agentPassword)

	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "example-1", body: helloIssueBody(1)})
	if err != nil || r.status != http.StatusAccepted {
		t.Fatalf("the delivery: %d %v", r.status, err)
	}
	want := map[string]bool{}
	for _, e := range r.body.Events {
		if e.Kind == "new_issue" {
			want[e.ID] = true
		}
	}
	rig.CheckStartedOnce(want)
	// Its answer reached triggerd through the account's imports.
	testenv.Eventually(t, 20*time.Second, "the agent's result recorded on its run", func() bool {
		_, body := rig.get("/v1/runs?limit=10")
		runs, _ := body["runs"].([]any)
		for _, run := range runs {
			res, _ := run.(map[string]any)["result"].(map[string]any)
			if fmt.Sprint(res["status"]) == string(agent.StatusSucceeded) {
				return true
			}
		}
		return false
	})
}

// exampleAgentBlock returns the example's account block of agent
// ag_example, from its first line to its closing brace and newline.
func exampleAgentBlock(text string) (string, error) {
	const head = "  AGENT_ag_example {\n"
	i := strings.Index(text, head)
	if i < 0 {
		return "", fmt.Errorf("the example has no line %q", strings.TrimSpace(head))
	}
	j := strings.Index(text[i:], "\n  }\n")
	if j < 0 {
		return "", fmt.Errorf("the example's block of ag_example does not end with a line \"  }\"")
	}
	return text[i : i+j+len("\n  }\n")], nil
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}
