package boltstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"
)

// lease is one held lock of the process-local Locker.
type lease struct {
	token   string
	expires time.Time
}

// TryLock takes the lease named key for ttl. Leases live in this process's
// memory: a bbolt file is used by one process only, so there is nobody
// else to share them with, and they do not survive a restart. It returns
// held false, without error, when another holder has the lease; release
// gives it back early and only releases this holder's lease; it is never
// nil (a no-op when not held) and may be called more than once.
func (s *Store) TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("boltstore: try lock: %w", err)
	}
	if ttl <= 0 {
		return nil, false, fmt.Errorf("boltstore: try lock %s: ttl %s is not positive", key, ttl)
	}
	token := rand.Text()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, l := range s.leases {
		if !now.Before(l.expires) {
			delete(s.leases, k)
		}
	}
	if _, ok := s.leases[key]; ok {
		return func() {}, false, nil
	}
	s.leases[key] = lease{token: token, expires: now.Add(ttl)}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if l, ok := s.leases[key]; ok && l.token == token {
				delete(s.leases, key)
			}
		})
	}, true, nil
}
