package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// timeKeyLen is the length of a timeKey.
const timeKeyLen = 12

// timeKey encodes t so that byte order is time order, to the nanosecond
// and whatever the zone: the Unix seconds with the sign bit flipped (8
// bytes), then the nanoseconds (4 bytes), big-endian.
func timeKey(t time.Time) []byte {
	k := make([]byte, timeKeyLen)
	binary.BigEndian.PutUint64(k, uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(k[8:], uint32(t.Nanosecond()))
	return k
}

// timeIndexKey is the key of a record in a time-ordered index: its scope,
// NUL, timeKey(t) and its id.
func timeIndexKey(scope string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(scope)+len(sep)+timeKeyLen+len(id))
	k = append(k, scope...)
	k = append(k, sep...)
	k = append(k, timeKey(t)...)
	return append(k, id...)
}

// newestFirst calls f with the id of every entry of scope in the
// time-ordered index b, newest first (of equal times, the greatest id
// first), once per id, until f returns false or an error. Scopes may
// contain NUL, so an entry can belong to a longer scope (and an id can
// come twice): f checks the record it reads.
func newestFirst(b *bolt.Bucket, scope string, f func(id string) (more bool, err error)) error {
	return newestFirstBefore(b, scope, nil, f)
}

// newestFirstBefore is newestFirst from the entry before the key from
// (timeIndexKey(scope, t, id)) down; from the newest for nil.
func newestFirstBefore(b *bolt.Bucket, scope string, from []byte, f func(id string) (more bool, err error)) error {
	prefix := []byte(scope + sep)
	seen := make(map[string]bool)
	c := b.Cursor()
	// The first key after every key with the prefix is scope + "\x01".
	if from == nil {
		from = []byte(scope + "\x01")
	}
	k, _ := c.Seek(from)
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if len(k) < len(prefix)+timeKeyLen {
			continue
		}
		id := string(k[len(prefix)+timeKeyLen:])
		if seen[id] {
			continue
		}
		seen[id] = true
		more, err := f(id)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// oldestFirst calls f with the id of every entry of the scope "" of the
// time-ordered index b whose time is before before, oldest first (of equal
// times, the least id first), until f returns false or an error. The id is
// valid only until the transaction ends.
func oldestFirst(b *bolt.Bucket, before time.Time, f func(id []byte) (more bool, err error)) error {
	prefix := []byte(sep)
	end := timeIndexKey("", before, "")
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		if len(k) < len(prefix)+timeKeyLen {
			continue
		}
		more, err := f(k[len(prefix)+timeKeyLen:])
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// prune deletes, oldest first, at most limit (store.DefaultPruneLimit if
// not positive) of the records that the time-ordered index names (by
// their key in records) with a time before before and that due accepts,
// with their index entries, and returns how many it deleted. It works in
// write transactions of at most store.DefaultPruneLimit records, so that
// other writes are not held up long.
func prune[T any](ctx context.Context, db *bolt.DB, index, records []byte, before time.Time, limit int,
	due func(T) bool, key func(T) []byte, indexes func(T) []indexEntry) (int, error) {
	limit = store.PruneLimit(limit)
	deleted := 0
	for deleted < limit {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		batch := min(limit-deleted, store.DefaultPruneLimit)
		n := 0
		err := db.Update(func(tx *bolt.Tx) error {
			rb := tx.Bucket(records)
			var doomed []T
			err := oldestFirst(tx.Bucket(index), before, func(k []byte) (bool, error) {
				v, err := getJSON[T](rb, k)
				if errors.Is(err, store.ErrNotFound) {
					return true, nil
				}
				if err != nil {
					return false, err
				}
				if due(v) {
					doomed = append(doomed, v)
				}
				return len(doomed) < batch, nil
			})
			if err != nil {
				return err
			}
			// Deleted after the walk: a cursor does not follow deletions
			// of keys other than its own.
			for _, v := range doomed {
				if err := rb.Delete(key(v)); err != nil {
					return err
				}
				if err := deleteIndexes(tx, indexes(v)); err != nil {
					return err
				}
			}
			n = len(doomed)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n < batch {
			break
		}
	}
	return deleted, nil
}
