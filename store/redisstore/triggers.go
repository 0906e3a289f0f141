package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/store"
)

// Key names (the package doc lists them).
func (s *Store) triggerKey(id string) string      { return s.prefix + "trigger:" + id }
func (s *Store) triggersKey(tenant string) string { return s.prefix + "triggers:" + tenant }
func (s *Store) allTriggersKey() string           { return s.prefix + "triggers" }

// CreateTrigger stores a new trigger with Version 1; store.ErrConflict if
// the id exists, in any tenant (trigger ids are global: run ids are
// derived from them).
func (s *Store) CreateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := store.RequireIDs("redisstore: create trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	store.Stamp(&t.CreatedAt, &t.UpdatedAt, s.now())
	t.Version = 1
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: create trigger: %w", err)
	}
	// KEYS: trigger, triggers:{tenant}, triggers. ARGV: JSON, id, score.
	keys := []string{s.triggerKey(t.ID), s.triggersKey(t.TenantID), s.allTriggersKey()}
	if err := createResult(createRecordScript.Run(ctx, s.rdb, keys, v, t.ID, score(t.CreatedAt)).Int()); err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: create trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// GetTrigger returns the tenant's trigger, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	var t store.Trigger
	err := s.getJSON(ctx, s.triggerKey(id), &t)
	if err == nil && (t.TenantID != tenantID || t.ID != id) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: get trigger %s: %w", id, err)
	}
	return t, nil
}

// ListTriggers returns the triggers f selects (every tenant's when
// f.TenantID is empty), oldest first (by CreatedAt, then id).
func (s *Store) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	zkey := s.allTriggersKey()
	if f.TenantID != "" {
		zkey = s.triggersKey(f.TenantID)
	}
	ts, err := listSet(ctx, s, zkey, s.triggerKey, f.Match)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list triggers: %w", err)
	}
	store.SortOldestFirst(ts, func(t store.Trigger) time.Time { return t.CreatedAt }, func(t store.Trigger) string { return t.ID })
	return ts, nil
}

// UpdateTrigger replaces the trigger if its stored Version equals
// t.Version, and returns it with Version increased; store.ErrConflict if
// another write came first, store.ErrNotFound if the tenant has no such
// trigger.
func (s *Store) UpdateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := store.RequireIDs("redisstore: update trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	want := t.Version
	t.Version++
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: update trigger: %w", err)
	}
	// KEYS: trigger, triggers:{tenant}, triggers (to refresh the score).
	// ARGV: tenant, expected version, JSON, id, score, 0 sets to leave.
	keys := []string{s.triggerKey(t.ID), s.triggersKey(t.TenantID), s.allTriggersKey()}
	if err := updateResult(updateRecordScript.Run(ctx, s.rdb, keys, t.TenantID, want, v, t.ID, score(t.CreatedAt), 0).Int()); err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: update trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// DeleteTrigger deletes the tenant's trigger; store.ErrNotFound if absent.
func (s *Store) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	// KEYS: trigger, triggers:{tenant}, triggers. ARGV: tenant, id.
	keys := []string{s.triggerKey(id), s.triggersKey(tenantID), s.allTriggersKey()}
	n, err := deleteRecordScript.Run(ctx, s.rdb, keys, tenantID, id).Int()
	if err == nil && n != 1 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete trigger %s: %w", id, err)
	}
	return nil
}
