package redisstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// unlockScript deletes a lease while it holds the caller's token. KEYS:
// lease. ARGV: token. Returns 1 when deleted, 0 otherwise.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// releaseTimeout bounds the call that gives a lease back.
const releaseTimeout = 5 * time.Second

// Key names (the package doc lists them).
func (s *Store) lockKey(key string) string { return s.prefix + "lock:" + key }

// TryLock takes the lease named key for ttl (SET NX PX with a random
// token), shared by every process on the same server and prefix. It
// returns held false, without error, when another holder has it. release
// gives it back early; it deletes the key only while it still holds this
// holder's token, so a lease that expired and was taken by another holder
// is left alone. release is never nil (a no-op when not held) and may be
// called more than once. It has no context: it uses TryLock's context
// values, without its cancellation, and a timeout of a few seconds; if it
// fails, the lease expires after ttl.
func (s *Store) TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error) {
	if ttl <= 0 {
		return nil, false, fmt.Errorf("redisstore: try lock %s: ttl %s is not positive", key, ttl)
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	token := rand.Text()
	k := s.lockKey(key)
	ok, err := s.rdb.SetNX(ctx, k, token, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("redisstore: try lock %s: %w", key, err)
	}
	if !ok {
		return func() {}, false, nil
	}
	bg := context.WithoutCancel(ctx)
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(bg, releaseTimeout)
			defer cancel()
			_ = unlockScript.Run(ctx, s.rdb, []string{k}, token).Err()
		})
	}, true, nil
}
