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
)

// HookCache is a Hooks that remembers what another resolved: a hook's
// scope and the verifier of its secrets. Per-hook deliveries are the usual
// path for users' triggers, and without it each one would read the store
// (a Redis round trip) and set up its HMAC key again.
//
// A deployment endpoint's secrets can be replaced (the provider's, set by
// the user): the process that replaces them calls Forget, and so does each
// other process when the change's broadcast reaches it; one that missed
// the broadcast asks again when a delivery's signature fails (Recheck).
//
// An entry is asked for again after the TTL. When the store cannot answer
// then (Redis stalled or down), the entry is used as it was, up to
// MaxStale: the sender does not retry a delivery refused with 503, and the
// entry was the hook's own secret a moment ago. (Deleting a hook needs the
// store too, so none is deleted meanwhile.) A hook the store no longer has
// is forgotten at once.
type HookCache struct {
	next     Hooks
	ttl      time.Duration
	maxStale time.Duration
	now      func() time.Time
	log      zerolog.Logger

	mu      sync.Mutex
	entries map[hookKey]hookEntry
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
}

// RecheckEvery bounds how often HookCache.Recheck asks the store about
// one hook: a sender of wrongly signed deliveries makes at most one store
// read a second per hook, whatever its rate.
const RecheckEvery = time.Second

// HookCacheOptions configures a HookCache; zero values take the defaults.
type HookCacheOptions struct {
	TTL      time.Duration
	MaxStale time.Duration
	Logger   zerolog.Logger
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
	if o.Now == nil {
		o.Now = time.Now
	}
	return &HookCache{
		next: next, ttl: o.TTL, maxStale: o.MaxStale, now: o.Now,
		log:     o.Logger.With().Str("component", "ingest").Logger(),
		entries: map[hookKey]hookEntry{},
	}
}

// Hook implements Hooks.
func (h *HookCache) Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error) {
	key := hookKey{c, id}
	now := h.now()
	h.mu.Lock()
	e, cached := h.entries[key]
	h.mu.Unlock()
	age := now.Sub(e.at)
	if cached && age < h.ttl {
		return e.scope, e.v, nil
	}
	scope, v, err := h.next.Hook(ctx, c, id)
	switch {
	case err == nil:
		h.mu.Lock()
		h.entries[key] = hookEntry{scope: scope, v: v, at: now}
		h.mu.Unlock()
		return scope, v, nil
	case errors.Is(err, ErrUnknownHook):
		if cached {
			h.mu.Lock()
			delete(h.entries, key)
			h.mu.Unlock()
		}
		return triggers.Scope{}, nil, err
	case cached && age < h.maxStale:
		h.log.Warn().Err(err).Str("hook", id).Dur("age", age).
			Msg("hook lookup failed; verifying with the hook's secret as last looked up")
		return e.scope, e.v, nil
	}
	return triggers.Scope{}, nil, err
}

// Forget drops what the cache holds of a hook, whose secrets changed or
// which is gone: its next delivery asks the store.
func (h *HookCache) Forget(c triggers.Connector, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.entries, hookKey{c, id})
}

// Recheck implements Rechecker: it resolves the hook again, past the TTL,
// when a delivery's signature fails against the secrets cached (a
// deployment endpoint's secrets can be replaced), at most once every
// RecheckEvery per hook. fresh reports whether it asked; when it did not,
// or the store failed, it returns what it had.
func (h *HookCache) Recheck(ctx context.Context, c triggers.Connector, id string) (scope triggers.Scope, v *Verifier, fresh bool, err error) {
	key := hookKey{c, id}
	now := h.now()
	h.mu.Lock()
	e, cached := h.entries[key]
	if cached && now.Sub(e.rechecked) < RecheckEvery {
		h.mu.Unlock()
		return e.scope, e.v, false, nil
	}
	if cached {
		e.rechecked = now
		h.entries[key] = e
	}
	h.mu.Unlock()
	scope, v, err = h.next.Hook(ctx, c, id)
	switch {
	case err == nil:
		h.mu.Lock()
		h.entries[key] = hookEntry{scope: scope, v: v, at: now, rechecked: now}
		h.mu.Unlock()
		return scope, v, true, nil
	case errors.Is(err, ErrUnknownHook):
		h.mu.Lock()
		delete(h.entries, key)
		h.mu.Unlock()
		return triggers.Scope{}, nil, false, err
	}
	return e.scope, e.v, false, err
}
