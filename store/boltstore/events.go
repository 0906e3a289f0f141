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

// Buckets of event records and their time-ordered indexes
// (the package doc gives their keys).
var (
	bucketEvents       = []byte("events")
	bucketEventTrigger = []byte("event-trigger")
	bucketEventTime    = []byte("event-time")
)

// eventKey is the key of an event record in the events bucket.
func eventKey(tenantID, eventID string) []byte {
	return []byte(tenantID + sep + eventID)
}

// eventIndexes returns e's entries in the indexes: one in event-time, and
// one in event-trigger per trigger with an outcome.
func eventIndexes(e store.EventRecord) []indexEntry {
	entries := []indexEntry{{bucket: bucketEventTime, key: timeIndexKey("", e.DispatchedAt, string(eventKey(e.TenantID, e.EventID)))}}
	for _, tr := range e.TriggerIDs() {
		entries = append(entries, indexEntry{bucket: bucketEventTrigger, key: timeIndexKey(e.TenantID+sep+tr, e.DispatchedAt, e.EventID)})
	}
	return entries
}

// indexEvents fills event-time from the event records when it is empty
// but they are not: a file written before event-time existed, whose
// records PruneEvents could not find otherwise. Open calls it.
func indexEvents(tx *bolt.Tx) error {
	index := tx.Bucket(bucketEventTime)
	if k, _ := index.Cursor().First(); k != nil {
		return nil
	}
	return tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
		var e store.EventRecord
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("decode %q: %w", k, err)
		}
		return index.Put(timeIndexKey("", e.DispatchedAt, string(k)), nil)
	})
}

// PutEvent stores or replaces the tenant's record of an event, and moves
// it in the indexes: a trigger no longer among the outcomes no longer
// lists it. A zero DispatchedAt is stored as the time of the
// write.
func (s *Store) PutEvent(ctx context.Context, e store.EventRecord) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("boltstore: put event: %w", err)
	}
	e = e.ForPut(s.now())
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("boltstore: put event: %w", err)
	}
	err = s.db.Batch(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		k := eventKey(e.TenantID, e.EventID)
		var stale []indexEntry
		old, err := getJSON[store.EventRecord](events, k)
		switch {
		case err == nil:
			if old.TenantID != e.TenantID || old.EventID != e.EventID {
				return store.ErrConflict // NUL in an id made two keys one
			}
			stale = eventIndexes(old)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := events.Put(k, v); err != nil {
			return err
		}
		return moveIndexes(tx, stale, eventIndexes(e))
	})
	if err != nil {
		return fmt.Errorf("boltstore: put event %s: %w", e.EventID, err)
	}
	return nil
}

// getEvent reads the tenant's record of an event in tx; store.ErrNotFound
// if absent.
func getEvent(tx *bolt.Tx, tenantID, eventID string) (store.EventRecord, error) {
	e, err := getJSON[store.EventRecord](tx.Bucket(bucketEvents), eventKey(tenantID, eventID))
	if err != nil {
		return store.EventRecord{}, err
	}
	if e.TenantID != tenantID || e.EventID != eventID {
		return store.EventRecord{}, store.ErrNotFound
	}
	return e, nil
}

// GetEvent returns the tenant's record of an event, or store.ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error) {
	if err := ctx.Err(); err != nil {
		return store.EventRecord{}, fmt.Errorf("boltstore: get event: %w", err)
	}
	e, err := view(s, func(tx *bolt.Tx) (store.EventRecord, error) { return getEvent(tx, tenantID, eventID) })
	if err != nil {
		return store.EventRecord{}, fmt.Errorf("boltstore: get event %s: %w", eventID, err)
	}
	return e, nil
}

// ListTriggerEvents returns the tenant's records that have an outcome for
// the trigger, newest DispatchedAt first (then greatest event id), at most
// limit (100 if not positive).
func (s *Store) ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]store.EventRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list trigger events: %w", err)
	}
	limit = store.ListLimit(limit)
	es := []store.EventRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return newestFirst(tx.Bucket(bucketEventTrigger), tenantID+sep+triggerID, func(id string) (bool, error) {
			e, err := getEvent(tx, tenantID, id)
			if errors.Is(err, store.ErrNotFound) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			if e.HasOutcome(triggerID) {
				es = append(es, e)
			}
			return len(es) < limit, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list trigger events %s: %w", triggerID, err)
	}
	return es, nil
}

// PruneEvents deletes the records of every tenant whose DispatchedAt is
// before before, with their index entries, oldest DispatchedAt first (then
// least tenant and event id), at most limit (store.DefaultPruneLimit if not
// positive), and returns how many it deleted. It walks event-time from the
// oldest entry, in write transactions of at most store.DefaultPruneLimit
// records.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := prune(ctx, s.db, bucketEventTime, bucketEvents, before, limit,
		func(e store.EventRecord) bool { return e.DispatchedAt.Before(before) },
		func(e store.EventRecord) []byte { return eventKey(e.TenantID, e.EventID) }, eventIndexes)
	if err != nil {
		return n, fmt.Errorf("boltstore: prune events: %w", err)
	}
	return n, nil
}
