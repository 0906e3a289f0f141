package main

import (
	"io"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/internal/testenv"
)

// volatileRedis runs a throwaway redis-server that keeps nothing on disk
// (appendonly no, no RDB snapshots), as this machine's and CI's do, and
// returns its URL. The shared test Redis is left alone: its configuration
// is not the test's to choose.
func volatileRedis(t *testing.T) string {
	t.Helper()
	return testenv.StartRedis(t).URL
}

func TestRedisAllowVolatileFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"flag", []string{"--redis-allow-volatile"}, nil, true},
		{"variable", nil, map[string]string{"TRIGGERD_REDIS_ALLOW_VOLATILE": "true"}, true},
		{"empty variable", nil, map[string]string{"TRIGGERD_REDIS_ALLOW_VOLATILE": ""}, false},
		{"flag wins", []string{"--redis-allow-volatile=false"}, map[string]string{"TRIGGERD_REDIS_ALLOW_VOLATILE": "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig(tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RedisAllowVolatile != tc.want {
				t.Errorf("RedisAllowVolatile = %v, want %v", cfg.RedisAllowVolatile, tc.want)
			}
		})
	}
	_, help := runTriggerd(t, nil, "--help")
	if want := "  --redis-allow-volatile (env TRIGGERD_REDIS_ALLOW_VOLATILE, default \"false\")\n"; !strings.Contains(help, want) {
		t.Errorf("help does not contain %q", want)
	}
}

// TestTriggerdRefusesVolatileRedis starts triggerd itself: without the
// flag it exits with the store's error; with TRIGGERD_REDIS_ALLOW_VOLATILE
// it starts, and says loudly what is at risk.
func TestTriggerdRefusesVolatileRedis(t *testing.T) {
	url := volatileRedis(t)
	code, stderr := runTriggerd(t, nil, "--http-addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--redis-url", url, "--log-format", "console")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, stderr)
	}
	for _, want := range []string{"appendonly", "CONFIG SET appendonly yes", "--redis-allow-volatile"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not mention %q:\n%s", want, stderr)
		}
	}

	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + t.TempDir(), "TRIGGERD_REDIS_URL=" + url, "TRIGGERD_REDIS_ALLOW_VOLATILE=true"})
	if logs := p.logs(); !strings.Contains(logs, "REDIS IS VOLATILE") {
		t.Errorf("no warning that Redis is volatile:\n%s", logs)
	}
	if code := p.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, p.logs())
	}
}
