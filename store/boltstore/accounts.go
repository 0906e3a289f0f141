package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Buckets of accounts and their external-id index
// (the package doc gives their keys).
var (
	bucketAccounts   = []byte("accounts")
	bucketAccountExt = []byte("account-ext")
)

// accountKey is the key of an account in the accounts bucket.
func accountKey(tenantID, id string) []byte {
	return []byte(tenantID + "/" + id)
}

// extKey is the key of an account in the account-ext index.
func extKey(tenantID, connector, externalID string) []byte {
	return []byte(tenantID + "\x00" + connector + "\x00" + externalID)
}

// accounts keeps accounts: by tenant and id, found by their external
// account in account-ext, which no two accounts share.
var accounts = kind[store.Account]{
	what:   "account",
	bucket: bucketAccounts,
	key:    accountKey,
	fields: record.OfAccount,
	// "t/x" + "/" + "y" and "t" + "/" + "x/y" share a key.
	reaches: record.InTenant,
	indexes: func(a store.Account) []indexEntry {
		return []indexEntry{{bucket: bucketAccountExt, key: extKey(a.TenantID, a.Connector, a.ExternalID), value: []byte(a.ID), unique: true}}
	},
}

// CreateAccount stores a new account with Version 1; store.ErrConflict if
// its id, or its (tenant, connector, external id), is taken.
func (s *Store) CreateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	return accounts.create(ctx, s, a)
}

// GetAccount returns the tenant's account, or store.ErrNotFound (also for
// another tenant's account).
func (s *Store) GetAccount(ctx context.Context, tenantID, id string) (store.Account, error) {
	return accounts.get(ctx, s, "get", tenantID, id)
}

// FindAccount returns the tenant's account for an external account of a
// connector, or store.ErrNotFound.
func (s *Store) FindAccount(ctx context.Context, tenantID, connector, externalID string) (store.Account, error) {
	if err := ctx.Err(); err != nil {
		return store.Account{}, fmt.Errorf("boltstore: find account: %w", err)
	}
	var a store.Account
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAccountExt).Get(extKey(tenantID, connector, externalID))
		if id == nil {
			return store.ErrNotFound
		}
		var err error
		a, err = accounts.read(tx, tenantID, string(id))
		return err
	})
	if err != nil {
		return store.Account{}, fmt.Errorf("boltstore: find account %s %s: %w", connector, externalID, err)
	}
	return a, nil
}

// ListAccounts returns the tenant's accounts, oldest first (by CreatedAt,
// then id).
func (s *Store) ListAccounts(ctx context.Context, tenantID string) ([]store.Account, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list accounts: %w", err)
	}
	as := []store.Account{}
	prefix := []byte(tenantID + "/")
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketAccounts).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var a store.Account
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			if a.TenantID == tenantID {
				as = append(as, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list accounts: %w", err)
	}
	store.SortOldestFirst(as, func(a store.Account) time.Time { return a.CreatedAt }, func(a store.Account) string { return a.ID })
	return as, nil
}

// UpdateAccount replaces the account if its stored Version equals
// a.Version, and returns it with Version increased; store.ErrConflict if
// another write came first (or if a new connector and external id belong
// to another account), store.ErrNotFound if it does not exist.
func (s *Store) UpdateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	return accounts.update(ctx, s, a, nil)
}
