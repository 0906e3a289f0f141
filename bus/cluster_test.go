//go:build unix

package bus

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/internal/testenv"
)

// provisioned lists every stream Connect provisions in the shared layout,
// the object store's included.
var provisioned = []string{EventsStream, IndexStream, dedupStream, AgentsStream, PushStream, DeadStream, "OBJ_" + BodiesBucket}

func connectCluster(t *testing.T, url string, o Options) *Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Connect(ctx, url, o)
	if err != nil {
		t.Fatalf("connect to the cluster: %v", err)
	}
	return b
}

// replicasOf returns each provisioned stream's replica count.
func replicasOf(t *testing.T, url string) map[string]int {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]int{}
	for _, name := range provisioned {
		s, err := retryJS(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, name) })
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		got[name] = s.CachedInfo().Config.Replicas
	}
	return got
}

func TestClusterDefaultsToThreeReplicas(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	b := connectCluster(t, c.URL(), Options{})
	defer b.Close()
	if b.Replicas() != 3 {
		t.Fatalf("replicas chosen on a 3-server cluster: %d, want 3", b.Replicas())
	}
	for name, n := range replicasOf(t, c.URL()) {
		if n != 3 {
			t.Errorf("stream %s has %d replicas, want 3", name, n)
		}
	}
}

// The report: an operator set the events stream to three replicas
// by hand, triggerd restarted and quietly made it one again.
func TestOperatorReplicasSurviveRestart(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	b := connectCluster(t, c.URL(), Options{Replicas: 1})
	b.Close()
	for name, n := range replicasOf(t, c.URL()) {
		if n != 1 {
			t.Fatalf("stream %s has %d replicas with Replicas 1", name, n)
		}
	}

	// The operator raises the events stream to R3.
	nc, err := nats.Connect(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Replicas = 3
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	// Restarted with Replicas 1, triggerd keeps R3 and says so, once.
	var mu sync.Mutex
	var kept []string
	b = connectCluster(t, c.URL(), Options{Replicas: 1, OnReplicasKept: func(stream string, have, want int) {
		mu.Lock()
		defer mu.Unlock()
		if have != 3 || want != 1 {
			t.Errorf("OnReplicasKept(%s, %d, %d), want have 3, want 1", stream, have, want)
		}
		kept = append(kept, stream)
	}})
	b.Close()
	mu.Lock()
	if len(kept) != 1 || kept[0] != EventsStream {
		t.Errorf("streams reported kept: %v, want [%s] once", kept, EventsStream)
	}
	mu.Unlock()
	got := replicasOf(t, c.URL())
	if got[EventsStream] != 3 {
		t.Errorf("after a restart with Replicas 1 the events stream has %d replicas, want the operator's 3", got[EventsStream])
	}
	if got[PushStream] != 1 {
		t.Errorf("push stream has %d replicas, want 1", got[PushStream])
	}

	// Started with Replicas 3, every stream with fewer is raised.
	b = connectCluster(t, c.URL(), Options{Replicas: 3})
	b.Close()
	for name, n := range replicasOf(t, c.URL()) {
		if n != 3 {
			t.Errorf("stream %s has %d replicas after a start with Replicas 3, want it raised to 3", name, n)
		}
	}
}

func TestReplicasAboveClusterSizeRefused(t *testing.T) {
	for _, tc := range []struct {
		servers, replicas int
	}{{1, 3}, {3, 4}} {
		c := testenv.StartNATSCluster(t, tc.servers)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b, err := Connect(ctx, c.URL(), Options{Replicas: tc.replicas, ReplicasFlag: "--nats-replicas"})
		cancel()
		if err == nil {
			b.Close()
			t.Fatalf("%d replicas on %d server(s): connected, want a refusal", tc.replicas, tc.servers)
		}
		if !errors.Is(err, ErrReplicas) || !strings.Contains(err.Error(), "--nats-replicas") {
			t.Errorf("%d replicas on %d server(s): %v; want ErrReplicas naming --nats-replicas", tc.replicas, tc.servers, err)
		}
	}
}

func TestLoneServerDefaultsToOneReplica(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	if b.Replicas() != 1 {
		t.Fatalf("replicas chosen on a lone server: %d, want 1", b.Replicas())
	}
}

// A stream without a leader makes the Bus not ready, saying why, until a
// leader is elected again.
func TestReadinessFollowsStreamLeaders(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	// Connected to n1 alone: killing the other two leaves it up but its
	// streams without a quorum, so without a leader.
	b := connectCluster(t, c.Nodes[0].URL, Options{Replicas: 3})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	capture, events := testDelivery("before-the-loss", 1, []byte(`{"n":1}`))
	if _, err := b.Commit(ctx, capture, events); err != nil {
		t.Fatal(err)
	}
	if !b.Ready() {
		t.Fatalf("not ready on a healthy cluster: %s", b.NotReadyReason())
	}
	c.Kill(t, c.Nodes[1])
	c.Kill(t, c.Nodes[2])
	testenv.Eventually(t, 30*time.Second, "the Bus to report a stream without a leader", func() bool {
		return !b.Ready()
	})
	if r := b.NotReadyReason(); !strings.Contains(r, "TRIGGERD_") && !strings.Contains(r, dedupStream) {
		t.Errorf("reason %q names no stream", r)
	}
	t.Logf("not ready: %s", b.NotReadyReason())
	// The election after a quorum comes back takes 5 to 7 s on a quiet
	// host; a CI host running every package's tests at once has taken
	// over 30 s.
	restarted := time.Now()
	c.Restart(t, c.Nodes[1])
	testenv.Eventually(t, 90*time.Second, "the Bus to be ready once a quorum is back", b.Ready)
	t.Logf("ready %s after the restart", time.Since(restarted).Round(time.Millisecond))
	capture, events = testDelivery("after-the-loss", 1, []byte(`{"n":2}`))
	if _, err := b.Commit(ctx, capture, events); err != nil {
		t.Fatalf("commit once ready again: %v", err)
	}
}

// Commit on R3 streams: a new delivery is accepted once, its redelivery is
// a duplicate.
func TestCommitOnReplicatedStreams(t *testing.T) {
	c := testenv.StartNATSCluster(t, 3)
	b := connectCluster(t, c.URL(), Options{})
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Twenty events: each was conditional on the delivery's record, and
	// a replicated stream refused all but the first (10164) while the
	// first was being replicated, which Commit took for a duplicate.
	for i, want := range []bool{false, true} {
		capture, events := testDelivery("r3-delivery", 20, []byte(`{"n":1}`))
		dup, err := b.Commit(ctx, capture, events)
		if err != nil || dup != want {
			t.Fatalf("attempt %d: duplicate %v, %v; want %v", i+1, dup, err, want)
		}
	}
	// Two processes at the same delivery at once: its events once.
	other := connectCluster(t, c.Nodes[2].URL, Options{})
	defer other.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	dups := make([]bool, 2)
	for i, client := range []*Bus{b, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			capture, events := testDelivery("r3-concurrent", 20, []byte(`{"n":2}`))
			dups[i], errs[i] = client.Commit(ctx, capture, events)
		}()
	}
	wg.Wait()
	if errs[0] != nil && errs[1] != nil {
		t.Fatalf("both concurrent attempts failed: %v; %v", errs[0], errs[1])
	}
	// Both may index it; the bucket's compare-and-set lets one accept it.
	if errs[0] == nil && errs[1] == nil && dups[0] == dups[1] {
		t.Fatalf("concurrent attempts both answered duplicate %v", dups[0])
	}
	n, err := b.EventCount(ctx)
	if err != nil || n != 40 {
		t.Fatalf("events stored: %d, %v; want 40", n, err)
	}
}
