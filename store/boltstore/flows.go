package boltstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// Buckets of OAuth flow states and their expiry index
// (the package doc gives their keys).
var (
	bucketFlows      = []byte("flows")
	bucketFlowExpiry = []byte("flow-expiry")
)

// expiryKey is the key of a flow state in the flow-expiry index.
func expiryKey(expires time.Time, state string) []byte {
	k := make([]byte, 8, 8+len(state))
	binary.BigEndian.PutUint64(k, uint64(expires.UnixNano()))
	return append(k, state...)
}

// PutFlowState stores a state until its ExpiresAt, replacing one with the
// same State. It also deletes the flow states that have expired.
func (s *Store) PutFlowState(ctx context.Context, f store.FlowState) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	if f.State == "" {
		return errors.New("boltstore: put flow state: empty state")
	}
	if f.ExpiresAt.IsZero() {
		return errors.New("boltstore: put flow state: zero ExpiresAt")
	}
	now := s.now()
	if f.CreatedAt.IsZero() {
		f.CreatedAt = now
	}
	v, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		flows, expiry := tx.Bucket(bucketFlows), tx.Bucket(bucketFlowExpiry)
		if err := purgeFlows(flows, expiry, now); err != nil {
			return fmt.Errorf("purge expired: %w", err)
		}
		if old := flows.Get([]byte(f.State)); old != nil {
			if err := deleteFlow(flows, expiry, old); err != nil {
				return err
			}
		}
		if !f.ExpiresAt.After(now) {
			return nil // already expired: nothing to keep
		}
		if err := flows.Put([]byte(f.State), v); err != nil {
			return err
		}
		return expiry.Put(expiryKey(f.ExpiresAt, f.State), nil)
	})
	if err != nil {
		return fmt.Errorf("boltstore: put flow state: %w", err)
	}
	return nil
}

// purgeFlows deletes the flow states whose ExpiresAt is not after now.
func purgeFlows(flows, expiry *bolt.Bucket, now time.Time) error {
	limit := uint64(now.UnixNano())
	c := expiry.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.First() {
		if len(k) < 8 || binary.BigEndian.Uint64(k[:8]) > limit {
			return nil
		}
		state := k[8:]
		if err := flows.Delete(state); err != nil {
			return err
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// deleteFlow deletes the stored flow state v and its expiry entry.
func deleteFlow(flows, expiry *bolt.Bucket, v []byte) error {
	var f store.FlowState
	if err := json.Unmarshal(v, &f); err != nil {
		return err
	}
	if err := expiry.Delete(expiryKey(f.ExpiresAt, f.State)); err != nil {
		return err
	}
	return flows.Delete([]byte(f.State))
}

// TakeFlowState returns and deletes the state atomically: a second take of
// the same state, or a take after it expired, is store.ErrNotFound.
func (s *Store) TakeFlowState(ctx context.Context, state string) (store.FlowState, error) {
	if err := ctx.Err(); err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	// A read transaction first: unknown states (typos, replays, bots)
	// should not cost a write.
	var present bool
	if err := s.db.View(func(tx *bolt.Tx) error {
		present = tx.Bucket(bucketFlows).Get([]byte(state)) != nil
		return nil
	}); err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	if !present {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", store.ErrNotFound)
	}
	var f store.FlowState
	found := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		flows, expiry := tx.Bucket(bucketFlows), tx.Bucket(bucketFlowExpiry)
		v := flows.Get([]byte(state))
		if v == nil {
			return nil
		}
		if err := json.Unmarshal(v, &f); err != nil {
			return err
		}
		// An expired state is deleted too, so the transaction commits.
		found = f.ExpiresAt.After(s.now())
		return deleteFlow(flows, expiry, v)
	})
	if err != nil {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", err)
	}
	if !found {
		return store.FlowState{}, fmt.Errorf("boltstore: take flow state: %w", store.ErrNotFound)
	}
	return f, nil
}
