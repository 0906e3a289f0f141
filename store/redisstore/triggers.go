package redisstore

import (
	"context"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Key names (the package doc lists them).
func (s *Store) triggerKey(id string) string      { return s.prefix + "trigger:" + id }
func (s *Store) triggersKey(tenant string) string { return s.prefix + "triggers:" + tenant }
func (s *Store) allTriggersKey() string           { return s.prefix + "triggers" }

// triggers keeps triggers: by id (trigger ids are global: run ids are
// derived from them), listed per tenant by triggers:{tenant} and all
// together by triggers.
func (s *Store) triggers() kind[store.Trigger] {
	return kind[store.Trigger]{
		s:          s,
		what:       "trigger",
		key:        func(_, id string) string { return s.triggerKey(id) },
		fields:     record.OfTrigger,
		reaches:    record.InTenant,
		tenantSets: func(tenant string) []string { return []string{s.triggersKey(tenant), s.allTriggersKey()} },
	}
}

// CreateTrigger stores a new trigger with Version 1; store.ErrConflict if
// the id exists, in any tenant.
func (s *Store) CreateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	return s.triggers().create(ctx, t)
}

// GetTrigger returns the tenant's trigger, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	return s.triggers().get(ctx, "get", tenantID, id)
}

// ListTriggers returns the triggers f selects (every tenant's when
// f.TenantID is empty), oldest first (by CreatedAt, then id).
func (s *Store) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	zkey := s.allTriggersKey()
	if f.TenantID != "" {
		zkey = s.triggersKey(f.TenantID)
	}
	return s.triggers().list(ctx, f.TenantID, zkey, f.Match)
}

// UpdateTrigger replaces the trigger if its stored Version equals
// t.Version, and returns it with Version increased; store.ErrConflict if
// another write came first, store.ErrNotFound if the tenant has no such
// trigger.
func (s *Store) UpdateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	return s.triggers().update(ctx, t)
}

// DeleteTrigger deletes the tenant's trigger; store.ErrNotFound if absent.
func (s *Store) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	return s.triggers().remove(ctx, tenantID, id)
}
