package boltstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// bucketCursors holds pollers' cursors (the package doc gives its keys).
var bucketCursors = []byte("cursors")

// GetCursor returns the cursor, or one with Version 0 and no Value when
// none is stored.
func (s *Store) GetCursor(ctx context.Context, key string) (store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: get cursor: %w", err)
	}
	c, err := view(s, func(tx *bolt.Tx) (store.Cursor, error) {
		return getJSON[store.Cursor](tx.Bucket(bucketCursors), []byte(key))
	})
	if errors.Is(err, store.ErrNotFound) {
		return store.Cursor{Key: key}, nil
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: get cursor %s: %w", key, err)
	}
	return c, nil
}

// PutCursor stores c if the stored Version equals c.Version (0: none is
// stored), store.ErrConflict otherwise, and returns it with Version
// increased. A zero UpdatedAt is stored as the time of the write.
func (s *Store) PutCursor(ctx context.Context, c store.Cursor) (store.Cursor, error) {
	if err := ctx.Err(); err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor: %w", err)
	}
	if err := c.Validate(); err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor: %w", err)
	}
	want := c.Version
	c = c.ForPut(s.now())
	v, err := json.Marshal(c)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		cursors := tx.Bucket(bucketCursors)
		cur, err := getJSON[store.Cursor](cursors, []byte(c.Key))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if cur.Version != want { // 0 when none is stored
			return store.ErrConflict
		}
		return cursors.Put([]byte(c.Key), v)
	})
	if err != nil {
		return store.Cursor{}, fmt.Errorf("boltstore: put cursor %s: %w", c.Key, err)
	}
	return c, nil
}
