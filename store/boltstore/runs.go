package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// Buckets of runs and their time-ordered indexes
// (the package doc gives their keys).
var (
	bucketRuns       = []byte("runs")
	bucketRunTime    = []byte("run-time")
	bucketRunTenant  = []byte("run-tenant")
	bucketRunTrigger = []byte("run-trigger")
	bucketRunAgent   = []byte("run-agent")
	bucketRunEvent   = []byte("run-event")
)

// runIndexes returns r's entries in the run indexes: every run is in
// run-time and run-tenant; runs with a trigger, agent or event id are in
// run-trigger, run-agent or run-event too.
func runIndexes(r store.Run) []indexEntry {
	e := []indexEntry{
		{bucket: bucketRunTime, key: timeIndexKey("", r.CreatedAt, r.ID)},
		{bucket: bucketRunTenant, key: timeIndexKey(r.TenantID, r.CreatedAt, r.ID)},
	}
	if r.TriggerID != "" {
		e = append(e, indexEntry{bucket: bucketRunTrigger, key: timeIndexKey(r.TriggerID, r.CreatedAt, r.ID)})
	}
	if r.AgentID != "" {
		e = append(e, indexEntry{bucket: bucketRunAgent, key: timeIndexKey(r.AgentID, r.CreatedAt, r.ID)})
	}
	if r.EventID != "" {
		e = append(e, indexEntry{bucket: bucketRunEvent, key: timeIndexKey(r.TenantID+sep+r.EventID, r.CreatedAt, r.ID)})
	}
	return e
}

// runs keeps runs: by id (the same event and trigger never make two
// runs, in any tenant), in the time-ordered indexes runIndexes lists.
// Their writes are batched: the dispatcher's workers make them at once.
var runs = kind[store.Run]{
	what:    "run",
	bucket:  bucketRuns,
	key:     byID,
	fields:  record.OfRun,
	reaches: record.InTenantOrAny,
	indexes: runIndexes,
	batch:   true,
	counts:  store.RunActivity,
}

// CreateRun stores a new run with Version 1; store.ErrConflict if the id
// exists, in any tenant: the run was already claimed by someone.
func (s *Store) CreateRun(ctx context.Context, r store.Run) (store.Run, error) {
	return runs.create(ctx, s, r)
}

// GetRun returns the tenant's run (any tenant's for ""), or
// store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	return runs.get(ctx, s, "get", tenantID, id)
}

// UpdateRun replaces the run if its stored Version equals r.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first, store.ErrNotFound if the tenant has no such run. The
// indexes follow the new run's trigger, agent, event and CreatedAt.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) (store.Run, error) {
	return runs.update(ctx, s, r, nil)
}

// PruneRuns deletes the runs of every tenant that finished before before
// (see store.Run.FinishedBefore), with their index entries, oldest
// CreatedAt first (then least id), at most limit (store.DefaultPruneLimit
// if not positive), and returns how many it deleted. It walks run-time from
// the oldest entry to the first created at or after before, past the runs
// that have not finished, in write transactions of at most
// store.DefaultPruneLimit runs, so that the dispatcher's writes are not
// held up long.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := prune(ctx, s.db, bucketRunTime, bucketRuns, before, limit,
		func(r store.Run) bool { return r.FinishedBefore(before) },
		func(r store.Run) []byte { return []byte(r.ID) }, runIndexes)
	if err != nil {
		return n, fmt.Errorf("boltstore: prune runs: %w", err)
	}
	return n, nil
}

// ListRuns returns the runs f selects, newest first (by CreatedAt, then
// id), at most f.Limit (100 if not positive). It walks the most selective
// index f allows (the tenant's event, the trigger, the agent, the tenant,
// or every run), from f.Before when it is set, and checks the rest, the
// status included, on the runs it reads.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list runs: %w", err)
	}
	limit := store.ListLimit(f.Limit)
	var bucket []byte
	var scope string
	switch {
	case f.TenantID != "" && f.EventID != "":
		bucket, scope = bucketRunEvent, f.TenantID+sep+f.EventID
	case f.TriggerID != "":
		bucket, scope = bucketRunTrigger, f.TriggerID
	case f.AgentID != "":
		bucket, scope = bucketRunAgent, f.AgentID
	case f.TenantID != "":
		bucket, scope = bucketRunTenant, f.TenantID
	default:
		bucket, scope = bucketRunTime, ""
	}
	var from []byte
	if !f.Before.IsZero() {
		from = timeIndexKey(scope, f.Before.CreatedAt, f.Before.ID)
	}
	rs := []store.Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(bucketRuns)
		return newestFirstBefore(tx.Bucket(bucket), scope, from, func(id string) (bool, error) {
			r, err := getJSON[store.Run](records, []byte(id))
			if errors.Is(err, store.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if f.Match(r) {
				rs = append(rs, r)
			}
			return len(rs) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list runs: %w", err)
	}
	return rs, nil
}
