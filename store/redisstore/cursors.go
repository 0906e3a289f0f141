package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// putCursorScript stores a cursor if the stored version (0 when none
// is stored) is the expected one. KEYS: cursor. ARGV: expected
// version, JSON. Returns 1 when written, 0 on a version mismatch.
var putCursorScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local v = 0
if cur then v = cjson.decode(cur).version end
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

// Key names (the package doc lists them).
func (s *Store) cursorKey(key string) string { return s.prefix + "cursor:" + key }

// GetCursor returns the cursor, or one with Version 0 and no Value when
// none is stored.
func (s *Store) GetCursor(ctx context.Context, key string) (store.Cursor, error) {
	var c store.Cursor
	err := s.getJSON(ctx, s.cursorKey(key), &c)
	if errors.Is(err, store.ErrNotFound) {
		return store.Cursor{Key: key}, nil
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: get cursor %s: %w", key, err)
	}
	return c, nil
}

// PutCursor stores c if the stored Version equals c.Version (0: none is
// stored), store.ErrConflict otherwise, and returns it with Version
// increased. A zero UpdatedAt is stored as the time of the write.
func (s *Store) PutCursor(ctx context.Context, c store.Cursor) (store.Cursor, error) {
	if err := c.Validate(); err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: put cursor: %w", err)
	}
	want := c.Version
	c = c.ForPut(s.now())
	v, err := json.Marshal(c)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: put cursor: %w", err)
	}
	// KEYS: cursor. ARGV: expected version, JSON.
	n, err := putCursorScript.Run(ctx, s.rdb, []string{s.cursorKey(c.Key)}, want, v).Int()
	if err == nil && n != 1 {
		err = store.ErrConflict
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: put cursor %s: %w", c.Key, err)
	}
	return c, nil
}
