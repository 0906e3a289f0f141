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
//	delivery-log    tenant id \0 id group \0 seq -> a batch of records
//	                (deliveries.go: one value per tenant and group of a
//	                write, encoded as deliverycodec.go says)
//	delivery-log-time  least record id \0 seq -> its delivery-log key
//	                (every batch, for PruneDeliveries)
//	activity        tenant id \0 "m"|"h" \0 bucket start -> store.ActivityCounts
//	                (activity.go)
//
// Agent, trigger, hook and run ids are global, like the keys of their
// buckets: a create finds another tenant's id taken. The time-ordered
// indexes let ListRuns and ListTriggerEvents walk newest first and stop at
// their limit; every write that changes a record's indexed fields moves its
// index entries in the same transaction. PruneRuns and PruneEvents walk
// run-time and event-time from the oldest entry and delete records with
// all their entries. Open fills an empty event-time from the event records
// of a file written before it existed, and moves the delivery log of a file
// written before delivery-log (a key per record in deliveries, and
// delivery-ids) into batches.
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
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// buckets are the buckets Open creates, each declared in the file of its
// records.
var buckets = [][]byte{
	bucketTenants, bucketAPIKeys, bucketAPIKeyIDs, bucketAccounts, bucketAccountExt, bucketFlows, bucketFlowExpiry,
	bucketAgents, bucketAgentTenant,
	bucketTriggers, bucketTriggerTenant,
	bucketHooks, bucketHookTenant, bucketHookKey, bucketHookActivity,
	bucketRuns, bucketRunTime, bucketRunTenant, bucketRunTrigger, bucketRunAgent, bucketRunEvent,
	bucketEvents, bucketEventTrigger, bucketEventTime,
	bucketCursors,
	bucketDeliveryLog, bucketDeliveryTime,
	bucketActivity,
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
	if err == nil {
		err = migrateDeliveries(db)
	}
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
