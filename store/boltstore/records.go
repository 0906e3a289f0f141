package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// sep separates the parts of index keys.
const sep = "\x00"

// tenantIndexKey is the key of a record in a per-tenant index.
func tenantIndexKey(tenantID, id string) []byte {
	return []byte(tenantID + sep + id)
}

// getJSON decodes the value at key in b; store.ErrNotFound if absent.
func getJSON[T any](b *bolt.Bucket, key []byte) (T, error) {
	var v T
	data := b.Get(key)
	if data == nil {
		return v, store.ErrNotFound
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("decode %q: %w", key, err)
	}
	return v, nil
}

// allRecords decodes every value of b.
func allRecords[T any](b *bolt.Bucket) ([]T, error) {
	var out []T
	err := b.ForEach(func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("decode %q: %w", k, err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// tenantRecords decodes the records (keyed by id in the records bucket)
// that the per-tenant index lists under tenantID. Ids may contain NUL, so
// the caller checks each record's tenant.
func tenantRecords[T any](tx *bolt.Tx, index, records []byte, tenantID string) ([]T, error) {
	var out []T
	prefix := []byte(tenantID + sep)
	rb := tx.Bucket(records)
	c := tx.Bucket(index).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		x, err := getJSON[T](rb, k[len(prefix):])
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// indexEntry is one key of a record in an index bucket: a per-tenant or
// time-ordered index (value nil), or a unique key that finds the record
// (value its id; unique set), which no other record may hold.
type indexEntry struct {
	bucket, key []byte
	value       []byte
	unique      bool
}

// taken reports whether another record holds one of the unique entries.
func taken(tx *bolt.Tx, entries []indexEntry) bool {
	return slices.ContainsFunc(entries, func(e indexEntry) bool {
		return e.unique && tx.Bucket(e.bucket).Get(e.key) != nil
	})
}

// putIndexes adds entries to their indexes.
func putIndexes(tx *bolt.Tx, entries []indexEntry) error {
	for _, e := range entries {
		if err := tx.Bucket(e.bucket).Put(e.key, e.value); err != nil {
			return err
		}
	}
	return nil
}

// deleteIndexes removes entries from their indexes; a unique entry only
// while it still finds this record.
func deleteIndexes(tx *bolt.Tx, entries []indexEntry) error {
	for _, e := range entries {
		b := tx.Bucket(e.bucket)
		if e.unique && !bytes.Equal(b.Get(e.key), e.value) {
			continue
		}
		if err := b.Delete(e.key); err != nil {
			return err
		}
	}
	return nil
}

// moveIndexes replaces a record's entries old with now, touching only the
// entries that differ: every bucket written costs pages at the commit, and
// most updates (a run's status, an event's outcomes) leave most entries
// where they were. A unique entry that another record holds is
// store.ErrConflict.
func moveIndexes(tx *bolt.Tx, old, now []indexEntry) error {
	added := without(now, old)
	if taken(tx, added) {
		return store.ErrConflict
	}
	if err := deleteIndexes(tx, without(old, now)); err != nil {
		return err
	}
	return putIndexes(tx, added)
}

// without returns the entries of a that b does not hold.
func without(a, b []indexEntry) []indexEntry {
	return slices.DeleteFunc(slices.Clone(a), func(e indexEntry) bool {
		return slices.ContainsFunc(b, func(f indexEntry) bool { return bytes.Equal(e.bucket, f.bucket) && bytes.Equal(e.key, f.key) })
	})
}

// kind says how one kind of versioned record is kept: its bucket and its
// key there, which stored record a request reaches, and the index entries
// that follow it. Its methods are the create, get, list, update (with a
// version check) and delete that these records share; each entity's
// methods are thin calls to them.
type kind[T record.Versioned[T]] struct {
	// what names the kind in errors ("agent").
	what   string
	bucket []byte
	// key is the key in bucket of the record tenantID and id name.
	key func(tenantID, id string) []byte
	// fields gives access to a record's common fields.
	fields func(*T) record.Fields
	// reaches reports whether stored, found at key(tenantID, id), is the
	// record asked for: of that tenant, where the kind's ids are per
	// tenant or the caller names one, and with that id, where keys of
	// joined parts can collide.
	reaches record.Reach
	// indexes returns a record's entries in other buckets (nil: none).
	indexes func(T) []indexEntry
	// tenantIndex is the per-tenant index that list walks for a tenant's
	// records (kinds that list them).
	tenantIndex []byte
	// batch writes through db.Batch, whose concurrent writers share one
	// commit (the dispatcher's runs); others through db.Update.
	batch bool
	// counts returns what writing v, replacing prev (nil on creation),
	// adds to the activity counters, in the same transaction; nil for
	// kinds not counted (all but runs).
	counts func(prev *T, v T) []store.ActivityDelta
}

// count adds to the activity counters what writing v over prev adds.
func (k kind[T]) count(tx *bolt.Tx, s *Store, prev *T, v T) error {
	if k.counts == nil {
		return nil
	}
	return s.addActivity(tx, k.counts(prev, v))
}

// byID is the key of records whose ids are global.
func byID(_, id string) []byte { return []byte(id) }

// view returns what read returns in a read transaction.
func view[T any](s *Store, read func(*bolt.Tx) (T, error)) (T, error) {
	var v T
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		v, err = read(tx)
		return err
	})
	return v, err
}

// write runs fn in a write transaction (a batched one for batch).
func (s *Store) write(batch bool, fn func(*bolt.Tx) error) error {
	if batch {
		return s.db.Batch(fn)
	}
	return s.db.Update(fn)
}

// entries returns v's index entries.
func (k kind[T]) entries(v T) []indexEntry {
	if k.indexes == nil {
		return nil
	}
	return k.indexes(v)
}

// read reads the record tenantID and id name in tx; store.ErrNotFound if
// it is absent or does not reach it.
func (k kind[T]) read(tx *bolt.Tx, tenantID, id string) (T, error) {
	v, err := getJSON[T](tx.Bucket(k.bucket), k.key(tenantID, id))
	if err != nil {
		var zero T
		return zero, err
	}
	if !k.reaches(k.fields(&v), tenantID, id) {
		var zero T
		return zero, store.ErrNotFound
	}
	return v, nil
}

// create stores v with Version 1 (v.ForCreate) and its index entries;
// store.ErrConflict if its key or one of its unique entries is taken.
func (k kind[T]) create(ctx context.Context, s *Store, v T) (T, error) {
	return k.createIf(ctx, s, v, nil)
}

// createIf is create, in a transaction where guard (unless nil) is asked
// first and may refuse the record with an error of its own.
func (k kind[T]) createIf(ctx context.Context, s *Store, v T, guard func(tx *bolt.Tx, v T) error) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("boltstore: create %s: %w", k.what, err)
	}
	if err := v.Validate(); err != nil {
		return zero, fmt.Errorf("boltstore: create %s: %w", k.what, err)
	}
	v = v.ForCreate(s.now())
	f := k.fields(&v)
	data, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("boltstore: create %s: %w", k.what, err)
	}
	err = s.write(k.batch, func(tx *bolt.Tx) error {
		if guard != nil {
			if err := guard(tx, v); err != nil {
				return err
			}
		}
		b, key, entries := tx.Bucket(k.bucket), k.key(f.TenantID, f.ID), k.entries(v)
		if b.Get(key) != nil || taken(tx, entries) {
			return store.ErrConflict
		}
		if err := b.Put(key, data); err != nil {
			return err
		}
		if err := k.count(tx, s, nil, v); err != nil {
			return err
		}
		return putIndexes(tx, entries)
	})
	if err != nil {
		return zero, fmt.Errorf("boltstore: create %s %s: %w", k.what, f.ID, err)
	}
	return v, nil
}

// get returns the record tenantID and id name, or store.ErrNotFound; op
// names the call in errors ("get", "find").
func (k kind[T]) get(ctx context.Context, s *Store, op, tenantID, id string) (T, error) {
	var v T
	if err := ctx.Err(); err != nil {
		return v, fmt.Errorf("boltstore: %s %s: %w", op, k.what, err)
	}
	v, err := view(s, func(tx *bolt.Tx) (T, error) { return k.read(tx, tenantID, id) })
	if err != nil {
		var zero T
		return zero, fmt.Errorf("boltstore: %s %s %s: %w", op, k.what, id, err)
	}
	return v, nil
}

// list returns the records of the tenant (every tenant's for "") that
// keep accepts, oldest first (by CreatedAt, then id). It walks the
// kind's per-tenant index, or the whole bucket for every tenant.
func (k kind[T]) list(ctx context.Context, s *Store, tenantID string, keep func(T) bool) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list %ss: %w", k.what, err)
	}
	out := []T{}
	err := s.db.View(func(tx *bolt.Tx) error {
		var all []T
		var err error
		if tenantID == "" {
			all, err = allRecords[T](tx.Bucket(k.bucket))
		} else {
			all, err = tenantRecords[T](tx, k.tenantIndex, k.bucket, tenantID)
		}
		for _, v := range all {
			if keep(v) {
				out = append(out, v)
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list %ss: %w", k.what, err)
	}
	store.SortOldestFirst(out, func(v T) time.Time { return k.fields(&v).Created }, func(v T) string { return k.fields(&v).ID })
	return out, nil
}

// update replaces the record v names if its stored Version equals
// v.Version, moves its index entries, and returns it with Version
// increased; store.ErrNotFound if it is absent (or does not reach it),
// store.ErrConflict if another write came first, if check refuses the
// change from the stored record, or if a new unique entry is taken.
func (k kind[T]) update(ctx context.Context, s *Store, v T, check func(cur, next T) error) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("boltstore: update %s: %w", k.what, err)
	}
	if err := v.Validate(); err != nil {
		return zero, fmt.Errorf("boltstore: update %s: %w", k.what, err)
	}
	f := k.fields(&v)
	want := *f.Version
	*f.Version++
	data, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("boltstore: update %s: %w", k.what, err)
	}
	err = s.write(k.batch, func(tx *bolt.Tx) error {
		cur, err := k.read(tx, f.TenantID, f.ID)
		if err != nil {
			return err
		}
		if *k.fields(&cur).Version != want {
			return store.ErrConflict
		}
		if check != nil {
			if err := check(cur, v); err != nil {
				return err
			}
		}
		if err := moveIndexes(tx, k.entries(cur), k.entries(v)); err != nil {
			return err
		}
		if err := k.count(tx, s, &cur, v); err != nil {
			return err
		}
		return tx.Bucket(k.bucket).Put(k.key(f.TenantID, f.ID), data)
	})
	if err != nil {
		return zero, fmt.Errorf("boltstore: update %s %s: %w", k.what, f.ID, err)
	}
	return v, nil
}

// remove deletes the record tenantID and id name, with its index
// entries, and calls also (if not nil) in the same transaction;
// store.ErrNotFound if it is absent (or does not reach it).
func (k kind[T]) remove(ctx context.Context, s *Store, tenantID, id string, also func(*bolt.Tx, T) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: delete %s: %w", k.what, err)
	}
	err := s.write(k.batch, func(tx *bolt.Tx) error {
		cur, err := k.read(tx, tenantID, id)
		if err != nil {
			return err
		}
		if err := tx.Bucket(k.bucket).Delete(k.key(tenantID, id)); err != nil {
			return err
		}
		if err := deleteIndexes(tx, k.entries(cur)); err != nil {
			return err
		}
		if also != nil {
			return also(tx, cur)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltstore: delete %s %s: %w", k.what, id, err)
	}
	return nil
}
