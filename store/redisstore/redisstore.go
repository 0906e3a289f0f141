// Package redisstore is the store.Store backend that several triggerd
// processes share: everything, leases included, lives in one Redis server
// (or a primary with replicas; Redis Cluster is not supported, since the
// scripts touch keys of several hash slots).
//
// Keys, all under Options.Prefix (default "triggerd:"):
//
//	tenant:{id}                                   store.Tenant (JSON)
//	tenants                                       sorted set of tenant ids, score CreatedAt (unix nanos)
//	apikey:{hex hash}                             store.APIKey (JSON)
//	apikey-id:{id}                                hex hash
//	apikeys:{tenant}                              sorted set of the tenant's keys' hex hashes, score CreatedAt (unix nanos)
//	apikeys-indexed                               marker: the apikeys sets hold the keys written before they existed
//	account:{tenant}:{id}                         store.Account (JSON)
//	accounts:{tenant}                             sorted set of account ids, score CreatedAt (unix nanos)
//	account-ext:{tenant}:{connector}:{external}   account id
//	flow:{state}                                  store.FlowState (JSON), PX TTL until ExpiresAt
//	lock:{key}                                    random owner token, PX TTL
//	ratelimit:{key}                               hash of limit, remaining, reset (unix ms), PX TTL
//
// and the dispatcher's records (every sorted set below holds ids, scored by
// the record's CreatedAt, or an event's DispatchedAt, in unix nanos):
//
//	agent:{id}                                    store.Agent (JSON)
//	agents:{tenant}                               sorted set of the tenant's agents
//	trigger:{id}                                  store.Trigger (JSON)
//	triggers:{tenant}                             sorted set of the tenant's triggers
//	triggers                                      sorted set of every trigger
//	hook:{id}                                     store.Hook (JSON)
//	hooks:{tenant}                                sorted set of the tenant's hooks
//	hooks                                         sorted set of every hook
//	hook-key:{tenant}:{account}:{connector}:{scope}:{target}   hook id
//	hook-activity:{id}                            hash of the hook's store.HookActivity (hooks.go)
//	run:{id}                                      store.Run (JSON)
//	runs                                          sorted set of every run
//	runs:{tenant}                                 sorted set of the tenant's runs
//	trigger-runs:{trigger}                        sorted set of the trigger's runs
//	agent-runs:{agent}                            sorted set of the agent's runs
//	event-runs:{tenant}:{event}                   sorted set of the runs of the tenant's event
//	event:{tenant}:{event}                        store.EventRecord (JSON)
//	trigger-events:{tenant}:{trigger}             sorted set of the event ids with an outcome for the trigger
//	events                                        sorted set of every event record, as {tenant}:{event}
//	events-indexed                                marker: events holds the records written before it existed
//	cursor:{key}                                  store.Cursor (JSON)
//
// Agent, trigger, hook and run ids are global, like their keys: a create
// finds another tenant's id taken.
//
// Creations, updates and deletions are Lua scripts, so each is atomic
// across processes, records and sorted sets together: a create writes
// nothing unless none of its keys exist, and an update compares the
// version field of the stored JSON with the caller's Version before it
// writes. Where a script must name keys that the stored record decides
// (UpdateAccount's old account-ext key, the sorted sets an updated run
// leaves, the key a deleted hook frees, the per-trigger sets a replaced
// event leaves), the record is read first and the script checks that the
// stored record is still the one read (its version, its key fields, or
// the SHA-1 of an event's JSON), so that the read is safe. ListRuns and
// ListTriggerEvents read a sorted set from the newest end and stop at
// their limit. PruneRuns and PruneEvents read runs and events from the
// oldest end, and delete each record, with its members of every sorted
// set, by a script that checks the SHA-1 of the stored JSON, so that a
// record changed since the read is left. The first PruneEvents of a Store
// adds the event records written before events existed (found by SCAN)
// unless events-indexed is set, and then sets it; the first ListAPIKeys
// or DeleteAPIKey does the same for API keys (apikey:*, apikeys-indexed).
// DeleteAPIKey reads the hash of the key's id and the members of the
// tenant's apikeys set, then deletes both keys and the set's member by a
// script that checks the id still maps to that hash and the record to that
// tenant, and that another member read is still in the set with a record
// of the tenant: finding none, the script refuses the tenant's only key
// (store.ErrLastAPIKey), unless the set holds members that were not read,
// when DeleteAPIKey reads it again. A member without a record (an index
// racing a delete can leave one) is not counted. TakeFlowState is a
// GETDEL; a flow state's expiry is the server's key TTL. A lease is SET NX
// PX with a random token, released by a compare-and-delete script.
//
// Keys that lose data must never be evicted, so Open refuses a server whose
// maxmemory-policy is not noeviction (see ErrEvictingPolicy). Nor may a
// restart of the server lose them, so Open also refuses a server that does
// not append every write to its AOF (appendonly yes), unless
// Options.AllowVolatile accepts it knowingly (see ErrVolatile).
//
// Reads check the tenant and ids inside the record, so ids that contain
// ':' cannot reach another tenant's data; at worst such an id makes a create
// report a false store.ErrConflict.
//
// Records with a zero CreatedAt are stored with the time of the write; an
// account, agent, trigger, hook or run with a zero UpdatedAt gets its
// CreatedAt. An event record with a zero DispatchedAt, and a cursor with a
// zero UpdatedAt, are stored with the time of the write.
package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// ErrEvictingPolicy is wrapped by the error Open returns when the server's
// maxmemory-policy lets it evict keys.
var ErrEvictingPolicy = errors.New("redis may evict keys")

// ErrVolatile is wrapped by the error Open returns when the server does not
// append every write to its AOF (appendonly is not yes), so that a restart
// of it loses keys, and Options.AllowVolatile is not set.
var ErrVolatile = errors.New("redis does not persist every write")

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "triggerd:"

// releaseTimeout bounds the call that gives a lease back.
const releaseTimeout = 5 * time.Second

// Scripts. KEYS and ARGV are documented at each call.
var (
	// Returns 1 when written, 0 on a version mismatch, -1 when the account
	// does not exist, -2 when the new external id is another account's.
	updateAccountScript = redis.NewScript(`
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
	deleteAPIKeyScript = redis.NewScript(`
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

	unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
)

// Options configures Open.
type Options struct {
	// Prefix is put before every key; empty means DefaultPrefix.
	Prefix string
	// Now returns the current time; nil means time.Now. It turns a flow
	// state's ExpiresAt into a TTL and fills zero CreatedAt fields.
	Now func() time.Time
	// AllowVolatile accepts a server without appendonly yes, whose restart
	// loses keys (run records, sealed tokens), instead of refusing it with
	// ErrVolatile; Volatile then says what is at risk, for the caller to log
	// as a warning. For tests and throwaway setups only.
	AllowVolatile bool
}

// Store is a store.Store over Redis. It is safe for concurrent use, and
// several Stores (in one or many processes) may share a server and prefix.
type Store struct {
	rdb        *redis.Client
	prefix     string
	now        func() time.Time
	unverified string
	// durabilityUnverified and volatile are returned by
	// DurabilityUnverified and Volatile.
	durabilityUnverified string
	volatile             string
	// eventsIndexed is set once the events sorted set is known to hold
	// the records written before it existed (see indexEvents).
	eventsIndexed atomic.Bool
	// apiKeysIndexed is set once the apikeys sorted sets are known to
	// hold the keys written before they existed (see indexAPIKeys).
	apiKeysIndexed atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open connects to the Redis server at url (redis:// or rediss://, as
// accepted by redis.ParseURL), checks that it answers PING, that its
// maxmemory-policy is noeviction and that appendonly is yes. A server that
// may evict keys is refused with an error wrapping ErrEvictingPolicy. A
// server without appendonly yes is refused with an error wrapping
// ErrVolatile, unless o.AllowVolatile, and then Volatile says so. A server
// that refuses CONFIG GET (as managed services often do) is accepted, and
// PolicyUnverified and DurabilityUnverified say so.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisstore: parse url: %w", redactURLError(err))
	}
	// A caller's deadline bounds its commands: without this, a stalled
	// server holds each one for the client's read timeout whatever the
	// context says, and a 1 s health ping took ten.
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	s := &Store{rdb: rdb, prefix: o.Prefix, now: o.Now}
	if err := s.check(ctx, opts, o.AllowVolatile); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return s, nil
}

// redactURLError drops the URL, which may hold a password, from a parse
// error.
func redactURLError(err error) error {
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		return uerr.Err
	}
	return err
}

// check pings the server and verifies its eviction policy and durability.
func (s *Store) check(ctx context.Context, opts *redis.Options, allowVolatile bool) error {
	where := fmt.Sprintf("%s db %d", opts.Addr, opts.DB)
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping %s: %w", where, err)
	}
	if err := s.checkPolicy(ctx, where); err != nil {
		return err
	}
	return s.checkDurability(ctx, where, allowVolatile)
}

// configValue reads the CONFIG parameter name. A server that refuses
// CONFIG GET (as managed services often do), or does not report name,
// gives why it could not be read, for the caller's warning; failing to
// reach the server is an error.
func (s *Store) configValue(ctx context.Context, where, name string) (value, unverified string, err error) {
	res, err := s.rdb.ConfigGet(ctx, name).Result()
	if err != nil {
		if _, ok := errors.AsType[redis.Error](err); !ok {
			return "", "", fmt.Errorf("redisstore: config get %s on %s: %w", name, where, err)
		}
		return "", fmt.Sprintf("the server refused CONFIG GET %s (%v)", name, err), nil
	}
	v, ok := res[name]
	if !ok {
		return "", "the server did not report " + name, nil
	}
	return v, "", nil
}

// checkPolicy verifies that the server's maxmemory-policy is noeviction.
func (s *Store) checkPolicy(ctx context.Context, where string) error {
	policy, why, err := s.configValue(ctx, where, "maxmemory-policy")
	switch {
	case err != nil:
		return err
	case why != "":
		s.unverified = why + "; make sure its maxmemory-policy is noeviction, or evicted keys will lose tokens and flow states"
	case policy != "noeviction":
		return fmt.Errorf("redisstore: %s: %w: its maxmemory-policy is %q, so under memory pressure it would evict keys "+
			"and silently lose tokens and flow states; run CONFIG SET maxmemory-policy noeviction "+
			"(and put maxmemory-policy noeviction in redis.conf so it survives a restart)",
			where, ErrEvictingPolicy, policy)
	}
	return nil
}

// volatileLoss is what a restart of a server without appendonly yes loses.
const volatileLoss = "run records (the dispatcher's idempotency ledger: without them the tool steps of redelivered events can run again) " +
	"and sealed OAuth tokens (without them every connected account must be connected again)"

// checkDurability verifies that the server appends every write to its AOF
// (appendonly yes). CONFIG errors are handled as checkPolicy handles them:
// a server that refuses CONFIG GET, or does not report appendonly, is
// accepted and DurabilityUnverified says so.
func (s *Store) checkDurability(ctx context.Context, where string, allowVolatile bool) error {
	aof, why, err := s.configValue(ctx, where, "appendonly")
	switch {
	case err != nil:
		return err
	case why != "":
		s.durabilityUnverified = why + "; make sure it has appendonly yes (with appendfsync everysec), or a restart of it loses " + volatileLoss
		return nil
	case aof == "yes":
		return nil
	}
	// save is read only to say how much a restart loses.
	save, why, err := s.configValue(ctx, where, "save")
	saveKnown := err == nil && why == ""
	problem := volatileProblem(aof, save, saveKnown)
	if !allowVolatile {
		return fmt.Errorf("redisstore: %s: %w: %s; run CONFIG SET appendonly yes, and put \"appendonly yes\" and \"appendfsync everysec\" "+
			"in redis.conf so it survives a restart, or, to accept that loss knowingly (tests, throwaway setups), "+
			"start triggerd with --redis-allow-volatile (Options.AllowVolatile)", where, ErrVolatile, problem)
	}
	s.volatile = where + ": " + problem
	return nil
}

// volatileProblem says what a server with appendonly aof (not yes) and
// the RDB snapshot schedule save (if saveKnown) loses on a restart.
func volatileProblem(aof, save string, saveKnown bool) string {
	var lost string
	switch {
	case !saveKnown:
		lost = fmt.Sprintf("appendonly is %q, so a restart of Redis loses every write since its last RDB snapshot, if it takes any", aof)
	case save == "":
		lost = fmt.Sprintf("appendonly is %q and save is empty (no RDB snapshots either), so a restart of Redis loses every key", aof)
	default:
		lost = fmt.Sprintf("appendonly is %q and only RDB snapshots are taken (save %q), so a restart of Redis loses every write since the last one", aof, save)
	}
	return lost + ", including " + volatileLoss
}

// DurabilityUnverified returns why the server's appendonly could not be
// checked (for the caller to log as a warning), or "" if it was checked.
func (s *Store) DurabilityUnverified() string { return s.durabilityUnverified }

// Volatile returns, when Options.AllowVolatile accepted a server without
// appendonly yes, what a restart of it loses (for the caller to log as a
// warning); "" otherwise.
func (s *Store) Volatile() string { return s.volatile }

// PolicyUnverified returns why the server's maxmemory-policy could not be
// checked (for the caller to log as a warning), or "" if it was verified to
// be noeviction.
func (s *Store) PolicyUnverified() string { return s.unverified }

// Ping reports whether Redis answers. The dispatcher asks it before it
// gives a message back on a store error, and holds the message while
// Redis does not answer (dispatch.Pinger).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping: %w", err)
	}
	return nil
}

// Prefix returns the prefix of every key of the store.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client. Calling it again returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.rdb.Close(); err != nil {
			s.closeErr = fmt.Errorf("redisstore: close: %w", err)
		}
	})
	return s.closeErr
}

// Key names.

func (s *Store) tenantKey(id string) string { return s.prefix + "tenant:" + id }
func (s *Store) tenantsKey() string         { return s.prefix + "tenants" }
func (s *Store) apiKeyKey(hash [32]byte) string {
	return s.apiKeyHexKey(hex.EncodeToString(hash[:]))
}
func (s *Store) apiKeyHexKey(hexHash string) string { return s.prefix + "apikey:" + hexHash }
func (s *Store) apiKeyIDKey(id string) string       { return s.prefix + "apikey-id:" + id }
func (s *Store) apiKeysKey(tenant string) string    { return s.prefix + "apikeys:" + tenant }
func (s *Store) apiKeysIndexedKey() string          { return s.prefix + "apikeys-indexed" }
func (s *Store) accountKey(tenant, id string) string {
	return s.prefix + "account:" + tenant + ":" + id
}
func (s *Store) accountsKey(tenant string) string { return s.prefix + "accounts:" + tenant }
func (s *Store) extKey(tenant, connector, externalID string) string {
	return s.prefix + "account-ext:" + tenant + ":" + connector + ":" + externalID
}
func (s *Store) flowKey(state string) string { return s.prefix + "flow:" + state }
func (s *Store) lockKey(key string) string   { return s.prefix + "lock:" + key }
func (s *Store) limitKey(key string) string  { return s.prefix + "ratelimit:" + key }

// score is the sorted-set score of a creation time.
func score(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

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

// indexOnce brings records written before a sorted set existed into it,
// once per store: unless marker is set, it SCANs the keys matching
// pattern (under the prefix), hands each batch to add, then sets marker;
// done remembers it in this process. Stores doing it at once add the same
// members.
func (s *Store) indexOnce(ctx context.Context, done *atomic.Bool, marker, pattern string, add func(context.Context, []string) error) error {
	if done.Load() {
		return nil
	}
	n, err := s.rdb.Exists(ctx, marker).Result()
	if err != nil {
		return err
	}
	if n == 0 {
		var cursor uint64
		for {
			keys, next, err := s.rdb.Scan(ctx, cursor, globEscape(s.prefix)+pattern, 1000).Result()
			if err != nil {
				return err
			}
			if err := add(ctx, keys); err != nil {
				return err
			}
			if next == 0 {
				break
			}
			cursor = next
		}
		if err := s.rdb.Set(ctx, marker, "1", 0).Err(); err != nil {
			return err
		}
	}
	done.Store(true)
	return nil
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

// accounts keeps accounts: by tenant and id, listed by accounts:{tenant},
// and found by their external account at account-ext, which no two
// accounts share.
func (s *Store) accounts() kind[store.Account] {
	return kind[store.Account]{
		s:    s,
		what: "account",
		key:  s.accountKey,
		fields: func(a *store.Account) fields {
			return fields{tenantID: a.TenantID, id: a.ID, created: a.CreatedAt, version: &a.Version}
		},
		// ids may contain ':', so a key can be another tenant's.
		reaches:    ofTenant,
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

// PutFlowState stores a state until its ExpiresAt (as the key's TTL),
// replacing one with the same State.
func (s *Store) PutFlowState(ctx context.Context, f store.FlowState) error {
	if f.State == "" {
		return errors.New("redisstore: put flow state: empty state")
	}
	if f.ExpiresAt.IsZero() {
		return errors.New("redisstore: put flow state: zero ExpiresAt")
	}
	now := s.now()
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	ttl := f.ExpiresAt.Sub(now)
	if ttl <= 0 {
		// Already expired: nothing to keep, and no older value either.
		if err := s.rdb.Del(ctx, s.flowKey(f.State)).Err(); err != nil {
			return fmt.Errorf("redisstore: put flow state: %w", err)
		}
		return nil
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond) // PX counts whole milliseconds
	v, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("redisstore: put flow state: %w", err)
	}
	if err := s.rdb.Set(ctx, s.flowKey(f.State), v, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: put flow state: %w", err)
	}
	return nil
}

// TakeFlowState returns and deletes the state atomically (GETDEL): a second
// take of the same state, or a take after it expired, is
// store.ErrNotFound.
func (s *Store) TakeFlowState(ctx context.Context, state string) (store.FlowState, error) {
	v, err := s.rdb.GetDel(ctx, s.flowKey(state)).Bytes()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.FlowState{}, fmt.Errorf("redisstore: take flow state: %w", err)
	}
	var f store.FlowState
	if err := json.Unmarshal(v, &f); err != nil {
		return store.FlowState{}, fmt.Errorf("redisstore: take flow state: decode: %w", err)
	}
	return f, nil
}

// TryLock takes the lease named key for ttl (SET NX PX with a random
// token), shared by every process on the same server and prefix. It
// returns held false, without error, when another holder has it. release
// gives it back early; it deletes the key only while it still holds this
// holder's token, so a lease that expired and was taken by another holder
// is left alone. release is never nil (a no-op when not held) and may be
// called more than once. It has no context: it uses TryLock's context
// values, without its cancellation, and a timeout of a few seconds; if it
// fails, the lease expires after ttl.
func (s *Store) TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error) {
	if ttl <= 0 {
		return nil, false, fmt.Errorf("redisstore: try lock %s: ttl %s is not positive", key, ttl)
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	token := rand.Text()
	k := s.lockKey(key)
	ok, err := s.rdb.SetNX(ctx, k, token, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: try lock %s: %w", key, err)
	}
	if !ok {
		return func() {}, false, nil
	}
	bg := context.WithoutCancel(ctx)
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(bg, releaseTimeout)
			defer cancel()
			_ = unlockScript.Run(ctx, s.rdb, []string{k}, token).Err()
		})
	}, true, nil
}

// putRateLimitScript stores a budget by store.MergeRateLimit's rule in one
// step, so concurrent answers from several processes cannot undo each
// other: a later reset replaces, an earlier one is ignored, the same reset
// keeps the lower remaining. KEYS: the budget. ARGV: limit, remaining,
// reset (unix ms), ttl (ms).
var putRateLimitScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'reset', 'remaining')
local reset, remaining = tonumber(ARGV[3]), tonumber(ARGV[2])
if cur[1] then
  local creset, cremaining = tonumber(cur[1]), tonumber(cur[2])
  if reset < creset then return 0 end
  if reset == creset and remaining >= cremaining then return 0 end
end
redis.call('HSET', KEYS[1], 'limit', ARGV[1], 'remaining', ARGV[2], 'reset', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// GetRateLimit implements store.RateLimits: one budget per key for every
// process sharing the Redis.
func (s *Store) GetRateLimit(ctx context.Context, key string) (store.RateLimit, bool, error) {
	v, err := s.rdb.HMGet(ctx, s.limitKey(key), "limit", "remaining", "reset").Result()
	if err != nil {
		return store.RateLimit{}, false, fmt.Errorf("redisstore: get rate limit: %w", err)
	}
	if len(v) != 3 || v[0] == nil || v[1] == nil || v[2] == nil {
		return store.RateLimit{}, false, nil
	}
	limit, _ := strconv.Atoi(fmt.Sprint(v[0]))
	remaining, _ := strconv.Atoi(fmt.Sprint(v[1]))
	resetMS, _ := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
	rl := store.RateLimit{Limit: limit, Remaining: remaining, Reset: time.UnixMilli(resetMS)}
	if !rl.Reset.After(s.now()) {
		return store.RateLimit{}, false, nil
	}
	return rl, true, nil
}

// PutRateLimit implements store.RateLimits. The key expires a minute after
// the reset, when the budget no longer says anything.
func (s *Store) PutRateLimit(ctx context.Context, key string, rl store.RateLimit) error {
	ttl := rl.Reset.Sub(s.now()) + time.Minute
	if ttl < time.Minute {
		ttl = time.Minute
	}
	err := putRateLimitScript.Run(ctx, s.rdb, []string{s.limitKey(key)},
		rl.Limit, rl.Remaining, rl.Reset.UnixMilli(), ttl.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redisstore: put rate limit: %w", err)
	}
	return nil
}
