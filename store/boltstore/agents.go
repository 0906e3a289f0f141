package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// Buckets of agents and their per-tenant index
// (the package doc gives their keys).
var (
	bucketAgents      = []byte("agents")
	bucketAgentTenant = []byte("agent-tenant")
)

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
