// Package boltstore is the embedded store.Store backend: one bbolt file
// under the data dir, for a single triggerd process. It needs nothing
// installed and is the default.
//
// bbolt takes an exclusive file lock, so only one process can use a data
// dir at a time; several processes must share Redis (package redisstore)
// instead. For the same reason the leases of the store.Locker are kept in
// process memory, not in the file.
//
// Layout (values are JSON unless noted):
//
//	tenants        tenant id -> store.Tenant
//	apikeys        SHA-256 hash (32 raw bytes) -> store.APIKey
//	apikey-ids     key id -> hash (32 raw bytes)
//	accounts       tenant id + "/" + account id -> store.Account
//	account-ext    tenant id + NUL + connector + NUL + external id -> account id
//	flows          state -> store.FlowState
//	flow-expiry    ExpiresAt (8 bytes, big-endian unix nanos) + state -> empty
//
// The flow-expiry index is ordered by time, so PutFlowState purges expired
// flow states in its own transaction by walking it from the start until the
// first unexpired entry; there is no background goroutine.
//
// The dispatcher's records (NUL is written \0, T is a 12-byte time that
// sorts as it should: Unix seconds with the sign bit flipped, then
// nanoseconds, big-endian):
//
//	agents          agent id -> store.Agent
//	agent-tenant    tenant id \0 agent id -> empty
//	triggers        trigger id -> store.Trigger
//	trigger-tenant  tenant id \0 trigger id -> empty
//	hooks           hook id -> store.Hook
//	hook-tenant     tenant id \0 hook id -> empty
//	hook-key        tenant \0 account \0 connector \0 scope \0 target -> hook id
//	hook-activity   hook id -> store.HookActivity (deleted with the hook)
//	runs            run id -> store.Run
//	run-time        \0 T(CreatedAt) run id -> empty (every run)
//	run-tenant      tenant id \0 T(CreatedAt) run id -> empty
//	run-trigger     trigger id \0 T(CreatedAt) run id -> empty
//	run-agent       agent id \0 T(CreatedAt) run id -> empty
//	run-event       tenant id \0 event id \0 T(CreatedAt) run id -> empty
//	events          tenant id \0 event id -> store.EventRecord
//	event-trigger   tenant id \0 trigger id \0 T(DispatchedAt) event id -> empty
//	event-time      \0 T(DispatchedAt) tenant id \0 event id -> empty (every record)
//	cursors         cursor key -> store.Cursor
//
// Agent, trigger, hook and run ids are global, like the keys of their
// buckets: a create finds another tenant's id taken. The time-ordered
// indexes let ListRuns and ListTriggerEvents walk newest first and stop at
// their limit; every write that changes a record's indexed fields moves its
// index entries in the same transaction. PruneRuns and PruneEvents walk
// run-time and event-time from the oldest entry and delete records with
// all their entries. Open fills an empty event-time from the event records
// of a file written before it existed.
//
// Reads check the tenant and ids inside the record, so ids that contain
// the separators ('/', NUL) cannot reach another tenant's data; at worst
// such an id makes a create report a false store.ErrConflict.
//
// Records with a zero CreatedAt are stored with the time of the write; an
// account, agent, trigger, hook or run with a zero UpdatedAt gets its
// CreatedAt. An event record with a zero DispatchedAt, and a cursor with a
// zero UpdatedAt, are stored with the time of the write.
package boltstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/triggerd/triggerd/store"
)

// batchDelay is how long a batched write waits for others to share its
// commit.
const batchDelay = 500 * time.Microsecond

// ErrLocked is wrapped by the error Open returns when another process still
// holds the file's lock after Options.OpenTimeout.
var ErrLocked = errors.New("boltstore: database file is locked")

// DefaultOpenTimeout is how long Open waits for the file lock when
// Options.OpenTimeout is zero.
const DefaultOpenTimeout = 2 * time.Second

// Bucket names.
var (
	bucketTenants    = []byte("tenants")
	bucketAPIKeys    = []byte("apikeys")
	bucketAPIKeyIDs  = []byte("apikey-ids")
	bucketAccounts   = []byte("accounts")
	bucketAccountExt = []byte("account-ext")
	bucketFlows      = []byte("flows")
	bucketFlowExpiry = []byte("flow-expiry")
)

// buckets are the buckets Open creates: those above, and those of the
// dispatcher's records, declared in the file of each.
var buckets = [][]byte{
	bucketTenants, bucketAPIKeys, bucketAPIKeyIDs, bucketAccounts, bucketAccountExt, bucketFlows, bucketFlowExpiry,
	bucketAgents, bucketAgentTenant,
	bucketTriggers, bucketTriggerTenant,
	bucketHooks, bucketHookTenant, bucketHookKey, bucketHookActivity,
	bucketRuns, bucketRunTime, bucketRunTenant, bucketRunTrigger, bucketRunAgent, bucketRunEvent,
	bucketEvents, bucketEventTrigger, bucketEventTime,
	bucketCursors,
}

// Options configures Open.
type Options struct {
	// Now returns the current time; nil means time.Now. It decides flow
	// state and lease expiry and fills zero CreatedAt fields.
	Now func() time.Time
	// OpenTimeout is how long Open waits for the file lock held by another
	// process; zero means DefaultOpenTimeout.
	OpenTimeout time.Duration
}

// Store is a store.Store over one bbolt file. It is safe for concurrent use
// by one process.
type Store struct {
	db  *bolt.DB
	now func() time.Time

	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	leases map[string]lease
	limits map[string]store.RateLimit
}

// lease is one held lock of the process-local Locker.
type lease struct {
	token   string
	expires time.Time
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the database file at path (mode 0600; a missing
// parent directory is created with mode 0700). If another process holds
// the file, Open fails after o.OpenTimeout with an error wrapping
// ErrLocked.
func Open(path string, o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("boltstore: create data dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.OpenTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (waited %s): another triggerd process is probably using this data dir; "+
			"run one process per data dir, or make several processes share Redis (--redis-url) instead", path, ErrLocked, o.OpenTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	// The dispatcher's writes (runs, event outcomes) go through db.Batch:
	// concurrent workers then share one fsync. Bolt's default 10 ms window
	// would add that much to every lone write; a short one still groups
	// the writes of a busy moment.
	db.MaxBatchDelay = batchDelay
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if err := indexEvents(tx); err != nil {
			return fmt.Errorf("index event records: %w", err)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return &Store{db: db, now: o.Now, leases: make(map[string]lease), limits: make(map[string]store.RateLimit)}, nil
}

// Path returns the path of the database file.
func (s *Store) Path() string { return s.db.Path() }

// Close closes the database file. Calling it again returns the first
// result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close: %w", err)
		}
	})
	return s.closeErr
}

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
	fields: func(a *store.Account) fields {
		return fields{tenantID: a.TenantID, id: a.ID, created: a.CreatedAt, version: &a.Version}
	},
	// "t/x" + "/" + "y" and "t" + "/" + "x/y" share a key.
	reaches: ofTenant,
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

// expiryKey is the key of a flow state in the flow-expiry index.
func expiryKey(expires time.Time, state string) []byte {
	k := make([]byte, 8, 8+len(state))
	binary.BigEndian.PutUint64(k, uint64(expires.UnixNano()))
	return append(k, state...)
}

// PutFlowState stores a state until its ExpiresAt, replacing one with the
// same State. It also deletes the flow states that have expired.
func (s *Store) PutFlowState(ctx context.Context, f store.FlowState) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	if f.State == "" {
		return errors.New("boltstore: put flow state: empty state")
	}
	if f.ExpiresAt.IsZero() {
		return errors.New("boltstore: put flow state: zero ExpiresAt")
	}
	now := s.now()
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	v, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		flows, expiry := tx.Bucket(bucketFlows), tx.Bucket(bucketFlowExpiry)
		if err := purgeFlows(flows, expiry, now); err != nil {
			return fmt.Errorf("purge expired: %w", err)
		}
		if old := flows.Get([]byte(f.State)); old != nil {
			if err := deleteFlow(flows, expiry, old); err != nil {
				return err
			}
		}
		if !f.ExpiresAt.After(now) {
			return nil // already expired: nothing to keep
		}
		if err := flows.Put([]byte(f.State), v); err != nil {
			return err
		}
		return expiry.Put(expiryKey(f.ExpiresAt, f.State), nil)
	})
	if err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	return nil
}

// purgeFlows deletes the flow states whose ExpiresAt is not after now.
func purgeFlows(flows, expiry *bolt.Bucket, now time.Time) error {
	limit := uint64(now.UnixNano())
	c := expiry.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.First() {
		if len(k) < 8 || binary.BigEndian.Uint64(k[:8]) > limit {
			return nil
		}
		state := k[8:]
		if err := flows.Delete(state); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// deleteFlow deletes the stored flow state v and its expiry entry.
func deleteFlow(flows, expiry *bolt.Bucket, v []byte) error {
	var f store.FlowState
	if err := json.Unmarshal(v, &f); err != nil {
		return err
	}
	if err := expiry.Delete(expiryKey(f.ExpiresAt, f.State)); err != nil {
		return err
	}
	return flows.Delete([]byte(f.State))
}

// TakeFlowState returns and deletes the state atomically: a second take of
// the same state, or a take after it expired, is store.ErrNotFound.
func (s *Store) TakeFlowState(ctx context.Context, state string) (store.FlowState, error) {
	if err := ctx.Err(); err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	// A read transaction first: unknown states (typos, replays, bots)
	// should not cost a write.
	var present bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		present = tx.Bucket(bucketFlows).Get([]byte(state)) != nil
		return nil
	}); err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	if !present {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", store.ErrNotFound)
	}
	var f store.FlowState
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		flows, expiry := tx.Bucket(bucketFlows), tx.Bucket(bucketFlowExpiry)
		v := flows.Get([]byte(state))
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		// An expired state is deleted too, so the transaction commits.
		found = f.ExpiresAt.After(s.now())
		return deleteFlow(flows, expiry, v)
	})
	if err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	if !found {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", store.ErrNotFound)
	}
	return f, nil
}

// TryLock takes the lease named key for ttl. Leases live in this process's
// memory: a bbolt file is used by one process only, so there is nobody
// else to share them with, and they do not survive a restart. It returns
// held false, without error, when another holder has the lease; release
// gives it back early and only releases this holder's lease; it is never
// nil (a no-op when not held) and may be called more than once.
func (s *Store) TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("boltstore: try lock: %w", err)
	}
	if ttl <= 0 {
		return nil, false, fmt.Errorf("boltstore: try lock %s: ttl %s is not positive", key, ttl)
	}
	token := rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, l := range s.leases {
		if !now.Before(l.expires) {
			delete(s.leases, k)
		}
	}
	if _, ok := s.leases[key]; ok {
		return func() {}, false, nil
	}
	s.leases[key] = lease{token: token, expires: now.Add(ttl)}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if l, ok := s.leases[key]; ok && l.token == token {
				delete(s.leases, key)
			}
		})
	}, true, nil
}

// GetRateLimit implements store.RateLimits. Like the leases, budgets are
// kept in this process's memory: a bbolt file serves one process, and a
// disk write per provider call would cost more than the budget saves.
func (s *Store) GetRateLimit(_ context.Context, key string) (store.RateLimit, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rl, ok := s.limits[key]
	if !ok || !rl.Reset.After(s.now()) {
		delete(s.limits, key)
		return store.RateLimit{}, false, nil
	}
	return rl, true, nil
}

// PutRateLimit implements store.RateLimits.
func (s *Store) PutRateLimit(_ context.Context, key string, rl store.RateLimit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.limits[key]
	s.limits[key] = store.MergeRateLimit(prev, ok, rl)
	return nil
}
