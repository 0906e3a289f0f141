package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Buckets of hooks, their indexes and their activity
// (the package doc gives their keys).
var (
	bucketHooks        = []byte("hooks")
	bucketHookTenant   = []byte("hook-tenant")
	bucketHookKey      = []byte("hook-key")
	bucketHookActivity = []byte("hook-activity")
)

// hookKey is the key of a hook in the hook-key index.
func hookKey(k store.HookKey) []byte {
	return []byte(k.TenantID + sep + k.AccountID + sep + k.Connector + sep + string(k.Scope) + sep + k.Target)
}

// hooks keeps hooks: by id, whatever the tenant (ingest knows only the id
// in the URL), listed per tenant by hook-tenant, and found by their Key in
// hook-key, which no two hooks share.
var hooks = kind[store.Hook]{
	what:    "hook",
	bucket:  bucketHooks,
	key:     byID,
	fields:  record.OfHook,
	reaches: record.AnyTenant,
	indexes: func(h store.Hook) []indexEntry {
		return []indexEntry{
			{bucket: bucketHookTenant, key: tenantIndexKey(h.TenantID, h.ID)},
			{bucket: bucketHookKey, key: hookKey(h.Key()), value: []byte(h.ID), unique: true},
		}
	},
	tenantIndex: bucketHookTenant,
}

// CreateHook stores a new hook with Version 1; store.ErrConflict if its id
// or its Key is taken.
func (s *Store) CreateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	return hooks.create(ctx, s, h)
}

// GetHook returns a hook by id, whatever its tenant, or store.ErrNotFound.
func (s *Store) GetHook(ctx context.Context, id string) (store.Hook, error) {
	return hooks.get(ctx, s, "get", "", id)
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
		h, err = hooks.read(tx, "", string(id))
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
	return hooks.list(ctx, s, tenantID, func(h store.Hook) bool { return tenantID == "" || h.TenantID == tenantID })
}

// UpdateHook replaces the hook if its stored Version equals h.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first or if h's Key differs from the stored one (the Key cannot
// change), store.ErrNotFound if it does not exist.
func (s *Store) UpdateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	return hooks.update(ctx, s, h, sameHookKey)
}

// sameHookKey refuses an update that changes a hook's Key.
func sameHookKey(cur, next store.Hook) error {
	if cur.Key() != next.Key() {
		return fmt.Errorf("the key (tenant, account, connector, scope, target) cannot change: %w", store.ErrConflict)
	}
	return nil
}

// DeleteHook deletes the hook, which frees its Key, and its activity;
// store.ErrNotFound if absent.
func (s *Store) DeleteHook(ctx context.Context, id string) error {
	return hooks.remove(ctx, s, "", id, func(tx *bolt.Tx, _ store.Hook) error {
		return tx.Bucket(bucketHookActivity).Delete([]byte(id))
	})
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
