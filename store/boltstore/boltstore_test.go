package boltstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/storetest"
)

func open(t *testing.T, path string, o Options) *Store {
	t.Helper()
	s, err := Open(path, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) store.Store {
			return open(t, filepath.Join(t.TempDir(), "triggerd.db"), Options{})
		},
		Reopen: func(t *testing.T, old store.Store) store.Store {
			path := old.(*Store).Path()
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, path, Options{})
		},
	})
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "triggerd.db")
	s := open(t, path, Options{})
	defer s.Close()

	const timeout = 200 * time.Millisecond
	start := time.Now()
	s2, err := Open(path, Options{OpenTimeout: timeout})
	elapsed := time.Since(start)
	if err == nil {
		s2.Close()
		t.Fatal("second Open of a file in use succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("err = %v, want ErrLocked", err)
	}
	for _, want := range []string{path, "another triggerd process is probably using this data dir", "--redis-url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if elapsed < timeout/2 || elapsed > timeout+time.Second {
		t.Errorf("second Open failed after %s, want about %s", elapsed, timeout)
	}

	// Once the first closes, the file can be opened again.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	open(t, path, Options{OpenTimeout: timeout}).Close()
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := filepath.Join(dir, "triggerd.db")
	s := open(t, path, Options{})
	defer s.Close()
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700}, {path, 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, got, c.mode)
		}
	}
}

// clock is a settable Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// count returns the number of keys in a bucket.
func count(t *testing.T, s *Store, bucket []byte) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFlowStatesPurged(t *testing.T) {
	ctx := t.Context()
	c := &clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := open(t, filepath.Join(t.TempDir(), "triggerd.db"), Options{Now: c.Now})
	defer s.Close()

	put := func(state string, ttl time.Duration) {
		t.Helper()
		f := store.FlowState{State: state, TenantID: "t1", CreatedAt: c.Now(), ExpiresAt: c.Now().Add(ttl)}
		if err := s.PutFlowState(ctx, f); err != nil {
			t.Fatalf("PutFlowState: %v", err)
		}
	}
	for i := range 5 {
		put(fmt.Sprintf("short-%d", i), time.Minute)
	}
	put("long", time.Hour)
	put("long", time.Hour) // replacing keeps one expiry entry
	if n := count(t, s, bucketFlows); n != 6 {
		t.Fatalf("%d flow states, want 6", n)
	}
	if n := count(t, s, bucketFlowExpiry); n != 6 {
		t.Fatalf("%d expiry entries, want 6", n)
	}

	c.Advance(time.Minute) // the short ones expire now
	if _, err := s.TakeFlowState(ctx, "short-0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TakeFlowState of an expired state: err = %v, want ErrNotFound", err)
	}
	put("new", time.Hour)
	if n := count(t, s, bucketFlows); n != 2 {
		t.Fatalf("after a put, %d flow states, want 2 (long, new)", n)
	}
	if n := count(t, s, bucketFlowExpiry); n != 2 {
		t.Fatalf("after a put, %d expiry entries, want 2", n)
	}
	for _, state := range []string{"long", "new"} {
		if _, err := s.TakeFlowState(ctx, state); err != nil {
			t.Fatalf("TakeFlowState %s: %v", state, err)
		}
	}
	if n := count(t, s, bucketFlows) + count(t, s, bucketFlowExpiry); n != 0 {
		t.Fatalf("after taking every state, %d keys left", n)
	}
}

func TestLeasesFollowNow(t *testing.T) {
	ctx := t.Context()
	c := &clock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := open(t, filepath.Join(t.TempDir(), "triggerd.db"), Options{Now: c.Now})
	defer s.Close()

	tryLock := func(key string) (func(), bool) {
		t.Helper()
		release, held, err := s.TryLock(ctx, key, time.Minute)
		if err != nil {
			t.Fatalf("TryLock: %v", err)
		}
		return release, held
	}
	stale, held := tryLock("k")
	if !held {
		t.Fatal("first TryLock: held = false")
	}
	c.Advance(time.Minute - time.Nanosecond)
	if _, held := tryLock("k"); held {
		t.Fatal("TryLock just before expiry: held = true")
	}
	c.Advance(time.Nanosecond)
	current, held := tryLock("k")
	if !held {
		t.Fatal("TryLock at expiry: held = false")
	}
	stale()
	if _, held := tryLock("k"); held {
		t.Fatal("stale release released the current lease")
	}
	current()
	if _, held := tryLock("k"); !held {
		t.Fatal("TryLock after release: held = false")
	}
	// Expired leases do not pile up.
	c.Advance(time.Hour)
	tryLock("other")
	s.mu.Lock()
	n := len(s.leases)
	s.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d leases in memory, want 1", n)
	}
}
