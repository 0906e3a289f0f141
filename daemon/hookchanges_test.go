package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// countedHooks resolves every hook to the same verifier, counting lookups.
type countedHooks struct {
	mu sync.Mutex
	n  int
}

func (c *countedHooks) Hook(context.Context, triggers.Connector, string) (triggers.Scope, *ingest.Verifier, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	v, err := ingest.NewVerifier(ingest.DeployScheme, "endpoint-secret")
	return triggers.Scope{Hook: "e1", Tenant: "t1", Agent: "ag1"}, v, err
}

func (c *countedHooks) lookups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestHookChangesReachEveryProcess: when the registry changes a hook's
// secrets in one process, that process's ingest forgets the hook before
// the API answers, and another process sharing the NATS forgets it as
// soon as the broadcast arrives, instead of verifying with the old
// secrets until its cache's TTL (30 s) runs out.
func TestHookChangesReachEveryProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b1, emb := bustest.Start(t)
	b2, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	opts := ingest.HookCacheOptions{TTL: time.Hour, Logger: zerolog.Nop()}
	here, there := &countedHooks{}, &countedHooks{}
	hereCache, thereCache := ingest.NewHookCache(here, opts), ingest.NewHookCache(there, opts)
	for _, c := range []*ingest.HookCache{hereCache, thereCache} {
		for range 2 {
			if _, _, err := c.Hook(ctx, triggers.Deploy, "e1"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if here.lookups() != 1 || there.lookups() != 1 {
		t.Fatalf("lookups %d and %d before any change; want one each, then cached", here.lookups(), there.lookups())
	}
	if err := listenHookChanges(ctx, b2, thereCache); err != nil {
		t.Fatal(err)
	}
	n := notifier{b: b1, hooks: hereCache, log: zerolog.Nop()}
	n.HookChanged(ctx, "deploy", "e1")
	hereCache.Hook(ctx, triggers.Deploy, "e1")
	if got := here.lookups(); got != 2 {
		t.Fatalf("the changing process looked the hook up %d times after the change; want it forgotten at once (2)", got)
	}
	testenv.Eventually(t, 10*time.Second, "the other process to forget the changed hook", func() bool {
		thereCache.Hook(ctx, triggers.Deploy, "e1")
		if there.lookups() > 1 {
			return true
		}
		n.HookChanged(ctx, "deploy", "e1") // sent again: the subscription may not have reached the server yet
		return false
	})
}
