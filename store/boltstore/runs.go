package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
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
		{bucketRunTime, timeIndexKey("", r.CreatedAt, r.ID)},
		{bucketRunTenant, timeIndexKey(r.TenantID, r.CreatedAt, r.ID)},
	}
	if r.TriggerID != "" {
		e = append(e, indexEntry{bucketRunTrigger, timeIndexKey(r.TriggerID, r.CreatedAt, r.ID)})
	}
	if r.AgentID != "" {
		e = append(e, indexEntry{bucketRunAgent, timeIndexKey(r.AgentID, r.CreatedAt, r.ID)})
	}
	if r.EventID != "" {
		e = append(e, indexEntry{bucketRunEvent, timeIndexKey(r.TenantID+sep+r.EventID, r.CreatedAt, r.ID)})
	}
	return e
}

// getRun reads a run in tx: the tenant's, or any tenant's for "";
// store.ErrNotFound if absent or another tenant's.
func getRun(tx *bolt.Tx, tenantID, id string) (store.Run, error) {
	r, err := getJSON[store.Run](tx.Bucket(bucketRuns), []byte(id))
	if err != nil {
		return store.Run{}, err
	}
	if tenantID != "" && r.TenantID != tenantID {
		return store.Run{}, store.ErrNotFound
	}
	return r, nil
}

// CreateRun stores a new run with Version 1; store.ErrConflict if the id
// exists, in any tenant: the run was already claimed by someone.
func (s *Store) CreateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run: %w", err)
	}
	if err := store.RequireIDs("boltstore: create run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	store.Stamp(&r.CreatedAt, &r.UpdatedAt, s.now())
	r.Version = 1
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		if runs.Get([]byte(r.ID)) != nil {
			return store.ErrConflict
		}
		if err := runs.Put([]byte(r.ID), v); err != nil {
			return err
		}
		return putIndexes(tx, runIndexes(r))
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: create run %s: %w", r.ID, err)
	}
	return r, nil
}

// GetRun returns the tenant's run (any tenant's for ""), or
// store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: get run: %w", err)
	}
	var r store.Run
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		r, err = getRun(tx, tenantID, id)
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: get run %s: %w", id, err)
	}
	return r, nil
}

// UpdateRun replaces the run if its stored Version equals r.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first, store.ErrNotFound if the tenant has no such run. The
// indexes follow the new run's trigger, agent, event and CreatedAt.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := ctx.Err(); err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run: %w", err)
	}
	if err := store.RequireIDs("boltstore: update run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	want := r.Version
	r.Version++
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		cur, err := getRun(tx, r.TenantID, r.ID)
		if err != nil {
			return err
		}
		if cur.Version != want {
			return store.ErrConflict
		}
		if err := moveIndexes(tx, runIndexes(cur), runIndexes(r)); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(r.ID), v)
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("boltstore: update run %s: %w", r.ID, err)
	}
	return r, nil
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
// or every run) and checks the rest, the status included, on the runs it
// reads.
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
	rs := []store.Run{}
	err := s.db.View(func(tx *bolt.Tx) error {
		runs := tx.Bucket(bucketRuns)
		return newestFirst(tx.Bucket(bucket), scope, func(id string) (bool, error) {
			r, err := getJSON[store.Run](runs, []byte(id))
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
