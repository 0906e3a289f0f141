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

// stallingHooks is fakeHooks behind a store that can stop answering, as
// a Redis under DEBUG SLEEP or behind a black hole does: once stalled,
// each lookup signals entered and blocks until its context ends (failing
// with the context's error) or the stall ends (failing with the stall's
// err, or answering when it is nil).
type stallingHooks struct {
	entered chan struct{}

	mu      sync.Mutex
	release chan struct{} // closed when the stall ends; nil when answering
	err     error
	calls   int
	stalled []stalledLookup
}

// stalledLookup is how a stalled lookup went.
type stalledLookup struct {
	start, deadline time.Time // deadline is zero when its context had none
	err             error
}

func newStallingHooks() *stallingHooks {
	return &stallingHooks{entered: make(chan struct{}, 64)}
}

func (f *stallingHooks) Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error) {
	f.mu.Lock()
	f.calls++
	release, err := f.release, f.err
	f.mu.Unlock()
	if release != nil {
		l := stalledLookup{start: time.Now()}
		l.deadline, _ = ctx.Deadline()
		f.entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			err = ctx.Err()
		}
		l.err = err
		f.mu.Lock()
		f.stalled = append(f.stalled, l)
		f.mu.Unlock()
		if err != nil {
			return triggers.Scope{}, nil, err
		}
	}
	return fakeHooks{}.Hook(ctx, c, id)
}

// stall makes lookups block; when the stall ends they fail with err (or
// answer, for nil).
func (f *stallingHooks) stall(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.release, f.err = make(chan struct{}), err
}

// answer ends the stall.
func (f *stallingHooks) answer() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.release != nil {
		close(f.release)
	}
	f.release, f.err = nil, nil
}

func (f *stallingHooks) lookups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *stallingHooks) stalledLookups() []stalledLookup {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stalledLookup(nil), f.stalled...)
}

// waitingCtx signals waiting when its holder first asks for Done: a
// caller blocked on its context, in HookCache or in the store.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan<- struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { c.waiting <- struct{}{} })
	return c.Context.Done()
}

// receive waits for one value from ch, or fails the test naming what it
// waited for.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

type hookAnswer struct {
	scope triggers.Scope
	v     *Verifier
	err   error
}

// goHook runs cache.Hook for code-hosting hook h1 in a goroutine of wg,
// and returns where its answer arrives.
func goHook(ctx context.Context, wg *sync.WaitGroup, cache *HookCache) <-chan hookAnswer {
	ch := make(chan hookAnswer, 1)
	wg.Go(func() {
		scope, v, err := cache.Hook(ctx, triggers.CodeHost, "h1")
		ch <- hookAnswer{scope, v, err}
	})
	return ch
}

// With the store stalled, a delivery for a hook whose entry is past the
// TTL is answered from the entry within about the lookup timeout: the
// sender's 10 s are not spent waiting for the store's own timeouts.
func TestHookCacheStalledRefreshIsBounded(t *testing.T) {
	const timeout = 100 * time.Millisecond
	next := newStallingHooks()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, LookupTimeout: timeout, Logger: zerolog.Nop(), Now: clock.Now})
	// The request's own deadline is far off: a lookup without one of its
	// own would last until it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	scope, v, err := cache.Hook(ctx, triggers.CodeHost, "h1")
	if err != nil {
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute)
	next.stall(nil)
	start := time.Now()
	s2, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1")
	elapsed := time.Since(start)
	if err != nil || v2 != v || s2 != scope {
		t.Fatalf("stale entry with the store stalled: %+v %v %v, want the cached hook", s2, v2, err)
	}
	stalled := next.stalledLookups()
	if len(stalled) != 1 {
		t.Fatalf("%d stalled lookups, want 1", len(stalled))
	}
	if l := stalled[0]; l.deadline.IsZero() || l.deadline.Sub(l.start) > timeout || !errors.Is(l.err, context.DeadlineExceeded) {
		t.Errorf("the store was asked with deadline %v (%v after it was asked) and ended with %v; want at most the lookup timeout %v, exceeded",
			l.deadline, l.deadline.Sub(l.start), l.err, timeout)
	}
	// Loose: the machine may be busy; the deadline above is the exact check.
	if elapsed > 10*timeout {
		t.Errorf("answered after %v, want about the lookup timeout %v", elapsed, timeout)
	}

	// A hook with nothing cached has nothing to fall back on: the store's
	// error, as bounded.
	start = time.Now()
	if _, _, err := cache.Hook(ctx, triggers.Deploy, "e1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("uncached hook with the store stalled: %v, want the lookup's deadline exceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 10*timeout {
		t.Errorf("uncached hook answered after %v, want about the lookup timeout %v", elapsed, timeout)
	}
}

// After a failed refresh the hook's entry is used without asking the
// store until the backoff has passed: a stalled store costs a hook one
// bounded wait per backoff, not one per delivery.
func TestHookCacheBacksOffAfterAFailedLookup(t *testing.T) {
	const backoff = 5 * time.Second
	ctx := t.Context()
	next := &flakyHooks{}
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, LookupBackoff: backoff, Logger: zerolog.Nop(), Now: clock.Now})
	scope, v, err := cache.Hook(ctx, triggers.CodeHost, "h1")
	if err != nil {
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute)
	next.set(errors.New("redis: i/o timeout"))
	if _, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil || v2 != v {
		t.Fatalf("stale lookup with the store down: %v %v, want the cached hook", v2, err)
	}
	if n := next.lookups(); n != 2 {
		t.Fatalf("%d lookups, want 2", n)
	}
	clock.Advance(backoff - time.Millisecond)
	for range 5 {
		if s, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil || v2 != v || s != scope {
			t.Fatalf("within the backoff: %+v %v %v, want the cached hook", s, v2, err)
		}
	}
	if n := next.lookups(); n != 2 {
		t.Fatalf("5 deliveries within the backoff made %d lookups in all, want still 2", n)
	}
	// A signature mismatch does not ask either: the store is failing.
	if _, v2, fresh, err := cache.Recheck(ctx, triggers.CodeHost, "h1"); err != nil || fresh || v2 != v {
		t.Fatalf("recheck within the backoff: %v fresh %v %v, want the cached hook, not fresh", v2, fresh, err)
	}
	if n := next.lookups(); n != 2 {
		t.Fatalf("a recheck within the backoff made a lookup (%d in all, want still 2)", n)
	}

	// Past the backoff, one delivery asks again; failing, it backs off again.
	clock.Advance(time.Millisecond)
	if _, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil || v2 != v {
		t.Fatalf("past the backoff with the store down: %v %v, want the cached hook", v2, err)
	}
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil {
		t.Fatal(err)
	}
	if n := next.lookups(); n != 3 {
		t.Fatalf("%d lookups, want 3: one past the backoff", n)
	}
	next.set(nil)
	clock.Advance(backoff)
	if _, v2, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil || v2 == v {
		t.Fatalf("with the store back: %v %v, want the hook looked up again", v2, err)
	}
	if n := next.lookups(); n != 4 {
		t.Fatalf("%d lookups, want 4", n)
	}
}

// A stalled store fails every hook's refresh, every backoff; the log says
// so a few times, not once each.
func TestHookCacheStaleWarningsAreSampled(t *testing.T) {
	ctx := t.Context()
	next := &flakyHooks{}
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	var logs testenv.Buffer
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, Logger: zerolog.New(&logs), Now: clock.Now})
	if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil {
		t.Fatal(err)
	}
	next.set(errors.New("redis: i/o timeout"))
	clock.Advance(2 * time.Minute)
	for range 50 {
		clock.Advance(DefaultHookLookupBackoff)
		if _, _, err := cache.Hook(ctx, triggers.CodeHost, "h1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := next.lookups(); n != 51 {
		t.Fatalf("%d lookups, want 51: one a backoff", n)
	}
	warned := strings.Count(logs.String(), "hook lookup failed")
	if warned == 0 || warned > 10 {
		t.Errorf("50 failed refreshes logged %d warnings, want 1 to 10:\n%s", warned, logs.String())
	}
}

// While one delivery refreshes a hook's entry, the hook's other
// deliveries use the entry at once: they neither wait for the store nor
// ask it too.
func TestHookCacheRefreshesOnceAtATime(t *testing.T) {
	next := newStallingHooks()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	// The lookup timeout is beyond the test: the stall ends when it says.
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, LookupTimeout: time.Hour, Logger: zerolog.Nop(), Now: clock.Now})
	ctx := t.Context()
	scope, v, err := cache.Hook(ctx, triggers.CodeHost, "h1")
	if err != nil {
		t.Fatal(err)
	}

	clock.Advance(2 * time.Minute)
	next.stall(nil)
	var wg sync.WaitGroup
	defer func() {
		next.answer() // what a failure left blocked
		wg.Wait()
	}()
	refreshed := goHook(ctx, &wg, cache)
	receive(t, next.entered, "the refresh to ask the store")
	const n = 20
	others := make([]<-chan hookAnswer, n)
	for i := range others {
		others[i] = goHook(ctx, &wg, cache)
	}
	for i, ch := range others {
		if a := receive(t, ch, fmt.Sprintf("delivery %d during the refresh", i)); a.err != nil || a.v != v || a.scope != scope {
			t.Fatalf("delivery %d during the refresh: %+v %v %v, want the cached hook", i, a.scope, a.v, a.err)
		}
	}
	if got := next.lookups(); got != 2 {
		t.Fatalf("%d deliveries during a refresh made %d lookups in all, want 2 (the first and the refresh)", n, got)
	}

	next.answer()
	a := receive(t, refreshed, "the refresh")
	if a.err != nil || a.v == v || a.scope != scope {
		t.Fatalf("refresh: %+v %v %v, want the hook looked up again", a.scope, a.v, a.err)
	}
	if _, v2, _ := cache.Hook(ctx, triggers.CodeHost, "h1"); v2 != a.v || next.lookups() != 2 {
		t.Fatalf("after the refresh: %v (%d lookups), want the refreshed entry without a lookup", v2, next.lookups())
	}
}

// Deliveries for a hook with nothing cached wait for the store, but share
// one lookup; one whose sender hung up does not leave the others without
// an answer.
func TestHookCacheColdMissesShareALookup(t *testing.T) {
	next := newStallingHooks()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Minute, LookupTimeout: time.Hour, Logger: zerolog.Nop(), Now: clock.Now})
	var wg sync.WaitGroup
	defer func() {
		next.answer() // what a failure left blocked
		wg.Wait()
	}()

	stall := errors.New("redis: i/o timeout")
	next.stall(stall)
	first := goHook(t.Context(), &wg, cache)
	receive(t, next.entered, "the first miss to ask the store")
	const n = 10
	waiting := make(chan struct{}, n)
	others := make([]<-chan hookAnswer, n)
	for i := range others {
		others[i] = goHook(&waitingCtx{Context: t.Context(), waiting: waiting}, &wg, cache)
	}
	for i := range n {
		receive(t, waiting, fmt.Sprintf("miss %d to wait", i))
	}
	next.answer()
	for i, ch := range append(others, first) {
		if a := receive(t, ch, fmt.Sprintf("miss %d", i)); !errors.Is(a.err, stall) {
			t.Fatalf("miss %d with the store failing: %+v %v %v, want the store's error", i, a.scope, a.v, a.err)
		}
	}
	if got := next.lookups(); got != 1 {
		t.Fatalf("%d concurrent misses made %d lookups, want 1", n+1, got)
	}

	// The asking delivery's sender hangs up: its waiter asks itself.
	next.stall(nil)
	ctx, hangUp := context.WithCancel(t.Context())
	defer hangUp()
	first = goHook(ctx, &wg, cache)
	receive(t, next.entered, "a miss to ask the store")
	other := goHook(&waitingCtx{Context: t.Context(), waiting: waiting}, &wg, cache)
	receive(t, waiting, "another miss to wait")
	hangUp()
	if a := receive(t, first, "the miss whose sender hung up"); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("miss whose sender hung up: %v, want context.Canceled", a.err)
	}
	receive(t, next.entered, "the waiting miss to ask the store itself")
	next.answer()
	if a := receive(t, other, "the other miss"); a.err != nil || a.scope.Hook != "h1" {
		t.Fatalf("miss waiting on a hung-up lookup: %+v %v, want the hook", a.scope, a.err)
	}
}

// A Forget that comes while a lookup is under way (the store may have read
// the secrets being replaced) leaves nothing of that lookup cached: the
// next delivery asks the store again.
func TestHookCacheForgetDuringALookup(t *testing.T) {
	next := newStallingHooks()
	cache := NewHookCache(next, HookCacheOptions{TTL: time.Hour})
	var wg sync.WaitGroup
	defer wg.Wait()
	next.stall(nil)
	answer := goHook(t.Context(), &wg, cache)
	receive(t, next.entered, "the lookup to reach the store")
	cache.Forget(triggers.CodeHost, "h1")
	next.answer()
	if a := receive(t, answer, "the first delivery's answer"); a.err != nil {
		t.Fatalf("first delivery: %v", a.err)
	}
	if _, _, err := cache.Hook(t.Context(), triggers.CodeHost, "h1"); err != nil {
		t.Fatal(err)
	}
	if n := next.lookups(); n != 2 {
		t.Errorf("%d store lookups, want 2: the answer read before Forget was kept", n)
	}
	// Without a Forget, an answer is kept as before.
	if _, _, err := cache.Hook(t.Context(), triggers.CodeHost, "h1"); err != nil {
		t.Fatal(err)
	}
	if n := next.lookups(); n != 2 {
		t.Errorf("%d store lookups, want still 2 within the TTL", n)
	}
}
