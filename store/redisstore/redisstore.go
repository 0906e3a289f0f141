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
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
	rdb    *redis.Client
	prefix string
	// sentinel is set for a store opened through Sentinel: a failover can
	// lose the master's last writes, so run writes wait for a replica
	// (see write), if the master has replicas: replicas is how many, as
	// read at replicasRead (unix nanoseconds).
	sentinel     bool
	replicas     atomic.Int64
	replicasRead atomic.Int64
	now          func() time.Time
	unverified   string
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
// accepted by redis.ParseURL; or Redis Sentinels, see IsSentinelURL), checks that it answers PING, that its
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
	rdb, where, err := newClient(url)
	if err != nil {
		return nil, err
	}
	s := &Store{rdb: rdb, prefix: o.Prefix, now: o.Now, sentinel: IsSentinelURL(url)}
	if err := s.check(ctx, where, o.AllowVolatile); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return s, nil
}

// IsSentinelURL reports whether url names Redis Sentinels rather than a
// server: it has a master_name parameter, as redis.ParseFailoverURL reads
// (redis://[user:password@]sentinel1:26379/0?master_name=mymaster&addr=sentinel2:26379).
func IsSentinelURL(url string) bool {
	_, query, _ := strings.Cut(url, "?")
	for kv := range strings.SplitSeq(query, "&") {
		if k, _, _ := strings.Cut(kv, "="); k == "master_name" {
			return true
		}
	}
	return false
}

// newClient returns a client of the server at url, or, for a Sentinel URL
// (IsSentinelURL), a failover client that asks the sentinels for the
// current master and follows a failover; where describes it for errors.
// A Sentinel URL's user and password authenticate to the sentinels, and to
// the master too unless the URL gives the master's own (password=...).
func newClient(url string) (rdb *redis.Client, where string, err error) {
	if IsSentinelURL(url) {
		fo, err := redis.ParseFailoverURL(url)
		if err != nil {
			return nil, "", fmt.Errorf("redisstore: parse sentinel url: %w", redactURLError(err))
		}
		if fo.MasterName == "" {
			return nil, "", errors.New("redisstore: sentinel url: master_name is empty")
		}
		if fo.Password == "" {
			fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
		}
		fo.ContextTimeoutEnabled = true
		where = fmt.Sprintf("master %s (sentinels %s) db %d", fo.MasterName, strings.Join(fo.SentinelAddrs, ","), fo.DB)
		return redis.NewFailoverClient(fo), where, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: parse url: %w", redactURLError(err))
	}
	// A caller's deadline bounds its commands: without this, a stalled
	// server holds each one for the client's read timeout whatever the
	// context says, and a 1 s health ping took ten.
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), fmt.Sprintf("%s db %d", opts.Addr, opts.DB), nil
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
func (s *Store) check(ctx context.Context, where string, allowVolatile bool) error {
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redisstore: ping %s: %w", where, err)
	}
	if err := s.checkNotCluster(ctx, where); err != nil {
		return err
	}
	if err := s.checkPolicy(ctx, where); err != nil {
		return err
	}
	return s.checkDurability(ctx, where, allowVolatile)
}

// ErrRedisCluster is wrapped by the error Open returns for a node of a
// Redis Cluster.
var ErrRedisCluster = errors.New("redisstore: a Redis Cluster is not supported")

// checkNotCluster refuses a node of a Redis Cluster: the store's scripts
// and transactions touch several keys that a cluster would spread over
// nodes (its keys carry no hash tags), and the client here is not a
// cluster client. A server that does not answer INFO cluster is let be.
func (s *Store) checkNotCluster(ctx context.Context, where string) error {
	info, err := s.rdb.Info(ctx, "cluster").Result()
	if err != nil {
		if _, ok := errors.AsType[redis.Error](err); ok {
			return nil // INFO refused (a managed service's restrictions)
		}
		return fmt.Errorf("redisstore: info cluster on %s: %w", where, err)
	}
	if strings.Contains(info, "cluster_enabled:1") {
		return fmt.Errorf("redisstore: %s: %w: the store's scripts touch several keys at once, which a cluster spreads over nodes; "+
			"run one Redis with replicas and Sentinel for failover (--redis-url redis://sentinel:26379/0?master_name=...)", where, ErrRedisCluster)
	}
	return nil
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

// score is the sorted-set score of a creation time.
func score(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

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
