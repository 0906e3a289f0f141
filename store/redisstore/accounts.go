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

// updateAccountScript replaces an account if its version, connector and
// external id are the ones read, and moves its account-ext key. KEYS:
// account, old account-ext, new account-ext, accounts:{tenant}. ARGV:
// expected version, JSON, id, score, old connector, old external id.
// Returns 1 when written, 0 on a version mismatch, -1 when the account
// does not exist, -2 when the new external id is another account's.
var updateAccountScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local a = cjson.decode(cur)
if a.version ~= tonumber(ARGV[1]) or a.connector ~= ARGV[5] or a.external_id ~= ARGV[6] then return 0 end
if KEYS[2] ~= KEYS[3] then
	if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end
	redis.call('DEL', KEYS[2])
	redis.call('SET', KEYS[3], ARGV[3])
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[3])
return 1`)

// Key names (the package doc lists them).
func (s *Store) accountKey(tenant, id string) string {
	return s.prefix + "account:" + tenant + ":" + id
}
func (s *Store) accountsKey(tenant string) string { return s.prefix + "accounts:" + tenant }
func (s *Store) extKey(tenant, connector, externalID string) string {
	return s.prefix + "account-ext:" + tenant + ":" + connector + ":" + externalID
}

// accounts keeps accounts: by tenant and id, listed by accounts:{tenant},
// and found by their external account at account-ext, which no two
// accounts share.
func (s *Store) accounts() kind[store.Account] {
	return kind[store.Account]{
		s:      s,
		what:   "account",
		key:    s.accountKey,
		fields: record.OfAccount,
		// ids may contain ':', so a key can be another tenant's.
		reaches:    record.InTenant,
		tenantSets: func(tenant string) []string { return []string{s.accountsKey(tenant)} },
		unique:     func(a store.Account) string { return s.extKey(a.TenantID, a.Connector, a.ExternalID) },
	}
}

// CreateAccount stores a new account with Version 1; store.ErrConflict if
// its id, or its (tenant, connector, external id), is taken.
func (s *Store) CreateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	return s.accounts().create(ctx, a)
}

// GetAccount returns the tenant's account, or store.ErrNotFound (also for
// another tenant's account).
func (s *Store) GetAccount(ctx context.Context, tenantID, id string) (store.Account, error) {
	return s.accounts().get(ctx, "get", tenantID, id)
}

// FindAccount returns the tenant's account for an external account of a
// connector, or store.ErrNotFound.
func (s *Store) FindAccount(ctx context.Context, tenantID, connector, externalID string) (store.Account, error) {
	id, err := s.rdb.Get(ctx, s.extKey(tenantID, connector, externalID)).Result()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	var a store.Account
	if err == nil {
		a, err = s.accounts().read(ctx, tenantID, id)
	}
	if err == nil && (a.Connector != connector || a.ExternalID != externalID) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("redisstore: find account %s %s: %w", connector, externalID, err)
	}
	return a, nil
}

// ListAccounts returns the tenant's accounts, oldest first (by CreatedAt,
// then id).
func (s *Store) ListAccounts(ctx context.Context, tenantID string) ([]store.Account, error) {
	return s.accounts().list(ctx, tenantID, s.accountsKey(tenantID), func(a store.Account) bool { return a.TenantID == tenantID })
}

// UpdateAccount replaces the account if its stored Version equals
// a.Version, and returns it with Version increased; store.ErrConflict if
// another write came first (or if a new connector and external id belong
// to another account), store.ErrNotFound if it does not exist.
func (s *Store) UpdateAccount(ctx context.Context, a store.Account) (store.Account, error) {
	if err := a.Validate(); err != nil {
		return store.Account{}, fmt.Errorf("redisstore: update account: %w", err)
	}
	// The script must name every key it touches, so read the current
	// external id first. The script checks that the version (and so the
	// external id) is still the one read.
	cur, err := s.accounts().read(ctx, a.TenantID, a.ID)
	if err != nil {
		return store.Account{}, fmt.Errorf("redisstore: update account %s: %w", a.ID, err)
	}
	if cur.Version != a.Version {
		return store.Account{}, fmt.Errorf("redisstore: update account %s: %w", a.ID, store.ErrConflict)
	}
	want := a.Version
	a.Version++
	v, err := json.Marshal(a)
	if err != nil {
		return store.Account{}, fmt.Errorf("redisstore: update account: %w", err)
	}
	// KEYS: account, old account-ext, new account-ext, accounts.
	// ARGV: expected version, JSON, id, score, old connector, old external id.
	keys := []string{
		s.accountKey(a.TenantID, a.ID),
		s.extKey(cur.TenantID, cur.Connector, cur.ExternalID),
		s.extKey(a.TenantID, a.Connector, a.ExternalID),
		s.accountsKey(a.TenantID),
	}
	n, err := updateAccountScript.Run(ctx, s.rdb, keys, want, v, a.ID, score(a.CreatedAt), cur.Connector, cur.ExternalID).Int()
	if err == nil && n == -2 {
		return store.Account{}, fmt.Errorf("redisstore: update account %s: external id %s is another account's: %w", a.ID, a.ExternalID, store.ErrConflict)
	}
	if err := updateResult(n, err); err != nil {
		return store.Account{}, fmt.Errorf("redisstore: update account %s: %w", a.ID, err)
	}
	return a, nil
}
