package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// Buckets of the dispatcher's records (see the package doc for their
// keys).
var (
	bucketAgents        = []byte("agents")
	bucketAgentTenant   = []byte("agent-tenant")
	bucketTriggers      = []byte("triggers")
	bucketTriggerTenant = []byte("trigger-tenant")
	bucketHooks         = []byte("hooks")
	bucketHookTenant    = []byte("hook-tenant")
	bucketHookKey       = []byte("hook-key")
	bucketHookActivity  = []byte("hook-activity")
	bucketRuns          = []byte("runs")
	bucketRunTime       = []byte("run-time")
	bucketRunTenant     = []byte("run-tenant")
	bucketRunTrigger    = []byte("run-trigger")
	bucketRunAgent      = []byte("run-agent")
	bucketRunEvent      = []byte("run-event")
	bucketEvents        = []byte("events")
	bucketEventTrigger  = []byte("event-trigger")
	bucketEventTime     = []byte("event-time")
	bucketCursors       = []byte("cursors")
)

// dispatchBuckets are the buckets Open creates for this file.
var dispatchBuckets = [][]byte{
	bucketAgents, bucketAgentTenant,
	bucketTriggers, bucketTriggerTenant,
	bucketHooks, bucketHookTenant, bucketHookKey, bucketHookActivity,
	bucketRuns, bucketRunTime, bucketRunTenant, bucketRunTrigger, bucketRunAgent, bucketRunEvent,
	bucketEvents, bucketEventTrigger, bucketEventTime,
	bucketCursors,
}

// sep separates the parts of index keys.
const sep = "\x00"

// timeKeyLen is the length of a timeKey.
const timeKeyLen = 12

// timeKey encodes t so that byte order is time order, to the nanosecond
// and whatever the zone: the Unix seconds with the sign bit flipped (8
// bytes), then the nanoseconds (4 bytes), big-endian.
func timeKey(t time.Time) []byte {
	k := make([]byte, timeKeyLen)
	binary.BigEndian.PutUint64(k, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
	return k
}

// timeIndexKey is the key of a record in a time-ordered index: its scope,
// NUL, timeKey(t) and its id.
func timeIndexKey(scope string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(scope)+len(sep)+timeKeyLen+len(id))
	k = append(k, scope...)
	k = append(k, sep...)
	k = append(k, timeKey(t)...)
	return append(k, id...)
}

// newestFirst calls f with the id of every entry of scope in the
// time-ordered index b, newest first (of equal times, the greatest id
// first), once per id, until f returns false or an error. Scopes may
// contain NUL, so an entry can belong to a longer scope (and an id can
// come twice): f checks the record it reads.
func newestFirst(b *bolt.Bucket, scope string, f func(id string) (more bool, err error)) error {
	prefix := []byte(scope + sep)
	seen := make(map[string]bool)
	c := b.Cursor()
	// The first key after every key with the prefix is scope + "\x01".
	k, _ := c.Seek([]byte(scope + "\x01"))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if len(k) < len(prefix)+timeKeyLen {
			continue
		}
		id := string(k[len(prefix)+timeKeyLen:])
		if seen[id] {
			continue
		}
		seen[id] = true
		more, err := f(id)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// oldestFirst calls f with the id of every entry of the scope "" of the
// time-ordered index b whose time is before before, oldest first (of equal
// times, the least id first), until f returns false or an error. The id is
// valid only until the transaction ends.
func oldestFirst(b *bolt.Bucket, before time.Time, f func(id []byte) (more bool, err error)) error {
	prefix := []byte(sep)
	end := timeIndexKey("", before, "")
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		if len(k) < len(prefix)+timeKeyLen {
			continue
		}
		more, err := f(k[len(prefix)+timeKeyLen:])
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// tenantIndexKey is the key of a record in a per-tenant index.
func tenantIndexKey(tenantID, id string) []byte {
	return []byte(tenantID + sep + id)
}

// getJSON decodes the value at key in b; store.ErrNotFound if absent.
func getJSON[T any](b *bolt.Bucket, key []byte) (T, error) {
	var v T
	data := b.Get(key)
	if data == nil {
		return v, store.ErrNotFound
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("decode %q: %w", key, err)
	}
	return v, nil
}

// allRecords decodes every value of b.
func allRecords[T any](b *bolt.Bucket) ([]T, error) {
	var out []T
	err := b.ForEach(func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("decode %q: %w", k, err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// tenantRecords decodes the records (keyed by id in the records bucket)
// that the per-tenant index lists under tenantID. Ids may contain NUL, so
// the caller checks each record's tenant.
func tenantRecords[T any](tx *bolt.Tx, index, records []byte, tenantID string) ([]T, error) {
	var out []T
	prefix := []byte(tenantID + sep)
	rb := tx.Bucket(records)
	c := tx.Bucket(index).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		x, err := getJSON[T](rb, k[len(prefix):])
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// Agents.

// getAgent reads the tenant's agent in tx; store.ErrNotFound if absent or
// another tenant's.
func getAgent(tx *bolt.Tx, tenantID, id string) (store.Agent, error) {
	a, err := getJSON[store.Agent](tx.Bucket(bucketAgents), []byte(id))
	if err != nil {
		return store.Agent{}, err
	}
	if a.TenantID != tenantID {
		return store.Agent{}, store.ErrNotFound
	}
	return a, nil
}

// CreateAgent stores a new agent with Version 1; store.ErrConflict if the
// id exists, in any tenant (agent ids are global: runs are published to
// agents.<agent-id>.runs).
func (s *Store) CreateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := ctx.Err(); err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: create agent: %w", err)
	}
	if err := store.RequireIDs("boltstore: create agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	store.Stamp(&a.CreatedAt, &a.UpdatedAt, s.now())
	a.Version = 1
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: create agent: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		agents := tx.Bucket(bucketAgents)
		if agents.Get([]byte(a.ID)) != nil {
			return store.ErrConflict
		}
		if err := agents.Put([]byte(a.ID), v); err != nil {
			return err
		}
		return tx.Bucket(bucketAgentTenant).Put(tenantIndexKey(a.TenantID, a.ID), nil)
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: create agent %s: %w", a.ID, err)
	}
	return a, nil
}

// GetAgent returns the tenant's agent, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	if err := ctx.Err(); err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: get agent: %w", err)
	}
	var a store.Agent
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		a, err = getAgent(tx, tenantID, id)
		return err
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: get agent %s: %w", id, err)
	}
	return a, nil
}

// FindAgent returns the agent with id, whatever its tenant, or
// store.ErrNotFound.
func (s *Store) FindAgent(ctx context.Context, id string) (store.Agent, error) {
	if err := ctx.Err(); err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: find agent: %w", err)
	}
	var a store.Agent
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		a, err = getJSON[store.Agent](tx.Bucket(bucketAgents), []byte(id))
		return err
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: find agent %s: %w", id, err)
	}
	return a, nil
}

// ListAgents returns the tenant's agents, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list agents: %w", err)
	}
	as := []store.Agent{}
	err := s.db.View(func(tx *bolt.Tx) error {
		all, err := tenantRecords[store.Agent](tx, bucketAgentTenant, bucketAgents, tenantID)
		for _, a := range all {
			if a.TenantID == tenantID {
				as = append(as, a)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list agents: %w", err)
	}
	store.SortOldestFirst(as, func(a store.Agent) time.Time { return a.CreatedAt }, func(a store.Agent) string { return a.ID })
	return as, nil
}

// UpdateAgent replaces the agent if its stored Version equals a.Version,
// and returns it with Version increased; store.ErrConflict if another
// write came first, store.ErrNotFound if the tenant has no such agent.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := ctx.Err(); err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: update agent: %w", err)
	}
	if err := store.RequireIDs("boltstore: update agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	want := a.Version
	a.Version++
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: update agent: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		cur, err := getAgent(tx, a.TenantID, a.ID)
		if err != nil {
			return err
		}
		if cur.Version != want {
			return store.ErrConflict
		}
		return tx.Bucket(bucketAgents).Put([]byte(a.ID), v)
	})
	if err != nil {
		return store.Agent{}, fmt.Errorf("boltstore: update agent %s: %w", a.ID, err)
	}
	return a, nil
}

// DeleteAgent deletes the tenant's agent; store.ErrNotFound if absent.
func (s *Store) DeleteAgent(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete agent: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if _, err := getAgent(tx, tenantID, id); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAgents).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket(bucketAgentTenant).Delete(tenantIndexKey(tenantID, id))
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete agent %s: %w", id, err)
	}
	return nil
}

// Triggers.

// getTrigger reads the tenant's trigger in tx; store.ErrNotFound if absent
// or another tenant's.
func getTrigger(tx *bolt.Tx, tenantID, id string) (store.Trigger, error) {
	t, err := getJSON[store.Trigger](tx.Bucket(bucketTriggers), []byte(id))
	if err != nil {
		return store.Trigger{}, err
	}
	if t.TenantID != tenantID {
		return store.Trigger{}, store.ErrNotFound
	}
	return t, nil
}

// CreateTrigger stores a new trigger with Version 1; store.ErrConflict if
// the id exists, in any tenant (trigger ids are global: run ids are
// derived from them).
func (s *Store) CreateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := ctx.Err(); err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: create trigger: %w", err)
	}
	if err := store.RequireIDs("boltstore: create trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	store.Stamp(&t.CreatedAt, &t.UpdatedAt, s.now())
	t.Version = 1
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: create trigger: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		triggers := tx.Bucket(bucketTriggers)
		if triggers.Get([]byte(t.ID)) != nil {
			return store.ErrConflict
		}
		if err := triggers.Put([]byte(t.ID), v); err != nil {
			return err
		}
		return tx.Bucket(bucketTriggerTenant).Put(tenantIndexKey(t.TenantID, t.ID), nil)
	})
	if err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: create trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// GetTrigger returns the tenant's trigger, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	if err := ctx.Err(); err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: get trigger: %w", err)
	}
	var t store.Trigger
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = getTrigger(tx, tenantID, id)
		return err
	})
	if err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: get trigger %s: %w", id, err)
	}
	return t, nil
}

// ListTriggers returns the triggers f selects (every tenant's when
// f.TenantID is empty), oldest first (by CreatedAt, then id).
func (s *Store) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list triggers: %w", err)
	}
	ts := []store.Trigger{}
	err := s.db.View(func(tx *bolt.Tx) error {
		var all []store.Trigger
		var err error
		if f.TenantID == "" {
			all, err = allRecords[store.Trigger](tx.Bucket(bucketTriggers))
		} else {
			all, err = tenantRecords[store.Trigger](tx, bucketTriggerTenant, bucketTriggers, f.TenantID)
		}
		for _, t := range all {
			if f.Match(t) {
				ts = append(ts, t)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list triggers: %w", err)
	}
	store.SortOldestFirst(ts, func(t store.Trigger) time.Time { return t.CreatedAt }, func(t store.Trigger) string { return t.ID })
	return ts, nil
}

// UpdateTrigger replaces the trigger if its stored Version equals
// t.Version, and returns it with Version increased; store.ErrConflict if
// another write came first, store.ErrNotFound if the tenant has no such
// trigger.
func (s *Store) UpdateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := ctx.Err(); err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: update trigger: %w", err)
	}
	if err := store.RequireIDs("boltstore: update trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	want := t.Version
	t.Version++
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: update trigger: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		cur, err := getTrigger(tx, t.TenantID, t.ID)
		if err != nil {
			return err
		}
		if cur.Version != want {
			return store.ErrConflict
		}
		return tx.Bucket(bucketTriggers).Put([]byte(t.ID), v)
	})
	if err != nil {
		return store.Trigger{}, fmt.Errorf("boltstore: update trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// DeleteTrigger deletes the tenant's trigger; store.ErrNotFound if absent.
func (s *Store) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete trigger: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if _, err := getTrigger(tx, tenantID, id); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTriggers).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket(bucketTriggerTenant).Delete(tenantIndexKey(tenantID, id))
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete trigger %s: %w", id, err)
	}
	return nil
}

// Hooks.

// hookKey is the key of a hook in the hook-key index.
func hookKey(k store.HookKey) []byte {
	return []byte(k.TenantID + sep + k.AccountID + sep + k.Connector + sep + string(k.Scope) + sep + k.Target)
}

// CreateHook stores a new hook with Version 1; store.ErrConflict if its id
// or its Key is taken.
func (s *Store) CreateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	if err := ctx.Err(); err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: create hook: %w", err)
	}
	if err := store.ValidateHook("boltstore: create hook", h); err != nil {
		return store.Hook{}, err
	}
	store.Stamp(&h.CreatedAt, &h.UpdatedAt, s.now())
	h.Version = 1
	v, err := json.Marshal(h)
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: create hook: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		hooks, keys := tx.Bucket(bucketHooks), tx.Bucket(bucketHookKey)
		hk := hookKey(h.Key())
		if hooks.Get([]byte(h.ID)) != nil || keys.Get(hk) != nil {
			return store.ErrConflict
		}
		if err := hooks.Put([]byte(h.ID), v); err != nil {
			return err
		}
		if err := keys.Put(hk, []byte(h.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketHookTenant).Put(tenantIndexKey(h.TenantID, h.ID), nil)
	})
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: create hook %s: %w", h.ID, err)
	}
	return h, nil
}

// GetHook returns a hook by id, whatever its tenant, or store.ErrNotFound.
func (s *Store) GetHook(ctx context.Context, id string) (store.Hook, error) {
	if err := ctx.Err(); err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: get hook: %w", err)
	}
	var h store.Hook
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		h, err = getJSON[store.Hook](tx.Bucket(bucketHooks), []byte(id))
		return err
	})
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: get hook %s: %w", id, err)
	}
	return h, nil
}

// FindHook returns the hook with this key, or store.ErrNotFound.
func (s *Store) FindHook(ctx context.Context, k store.HookKey) (store.Hook, error) {
	if err := ctx.Err(); err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: find hook: %w", err)
	}
	var h store.Hook
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketHookKey).Get(hookKey(k))
		if id == nil {
			return store.ErrNotFound
		}
		var err error
		h, err = getJSON[store.Hook](tx.Bucket(bucketHooks), id)
		if err == nil && h.Key() != k {
			err = store.ErrNotFound // NUL in a part made two keys one
		}
		return err
	})
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: find hook %s %s %s: %w", k.Connector, k.Scope, k.Target, err)
	}
	return h, nil
}

// ListHooks returns the tenant's hooks (every tenant's for ""), oldest
// first (by CreatedAt, then id).
func (s *Store) ListHooks(ctx context.Context, tenantID string) ([]store.Hook, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list hooks: %w", err)
	}
	hs := []store.Hook{}
	err := s.db.View(func(tx *bolt.Tx) error {
		var all []store.Hook
		var err error
		if tenantID == "" {
			all, err = allRecords[store.Hook](tx.Bucket(bucketHooks))
		} else {
			all, err = tenantRecords[store.Hook](tx, bucketHookTenant, bucketHooks, tenantID)
		}
		for _, h := range all {
			if tenantID == "" || h.TenantID == tenantID {
				hs = append(hs, h)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list hooks: %w", err)
	}
	store.SortOldestFirst(hs, func(h store.Hook) time.Time { return h.CreatedAt }, func(h store.Hook) string { return h.ID })
	return hs, nil
}

// UpdateHook replaces the hook if its stored Version equals h.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first or if h's Key differs from the stored one (the Key cannot
// change), store.ErrNotFound if it does not exist.
func (s *Store) UpdateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	if err := ctx.Err(); err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: update hook: %w", err)
	}
	if err := store.ValidateHook("boltstore: update hook", h); err != nil {
		return store.Hook{}, err
	}
	want := h.Version
	h.Version++
	v, err := json.Marshal(h)
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: update hook: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		hooks := tx.Bucket(bucketHooks)
		cur, err := getJSON[store.Hook](hooks, []byte(h.ID))
		if err != nil {
			return err
		}
		if cur.Version != want {
			return store.ErrConflict
		}
		if cur.Key() != h.Key() {
			return fmt.Errorf("the key (tenant, account, connector, scope, target) cannot change: %w", store.ErrConflict)
		}
		return hooks.Put([]byte(h.ID), v)
	})
	if err != nil {
		return store.Hook{}, fmt.Errorf("boltstore: update hook %s: %w", h.ID, err)
	}
	return h, nil
}

// DeleteHook deletes the hook, which frees its Key; store.ErrNotFound if
// absent.
func (s *Store) DeleteHook(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete hook: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		hooks, keys := tx.Bucket(bucketHooks), tx.Bucket(bucketHookKey)
		cur, err := getJSON[store.Hook](hooks, []byte(id))
		if err != nil {
			return err
		}
		if err := hooks.Delete([]byte(id)); err != nil {
			return err
		}
		hk := hookKey(cur.Key())
		if bytes.Equal(keys.Get(hk), []byte(id)) {
			if err := keys.Delete(hk); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketHookActivity).Delete([]byte(id)); err != nil {
			return err
		}
		return tx.Bucket(bucketHookTenant).Delete(tenantIndexKey(cur.TenantID, id))
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete hook %s: %w", id, err)
	}
	return nil
}

// AddHookActivity merges a into the activity of hook id
// (store.HookActivity.Add), in one write transaction that also checks the
// hook exists; store.ErrNotFound if it is absent.
func (s *Store) AddHookActivity(ctx context.Context, id string, a store.HookActivity) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: add hook activity: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketHooks).Get([]byte(id)) == nil {
			return store.ErrNotFound
		}
		activity := tx.Bucket(bucketHookActivity)
		cur, err := getJSON[store.HookActivity](activity, []byte(id))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		cur.Add(a)
		v, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return activity.Put([]byte(id), v)
	})
	if err != nil {
		return fmt.Errorf("boltstore: add hook activity %s: %w", id, err)
	}
	return nil
}

// GetHookActivity returns the activity of hook id: a zero
// store.HookActivity when none was added (or the hook is absent).
func (s *Store) GetHookActivity(ctx context.Context, id string) (store.HookActivity, error) {
	if err := ctx.Err(); err != nil {
		return store.HookActivity{}, fmt.Errorf("boltstore: get hook activity: %w", err)
	}
	var a store.HookActivity
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		a, err = getJSON[store.HookActivity](tx.Bucket(bucketHookActivity), []byte(id))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return store.HookActivity{}, fmt.Errorf("boltstore: get hook activity %s: %w", id, err)
	}
	return a, nil
}

// Runs.

// indexEntry is one key of a run or event in a time-ordered index.
type indexEntry struct {
	bucket, key []byte
}

// runIndexes returns r's entries in the run indexes: every run is in
// run-time and run-tenant; runs with a trigger, agent or event id are in
// run-trigger, run-agent or run-event too.
func runIndexes(r store.Run) []indexEntry {
	e := []indexEntry{
		{bucketRunTime, timeIndexKey("", r.CreatedAt, r.ID)},
		{bucketRunTenant, timeIndexKey(r.TenantID, r.CreatedAt, r.ID)},
	}
	if r.TriggerID != "" {
		e = append(e, indexEntry{bucketRunTrigger, timeIndexKey(r.TriggerID, r.CreatedAt, r.ID)})
	}
	if r.AgentID != "" {
		e = append(e, indexEntry{bucketRunAgent, timeIndexKey(r.AgentID, r.CreatedAt, r.ID)})
	}
	if r.EventID != "" {
		e = append(e, indexEntry{bucketRunEvent, timeIndexKey(r.TenantID+sep+r.EventID, r.CreatedAt, r.ID)})
	}
	return e
}

// putIndexes adds entries to their indexes.
func putIndexes(tx *bolt.Tx, entries []indexEntry) error {
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Put(e.key, nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteIndexes removes entries from their indexes.
func deleteIndexes(tx *bolt.Tx, entries []indexEntry) error {
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Delete(e.key); err != nil {
			return err
		}
	}
	return nil
}

// moveIndexes replaces a record's entries old with now, touching only the
// entries that differ: every bucket written costs pages at the commit, and
// most updates (a run's status, an event's outcomes) leave most entries
// where they were.
func moveIndexes(tx *bolt.Tx, old, now []indexEntry) error {
	if err := deleteIndexes(tx, without(old, now)); err != nil {
		return err
	}
	return putIndexes(tx, without(now, old))
}

// without returns the entries of a that b does not hold.
func without(a, b []indexEntry) []indexEntry {
	return slices.DeleteFunc(slices.Clone(a), func(e indexEntry) bool {
		return slices.ContainsFunc(b, func(f indexEntry) bool { return bytes.Equal(e.bucket, f.bucket) && bytes.Equal(e.key, f.key) })
	})
}

// getRun reads a run in tx: the tenant's, or any tenant's for "";
// store.ErrNotFound if absent or another tenant's.
func getRun(tx *bolt.Tx, tenantID, id string) (store.Run, error) {
	r, err := getJSON[store.Run](tx.Bucket(bucketRuns), []byte(id))
	if err != nil {
		return store.Run{}, err
	}
	if tenantID != "" && r.TenantID != tenantID {
		return store.Run{}, store.ErrNotFound
	}
	return r, nil
}

// CreateRun stores a new run with Version 1; store.ErrConflict if the id
// exists, in any tenant: the run was already claimed by someone.
func (s *Store) CreateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run: %w", err)
	}
	if err := store.RequireIDs("boltstore: create run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	store.Stamp(&r.CreatedAt, &r.UpdatedAt, s.now())
	r.Version = 1
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if runs.Get([]byte(r.ID)) != nil {
			return store.ErrConflict
		}
		if err := runs.Put([]byte(r.ID), v); err != nil {
			return err
		}
		return putIndexes(tx, runIndexes(r))
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run %s: %w", r.ID, err)
	}
	return r, nil
}

// GetRun returns the tenant's run (any tenant's for ""), or
// store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: get run: %w", err)
	}
	var r store.Run
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = getRun(tx, tenantID, id)
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: get run %s: %w", id, err)
	}
	return r, nil
}

// UpdateRun replaces the run if its stored Version equals r.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first, store.ErrNotFound if the tenant has no such run. The
// indexes follow the new run's trigger, agent, event and CreatedAt.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run: %w", err)
	}
	if err := store.RequireIDs("boltstore: update run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	want := r.Version
	r.Version++
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		cur, err := getRun(tx, r.TenantID, r.ID)
		if err != nil {
			return err
		}
		if cur.Version != want {
			return store.ErrConflict
		}
		if err := moveIndexes(tx, runIndexes(cur), runIndexes(r)); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(r.ID), v)
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run %s: %w", r.ID, err)
	}
	return r, nil
}

// PruneRuns deletes the runs of every tenant that finished before before
// (see store.Run.FinishedBefore), with their index entries, oldest
// CreatedAt first (then least id), at most limit (store.DefaultPruneLimit
// if not positive), and returns how many it deleted. It walks run-time from
// the oldest entry to the first created at or after before, past the runs
// that have not finished, in write transactions of at most
// store.DefaultPruneLimit runs, so that the dispatcher's writes are not
// held up long.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := prune(ctx, s.db, bucketRunTime, bucketRuns, before, limit,
		func(r store.Run) bool { return r.FinishedBefore(before) },
		func(r store.Run) []byte { return []byte(r.ID) }, runIndexes)
	if err != nil {
		return n, fmt.Errorf("boltstore: prune runs: %w", err)
	}
	return n, nil
}

// prune deletes, oldest first, at most limit (store.DefaultPruneLimit if
// not positive) of the records that the time-ordered index names (by
// their key in records) with a time before before and that due accepts,
// with their index entries, and returns how many it deleted. It works in
// write transactions of at most store.DefaultPruneLimit records, so that
// other writes are not held up long.
func prune[T any](ctx context.Context, db *bolt.DB, index, records []byte, before time.Time, limit int,
	due func(T) bool, key func(T) []byte, indexes func(T) []indexEntry) (int, error) {
	limit = store.PruneLimit(limit)
	deleted := 0
	for deleted < limit {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		batch := min(limit-deleted, store.DefaultPruneLimit)
		n := 0
		err := db.Update(func(tx *bolt.Tx) error {
			rb := tx.Bucket(records)
			var doomed []T
			err := oldestFirst(tx.Bucket(index), before, func(k []byte) (bool, error) {
				v, err := getJSON[T](rb, k)
				if errors.Is(err, store.ErrNotFound) {
					return true, nil
				}
				if err != nil {
					return false, err
				}
				if due(v) {
					doomed = append(doomed, v)
				}
				return len(doomed) < batch, nil
			})
			if err != nil {
				return err
			}
			// Deleted after the walk: a cursor does not follow deletions
			// of keys other than its own.
			for _, v := range doomed {
				if err := rb.Delete(key(v)); err != nil {
					return err
				}
				if err := deleteIndexes(tx, indexes(v)); err != nil {
					return err
				}
			}
			n = len(doomed)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n < batch {
			break
		}
	}
	return deleted, nil
}

// ListRuns returns the runs f selects, newest first (by CreatedAt, then
// id), at most f.Limit (100 if not positive). It walks the most selective
// index f allows (the tenant's event, the trigger, the agent, the tenant,
// or every run) and checks the rest, the status included, on the runs it
// reads.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list runs: %w", err)
	}
	limit := store.ListLimit(f.Limit)
	var bucket []byte
	var scope string
	switch {
	case f.TenantID != "" && f.EventID != "":
		bucket, scope = bucketRunEvent, f.TenantID+sep+f.EventID
	case f.TriggerID != "":
		bucket, scope = bucketRunTrigger, f.TriggerID
	case f.AgentID != "":
		bucket, scope = bucketRunAgent, f.AgentID
	case f.TenantID != "":
		bucket, scope = bucketRunTenant, f.TenantID
	default:
		bucket, scope = bucketRunTime, ""
	}
	rs := []store.Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		return newestFirst(tx.Bucket(bucket), scope, func(id string) (bool, error) {
			r, err := getJSON[store.Run](runs, []byte(id))
			if errors.Is(err, store.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if f.Match(r) {
				rs = append(rs, r)
			}
			return len(rs) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list runs: %w", err)
	}
	return rs, nil
}

// Events.

// eventKey is the key of an event record in the events bucket.
func eventKey(tenantID, eventID string) []byte {
	return []byte(tenantID + sep + eventID)
}

// eventIndexes returns e's entries in the indexes: one in event-time, and
// one in event-trigger per trigger with an outcome.
func eventIndexes(e store.EventRecord) []indexEntry {
	entries := []indexEntry{{bucketEventTime, timeIndexKey("", e.DispatchedAt, string(eventKey(e.TenantID, e.EventID)))}}
	for _, tr := range e.TriggerIDs() {
		entries = append(entries, indexEntry{bucketEventTrigger, timeIndexKey(e.TenantID+sep+tr, e.DispatchedAt, e.EventID)})
	}
	return entries
}

// indexEvents fills event-time from the event records when it is empty
// but they are not: a file written before event-time existed, whose
// records PruneEvents could not find otherwise. Open calls it.
func indexEvents(tx *bolt.Tx) error {
	index := tx.Bucket(bucketEventTime)
	if k, _ := index.Cursor().First(); k != nil {
		return nil
	}
	return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
		var e store.EventRecord
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode %q: %w", k, err)
		}
		return index.Put(timeIndexKey("", e.DispatchedAt, string(k)), nil)
	})
}

// PutEvent stores or replaces the tenant's record of an event, and moves
// it in the indexes: a trigger no longer among the outcomes no longer
// lists it. A zero DispatchedAt is stored as the time of the
// write.
func (s *Store) PutEvent(ctx context.Context, e store.EventRecord) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put event: %w", err)
	}
	if err := store.RequireIDs("boltstore: put event", "tenant id", e.TenantID, "event id", e.EventID); err != nil {
		return err
	}
	if e.DispatchedAt.IsZero() {
		e.DispatchedAt = s.now()
	}
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("boltstore: put event: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		k := eventKey(e.TenantID, e.EventID)
		var stale []indexEntry
		old, err := getJSON[store.EventRecord](events, k)
		switch {
		case err == nil:
			if old.TenantID != e.TenantID || old.EventID != e.EventID {
				return store.ErrConflict // NUL in an id made two keys one
			}
			stale = eventIndexes(old)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := events.Put(k, v); err != nil {
			return err
		}
		return moveIndexes(tx, stale, eventIndexes(e))
	})
	if err != nil {
		return fmt.Errorf("boltstore: put event %s: %w", e.EventID, err)
	}
	return nil
}

// getEvent reads the tenant's record of an event in tx; store.ErrNotFound
// if absent.
func getEvent(tx *bolt.Tx, tenantID, eventID string) (store.EventRecord, error) {
	e, err := getJSON[store.EventRecord](tx.Bucket(bucketEvents), eventKey(tenantID, eventID))
	if err != nil {
		return store.EventRecord{}, err
	}
	if e.TenantID != tenantID || e.EventID != eventID {
		return store.EventRecord{}, store.ErrNotFound
	}
	return e, nil
}

// GetEvent returns the tenant's record of an event, or store.ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error) {
	if err := ctx.Err(); err != nil {
		return store.EventRecord{}, fmt.Errorf("boltstore: get event: %w", err)
	}
	var e store.EventRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		e, err = getEvent(tx, tenantID, eventID)
		return err
	})
	if err != nil {
		return store.EventRecord{}, fmt.Errorf("boltstore: get event %s: %w", eventID, err)
	}
	return e, nil
}

// ListTriggerEvents returns the tenant's records that have an outcome for
// the trigger, newest DispatchedAt first (then greatest event id), at most
// limit (100 if not positive).
func (s *Store) ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]store.EventRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list trigger events: %w", err)
	}
	limit = store.ListLimit(limit)
	es := []store.EventRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return newestFirst(tx.Bucket(bucketEventTrigger), tenantID+sep+triggerID, func(id string) (bool, error) {
			e, err := getEvent(tx, tenantID, id)
			if errors.Is(err, store.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if e.HasOutcome(triggerID) {
				es = append(es, e)
			}
			return len(es) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list trigger events %s: %w", triggerID, err)
	}
	return es, nil
}

// PruneEvents deletes the records of every tenant whose DispatchedAt is
// before before, with their index entries, oldest DispatchedAt first (then
// least tenant and event id), at most limit (store.DefaultPruneLimit if not
// positive), and returns how many it deleted. It walks event-time from the
// oldest entry, in write transactions of at most store.DefaultPruneLimit
// records.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := prune(ctx, s.db, bucketEventTime, bucketEvents, before, limit,
		func(e store.EventRecord) bool { return e.DispatchedAt.Before(before) },
		func(e store.EventRecord) []byte { return eventKey(e.TenantID, e.EventID) }, eventIndexes)
	if err != nil {
		return n, fmt.Errorf("boltstore: prune events: %w", err)
	}
	return n, nil
}

// Cursors.

// GetCursor returns the cursor, or one with Version 0 and no Value when
// none is stored.
func (s *Store) GetCursor(ctx context.Context, key string) (store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: get cursor: %w", err)
	}
	var c store.Cursor
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, err = getJSON[store.Cursor](tx.Bucket(bucketCursors), []byte(key))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Cursor{Key: key}, nil
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: get cursor %s: %w", key, err)
	}
	return c, nil
}

// PutCursor stores c if the stored Version equals c.Version (0: none is
// stored), store.ErrConflict otherwise, and returns it with Version
// increased. A zero UpdatedAt is stored as the time of the write.
func (s *Store) PutCursor(ctx context.Context, c store.Cursor) (store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor: %w", err)
	}
	if err := store.RequireIDs("boltstore: put cursor", "key", c.Key); err != nil {
		return store.Cursor{}, err
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = s.now()
	}
	want := c.Version
	c.Version++
	v, err := json.Marshal(c)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		cursors := tx.Bucket(bucketCursors)
		cur, err := getJSON[store.Cursor](cursors, []byte(c.Key))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if cur.Version != want { // 0 when none is stored
			return store.ErrConflict
		}
		return cursors.Put([]byte(c.Key), v)
	})
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor %s: %w", c.Key, err)
	}
	return c, nil
}
