package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/triggers"
)

// Defaults for NewHookCache.
const (
	DefaultHookCacheTTL = 30 * time.Second
	DefaultHookMaxStale = 24 * time.Hour
	// DefaultHookLookupTimeout bounds one store read of a hook. Redis and
	// bbolt answer one in about a millisecond, so a second is a stall, not
	// a slow answer; and it leaves most of the 10 s a sender waits (GitHub
	// counts a slower answer as a failed delivery) to the delivery's own
	// commit.
	DefaultHookLookupTimeout = time.Second
	// DefaultHookLookupBackoff is how long a hook whose lookup failed is
	// served from its entry without asking the store: a stalled store then
	// costs each hook one bounded wait every few seconds, not one per
	// delivery, and is not pressed by every delivery while it recovers.
	DefaultHookLookupBackoff = 5 * time.Second
)

// HookCache is a Hooks that remembers what another resolved: a hook's
// scope and the verifier of its secrets. Per-hook deliveries are the usual
// path for users' triggers, and without it each one would read the store
// (a Redis round trip) and set up its HMAC key again.
//
// A deployment endpoint's secrets can be replaced (the provider's, set by
// the user): the process that replaces them calls Forget, and so does each
// other process when the change's broadcast reaches it; one that missed
// the broadcast asks again when a delivery's signature fails (Recheck). A
// lookup under way when Forget is called may have read the old secrets:
// its answer is used for its delivery but not kept.
//
// An entry is asked for again after the TTL. When the store cannot answer
// then (Redis stalled or down), the entry is used as it was, up to
// MaxStale: the sender does not retry a delivery refused with 503, and the
// entry was the hook's own secret a moment ago. (Deleting a hook needs the
// store too, so none is deleted meanwhile.) A hook the store no longer has
// is forgotten at once.
//
// A stalled store must not make deliveries late either: a sender that
// waits past its timeout counts the delivery failed as surely as a 503.
// So a lookup has LookupTimeout, the delivery that refreshes an entry is
// the only one of its hook that waits for the store (the others use the
// entry meanwhile), and after a failed lookup the hook's entry is used
// without asking for LookupBackoff. A hook with no usable entry has
// nothing else to go on: its deliveries wait, sharing one lookup.
type HookCache struct {
	next     Hooks
	ttl      time.Duration
	maxStale time.Duration
	timeout  time.Duration
	backoff  time.Duration
	now      func() time.Time
	// log is sampled: a stalled store fails every hook's refresh, and
	// would otherwise have a warning written for each hook every backoff.
	log zerolog.Logger

	mu      sync.Mutex
	entries map[hookKey]hookEntry
	// lookups are the hooks being asked of next by Hook, with what their
	// waiters get.
	lookups map[hookKey]*hookLookup
	// forgets counts Forget calls. A lookup keeps its answer only if none
	// came while it asked: the store may have answered with the secrets
	// Forget was called to drop.
	forgets uint64
}

type hookKey struct {
	c  triggers.Connector
	id string
}

type hookEntry struct {
	scope triggers.Scope
	v     *Verifier
	at    time.Time // when next last resolved it
	// rechecked is when Recheck last asked next.
	rechecked time.Time
	// retryAt is, after a failed lookup, when next may be asked again.
	retryAt time.Time
}

// hookLookup is one lookup by Hook, which deliveries of the hook that
// have no usable entry wait for (done closed) instead of starting their
// own.
type hookLookup struct {
	done  chan struct{}
	scope triggers.Scope
	v     *Verifier
	err   error
	// shared is false when the looking-up delivery's own context ended:
	// its error says nothing about the hook, and a waiter asks itself.
	shared bool
}

// RecheckEvery bounds how often HookCache.Recheck asks the store about
// one hook: a sender of wrongly signed deliveries makes at most one store
// read a second per hook, whatever its rate.
const RecheckEvery = time.Second

// HookCacheOptions configures a HookCache; zero values take the defaults.
type HookCacheOptions struct {
	TTL      time.Duration
	MaxStale time.Duration
	// LookupTimeout bounds each store read of a hook
	// (DefaultHookLookupTimeout).
	LookupTimeout time.Duration
	// LookupBackoff is how long, after a failed lookup, a hook is served
	// from its entry without asking the store (DefaultHookLookupBackoff).
	LookupBackoff time.Duration
	Logger        zerolog.Logger
	// Now defaults to time.Now; tests replace it.
	Now func() time.Time
}

// NewHookCache returns a HookCache in front of next.
func NewHookCache(next Hooks, o HookCacheOptions) *HookCache {
	if o.TTL <= 0 {
		o.TTL = DefaultHookCacheTTL
	}
	if o.MaxStale < o.TTL {
		o.MaxStale = max(DefaultHookMaxStale, o.TTL)
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = DefaultHookLookupTimeout
	}
	if o.LookupBackoff <= 0 {
		o.LookupBackoff = DefaultHookLookupBackoff
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &HookCache{
		next: next, ttl: o.TTL, maxStale: o.MaxStale, timeout: o.LookupTimeout, backoff: o.LookupBackoff, now: o.Now,
		// Enough warnings a minute to see that the store fails, and for
		// which hooks.
		log: o.Logger.With().Str("component", "ingest").Logger().
			Sample(&zerolog.BurstSampler{Burst: 10, Period: time.Minute}),
		entries: map[hookKey]hookEntry{},
		lookups: map[hookKey]*hookLookup{},
	}
}

// Hook implements Hooks.
func (h *HookCache) Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error) {
	key := hookKey{c, id}
	for {
		now := h.now()
		h.mu.Lock()
		e, cached := h.entries[key]
		age := now.Sub(e.at)
		usable := cached && age < h.maxStale
		l := h.lookups[key]
		switch {
		case cached && age < h.ttl,
			// Another delivery is asking, or the store failed a moment ago.
			usable && (l != nil || now.Before(e.retryAt)):
			h.mu.Unlock()
			return e.scope, e.v, nil
		case l == nil:
			l = &hookLookup{done: make(chan struct{})}
			h.lookups[key] = l
			gen := h.forgets
			h.mu.Unlock()
			return h.refresh(ctx, key, e, cached, now, gen, l)
		}
		h.mu.Unlock()
		// Nothing usable cached, and another delivery is asking: its
		// answer is this one's too.
		select {
		case <-l.done:
		case <-ctx.Done():
			return triggers.Scope{}, nil, ctx.Err()
		}
		if l.shared {
			return l.scope, l.v, l.err
		}
	}
}

// refresh asks next about a hook for Hook, which registered l, and
// answers l's waiters too. e is the entry, if cached, as of now; gen is
// forgets when l was registered.
func (h *HookCache) refresh(ctx context.Context, key hookKey, e hookEntry, cached bool, now time.Time, gen uint64, l *hookLookup) (scope triggers.Scope, v *Verifier, err error) {
	// Deferred, so that waiters are let go even if next panics (and then
	// ask themselves: there is no answer to share).
	answered := false
	defer func() {
		l.scope, l.v, l.err = scope, v, err
		l.shared = answered && ctx.Err() == nil
		h.mu.Lock()
		delete(h.lookups, key)
		h.mu.Unlock()
		close(l.done)
	}()
	scope, v, err = h.lookup(ctx, key)
	answered = true
	age := now.Sub(e.at)
	switch {
	case err == nil:
		h.keep(key, hookEntry{scope: scope, v: v, at: now}, gen)
		return scope, v, nil
	case errors.Is(err, ErrUnknownHook):
		if cached {
			h.mu.Lock()
			delete(h.entries, key)
			h.mu.Unlock()
		}
		return triggers.Scope{}, nil, err
	case cached && age < h.maxStale:
		h.failed(ctx, key, now)
		h.log.Warn().Err(err).Str("hook", key.id).Dur("age", age).
			Msg("hook lookup failed; verifying with the hook's secret as last looked up")
		return e.scope, e.v, nil
	}
	return triggers.Scope{}, nil, err
}

// lookup asks next, within the lookup timeout.
func (h *HookCache) lookup(ctx context.Context, key hookKey) (triggers.Scope, *Verifier, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	return h.next.Hook(ctx, key.c, key.id)
}

// failed records that a lookup of a cached hook failed at now: next is not
// asked about it again for the backoff. A lookup cut short by its caller
// (the sender hung up) says nothing of the store and is not held against
// the hook.
func (h *HookCache) failed(ctx context.Context, key hookKey, now time.Time) {
	if ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.entries[key]; ok {
		e.retryAt = now.Add(h.backoff)
		h.entries[key] = e
	}
}

// keep caches what a lookup that started at Forget count gen found,
// unless a Forget came since.
func (h *HookCache) keep(key hookKey, e hookEntry, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.forgets == gen {
		h.entries[key] = e
	}
}

// Forget drops what the cache holds of a hook, whose secrets changed or
// which is gone: its next delivery asks the store. A lookup under way
// keeps nothing (see keep), as it may have read what changed.
func (h *HookCache) Forget(c triggers.Connector, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.entries, hookKey{c, id})
	h.forgets++
}

// Recheck implements Rechecker: it resolves the hook again, past the TTL,
// when a delivery's signature fails against the secrets cached (a
// deployment endpoint's secrets can be replaced), at most once every
// RecheckEvery per hook, and not during the backoff after a failed lookup
// (the store is likely failing still, and each ask would hold a delivery
// for the lookup timeout). fresh reports whether it asked; when it did
// not, or the store failed, it returns what it had.
func (h *HookCache) Recheck(ctx context.Context, c triggers.Connector, id string) (scope triggers.Scope, v *Verifier, fresh bool, err error) {
	key := hookKey{c, id}
	now := h.now()
	h.mu.Lock()
	e, cached := h.entries[key]
	if cached && (now.Sub(e.rechecked) < RecheckEvery || now.Before(e.retryAt)) {
		h.mu.Unlock()
		return e.scope, e.v, false, nil
	}
	if cached {
		e.rechecked = now
		h.entries[key] = e
	}
	gen := h.forgets
	h.mu.Unlock()
	scope, v, err = h.lookup(ctx, key)
	switch {
	case err == nil:
		h.keep(key, hookEntry{scope: scope, v: v, at: now, rechecked: now}, gen)
		return scope, v, true, nil
	case errors.Is(err, ErrUnknownHook):
		h.mu.Lock()
		delete(h.entries, key)
		h.mu.Unlock()
		return triggers.Scope{}, nil, false, err
	case cached:
		h.failed(ctx, key, now)
	}
	return e.scope, e.v, false, err
}
