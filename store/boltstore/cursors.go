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
	var c store.Cursor
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		c, err = getJSON[store.Cursor](tx.Bucket(bucketCursors), []byte(key))
		return err
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
	if err := store.RequireIDs("boltstore: put cursor", "key", c.Key); err != nil {
		return store.Cursor{}, err
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = s.now()
	}
	want := c.Version
	c.Version++
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
