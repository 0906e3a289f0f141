package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/store/storetest"
)

// open opens a store for a test. The test servers (this machine's, CI's)
// keep nothing on disk, so it allows a volatile server.
func open(t *testing.T, url, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{Prefix: prefix, AllowVolatile: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	url := storetest.RedisURL(t)
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			return open(t, url, storetest.Prefix(t))
		},
		Reopen: func(t *testing.T, old store.Store) store.Store {
			prefix := old.(*redisstore.Store).Prefix()
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, url, prefix)
		},
	})
}

func TestOpenChecksPolicy(t *testing.T) {
	s := open(t, storetest.RedisURL(t), storetest.Prefix(t))
	defer s.Close()
	// The shared test server must not evict (that is why Open succeeded),
	// and it answers CONFIG GET.
	if msg := s.PolicyUnverified(); msg != "" {
		t.Logf("note: the test server's policy is unverified: %s", msg)
	}
}

func TestOpenDefaultPrefix(t *testing.T) {
	s, err := redisstore.Open(t.Context(), storetest.RedisURL(t), redisstore.Options{AllowVolatile: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if got := s.Prefix(); got != redisstore.DefaultPrefix {
		t.Fatalf("Prefix() = %q, want %q", got, redisstore.DefaultPrefix)
	}
}

func TestOpenBadURL(t *testing.T) {
	_, err := redisstore.Open(t.Context(), "redis://user:s3cret@[::1", redisstore.Options{})
	if err == nil {
		t.Fatal("Open of a bad URL succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestOpenNoServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := redisstore.Open(ctx, "redis://127.0.0.1:"+freePort(t)+"/0", redisstore.Options{})
	if err == nil {
		t.Fatal("Open without a server succeeded")
	}
	if !strings.Contains(err.Error(), "ping 127.0.0.1:") {
		t.Errorf("error %q does not say which server did not answer", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open took %s with a 300ms context", d)
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// startRedis runs a throwaway redis-server with extra arguments and returns
// its URL (testenv.StartRedis).
func startRedis(t *testing.T, args ...string) string {
	t.Helper()
	return testenv.StartRedis(t, args...).URL
}

func TestOpenRefusesEvictingPolicy(t *testing.T) {
	url := startRedis(t, "--maxmemory-policy", "allkeys-lru")
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a server with maxmemory-policy allkeys-lru succeeded")
	}
	if !errors.Is(err, redisstore.ErrEvictingPolicy) {
		t.Errorf("err = %v, want ErrEvictingPolicy", err)
	}
	for _, want := range []string{"allkeys-lru", "CONFIG SET maxmemory-policy noeviction", "redis.conf", "tokens and flow states"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestOpenToleratesRefusedConfig(t *testing.T) {
	// As on managed Redis, CONFIG is not available.
	url := startRedis(t, "--rename-command", "CONFIG", "")
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{})
	if err != nil {
		t.Fatalf("Open of a server that refuses CONFIG: %v", err)
	}
	defer s.Close()
	msg := s.PolicyUnverified()
	if !strings.Contains(msg, "noeviction") {
		t.Fatalf("PolicyUnverified() = %q, want a warning that mentions noeviction", msg)
	}
	// Nor can it say whether it persists every write: accepted (without
	// AllowVolatile), with a warning.
	msg = s.DurabilityUnverified()
	for _, want := range []string{"CONFIG GET appendonly", "appendonly yes", "run records", "tokens"} {
		if !strings.Contains(msg, want) {
			t.Errorf("DurabilityUnverified() = %q, want a warning that mentions %q", msg, want)
		}
	}
	if v := s.Volatile(); v != "" {
		t.Errorf("Volatile() = %q, want \"\" (nothing was found volatile)", v)
	}
	// The store works.
	if err := s.CreateTenant(t.Context(), store.Tenant{ID: "t1"}); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
}

func TestOpenRefusesVolatile(t *testing.T) {
	for _, tc := range []struct {
		name, save, loses string
	}{
		{"no snapshots", "", "every key"},
		{"snapshots", "3600 1", `save "3600 1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := startRedis(t, "--appendonly", "no", "--save", tc.save)
			s, err := redisstore.Open(t.Context(), url, redisstore.Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open of a server with appendonly no succeeded")
			}
			if !errors.Is(err, redisstore.ErrVolatile) {
				t.Errorf("err = %v, want ErrVolatile", err)
			}
			for _, want := range []string{
				`appendonly is "no"`, tc.loses, // what is wrong
				"run records", "tool steps", "tokens", "connected again", // what is at risk
				"CONFIG SET appendonly yes", `"appendonly yes"`, `"appendfsync everysec"`, "redis.conf", "--redis-allow-volatile", // the fix
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestOpenAllowVolatile(t *testing.T) {
	url := startRedis(t) // appendonly no, no snapshots
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{AllowVolatile: true})
	if err != nil {
		t.Fatalf("Open with AllowVolatile: %v", err)
	}
	defer s.Close()
	msg := s.Volatile()
	for _, want := range []string{`appendonly is "no"`, "every key", "run records", "tokens"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Volatile() = %q, want a warning that mentions %q", msg, want)
		}
	}
	if msg := s.DurabilityUnverified(); msg != "" {
		t.Errorf("DurabilityUnverified() = %q, want \"\" (CONFIG answered)", msg)
	}
	if err := s.CreateTenant(t.Context(), store.Tenant{ID: "t1"}); err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
}

func TestOpenAcceptsAppendOnly(t *testing.T) {
	url := startRedis(t, "--appendonly", "yes", "--appendfsync", "everysec")
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{})
	if err != nil {
		t.Fatalf("Open of a server with appendonly yes: %v", err)
	}
	defer s.Close()
	if v, u := s.Volatile(), s.DurabilityUnverified(); v != "" || u != "" {
		t.Errorf("Volatile() = %q, DurabilityUnverified() = %q; want both empty", v, u)
	}
}

// TestOpenSharedServerDurability checks the shared test server (this
// machine's or CI's, which usually keep nothing on disk) both ways, without
// changing its configuration.
func TestOpenSharedServerDurability(t *testing.T) {
	url := storetest.RedisURL(t)
	aof, err := client(t, url).ConfigGet(t.Context(), "appendonly").Result()
	if err != nil {
		// A managed server without CONFIG: accepted, and said to be
		// unverified.
		s := open(t, url, storetest.Prefix(t))
		defer s.Close()
		if s.DurabilityUnverified() == "" {
			t.Errorf("the shared server refuses CONFIG GET appendonly (%v), yet DurabilityUnverified() is empty", err)
		}
		return
	}
	volatile := aof["appendonly"] != "yes"
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{Prefix: storetest.Prefix(t)})
	switch {
	case volatile && !errors.Is(err, redisstore.ErrVolatile):
		t.Errorf("Open of the shared server (appendonly %q) without AllowVolatile: err = %v, want ErrVolatile", aof["appendonly"], err)
	case !volatile && err != nil:
		t.Errorf("Open of the shared server (appendonly yes): %v", err)
	}
	if err == nil {
		s.Close()
	}
	s = open(t, url, storetest.Prefix(t))
	defer s.Close()
	if got := s.Volatile() != ""; got != volatile {
		t.Errorf("Volatile() = %q with appendonly %q", s.Volatile(), aof["appendonly"])
	}
}

// TestKeyLayout pins the documented key names: other tools (and older
// processes during a rolling deploy) rely on them.
func TestKeyLayout(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	s := open(t, url, prefix)
	defer s.Close()
	hash := [32]byte{0xab, 31: 0xcd}
	created := time.Unix(1700000000, 5)
	steps := []error{
		s.CreateTenant(ctx, store.Tenant{ID: "t1", CreatedAt: created}),
		s.CreateAPIKey(ctx, store.APIKey{ID: "k1", TenantID: "t1", Hash: hash, CreatedAt: created}),
		s.PutFlowState(ctx, store.FlowState{State: "st", TenantID: "t1", ExpiresAt: time.Now().Add(time.Minute)}),
	}
	_, err := s.CreateAccount(ctx, store.Account{ID: "a1", TenantID: "t1", Connector: "codehost", ExternalID: "42", CreatedAt: created})
	steps = append(steps, err)
	release, held, err := s.TryLock(ctx, "refresh:a1", time.Minute)
	steps = append(steps, err)
	if err := errors.Join(steps...); err != nil || !held {
		t.Fatalf("setup: held %v, %v", held, err)
	}
	defer release()

	rdb := client(t, url)
	hexHash := fmt.Sprintf("%x", hash)
	want := map[string]string{ // key -> type
		"tenant:t1":                  "string",
		"tenants":                    "zset",
		"apikey:" + hexHash:          "string",
		"apikey-id:k1":               "string",
		"apikeys:t1":                 "zset",
		"account:t1:a1":              "string",
		"accounts:t1":                "zset",
		"account-ext:t1:codehost:42": "string",
		"flow:st":                    "string",
		"lock:refresh:a1":            "string",
	}
	if got := keysUnder(t, rdb, prefix); !maps.Equal(got, want) {
		t.Errorf("keys under the prefix (and their types):\n got %v\nwant %v", got, want)
	}
	if got := rdb.Get(ctx, prefix+"apikey-id:k1").Val(); got != hexHash {
		t.Errorf("apikey-id:k1 = %q, want %q", got, hexHash)
	}
	if got := rdb.ZScore(ctx, prefix+"apikeys:t1", hexHash).Val(); got != float64(created.UnixNano()) {
		t.Errorf("apikeys:t1 score of the key's hash = %v, want %v", got, float64(created.UnixNano()))
	}
	if got := rdb.Get(ctx, prefix+"account-ext:t1:codehost:42").Val(); got != "a1" {
		t.Errorf("account-ext = %q, want a1", got)
	}
	if got := rdb.ZScore(ctx, prefix+"accounts:t1", "a1").Val(); got != float64(created.UnixNano()) {
		t.Errorf("accounts:t1 score of a1 = %v, want %v", got, float64(created.UnixNano()))
	}
	for _, key := range []string{"flow:st", "lock:refresh:a1"} {
		if ttl := rdb.PTTL(ctx, prefix+key).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("%s: PTTL %s, want (0, 1m]", key, ttl)
		}
	}
	for _, key := range []string{"tenant:t1", "account:t1:a1", "apikey:" + hexHash} {
		if ttl := rdb.PTTL(ctx, prefix+key).Val(); ttl != -1 {
			t.Errorf("%s: PTTL %s, want none (-1)", key, ttl)
		}
	}
}

// TestTwoStores runs two Stores on the same prefix, as two processes
// would: compare-and-set, flow states and leases must hold across them.
func TestTwoStores(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	s1, s2 := open(t, url, prefix), open(t, url, prefix)
	defer s1.Close()
	defer s2.Close()

	a, err := s1.CreateAccount(ctx, store.Account{ID: "a1", TenantID: "t1", Connector: "codehost", ExternalID: "42"})
	if err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if _, err := s2.CreateAccount(ctx, store.Account{ID: "a2", TenantID: "t1", Connector: "codehost", ExternalID: "42"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateAccount of the same external id from the other store: err = %v, want ErrConflict", err)
	}
	b, err := s2.GetAccount(ctx, "t1", "a1")
	if err != nil {
		t.Fatalf("GetAccount from the other store: %v", err)
	}
	a.Login = "one"
	if _, err := s1.UpdateAccount(ctx, a); err != nil {
		t.Fatalf("UpdateAccount: %v", err)
	}
	b.Login = "two"
	if _, err := s2.UpdateAccount(ctx, b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale UpdateAccount from the other store: err = %v, want ErrConflict", err)
	}

	// Concurrent updates from both stores, all from version 2.
	cur, err := s2.GetAccount(ctx, "t1", "a1")
	if err != nil {
		t.Fatal(err)
	}
	stores := []*redisstore.Store{s1, s2}
	storetest.OneWins(t, "UpdateAccount across two stores", 20, func(i int) (store.Account, error) {
		c := cur
		c.Login = fmt.Sprint("writer-", i)
		return stores[i%len(stores)].UpdateAccount(ctx, c)
	})
	if got, err := s1.GetAccount(ctx, "t1", "a1"); err != nil || got.Version != 3 {
		t.Fatalf("GetAccount after concurrent updates: version %d, %v; want 3", got.Version, err)
	}

	// Leases.
	release, held, err := s1.TryLock(ctx, "refresh:a1", time.Minute)
	if err != nil || !held {
		t.Fatalf("TryLock on s1: held %v, %v", held, err)
	}
	if _, held, err := s2.TryLock(ctx, "refresh:a1", time.Minute); err != nil || held {
		t.Fatalf("TryLock on s2 of a lease s1 holds: held %v, %v", held, err)
	}
	release()
	release2, held, err := s2.TryLock(ctx, "refresh:a1", time.Minute)
	if err != nil || !held {
		t.Fatalf("TryLock on s2 after s1 released: held %v, %v", held, err)
	}
	release() // s1 again: must not touch s2's lease
	if _, held, err := s1.TryLock(ctx, "refresh:a1", time.Minute); err != nil || held {
		t.Fatalf("TryLock on s1 of a lease s2 holds: held %v, %v", held, err)
	}
	release2()

	// Flow states are taken once, whoever takes.
	if err := s1.PutFlowState(ctx, store.FlowState{State: "st", TenantID: "t1", ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.TakeFlowState(ctx, "st"); err != nil {
		t.Fatalf("TakeFlowState on s2: %v", err)
	}
	if _, err := s1.TakeFlowState(ctx, "st"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second TakeFlowState on s1: err = %v, want ErrNotFound", err)
	}
}

func TestReleaseAfterClose(t *testing.T) {
	s := open(t, storetest.RedisURL(t), storetest.Prefix(t))
	release, held, err := s.TryLock(t.Context(), "k", time.Minute)
	if err != nil || !held {
		t.Fatalf("TryLock: held %v, %v", held, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	release() // must not panic or block
}

// keysUnder returns the keys under prefix, without it, and their types.
func keysUnder(t *testing.T, rdb *redis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := t.Context()
	keys := map[string]string{}
	iter := rdb.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		keys[strings.TrimPrefix(iter.Val(), prefix)] = rdb.Type(ctx, iter.Val()).Val()
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// client returns a plain client of the server at url, to look at the keys
// under a prefix; it is closed when the test ends.
func client(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestDispatchKeyLayout pins the documented key names of the dispatcher's
// records, and checks that updates, replacements and deletions keep the
// sorted sets in step: nothing stale is left behind.
func TestDispatchKeyLayout(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	s := open(t, url, prefix)
	defer s.Close()
	rdb := client(t, url)

	created := time.Unix(1700000000, 5)
	var steps []error
	step := func(err error) { steps = append(steps, err) }
	_, err := s.CreateAgent(ctx, store.Agent{ID: "ag1", TenantID: "t1", CreatedAt: created})
	step(err)
	_, err = s.CreateTrigger(ctx, store.Trigger{ID: "tr1", TenantID: "t1", AccountID: "acc1", AgentID: "ag1", CreatedAt: created})
	step(err)
	_, err = s.CreateHook(ctx, store.Hook{ID: "h1", TenantID: "t1", AccountID: "acc1", Connector: "codehost",
		Scope: store.HookRepository, Target: "octo/hello", CreatedAt: created})
	step(err)
	r, err := s.CreateRun(ctx, store.Run{ID: "r1", TenantID: "t1", EventID: "ev1", TriggerID: "tr1", AgentID: "ag1", CreatedAt: created})
	step(err)
	step(s.PutEvent(ctx, store.EventRecord{TenantID: "t1", EventID: "ev1", DispatchedAt: created.Add(time.Second),
		Outcomes: []store.Outcome{{TriggerID: "tr1"}, {TriggerID: "tr2"}}}))
	_, err = s.PutCursor(ctx, store.Cursor{Key: "poll:acc1", Value: json.RawMessage(`1`)})
	step(err)
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("setup: %v", err)
	}

	want := map[string]string{
		"agent:ag1":   "string",
		"agents:t1":   "zset",
		"trigger:tr1": "string",
		"triggers:t1": "zset",
		"triggers":    "zset",
		"hook:h1":     "string",
		"hooks:t1":    "zset",
		"hooks":       "zset",
		"hook-key:t1:acc1:codehost:repository:octo/hello": "string",
		"run:r1":                "string",
		"runs":                  "zset",
		"runs:t1":               "zset",
		"trigger-runs:tr1":      "zset",
		"agent-runs:ag1":        "zset",
		"event-runs:t1:ev1":     "zset",
		"event:t1:ev1":          "string",
		"events":                "zset",
		"trigger-events:t1:tr1": "zset",
		"trigger-events:t1:tr2": "zset",
		"cursor:poll:acc1":      "string",
	}
	if got := keysUnder(t, rdb, prefix); !maps.Equal(got, want) {
		t.Fatalf("keys after creates:\n got %v\nwant %v", got, want)
	}
	if got := rdb.Get(ctx, prefix+"hook-key:t1:acc1:codehost:repository:octo/hello").Val(); got != "h1" {
		t.Errorf("hook-key = %q, want h1", got)
	}
	for _, z := range []struct {
		key, member string
		at          time.Time
	}{
		{"agents:t1", "ag1", created},
		{"triggers", "tr1", created},
		{"hooks:t1", "h1", created},
		{"runs:t1", "r1", created},
		{"trigger-runs:tr1", "r1", created},
		{"trigger-events:t1:tr1", "ev1", created.Add(time.Second)},
		{"events", "t1:ev1", created.Add(time.Second)},
	} {
		if got := rdb.ZScore(ctx, prefix+z.key, z.member).Val(); got != float64(z.at.UnixNano()) {
			t.Errorf("%s score of %s = %v, want %v", z.key, z.member, got, float64(z.at.UnixNano()))
		}
	}

	r.TriggerID, r.AgentID, r.EventID = "tr2", "ag2", "ev2"
	r, err = s.UpdateRun(ctx, r)
	step(err)
	step(s.PutEvent(ctx, store.EventRecord{TenantID: "t1", EventID: "ev1", DispatchedAt: created,
		Outcomes: []store.Outcome{{TriggerID: "tr3"}}}))
	step(s.DeleteAgent(ctx, "t1", "ag1"))
	step(s.DeleteTrigger(ctx, "t1", "tr1"))
	step(s.DeleteHook(ctx, "h1"))
	if err := errors.Join(steps...); err != nil {
		t.Fatalf("moves and deletions: %v", err)
	}
	want = map[string]string{
		"run:r1":                "string",
		"runs":                  "zset",
		"runs:t1":               "zset",
		"trigger-runs:tr2":      "zset",
		"agent-runs:ag2":        "zset",
		"event-runs:t1:ev2":     "zset",
		"event:t1:ev1":          "string",
		"events":                "zset",
		"trigger-events:t1:tr3": "zset",
		"cursor:poll:acc1":      "string",
	}
	if got := keysUnder(t, rdb, prefix); !maps.Equal(got, want) {
		t.Fatalf("keys after moves and deletions:\n got %v\nwant %v", got, want)
	}
	if got := rdb.ZScore(ctx, prefix+"events", "t1:ev1").Val(); got != float64(created.UnixNano()) {
		t.Errorf("events score of t1:ev1 after a replace = %v, want %v", got, float64(created.UnixNano()))
	}

	// Pruning deletes the records from every sorted set.
	r.Status, r.FinishedAt = store.RunSucceeded, created.Add(time.Minute)
	_, err = s.UpdateRun(ctx, r)
	step(err)
	later := created.Add(24 * time.Hour)
	if n, err := s.PruneRuns(ctx, later, 0); err != nil || n != 1 {
		t.Fatalf("PruneRuns = %d, %v; want 1", n, err)
	}
	if n, err := s.PruneEvents(ctx, later, 0); err != nil || n != 1 {
		t.Fatalf("PruneEvents = %d, %v; want 1", n, err)
	}
	want = map[string]string{
		"cursor:poll:acc1": "string",
		"events-indexed":   "string",
	}
	if got := keysUnder(t, rdb, prefix); !maps.Equal(got, want) {
		t.Fatalf("keys after pruning:\n got %v\nwant %v", got, want)
	}
}

// TestPruneEventsIndexesOldRecords prunes event records written before
// the events sorted set existed, under a prefix with glob characters: the
// first PruneEvents of a Store finds them by SCAN, and only them (not the
// records of another prefix that the unescaped pattern would match), then
// marks the prefix as indexed.
func TestPruneEventsIndexesOldRecords(t *testing.T) {
	ctx := t.Context()
	url, base := storetest.RedisURL(t), storetest.Prefix(t)
	rdb := client(t, url)
	// Unescaped, the first prefix's pattern misses its own keys and
	// matches the second's.
	prefix, other := "a[b]*?\\:", "abcd:"
	s, o := open(t, url, base+prefix), open(t, url, base+other)
	defer s.Close()
	defer o.Close()
	old, cutoff := time.Unix(1700000000, 5), time.Unix(1700003600, 0)
	put := func(s *redisstore.Store, tenant, id string, at time.Time, trigger string) {
		t.Helper()
		if err := s.PutEvent(ctx, store.EventRecord{TenantID: tenant, EventID: id, DispatchedAt: at, Outcomes: []store.Outcome{{TriggerID: trigger}}}); err != nil {
			t.Fatalf("PutEvent %s: %v", id, err)
		}
	}
	put(s, "t1", "e1", old, "trA")
	put(s, "t2", "e2", old.Add(time.Minute), "trA")
	put(s, "t1", "e3", cutoff, "trB")
	put(o, "t1", "e9", old, "trA")
	// As the data was: no events sorted sets.
	if err := rdb.Del(ctx, base+prefix+"events", base+other+"events").Err(); err != nil {
		t.Fatal(err)
	}
	under := func(p string) map[string]string {
		t.Helper()
		keys := map[string]string{}
		for k, typ := range keysUnder(t, rdb, base) {
			if rest, ok := strings.CutPrefix(k, p); ok {
				keys[rest] = typ
			}
		}
		return keys
	}

	s2 := open(t, url, base+prefix)
	defer s2.Close()
	put(s2, "t1", "e4", old.Add(time.Second), "trC") // in events already
	if n, err := s2.PruneEvents(ctx, cutoff, 0); err != nil || n != 3 {
		t.Fatalf("PruneEvents = %d, %v; want 3", n, err)
	}
	want := map[string]string{
		"event:t1:e3":           "string",
		"events":                "zset",
		"events-indexed":        "string",
		"trigger-events:t1:trB": "zset",
	}
	if got := under(prefix); !maps.Equal(got, want) {
		t.Errorf("keys of the pruned prefix:\n got %v\nwant %v", got, want)
	}
	if got := rdb.ZRange(ctx, base+prefix+"events", 0, -1).Val(); len(got) != 1 || got[0] != "t1:e3" {
		t.Errorf("events = %q, want [t1:e3]", got)
	}
	want = map[string]string{
		"event:t1:e9":           "string",
		"trigger-events:t1:trA": "zset",
	}
	if got := under(other); !maps.Equal(got, want) {
		t.Errorf("keys of the other prefix:\n got %v\nwant %v", got, want)
	}

	// Once the prefix is marked, Stores do not look again.
	if err := rdb.Del(ctx, base+prefix+"events").Err(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, url, base+prefix)
	defer s3.Close()
	if n, err := s3.PruneEvents(ctx, cutoff.Add(time.Hour), 0); err != nil || n != 0 {
		t.Fatalf("PruneEvents on a marked prefix without events = %d, %v; want 0", n, err)
	}
	if err := rdb.Del(ctx, base+prefix+"events-indexed").Err(); err != nil {
		t.Fatal(err)
	}
	s4 := open(t, url, base+prefix)
	defer s4.Close()
	if n, err := s4.PruneEvents(ctx, cutoff.Add(time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("PruneEvents after the mark was deleted = %d, %v; want 1", n, err)
	}
}

// TestListAPIKeysIndexesOldKeys lists and deletes API keys written before
// the apikeys sorted sets existed, under a prefix with glob characters: the
// first ListAPIKeys of a Store finds them by SCAN, and only them (not the
// keys of another prefix that the unescaped pattern would match), then
// marks the prefix as indexed. Without that, a tenant's key made by an
// older triggerd could be neither listed nor revoked.
func TestListAPIKeysIndexesOldKeys(t *testing.T) {
	ctx := t.Context()
	url, base := storetest.RedisURL(t), storetest.Prefix(t)
	rdb := client(t, url)
	prefix, other := "a[b]*?\\:", "abcd:"
	s, o := open(t, url, base+prefix), open(t, url, base+other)
	defer s.Close()
	defer o.Close()
	created := time.Unix(1700000000, 5)
	old1 := store.APIKey{ID: "k1", TenantID: "t1", Hash: [32]byte{1}, Name: "initial", CreatedAt: created}
	old2 := store.APIKey{ID: "k2", TenantID: "t1", Hash: [32]byte{2}, Name: "ci", CreatedAt: created.Add(time.Second)}
	oldOther := store.APIKey{ID: "k3", TenantID: "t2", Hash: [32]byte{3}, Name: "theirs", CreatedAt: created}
	for _, k := range []store.APIKey{old1, old2, oldOther} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.ID, err)
		}
	}
	if err := o.CreateAPIKey(ctx, store.APIKey{ID: "k9", TenantID: "t1", Hash: [32]byte{9}, CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	// As the data was: no apikeys sorted sets.
	if err := rdb.Del(ctx, base+prefix+"apikeys:t1", base+prefix+"apikeys:t2", base+other+"apikeys:t1").Err(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, url, base+prefix)
	defer s2.Close()
	fresh := store.APIKey{ID: "k4", TenantID: "t1", Hash: [32]byte{4}, Name: "new", CreatedAt: created.Add(time.Minute)}
	if err := s2.CreateAPIKey(ctx, fresh); err != nil { // in its set already
		t.Fatal(err)
	}
	ids := func(s *redisstore.Store, tenant string) string {
		t.Helper()
		ks, err := s.ListAPIKeys(ctx, tenant)
		if err != nil {
			t.Fatalf("ListAPIKeys %s: %v", tenant, err)
		}
		var out []string
		for _, k := range ks {
			out = append(out, k.ID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(s2, "t1"); got != "k1,k2,k4" {
		t.Errorf("ListAPIKeys t1 = %s, want k1,k2,k4", got)
	}
	if got := ids(s2, "t2"); got != "k3" {
		t.Errorf("ListAPIKeys t2 = %s, want k3", got)
	}
	if n := rdb.Exists(ctx, base+prefix+"apikeys-indexed").Val(); n != 1 {
		t.Errorf("apikeys-indexed is not set after the first ListAPIKeys")
	}
	if n := rdb.Exists(ctx, base+other+"apikeys:t1", base+other+"apikeys-indexed").Val(); n != 0 {
		t.Errorf("indexing one prefix wrote %d keys under another", n)
	}
	// An indexed old key is deleted like a new one.
	if err := s2.DeleteAPIKey(ctx, "t1", "k1"); err != nil {
		t.Fatalf("DeleteAPIKey of an old key: %v", err)
	}
	if got := ids(s2, "t1"); got != "k2,k4" {
		t.Errorf("ListAPIKeys t1 after deleting k1 = %s, want k2,k4", got)
	}
	if err := rdb.ZScore(ctx, base+prefix+"apikeys:t1", fmt.Sprintf("%x", old1.Hash)).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("apikeys:t1 still holds the deleted key's hash (ZSCORE: %v)", err)
	}
	for _, k := range []string{"apikey-id:k1", fmt.Sprintf("apikey:%x", old1.Hash)} {
		if n := rdb.Exists(ctx, base+prefix+k).Val(); n != 0 {
			t.Errorf("%s is left after DeleteAPIKey", k)
		}
	}

	// Once the prefix is marked, Stores do not look again.
	if err := rdb.Del(ctx, base+prefix+"apikeys:t2").Err(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, url, base+prefix)
	defer s3.Close()
	if got := ids(s3, "t2"); got != "" {
		t.Errorf("ListAPIKeys t2 on a marked prefix without its set = %s, want none", got)
	}
}

// TestDeleteAPIKeyIndexesOldKeys deletes a key made before the apikeys
// sets existed, before any ListAPIKeys: DeleteAPIKey indexes the tenant's
// old keys first, so that it counts them all, and refuses the last one.
func TestDeleteAPIKeyIndexesOldKeys(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	rdb := client(t, url)
	s := open(t, url, prefix)
	defer s.Close()
	created := time.Unix(1700000000, 5)
	old1 := store.APIKey{ID: "k1", TenantID: "t1", Hash: [32]byte{1}, Name: "initial", CreatedAt: created}
	old2 := store.APIKey{ID: "k2", TenantID: "t1", Hash: [32]byte{2}, Name: "ci", CreatedAt: created.Add(time.Second)}
	for _, k := range []store.APIKey{old1, old2} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.ID, err)
		}
	}
	// As the data was: no apikeys sorted set.
	if err := rdb.Del(ctx, prefix+"apikeys:t1").Err(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t, url, prefix)
	defer s2.Close()
	if err := s2.DeleteAPIKey(ctx, "t1", "k1"); err != nil {
		t.Fatalf("DeleteAPIKey of one of two old keys: %v", err)
	}
	if err := s2.DeleteAPIKey(ctx, "t1", "k2"); !errors.Is(err, store.ErrLastAPIKey) {
		t.Fatalf("DeleteAPIKey of the old key left: err = %v, want ErrLastAPIKey", err)
	}
	if _, err := s2.APIKeyByHash(ctx, old2.Hash); err != nil {
		t.Fatalf("APIKeyByHash of the refused key: %v", err)
	}
}

// TestDeleteAPIKeyStaleMembers gives a tenant's apikeys set members without
// a record of the tenant (an index racing a delete can leave one): they do
// not count as keys, so the tenant's only key is still refused.
func TestDeleteAPIKeyStaleMembers(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	rdb := client(t, url)
	s := open(t, url, prefix)
	defer s.Close()
	only := store.APIKey{ID: "k1", TenantID: "t1", Hash: [32]byte{1}, Name: "only", CreatedAt: time.Unix(1700000000, 0)}
	theirs := store.APIKey{ID: "k2", TenantID: "t2", Hash: [32]byte{2}, Name: "theirs", CreatedAt: time.Unix(1700000000, 0)}
	for _, k := range []store.APIKey{only, theirs} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.ID, err)
		}
	}
	stale := []redis.Z{
		{Score: 1, Member: fmt.Sprintf("%x", [32]byte{9})}, // no record
		{Score: 2, Member: fmt.Sprintf("%x", theirs.Hash)}, // another tenant's record
	}
	if err := rdb.ZAdd(ctx, prefix+"apikeys:t1", stale...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(ctx, "t1", "k1"); !errors.Is(err, store.ErrLastAPIKey) {
		t.Fatalf("DeleteAPIKey of the only key beside stale members: err = %v, want ErrLastAPIKey", err)
	}
	if _, err := s.APIKeyByHash(ctx, only.Hash); err != nil {
		t.Fatalf("APIKeyByHash of the refused key: %v", err)
	}
	// A real second key counts.
	if err := s.CreateAPIKey(ctx, store.APIKey{ID: "k3", TenantID: "t1", Hash: [32]byte{3}, CreatedAt: time.Unix(1700000001, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(ctx, "t1", "k1"); err != nil {
		t.Fatalf("DeleteAPIKey with a second key: %v", err)
	}
}

// TestTwoStoresAPIKeys has two Stores on one prefix, as two processes,
// delete both of a tenant's two keys at once: one delete wins each time,
// and the tenant keeps a key.
func TestTwoStoresAPIKeys(t *testing.T) {
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	var stores []store.Store
	for range 2 {
		s := open(t, url, prefix)
		defer s.Close()
		stores = append(stores, s)
	}
	storetest.ConcurrentDeletesOfLastTwo(t, stores)
}

// TestTwoStoresRuns has two Stores on one prefix, as two processes, race
// to create and to update one run: each time, exactly one wins.
func TestTwoStoresRuns(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	stores := []*redisstore.Store{open(t, url, prefix), open(t, url, prefix)}
	defer stores[0].Close()
	defer stores[1].Close()

	storetest.OneWins(t, "CreateRun across two stores", 20, func(i int) (store.Run, error) {
		return stores[i%len(stores)].CreateRun(ctx, store.Run{ID: "r1", TenantID: "t1", TriggerID: "tr1", ClaimedBy: fmt.Sprint("worker-", i)})
	})
	cur, err := stores[1].GetRun(ctx, "t1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	storetest.OneWins(t, "UpdateRun across two stores", 20, func(i int) (store.Run, error) {
		r := cur
		r.Status = store.RunStarted
		r.ClaimedBy = fmt.Sprint("worker-", i)
		return stores[i%len(stores)].UpdateRun(ctx, r)
	})
	storetest.OneWins(t, "PutCursor across two stores", 20, func(i int) (store.Cursor, error) {
		return stores[i%len(stores)].PutCursor(ctx, store.Cursor{Key: "k", Value: json.RawMessage(fmt.Sprint(i))})
	})
	rs, err := stores[0].ListRuns(ctx, store.RunFilter{TenantID: "t1", Status: store.RunStarted})
	if err != nil || len(rs) != 1 || rs[0].Version != 2 {
		t.Fatalf("ListRuns after the races = %+v, %v; want r1 at version 2", rs, err)
	}
}

// TestConcurrentPutEvent has two Stores replace one event record
// concurrently, each with other outcomes: afterwards only the triggers of
// the record that stayed list it (a put whose read went stale must not
// leave the triggers of the record it replaced behind).
func TestConcurrentPutEvent(t *testing.T) {
	ctx := t.Context()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	stores := []*redisstore.Store{open(t, url, prefix), open(t, url, prefix)}
	defer stores[0].Close()
	defer stores[1].Close()
	rdb := client(t, url)

	for round := range 5 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 10 {
			wg.Go(func() {
				<-start
				e := store.EventRecord{TenantID: "t1", EventID: "ev1", DispatchedAt: time.Unix(int64(round), 0),
					Outcomes: []store.Outcome{{TriggerID: "common"}, {TriggerID: fmt.Sprintf("tr%d-%d", round, i)}}}
				if err := stores[i%2].PutEvent(ctx, e); err != nil {
					t.Errorf("PutEvent: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	e, err := stores[0].GetEvent(ctx, "t1", "ev1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"event:t1:ev1": "string", "events": "zset"}
	for _, o := range e.Outcomes {
		want["trigger-events:t1:"+o.TriggerID] = "zset"
	}
	if got := keysUnder(t, rdb, prefix); !maps.Equal(got, want) {
		t.Fatalf("keys after concurrent puts:\n got %v\nwant %v", got, want)
	}
}
