package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
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
