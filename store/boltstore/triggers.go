package boltstore

import (
	"context"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Buckets of triggers and their per-tenant index
// (the package doc gives their keys).
var (
	bucketTriggers      = []byte("triggers")
	bucketTriggerTenant = []byte("trigger-tenant")
)

// triggers keeps triggers: by id (trigger ids are global: run ids are
// derived from them), listed per tenant by trigger-tenant.
var triggers = kind[store.Trigger]{
	what:    "trigger",
	bucket:  bucketTriggers,
	key:     byID,
	fields:  record.OfTrigger,
	reaches: record.InTenant,
	indexes: func(t store.Trigger) []indexEntry {
		return []indexEntry{{bucket: bucketTriggerTenant, key: tenantIndexKey(t.TenantID, t.ID)}}
	},
	tenantIndex: bucketTriggerTenant,
}

// CreateTrigger stores a new trigger with Version 1; store.ErrConflict if
// the id exists, in any tenant.
func (s *Store) CreateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	return triggers.create(ctx, s, t)
}

// GetTrigger returns the tenant's trigger, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	return triggers.get(ctx, s, "get", tenantID, id)
}

// ListTriggers returns the triggers f selects (every tenant's when
// f.TenantID is empty), oldest first (by CreatedAt, then id).
func (s *Store) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	return triggers.list(ctx, s, f.TenantID, f.Match)
}

// UpdateTrigger replaces the trigger if its stored Version equals
// t.Version, and returns it with Version increased; store.ErrConflict if
// another write came first, store.ErrNotFound if the tenant has no such
// trigger.
func (s *Store) UpdateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	return triggers.update(ctx, s, t, nil)
}

// DeleteTrigger deletes the tenant's trigger; store.ErrNotFound if absent.
func (s *Store) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	return triggers.remove(ctx, s, tenantID, id, nil)
}
