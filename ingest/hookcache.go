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
// scope and the verifier of its secret (which never changes once the hook
// exists). Per-hook deliveries are the usual path for users' triggers, and
// without it each one would read the store (a Redis round trip) and set up
// its HMAC key again.
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
}

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
