package boltstore

import (
	"context"

	"github.com/triggerd/triggerd/store"
)

// GetRateLimit implements store.RateLimits. Like the leases, budgets are
// kept in this process's memory: a bbolt file serves one process, and a
// disk write per provider call would cost more than the budget saves.
func (s *Store) GetRateLimit(_ context.Context, key string) (store.RateLimit, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rl, ok := s.limits[key]
	if !ok || !rl.Reset.After(s.now()) {
		delete(s.limits, key)
		return store.RateLimit{}, false, nil
	}
	return rl, true, nil
}

// PutRateLimit implements store.RateLimits.
func (s *Store) PutRateLimit(_ context.Context, key string, rl store.RateLimit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.limits[key]
	s.limits[key] = store.MergeRateLimit(prev, ok, rl)
	return nil
}
