package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// Key names (the package doc lists them).
func (s *Store) flowKey(state string) string { return s.prefix + "flow:" + state }

// PutFlowState stores a state until its ExpiresAt (as the key's TTL),
// replacing one with the same State.
func (s *Store) PutFlowState(ctx context.Context, f store.FlowState) error {
	if f.State == "" {
		return errors.New("redisstore: put flow state: empty state")
	}
	if f.ExpiresAt.IsZero() {
		return errors.New("redisstore: put flow state: zero ExpiresAt")
	}
	now := s.now()
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	ttl := f.ExpiresAt.Sub(now)
	if ttl <= 0 {
		// Already expired: nothing to keep, and no older value either.
		if err := s.rdb.Del(ctx, s.flowKey(f.State)).Err(); err != nil {
			return fmt.Errorf("redisstore: put flow state: %w", err)
		}
		return nil
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond) // PX counts whole milliseconds
	v, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("redisstore: put flow state: %w", err)
	}
	if err := s.rdb.Set(ctx, s.flowKey(f.State), v, ttl).Err(); err != nil {
		return fmt.Errorf("redisstore: put flow state: %w", err)
	}
	return nil
}

// TakeFlowState returns and deletes the state atomically (GETDEL): a second
// take of the same state, or a take after it expired, is
// store.ErrNotFound.
func (s *Store) TakeFlowState(ctx context.Context, state string) (store.FlowState, error) {
	v, err := s.rdb.GetDel(ctx, s.flowKey(state)).Bytes()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.FlowState{}, fmt.Errorf("redisstore: take flow state: %w", err)
	}
	var f store.FlowState
	if err := json.Unmarshal(v, &f); err != nil {
		return store.FlowState{}, fmt.Errorf("redisstore: take flow state: decode: %w", err)
	}
	return f, nil
}
