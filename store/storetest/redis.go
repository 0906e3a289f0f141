package storetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/internal/testenv"
)

// DefaultRedisURL is the server RedisURL uses when TRIGGERD_TEST_REDIS_URL
// is not set.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// RedisURL returns the URL of the Redis server for tests: the environment
// variable TRIGGERD_TEST_REDIS_URL, or DefaultRedisURL. A server that does
// not answer PING within a second is a missing prerequisite
// (testenv.Missing): the test fails when CI=true and is skipped, loudly,
// otherwise.
func RedisURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("TRIGGERD_TEST_REDIS_URL")
	if url == "" {
		url = DefaultRedisURL
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("storetest: TRIGGERD_TEST_REDIS_URL: %v", err)
	}
	opts.MaxRetries = -1 // one try, within the second
	opts.DialerRetries = 1
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testenv.Missing(t, "Redis at "+opts.Addr+" (start redis-server or set TRIGGERD_TEST_REDIS_URL)", err)
	}
	return url
}

// Prefix returns a key prefix unique to the test ("triggerd-test:" + a
// UUID + ":") on the server of RedisURL, and deletes every key under it
// when the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	url := RedisURL(t)
	prefix := "triggerd-test:" + uuid.NewString() + ":"
	t.Cleanup(func() {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Errorf("storetest: clean up %s: %v", prefix, err)
			return
		}
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		// Generous: a benchmark's prefix holds hundreds of thousands of
		// keys (console's BenchmarkPages), left behind if this gave up.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := deleteKeys(ctx, rdb, prefix); err != nil {
			t.Errorf("storetest: clean up %s: %v", prefix, err)
		}
	})
	return prefix
}

// deleteKeys deletes every key starting with prefix (which holds no glob
// characters).
func deleteKeys(ctx context.Context, rdb *redis.Client, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 500).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}
