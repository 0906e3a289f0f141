//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/testenv"
)

// TestAgentOnEmbeddedCluster runs a NATS agent on a cluster of three
// triggerd processes whose embedded servers route to one another. The
// agent is created through the first process's API, after the cluster
// formed; it then connects to each process's server in turn, with its
// password, and a delivery posted to another process starts its run
// exactly once, and its result is recorded.
func TestAgentOnEmbeddedCluster(t *testing.T) {
	began := time.Now()
	rig := newAgentRig(t)
	const secret = "embedded-agent-secret"
	env := append([]string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret}, rig.env...)
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", testenv.FreePort(t))
	}
	dirs := make([]string, 3)
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), "data")
	}
	procs := make([]*proc, 3)
	readies := make([]<-chan struct{}, 3)
	for i := range procs {
		procs[i], readies[i] = launchTriggerd(t, "triggerd ready", env, append([]string{
			"--data-dir", dirs[i],
			"--nats-server-name", fmt.Sprintf("e%d", i+1),
			"--nats-cluster-listen", strings.TrimPrefix(routes[i], "nats://"),
			"--nats-routes", strings.Join(routes, ","),
		}, rig.Args(i)...)...)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, p := range procs {
				t.Logf("process %d:\n%s", i+1, p.logs())
			}
		}
	})
	for i, p := range procs {
		p.waitReady(readies[i], 90*time.Second)
	}
	formed := time.Since(began)
	// The members, started together on an empty store, created one
	// default tenant between them, and its key is in the data dir of the
	// one that did.
	keyDir := ""
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "default_tenant_key")); err == nil {
			if keyDir != "" {
				t.Fatalf("default tenant keys in %s and %s: more than one member created a default tenant", keyDir, dir)
			}
			keyDir = dir
		}
	}
	if keyDir == "" {
		t.Fatal("no member wrote the default tenant's key into its data dir")
	}
	rig.Setup(keyDir)
	t.Logf("cluster ready in %s; agent %s created through process 1", formed.Round(time.Millisecond), rig.agentID)

	for i, p := range procs {
		round := time.Now()
		stop := rig.Consume(p.natsURL, "", "")
		target := procs[(i+1)%len(procs)]
		id := fmt.Sprintf("embedded-agent-%d", i+1)
		posted := time.Now()
		r, err := post(target.httpURL, secret, delivery{event: "issues", id: id, body: helloIssueBody(100 + i)})
		if err != nil || r.status != http.StatusAccepted || r.body.Spooled {
			t.Fatalf("delivery %s to process %d: %v, %d, spooled %v", id, (i+1)%len(procs)+1, err, r.status, r.body.Spooled)
		}
		want := map[string]bool{}
		for _, e := range r.body.Events {
			if e.Kind == "new_issue" {
				want[e.ID] = true
			}
		}
		rig.CheckStartedOnce(want)
		for ev := range want {
			rig.waitResult(ev)
		}
		recorded := time.Since(posted)
		stop()
		// The stopped agent's last pull stays on the consumer until it
		// expires; the next round's run would go to it first and reach
		// the next agent only as a redelivery, an ack wait later.
		waitNoPulls(t, p.natsURL, rig.agentID)
		t.Logf("agent on process %d's server (%s), delivery to process %d: run started once and its result recorded %s after the delivery (round %s)",
			i+1, p.natsURL, (i+1)%len(procs)+1, recorded.Round(time.Millisecond), time.Since(round).Round(time.Millisecond))
	}

	// A new password, made through the first process, closes the agent's
	// connections to every member's server, not only the first's, and
	// the old one is refused everywhere.
	rotate := time.Now()
	disconnected := make([]chan struct{}, len(procs))
	for i, p := range procs {
		disconnected[i] = make(chan struct{})
		var once sync.Once
		nc, err := agent.Connect(p.natsURL, rig.agentID, rig.password, nats.NoReconnect(),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { once.Do(func() { close(disconnected[i]) }) }))
		if err != nil {
			t.Fatalf("the agent connecting to process %d's server: %v", i+1, err)
		}
		t.Cleanup(nc.Close)
	}
	ag := rig.api(http.MethodPost, "/v1/agents/"+rig.agentID+"/nats-password", "", http.StatusOK)
	for i, ch := range disconnected {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Errorf("the agent's connection to process %d's server still open 10 s after its password changed", i+1)
		}
	}
	newPassword, _ := ag["nats_password"].(string)
	if newPassword == "" || newPassword == rig.password {
		t.Fatalf("POST nats-password answered no new password: %v", ag)
	}
	for i, p := range procs {
		if nc, err := agent.Connect(p.natsURL, rig.agentID, rig.password, nats.NoReconnect()); err == nil {
			nc.Close()
			t.Errorf("process %d's server took the agent's old password", i+1)
		}
		nc, err := agent.Connect(p.natsURL, rig.agentID, newPassword, nats.NoReconnect())
		if err != nil {
			t.Errorf("process %d's server refused the agent's new password: %v", i+1, err)
			continue
		}
		nc.Close()
	}
	t.Logf("new password: the agent's connections to all three servers closed and the old password refused in %s",
		time.Since(rotate).Round(time.Millisecond))
	// The members that heard of the agent's subscriptions in an account
	// they had not made yet said so at debug level, not as errors.
	for i, p := range procs {
		for _, line := range strings.Split(p.logs(), "\n") {
			if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "Unknown account") {
				t.Errorf("process %d logged an error for the agent's account: %s", i+1, line)
				break
			}
		}
	}
	t.Logf("whole test: %s", time.Since(began).Round(time.Millisecond))
}

// waitResult waits until the run of event id has the agent's result.
func (r *agentRig) waitResult(eventID string) {
	r.t.Helper()
	var last []any
	ok := false
	r.t.Cleanup(func() {
		if !ok {
			r.t.Logf("runs when the result of event %s was awaited: %.2000v", eventID, last)
		}
	})
	testenv.Eventually(r.t, 20*time.Second, "the agent's result recorded on the run of event "+eventID, func() bool {
		_, body := r.get("/v1/runs?limit=100")
		runs, _ := body["runs"].([]any)
		last = runs
		for _, run := range runs {
			m, _ := run.(map[string]any)
			if m["event_id"] != eventID {
				continue
			}
			var res agent.Result
			raw, _ := json.Marshal(m["result"])
			if json.Unmarshal(raw, &res) == nil && res.Status == agent.StatusSucceeded {
				ok = true
				return true
			}
		}
		return false
	})
}

// waitNoPulls waits until the agent's consumer has no pull request
// waiting, as its operator sees it through the NATS at url.
func waitNoPulls(t *testing.T, url, agentID string) {
	t.Helper()
	nc, err := nats.Connect(url, asOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the stopped agent's pulls to expire", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, agent.Stream, agent.ConsumerName(agentID))
		if err != nil {
			return false
		}
		return c.CachedInfo().NumWaiting == 0
	})
}
