package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Key names (the package doc lists them).
func (s *Store) agentKey(id string) string      { return s.prefix + "agent:" + id }
func (s *Store) agentsKey(tenant string) string { return s.prefix + "agents:" + tenant }

// agents keeps agents: by id (agent ids are global: runs are published to
// agents.<agent-id>.runs), listed per tenant by agents:{tenant}.
func (s *Store) agents() kind[store.Agent] {
	return kind[store.Agent]{
		s:          s,
		what:       "agent",
		key:        func(_, id string) string { return s.agentKey(id) },
		fields:     record.OfAgent,
		reaches:    record.InTenant,
		tenantSets: func(tenant string) []string { return []string{s.agentsKey(tenant)} },
	}
}

// CreateAgent stores a new agent with Version 1; store.ErrConflict if the
// id exists, in any tenant.
func (s *Store) CreateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	return s.agents().create(ctx, a)
}

// maxCreateNamedTries bounds CreateAgentNamed's optimistic retries under
// contention.
const maxCreateNamedTries = 100

// CreateAgentNamed is CreateAgent, unless another agent of the tenant has
// a's name: then a *store.NameTakenError. It reads the tenant's agents
// under WATCH of agents:{tenant}, which every creation and deletion of one
// of them changes, and writes in MULTI: a creation or deletion in between
// fails the transaction, and the check runs again.
func (s *Store) CreateAgentNamed(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := a.Validate(); err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent: %w", err)
	}
	k := s.agents()
	a = a.ForCreate(s.now())
	data, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent: %w", err)
	}
	zkey := s.agentsKey(a.TenantID)
	// KEYS: record, sorted sets. ARGV: JSON, id, score.
	keys := append([]string{s.agentKey(a.ID)}, k.setsOf(a)...)
	try := func(tx *redis.Tx) error {
		ids, err := tx.ZRange(ctx, zkey, 0, -1).Result()
		if err != nil {
			return err
		}
		var named []store.Agent
		err = mgetJSON(ctx, tx, ids, s.agentKey, func(_ int, x store.Agent) {
			if x.TenantID == a.TenantID {
				named = append(named, x)
			}
		})
		if err != nil {
			return err
		}
		if err := store.TakenName(named, a.Name); err != nil {
			return err
		}
		var created *redis.Cmd
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			created = createRecordScript.Eval(ctx, p, keys, data, a.ID, score(a.CreatedAt))
			return nil
		})
		if err != nil {
			return err
		}
		return createResult(created.Int())
	}
	for range maxCreateNamedTries {
		err := s.rdb.Watch(ctx, try, zkey)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			return store.Agent{}, fmt.Errorf("redisstore: create agent %s: %w", a.ID, err)
		}
		return a, nil
	}
	return store.Agent{}, fmt.Errorf("redisstore: create agent %s: the tenant's agents kept changing (%d tries): %w", a.ID, maxCreateNamedTries, store.ErrConflict)
}

// GetAgent returns the tenant's agent, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	return s.agents().get(ctx, "get", tenantID, id)
}

// FindAgent returns the agent with id, whatever its tenant, or
// store.ErrNotFound.
func (s *Store) FindAgent(ctx context.Context, id string) (store.Agent, error) {
	k := s.agents()
	k.reaches = record.AnyTenant
	return k.get(ctx, "find", "", id)
}

// ListAgents returns the tenant's agents, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	return s.agents().list(ctx, tenantID, s.agentsKey(tenantID), func(a store.Agent) bool { return a.TenantID == tenantID })
}

// UpdateAgent replaces the agent if its stored Version equals a.Version,
// and returns it with Version increased; store.ErrConflict if another
// write came first, store.ErrNotFound if the tenant has no such agent.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	return s.agents().update(ctx, a)
}

// DeleteAgent deletes the tenant's agent; store.ErrNotFound if absent.
func (s *Store) DeleteAgent(ctx context.Context, tenantID, id string) error {
	return s.agents().remove(ctx, tenantID, id)
}
