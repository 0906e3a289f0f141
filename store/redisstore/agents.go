package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/store"
)

// Key names (the package doc lists them).
func (s *Store) agentKey(id string) string      { return s.prefix + "agent:" + id }
func (s *Store) agentsKey(tenant string) string { return s.prefix + "agents:" + tenant }

// CreateAgent stores a new agent with Version 1; store.ErrConflict if the
// id exists, in any tenant (agent ids are global: runs are published to
// agents.<agent-id>.runs).
func (s *Store) CreateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := store.RequireIDs("redisstore: create agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	store.Stamp(&a.CreatedAt, &a.UpdatedAt, s.now())
	a.Version = 1
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent: %w", err)
	}
	// KEYS: agent, agents:{tenant}. ARGV: JSON, id, score.
	if err := createResult(createRecordScript.Run(ctx, s.rdb, []string{s.agentKey(a.ID), s.agentsKey(a.TenantID)}, v, a.ID, score(a.CreatedAt)).Int()); err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent %s: %w", a.ID, err)
	}
	return a, nil
}

// GetAgent returns the tenant's agent, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	var a store.Agent
	err := s.getJSON(ctx, s.agentKey(id), &a)
	if err == nil && (a.TenantID != tenantID || a.ID != id) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: get agent %s: %w", id, err)
	}
	return a, nil
}

// FindAgent returns the agent with id, whatever its tenant, or
// store.ErrNotFound.
func (s *Store) FindAgent(ctx context.Context, id string) (store.Agent, error) {
	var a store.Agent
	err := s.getJSON(ctx, s.agentKey(id), &a)
	if err == nil && a.ID != id {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: find agent %s: %w", id, err)
	}
	return a, nil
}

// ListAgents returns the tenant's agents, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	as, err := listSet(ctx, s, s.agentsKey(tenantID), s.agentKey, func(a store.Agent) bool { return a.TenantID == tenantID })
	if err != nil {
		return nil, fmt.Errorf("redisstore: list agents: %w", err)
	}
	store.SortOldestFirst(as, func(a store.Agent) time.Time { return a.CreatedAt }, func(a store.Agent) string { return a.ID })
	return as, nil
}

// UpdateAgent replaces the agent if its stored Version equals a.Version,
// and returns it with Version increased; store.ErrConflict if another
// write came first, store.ErrNotFound if the tenant has no such agent.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := store.RequireIDs("redisstore: update agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	want := a.Version
	a.Version++
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: update agent: %w", err)
	}
	// KEYS: agent, agents:{tenant} (to refresh the score).
	// ARGV: tenant, expected version, JSON, id, score, 0 sets to leave.
	err = updateResult(updateRecordScript.Run(ctx, s.rdb, []string{s.agentKey(a.ID), s.agentsKey(a.TenantID)},
		a.TenantID, want, v, a.ID, score(a.CreatedAt), 0).Int())
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: update agent %s: %w", a.ID, err)
	}
	return a, nil
}

// DeleteAgent deletes the tenant's agent; store.ErrNotFound if absent.
func (s *Store) DeleteAgent(ctx context.Context, tenantID, id string) error {
	// KEYS: agent, agents:{tenant}. ARGV: tenant, id.
	n, err := deleteRecordScript.Run(ctx, s.rdb, []string{s.agentKey(id), s.agentsKey(tenantID)}, tenantID, id).Int()
	if err == nil && n != 1 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete agent %s: %w", id, err)
	}
	return nil
}
