package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// flakyHooks is fakeHooks behind a switch: while err is set every lookup
// fails with it, as a stalled store would. Deployment endpoint e1's
// secrets can be replaced, as a user does with Vercel's. It counts
// lookups.
type flakyHooks struct {
	mu      sync.Mutex
	err     error
	secrets []string // e1's, when set
	calls   int
}

func (f *flakyHooks) Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error) {
	f.mu.Lock()
	f.calls++
	err, secrets := f.err, f.secrets
	f.mu.Unlock()
	if err != nil {
		return triggers.Scope{}, nil, err
	}
	scope, v, err := fakeHooks{}.Hook(ctx, c, id)
	if err == nil && scope.Hook == "e1" && secrets != nil {
		v, err = NewVerifier(DeployScheme, secrets...)
	}
	return scope, v, err
}

func (f *flakyHooks) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *flakyHooks) setSecrets(secrets ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets = secrets
}

func (f *flakyHooks) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestHookCache(t *testing.T) {
	ctx := context.Background()
	next := &flakyHooks{}
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, MaxStale: time.Hour, Logger: zerolog.Nop(), Now: clock.Now})

	scope, v, err := cache.Hook(ctx, triggers.CodeHost, "h1")
	if err != nil || scope.Tenant != "t1" || v == nil {
		t.Fatalf("first lookup: %+v %v %v", scope, v, err)
	}
	if _, v2, _ := cache.Hook(ctx, triggers.CodeHost, "h1"); v2 != v || next.lookups() != 1 {
		t.Fatalf("a second lookup within the TTL asked the store again (%d lookups)", next.lookups())
	}
	// The same id on the other connector is another hook.
	if _, _, err := cache.Hook(ctx, triggers.Deploy, "h1"); !errors.Is(err, ErrUnknownHook) {
		t.Fatalf("h1 as a deployment endpoint: %v, want ErrUnknownHook", err)
	}

	// Past the TTL with the store failing: the entry as it was.
	clock.Advance(2 * time.Minute)
	stall := errors.New("redis: i/o timeout")
	next.set(stall)
	if s, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil || v2 != v || s != scope {
		t.Fatalf("stale lookup with the store down: %+v %v %v, want the cached hook", s, v2, err)
	}
	// An unknown hook stays unknown while the store is down.
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "never-seen"); !errors.Is(err, stall) {
		t.Fatalf("uncached hook with the store down: %v, want the store's error", err)
	}
	// Beyond MaxStale the store's error is the answer.
	clock.Advance(2 * time.Hour)
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); !errors.Is(err, stall) {
		t.Fatalf("lookup beyond MaxStale: %v, want the store's error", err)
	}

	// The store answers again: refreshed; then the hook is deleted.
	next.set(nil)
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	gone := &flakyHooks{err: errors.Join(ErrUnknownHook, errors.New("h1"))}
	cache.next = gone
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); !errors.Is(err, ErrUnknownHook) {
		t.Fatalf("deleted hook: %v, want ErrUnknownHook", err)
	}
	// Forgotten: with the store failing now, it is not served stale.
	gone.set(stall)
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); !errors.Is(err, stall) {
		t.Fatalf("deleted hook with the store down: %v, want the store's error, not the old entry", err)
	}
}

// A per-hook delivery is accepted while the store stalls, once the hook
// was looked up before: the sender would not retry a 503.
func TestHookDeliveriesSurviveAStoreStall(t *testing.T) {
	next := &flakyHooks{}
	clock := testenv.NewClock(time.Now())
	h := newHarness(t, func(o *Options) {
		o.Hooks = NewHookCache(next, HookCacheOptions{TTL: time.Second, Logger: zerolog.Nop(), Now: clock.Now})
	})
	body := []byte(issueOpened)
	post := func(id string) answer {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/codehost/h1", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", id)
		req.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte("hook-one-secret"), body))
		return h.do(req)
	}
	if a := post("before"); a.status != http.StatusAccepted {
		t.Fatalf("before the stall: %d %v", a.status, a.body)
	}
	next.set(errors.New("redis: connection refused"))
	clock.Advance(time.Minute)
	if a := post("during"); a.status != http.StatusAccepted {
		t.Fatalf("during the stall: %d %v, want 202 verified with the hook's secret as last looked up", a.status, a.body)
	}
	if c := h.fc.commits[1]; c.Scope == nil || c.Scope.Hook != "h1" || c.Scope.Tenant != "t1" {
		t.Fatalf("capture scope during the stall: %+v", c.Scope)
	}
}

func TestReplacedSecretsTakeEffectAtTheFirstDelivery(t *testing.T) {
	next := &flakyHooks{secrets: []string{"generated-by-triggerd"}}
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	// A TTL far longer than the test: only Recheck can see the change.
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Hour, Logger: zerolog.Nop(), Now: clock.Now})
	h := newHarness(t, func(o *Options) { o.Hooks = cache })
	n := 0
	send := func(secret string) answer {
		n++
		body := []byte(fmt.Sprintf(`{"id":"evt_%d","type":"deployment.created","createdAt":1700000000000,"payload":{"deployment":{"id":"dpl_1"},"project":{"id":"prj_1"}}}`, n))
		req := httptest.NewRequest(http.MethodPost, "/webhooks/deploy/e1", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-vercel-signature", DeployScheme.Sign([]byte(secret), body))
		return h.do(req)
	}
	if a := send("generated-by-triggerd"); a.status != http.StatusAccepted {
		t.Fatalf("with the generated secret: %d %v", a.status, a.body)
	}

	// The user sets the secret Vercel showed; Vercel's next delivery is
	// taken, with the cache's entry minutes old and its TTL an hour.
	const vercel = "pJ7kq2ZQvN4xXw9mHc3tLb8R"
	next.setSecrets(vercel)
	clock.Advance(5 * time.Minute)
	if a := send(vercel); a.status != http.StatusAccepted {
		t.Fatalf("with the secret just set: %d %v; want 202 at once", a.status, a.body)
	}
	if a := send("generated-by-triggerd"); a.status != http.StatusUnauthorized {
		t.Fatalf("with the replaced secret: %d, want 401", a.status)
	} else if msg := errorMessage(a); !strings.Contains(msg, "triggerctl agents set-secrets ag1") {
		t.Errorf("the refusal %q does not say how to set the endpoint's secrets", msg)
	}

	// A flood of wrongly signed deliveries asks the store at most once a
	// RecheckEvery.
	before := next.lookups()
	for range 20 {
		if a := send("wrong-secret-entirely"); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong secret: %d, want 401", a.status)
		}
	}
	if got := next.lookups() - before; got > 1 {
		t.Errorf("20 refused deliveries within a second made %d lookups; want at most 1", got)
	}
	clock.Advance(RecheckEvery)
	before = next.lookups()
	send("wrong-secret-entirely")
	if got := next.lookups() - before; got != 1 {
		t.Errorf("a refused delivery a RecheckEvery later made %d lookups; want 1", got)
	}
	if a := send(vercel); a.status != http.StatusAccepted {
		t.Fatalf("the set secret after the flood: %d %v", a.status, a.body)
	}
}
