package boltstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
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
