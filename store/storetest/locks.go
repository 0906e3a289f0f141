package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
)

// tryLock is TryLock that fails the test on error.
func tryLock(t *testing.T, s store.Store, key string, ttl time.Duration) (func(), bool) {
	t.Helper()
	release, held, err := s.TryLock(t.Context(), key, ttl)
	must(t, "TryLock "+key, err)
	if held && release == nil {
		t.Fatalf("TryLock %s: held with a nil release", key)
	}
	return release, held
}

// waitLock polls TryLock until it holds key.
func waitLock(t *testing.T, s store.Store, key string, ttl time.Duration) func() {
	t.Helper()
	var release func()
	testenv.Eventually(t, waitTimeout, "lease "+key+" to expire", func() bool {
		var held bool
		release, held = tryLock(t, s, key, ttl)
		return held
	})
	return release
}

func testLockHeld(t *testing.T, s store.Store) {
	release, held := tryLock(t, s, "refresh:a1", longTTL)
	if !held {
		t.Fatal("first TryLock: held = false")
	}
	if _, held := tryLock(t, s, "refresh:a1", longTTL); held {
		t.Fatal("second TryLock of a held lease: held = true")
	}
	other, held := tryLock(t, s, "refresh:a2", longTTL)
	if !held {
		t.Fatal("TryLock of another key: held = false")
	}
	release()
	release() // harmless
	again, held := tryLock(t, s, "refresh:a1", longTTL)
	if !held {
		t.Fatal("TryLock after release: held = false")
	}
	if _, held := tryLock(t, s, "refresh:a2", longTTL); held {
		t.Fatal("releasing a1 released a2")
	}
	again()
	other()
}

func testLockConcurrent(t *testing.T, s store.Store) {
	const n = 10
	var mu sync.Mutex
	var releases []func()
	errNotHeld := errors.New("not held")
	wins := runConcurrently(t, n, errNotHeld, func(int) error {
		release, held, err := s.TryLock(t.Context(), "k", longTTL)
		if err != nil {
			return err
		}
		if !held {
			return errNotHeld
		}
		mu.Lock()
		releases = append(releases, release)
		mu.Unlock()
		return nil
	})
	if wins != 1 {
		t.Fatalf("%d of %d concurrent TryLocks held the lease, want exactly 1", wins, n)
	}
	for _, r := range releases {
		r()
	}
}

func testLockExpiry(t *testing.T, s store.Store) {
	start := time.Now()
	if _, held := tryLock(t, s, "k", shortTTL); !held {
		t.Fatal("first TryLock: held = false")
	}
	_, held := tryLock(t, s, "k", longTTL)
	if held && time.Since(start) < shortTTL/2 {
		t.Fatal("second TryLock within the ttl: held = true")
	}
	if !held {
		waitLock(t, s, "k", longTTL)()
	}
	if time.Since(start) < shortTTL {
		t.Fatalf("lease with ttl %s taken again after %s", shortTTL, time.Since(start))
	}
}

func testLockStaleRelease(t *testing.T, s store.Store) {
	stale, held := tryLock(t, s, "k", shortTTL)
	if !held {
		t.Fatal("first TryLock: held = false")
	}
	current := waitLock(t, s, "k", longTTL) // after the first lease expired
	stale()                                 // must not release the current holder's lease
	if _, held := tryLock(t, s, "k", longTTL); held {
		t.Fatal("the expired holder's release released the current holder's lease")
	}
	current()
	if release, held := tryLock(t, s, "k", longTTL); !held {
		t.Fatal("TryLock after the current holder released: held = false")
	} else {
		release()
	}
}
