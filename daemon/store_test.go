package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store/redisstore"
)

func TestOpenStoreRefusesVolatileRedis(t *testing.T) {
	url := testenv.StartRedis(t).URL
	var logs testenv.Buffer
	st, err := openStore(t.Context(), Config{RedisURL: url, RedisPrefix: "triggerd:"}, zerolog.New(&logs))
	if err == nil {
		st.Close()
		t.Fatal("openStore of a Redis with appendonly no succeeded")
	}
	if !errors.Is(err, redisstore.ErrVolatile) {
		t.Errorf("err = %v, want ErrVolatile", err)
	}
	for _, want := range []string{`appendonly is "no"`, "run records", "tokens", "CONFIG SET appendonly yes", "appendfsync everysec", "redis.conf", "--redis-allow-volatile"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestOpenStoreAllowVolatileWarns(t *testing.T) {
	url := testenv.StartRedis(t).URL
	var logs testenv.Buffer
	st, err := openStore(t.Context(), Config{RedisURL: url, RedisPrefix: "triggerd:", RedisAllowVolatile: true}, zerolog.New(&logs))
	if err != nil {
		t.Fatalf("openStore with --redis-allow-volatile: %v", err)
	}
	defer st.Close()
	var warning string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "REDIS IS VOLATILE") {
			warning = line
		}
	}
	for _, want := range []string{`"level":"warn"`, "--redis-allow-volatile", `appendonly is \"no\"`, "run records", "tokens"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning does not mention %q; logs:\n%s", want, logs.String())
		}
	}
}
