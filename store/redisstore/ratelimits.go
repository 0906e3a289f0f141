package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// Key names (the package doc lists them).
func (s *Store) limitKey(key string) string { return s.prefix + "ratelimit:" + key }

// putRateLimitScript stores a budget by store.MergeRateLimit's rule in one
// step, so concurrent answers from several processes cannot undo each
// other: a later reset replaces, an earlier one is ignored, the same reset
// keeps the lower remaining. KEYS: the budget. ARGV: limit, remaining,
// reset (unix ms), ttl (ms).
var putRateLimitScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'reset', 'remaining')
local reset, remaining = tonumber(ARGV[3]), tonumber(ARGV[2])
if cur[1] then
  local creset, cremaining = tonumber(cur[1]), tonumber(cur[2])
  if reset < creset then return 0 end
  if reset == creset and remaining >= cremaining then return 0 end
end
redis.call('HSET', KEYS[1], 'limit', ARGV[1], 'remaining', ARGV[2], 'reset', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// GetRateLimit implements store.RateLimits: one budget per key for every
// process sharing the Redis.
func (s *Store) GetRateLimit(ctx context.Context, key string) (store.RateLimit, bool, error) {
	v, err := s.rdb.HMGet(ctx, s.limitKey(key), "limit", "remaining", "reset").Result()
	if err != nil {
		return store.RateLimit{}, false, fmt.Errorf("redisstore: get rate limit: %w", err)
	}
	if len(v) != 3 || v[0] == nil || v[1] == nil || v[2] == nil {
		return store.RateLimit{}, false, nil
	}
	limit, _ := strconv.Atoi(fmt.Sprint(v[0]))
	remaining, _ := strconv.Atoi(fmt.Sprint(v[1]))
	resetMS, _ := strconv.ParseInt(fmt.Sprint(v[2]), 10, 64)
	rl := store.RateLimit{Limit: limit, Remaining: remaining, Reset: time.UnixMilli(resetMS)}
	if !rl.Reset.After(s.now()) {
		return store.RateLimit{}, false, nil
	}
	return rl, true, nil
}

// PutRateLimit implements store.RateLimits. The key expires a minute after
// the reset, when the budget no longer says anything.
func (s *Store) PutRateLimit(ctx context.Context, key string, rl store.RateLimit) error {
	ttl := rl.Reset.Sub(s.now()) + time.Minute
	if ttl < time.Minute {
		ttl = time.Minute
	}
	err := putRateLimitScript.Run(ctx, s.rdb, []string{s.limitKey(key)},
		rl.Limit, rl.Remaining, rl.Reset.UnixMilli(), ttl.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redisstore: put rate limit: %w", err)
	}
	return nil
}
