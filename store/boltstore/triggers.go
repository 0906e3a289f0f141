package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// Buckets of triggers and their per-tenant index
// (the package doc gives their keys).
var (
	bucketTriggers      = []byte("triggers")
	bucketTriggerTenant = []byte("trigger-tenant")
)

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
