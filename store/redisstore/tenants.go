package redisstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// deleteAPIKeyScript deletes an API key, the id that finds it and its
// member of the tenant's set, if the id still finds the hash read, the
// record is the tenant's, and the tenant keeps another key: one of the
// other members read is still in the set, with a record of the tenant.
// KEYS: apikey-id, apikey, apikeys, then the apikey record of each
// other member read. ARGV: hex hash, tenant id, id, then those members
// (ARGV[i] is the member whose record is KEYS[i]). Returns 1 when
// deleted, 0 for an unknown id or another tenant's key, -1 for the
// tenant's only key, -2 when no other key was found but the set holds
// members that were not read (added since).
var deleteAPIKeyScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local cur = redis.call('GET', KEYS[2])
if not cur then return 0 end
local k = cjson.decode(cur)
if k.tenant_id ~= ARGV[2] or k.id ~= ARGV[3] then return 0 end
local other, seen = false, 0
for i = 4, #KEYS do
	if redis.call('ZSCORE', KEYS[3], ARGV[i]) then
		seen = seen + 1
		local o = redis.call('GET', KEYS[i])
		if o and cjson.decode(o).tenant_id == ARGV[2] then
			other = true
			break
		end
	end
end
if not other then
	if redis.call('ZSCORE', KEYS[3], ARGV[1]) then seen = seen + 1 end
	if redis.call('ZCARD', KEYS[3]) > seen then return -2 end
	return -1
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1`)

// Key names (the package doc lists them).
func (s *Store) tenantKey(id string) string { return s.prefix + "tenant:" + id }
func (s *Store) tenantsKey() string         { return s.prefix + "tenants" }
func (s *Store) apiKeyKey(hash [32]byte) string {
	return s.apiKeyHexKey(hex.EncodeToString(hash[:]))
}
func (s *Store) apiKeyHexKey(hexHash string) string { return s.prefix + "apikey:" + hexHash }
func (s *Store) apiKeyIDKey(id string) string       { return s.prefix + "apikey-id:" + id }
func (s *Store) apiKeysKey(tenant string) string    { return s.prefix + "apikeys:" + tenant }
func (s *Store) apiKeysIndexedKey() string          { return s.prefix + "apikeys-indexed" }

// CreateTenant stores a new tenant; store.ErrConflict if the id exists.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) error {
	if t.ID == "" {
		return errors.New("redisstore: create tenant: empty id")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	v, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("redisstore: create tenant: %w", err)
	}
	// KEYS: tenant, tenants. ARGV: JSON, id, score.
	if err := createResult(createRecordScript.Run(ctx, s.rdb, []string{s.tenantKey(t.ID), s.tenantsKey()}, v, t.ID, score(t.CreatedAt)).Int()); err != nil {
		return fmt.Errorf("redisstore: create tenant %s: %w", t.ID, err)
	}
	return nil
}

// GetTenant returns the tenant, or store.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string) (store.Tenant, error) {
	var t store.Tenant
	if err := s.getJSON(ctx, s.tenantKey(id), &t); err != nil {
		return store.Tenant{}, fmt.Errorf("redisstore: get tenant %s: %w", id, err)
	}
	return t, nil
}

// ListTenants returns every tenant, oldest first.
func (s *Store) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	ts, err := listSet(ctx, s, s.tenantsKey(), s.tenantKey, func(store.Tenant) bool { return true })
	if err != nil {
		return nil, fmt.Errorf("redisstore: list tenants: %w", err)
	}
	// Scores are float64, too coarse for nanoseconds: sort exactly here.
	store.SortOldestFirst(ts, func(t store.Tenant) time.Time { return t.CreatedAt }, func(t store.Tenant) string { return t.ID })
	return ts, nil
}

// CreateAPIKey stores a key's hash; store.ErrConflict if the id or the hash
// exists.
func (s *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if k.ID == "" {
		return errors.New("redisstore: create api key: empty id")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	v, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("redisstore: create api key: %w", err)
	}
	// KEYS: apikey, apikey-id, apikeys. ARGV: JSON, hex hash, score.
	keys := []string{s.apiKeyKey(k.Hash), s.apiKeyIDKey(k.ID), s.apiKeysKey(k.TenantID)}
	if err := createResult(createUniqueScript.Run(ctx, s.rdb, keys, v, hex.EncodeToString(k.Hash[:]), score(k.CreatedAt)).Int()); err != nil {
		return fmt.Errorf("redisstore: create api key %s: %w", k.ID, err)
	}
	return nil
}

// APIKeyByHash finds the key with this hash, or store.ErrNotFound.
func (s *Store) APIKeyByHash(ctx context.Context, hash [32]byte) (store.APIKey, error) {
	var k store.APIKey
	if err := s.getJSON(ctx, s.apiKeyKey(hash), &k); err != nil {
		return store.APIKey{}, fmt.Errorf("redisstore: api key by hash: %w", err)
	}
	if k.Hash != hash {
		return store.APIKey{}, fmt.Errorf("redisstore: api key by hash: %w", store.ErrNotFound)
	}
	return k, nil
}

// ListAPIKeys returns the tenant's keys, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	if err := s.indexAPIKeys(ctx); err != nil {
		return nil, fmt.Errorf("redisstore: list api keys: index the keys written before apikeys sets: %w", err)
	}
	ks, err := listSet(ctx, s, s.apiKeysKey(tenantID), s.apiKeyHexKey, func(k store.APIKey) bool { return k.TenantID == tenantID })
	if err != nil {
		return nil, fmt.Errorf("redisstore: list api keys: %w", err)
	}
	// Scores are float64, too coarse for nanoseconds: sort exactly here.
	store.SortOldestFirst(ks, func(k store.APIKey) time.Time { return k.CreatedAt }, func(k store.APIKey) string { return k.ID })
	return ks, nil
}

// deleteAPIKeyAttempts bounds DeleteAPIKey's reads of a tenant's set that
// keys created meanwhile make stale.
const deleteAPIKeyAttempts = 10

// DeleteAPIKey deletes the tenant's key with this id, the id and the
// hash's member of the tenant's set in one script; store.ErrNotFound for
// an unknown id or another tenant's key, store.ErrLastAPIKey for the
// tenant's only key, which the script counts in the same step.
func (s *Store) DeleteAPIKey(ctx context.Context, tenantID, id string) error {
	// Keys written before the apikeys sets must be in them to be counted.
	if err := s.indexAPIKeys(ctx); err != nil {
		return fmt.Errorf("redisstore: delete api key %s: index the keys written before apikeys sets: %w", id, err)
	}
	// The script must name the record's key, which the hash decides, and
	// the records of the tenant's other keys: read them first; the script
	// checks the id still maps to the hash, and the others' membership.
	hexHash, err := s.rdb.Get(ctx, s.apiKeyIDKey(id)).Result()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete api key %s: %w", id, err)
	}
	for range deleteAPIKeyAttempts {
		members, err := s.rdb.ZRange(ctx, s.apiKeysKey(tenantID), 0, -1).Result()
		if err != nil {
			return fmt.Errorf("redisstore: delete api key %s: %w", id, err)
		}
		keys := []string{s.apiKeyIDKey(id), s.apiKeyHexKey(hexHash), s.apiKeysKey(tenantID)}
		args := []any{hexHash, tenantID, id}
		for _, m := range members {
			if m != hexHash {
				keys = append(keys, s.apiKeyHexKey(m))
				args = append(args, m)
			}
		}
		n, err := deleteAPIKeyScript.Run(ctx, s.rdb, keys, args...).Int()
		switch {
		case err != nil:
			return fmt.Errorf("redisstore: delete api key %s: %w", id, err)
		case n == 1:
			return nil
		case n == 0:
			return fmt.Errorf("redisstore: delete api key %s: %w", id, store.ErrNotFound)
		case n == -1:
			return fmt.Errorf("redisstore: delete api key %s: %w", id, store.ErrLastAPIKey)
		}
		// -2: keys were added to the set since it was read; read it again.
	}
	return fmt.Errorf("redisstore: delete api key %s: the tenant's keys kept changing while counted: %w", id, store.ErrConflict)
}

// indexAPIKeys adds the API keys written before the apikeys sorted sets
// existed to their tenant's set, unless the apikeys-indexed marker says it
// was done, as indexEvents does for event records: SCAN apikey:*, ZADD NX
// each key found, then set the marker. Without it a tenant's older keys
// would be missing from its list, and could be neither seen nor revoked.
func (s *Store) indexAPIKeys(ctx context.Context) error {
	return s.indexOnce(ctx, &s.apiKeysIndexed, s.apiKeysIndexedKey(), "apikey:*", s.indexAPIKeyKeys)
}

// indexAPIKeyKeys adds the API keys at keys to their tenant's set, unless
// they are in it. A key deleted meanwhile may leave a member without a
// record, which listSet passes over and DeleteAPIKey does not count.
func (s *Store) indexAPIKeyKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return err
	}
	pipe := s.rdb.Pipeline()
	for i, val := range vals {
		raw, ok := val.(string)
		if !ok {
			continue // gone, or not a record
		}
		var k store.APIKey
		if json.Unmarshal([]byte(raw), &k) != nil || keys[i] != s.apiKeyKey(k.Hash) {
			continue // not this store's record
		}
		pipe.ZAddNX(ctx, s.apiKeysKey(k.TenantID), redis.Z{Score: float64(k.CreatedAt.UnixNano()), Member: hex.EncodeToString(k.Hash[:])})
	}
	if pipe.Len() == 0 {
		return nil
	}
	_, err = pipe.Exec(ctx)
	return err
}
