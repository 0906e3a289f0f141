package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// Buckets of tenants and their API keys
// (the package doc gives their keys).
var (
	bucketTenants   = []byte("tenants")
	bucketAPIKeys   = []byte("apikeys")
	bucketAPIKeyIDs = []byte("apikey-ids")
)

// CreateTenant stores a new tenant; store.ErrConflict if the id exists.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: create tenant: %w", err)
	}
	if t.ID == "" {
		return errors.New("boltstore: create tenant: empty id")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	v, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("boltstore: create tenant: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTenants)
		if b.Get([]byte(t.ID)) != nil {
			return store.ErrConflict
		}
		return b.Put([]byte(t.ID), v)
	})
	if err != nil {
		return fmt.Errorf("boltstore: create tenant %s: %w", t.ID, err)
	}
	return nil
}

// GetTenant returns the tenant, or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (store.Tenant, error) {
	var t store.Tenant
	if err := ctx.Err(); err != nil {
		return t, fmt.Errorf("boltstore: get tenant: %w", err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTenants).Get([]byte(id))
		if v == nil {
			return store.ErrNotFound
		}
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return store.Tenant{}, fmt.Errorf("boltstore: get tenant %s: %w", id, err)
	}
	return t, nil
}

// ListTenants returns every tenant, oldest first.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list tenants: %w", err)
	}
	ts := []store.Tenant{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTenants).ForEach(func(_, v []byte) error {
			var t store.Tenant
			if err := json.Unmarshal(v, &t); err != nil {
				return err
			}
			ts = append(ts, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list tenants: %w", err)
	}
	store.SortOldestFirst(ts, func(t store.Tenant) time.Time { return t.CreatedAt }, func(t store.Tenant) string { return t.ID })
	return ts, nil
}

// CreateAPIKey stores a key's hash; store.ErrConflict if the id or the hash
// exists.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: create api key: %w", err)
	}
	if k.ID == "" {
		return errors.New("boltstore: create api key: empty id")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	v, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("boltstore: create api key: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		keys, ids := tx.Bucket(bucketAPIKeys), tx.Bucket(bucketAPIKeyIDs)
		if keys.Get(k.Hash[:]) != nil || ids.Get([]byte(k.ID)) != nil {
			return store.ErrConflict
		}
		if err := keys.Put(k.Hash[:], v); err != nil {
			return err
		}
		return ids.Put([]byte(k.ID), k.Hash[:])
	})
	if err != nil {
		return fmt.Errorf("boltstore: create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKeyByHash finds the key with this hash, or store.ErrNotFound.
func (s *Store) APIKeyByHash(ctx context.Context, hash [32]byte) (store.APIKey, error) {
	var k store.APIKey
	if err := ctx.Err(); err != nil {
		return k, fmt.Errorf("boltstore: api key by hash: %w", err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketAPIKeys).Get(hash[:])
		if v == nil {
			return store.ErrNotFound
		}
		return json.Unmarshal(v, &k)
	})
	if err != nil {
		return store.APIKey{}, fmt.Errorf("boltstore: api key by hash: %w", err)
	}
	return k, nil
}

// ListAPIKeys returns the tenant's keys, oldest first (by CreatedAt, then
// id). It reads the whole apikeys bucket: a tenant has a few keys and an
// installation few tenants, and an index by tenant would need files
// written before it to be indexed on open.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list api keys: %w", err)
	}
	var ks []store.APIKey
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		ks, err = tenantAPIKeys(tx, tenantID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list api keys: %w", err)
	}
	store.SortOldestFirst(ks, func(k store.APIKey) time.Time { return k.CreatedAt }, func(k store.APIKey) string { return k.ID })
	return ks, nil
}

// tenantAPIKeys returns the tenant's keys in tx, in no order, reading the
// whole apikeys bucket (see ListAPIKeys).
func tenantAPIKeys(tx *bolt.Tx, tenantID string) ([]store.APIKey, error) {
	ks := []store.APIKey{}
	err := tx.Bucket(bucketAPIKeys).ForEach(func(h, v []byte) error {
		var k store.APIKey
		if err := json.Unmarshal(v, &k); err != nil {
			return fmt.Errorf("decode the key of hash %x: %w", h[:4], err)
		}
		if k.TenantID == tenantID {
			ks = append(ks, k)
		}
		return nil
	})
	return ks, err
}

// DeleteAPIKey deletes the tenant's key with this id and its hash in one
// transaction; store.ErrNotFound for an unknown id or another tenant's key,
// store.ErrLastAPIKey for the tenant's only key, which the same
// transaction counts (bolt runs one write transaction at a time, and the
// file is one process's).
func (s *Store) DeleteAPIKey(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete api key: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		keys, ids := tx.Bucket(bucketAPIKeys), tx.Bucket(bucketAPIKeyIDs)
		hash := ids.Get([]byte(id))
		if hash == nil {
			return store.ErrNotFound
		}
		hash = slices.Clone(hash) // bolt's memory is not ours once we write
		v := keys.Get(hash)
		if v == nil {
			return store.ErrNotFound
		}
		var k store.APIKey
		if err := json.Unmarshal(v, &k); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if k.TenantID != tenantID || k.ID != id {
			return store.ErrNotFound
		}
		ks, err := tenantAPIKeys(tx, tenantID)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(ks, func(o store.APIKey) bool { return o.ID != id }) {
			return store.ErrLastAPIKey
		}
		if err := keys.Delete(hash); err != nil {
			return err
		}
		return ids.Delete([]byte(id))
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete api key %s: %w", id, err)
	}
	return nil
}
