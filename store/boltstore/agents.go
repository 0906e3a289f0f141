package boltstore

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Buckets of agents and their per-tenant index
// (the package doc gives their keys).
var (
	bucketAgents      = []byte("agents")
	bucketAgentTenant = []byte("agent-tenant")
)

// agents keeps agents: by id (agent ids are global: runs are published to
// agents.<agent-id>.runs), listed per tenant by agent-tenant.
var agents = kind[store.Agent]{
	what:    "agent",
	bucket:  bucketAgents,
	key:     byID,
	fields:  record.OfAgent,
	reaches: record.InTenant,
	indexes: func(a store.Agent) []indexEntry {
		return []indexEntry{{bucket: bucketAgentTenant, key: tenantIndexKey(a.TenantID, a.ID)}}
	},
	tenantIndex: bucketAgentTenant,
}

// CreateAgent stores a new agent with Version 1; store.ErrConflict if the
// id exists, in any tenant.
func (s *Store) CreateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	return agents.create(ctx, s, a)
}

// CreateAgentNamed is CreateAgent, unless another agent of the tenant has
// a's name: then a *store.NameTakenError. The tenant's agents are read in
// the transaction that writes, which bolt runs alone.
func (s *Store) CreateAgentNamed(ctx context.Context, a store.Agent) (store.Agent, error) {
	return agents.createIf(ctx, s, a, func(tx *bolt.Tx, a store.Agent) error {
		all, err := tenantRecords[store.Agent](tx, bucketAgentTenant, bucketAgents, a.TenantID)
		if err != nil {
			return err
		}
		return store.TakenName(all, a.Name)
	})
}

// GetAgent returns the tenant's agent, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	return agents.get(ctx, s, "get", tenantID, id)
}

// FindAgent returns the agent with id, whatever its tenant, or
// store.ErrNotFound.
func (s *Store) FindAgent(ctx context.Context, id string) (store.Agent, error) {
	k := agents
	k.reaches = record.AnyTenant
	return k.get(ctx, s, "find", "", id)
}

// ListAgents returns the tenant's agents, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	return agents.list(ctx, s, tenantID, func(a store.Agent) bool { return a.TenantID == tenantID })
}

// UpdateAgent replaces the agent if its stored Version equals a.Version,
// and returns it with Version increased; store.ErrConflict if another
// write came first, store.ErrNotFound if the tenant has no such agent.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	return agents.update(ctx, s, a, nil)
}

// DeleteAgent deletes the tenant's agent; store.ErrNotFound if absent.
func (s *Store) DeleteAgent(ctx context.Context, tenantID, id string) error {
	return agents.remove(ctx, s, tenantID, id, nil)
}
