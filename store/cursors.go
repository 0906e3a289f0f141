package store

import (
	"context"
	"encoding/json"
	"time"
)

// Cursor is a small piece of state a poller keeps between polls (an ETag,
// the newest item seen).
type Cursor struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Version is 0 for a cursor not stored yet.
	Version int64 `json:"version"`
}

// Validate reports whether a cursor to be stored lacks its key.
func (c Cursor) Validate() error { return requireIDs("key", c.Key) }

// ForPut returns c as PutCursor stores it: Version increased, a zero
// UpdatedAt set to now.
func (c Cursor) ForPut(now time.Time) Cursor {
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = now
	}
	c.Version++
	return c
}

// Cursors stores pollers' cursors.
type Cursors interface {
	// GetCursor returns the cursor, or one with Version 0 and no Value
	// when none is stored.
	GetCursor(ctx context.Context, key string) (Cursor, error)
	// PutCursor stores c if the stored Version equals c.Version (0: none
	// stored), ErrConflict otherwise, and returns it with Version
	// increased.
	PutCursor(ctx context.Context, c Cursor) (Cursor, error)
}
