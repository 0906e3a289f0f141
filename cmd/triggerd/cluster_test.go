//go:build unix

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/testenv"
)

// streamReplicas returns how many replicas stream has, and its leader, as
// the NATS at url reports them.
func streamReplicas(t *testing.T, url, stream string, opts ...nats.Option) (int, string) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info := s.CachedInfo()
	leader := ""
	if info.Cluster != nil {
		leader = info.Cluster.Leader
	}
	return info.Config.Replicas, leader
}

// Three triggerd processes whose embedded servers route to one another
// form a JetStream cluster of their own: every stream R3, and a delivery
// taken by one is in the stream all three hold.
func TestEmbeddedServersFormACluster(t *testing.T) {
	const secret = "cluster-secret"
	routes := make([]string, 3)
	for i := range routes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", testenv.FreePort(t))
	}
	procs := make([]*proc, 3)
	readies := make([]<-chan struct{}, 3)
	for i := range procs {
		env := []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret}
		procs[i], readies[i] = launchTriggerd(t, "triggerd ready", env,
			"--data-dir", filepath.Join(t.TempDir(), "data"),
			"--nats-server-name", fmt.Sprintf("t%d", i+1),
			"--nats-cluster-listen", strings.TrimPrefix(routes[i], "nats://"),
			"--nats-routes", strings.Join(routes, ","))
	}
	start := time.Now()
	for i, p := range procs {
		p.waitReady(readies[i], 90*time.Second)
	}
	t.Logf("three processes ready as a cluster in %s", time.Since(start).Round(time.Millisecond))

	for _, stream := range []string{bus.EventsStream, bus.IndexStream, bus.AgentsStream, bus.PushStream, bus.DeadStream} {
		n, leader := streamReplicas(t, procs[2].natsURL, stream, asOperator)
		if n != 3 || leader == "" {
			t.Errorf("stream %s: %d replicas, leader %q; want 3 and a leader", stream, n, leader)
		}
	}
	r, err := post(procs[1].httpURL, secret, delivery{event: "issues", id: "cluster-1", body: issueBody(1)})
	if err != nil || r.status != 202 || r.body.Spooled {
		t.Fatalf("delivery to the second process: %v, %d, spooled %v", err, r.status, r.body.Spooled)
	}
	counts, _ := streamEvents(t, procs[0].natsURL, asOperator)
	if len(counts) != len(r.body.Events) || len(counts) == 0 {
		t.Fatalf("events read through the first process's server: %v, want the delivery's %d", counts, len(r.body.Events))
	}
}

func TestRoutesWithoutClusterListenRefused(t *testing.T) {
	_, err := parseConfig([]string{"--nats-routes", "nats://127.0.0.1:6360"}, func(string) (string, bool) { return "", false }, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "--nats-cluster-listen") {
		t.Fatalf("--nats-routes alone: %v, want a refusal naming --nats-cluster-listen", err)
	}
}
