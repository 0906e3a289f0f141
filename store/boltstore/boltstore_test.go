package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/internal/testenv"
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
	c := testenv.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
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
	c := testenv.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
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

// TestIndexesFollowRecords checks that the index buckets hold exactly one
// entry per indexed record: moves, replacements and deletions leave no
// stale entries behind (the lists would hide them, but they would pile
// up).
func TestIndexesFollowRecords(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "triggerd.db"), Options{})
	defer s.Close()
	created := time.Date(2025, 1, 1, 0, 0, 0, 5, time.UTC)

	wantCounts := func(what string, want map[string]int) {
		t.Helper()
		for _, b := range buckets {
			if got := count(t, s, b); got != want[string(b)] {
				t.Errorf("%s: %s holds %d keys, want %d", what, b, got, want[string(b)])
			}
		}
	}
	_, err := s.CreateAgent(ctx, store.Agent{ID: "ag1", TenantID: "t1", CreatedAt: created})
	must(t, err)
	_, err = s.CreateTrigger(ctx, store.Trigger{ID: "tr1", TenantID: "t1", AccountID: "acc1", AgentID: "ag1", CreatedAt: created})
	must(t, err)
	h, err := s.CreateHook(ctx, store.Hook{ID: "h1", TenantID: "t1", AccountID: "acc1", Connector: "codehost", Scope: store.HookRepository, Target: "octo/hello"})
	must(t, err)
	r, err := s.CreateRun(ctx, store.Run{ID: "r1", TenantID: "t1", EventID: "ev1", TriggerID: "tr1", AgentID: "ag1", CreatedAt: created})
	must(t, err)
	_, err = s.CreateRun(ctx, store.Run{ID: "r2", TenantID: "t1", CreatedAt: created}) // no trigger, agent or event
	must(t, err)
	must(t, s.PutEvent(ctx, store.EventRecord{TenantID: "t1", EventID: "ev1", DispatchedAt: created,
		Outcomes: []store.Outcome{{TriggerID: "tr1"}, {TriggerID: "tr2"}, {TriggerID: "tr1"}}}))
	_, err = s.PutCursor(ctx, store.Cursor{Key: "k"})
	must(t, err)
	afterCreates := map[string]int{
		"agents": 1, "agent-tenant": 1, "triggers": 1, "trigger-tenant": 1,
		"hooks": 1, "hook-tenant": 1, "hook-key": 1,
		"runs": 2, "run-time": 2, "run-tenant": 2, "run-trigger": 1, "run-agent": 1, "run-event": 1,
		"events": 1, "event-trigger": 2, "event-time": 1, "cursors": 1,
	}
	wantCounts("after creates", afterCreates)

	// An update that moves nothing keeps every entry, and touches none:
	// moveIndexes deletes and puts only the difference.
	before := r
	r.Status = store.RunStarted
	r, err = s.UpdateRun(ctx, r)
	must(t, err)
	wantCounts("after a status update", afterCreates)
	if gone, added := without(runIndexes(before), runIndexes(r)), without(runIndexes(r), runIndexes(before)); len(gone)+len(added) != 0 {
		t.Errorf("a status update would move index entries: delete %v, put %v", gone, added)
	}

	before = r
	r.TriggerID, r.AgentID, r.EventID, r.CreatedAt = "tr2", "ag2", "ev2", created.Add(time.Hour)
	r, err = s.UpdateRun(ctx, r)
	must(t, err)
	// Every entry of r1 moves (its time is in each key): five out, five in.
	if gone, added := without(runIndexes(before), runIndexes(r)), without(runIndexes(r), runIndexes(before)); len(gone) != 5 || len(added) != 5 {
		t.Errorf("moving r1 deletes %d and puts %d index entries, want 5 and 5", len(gone), len(added))
	}
	if rs, err := s.ListRuns(ctx, store.RunFilter{TenantID: "t1", Limit: 1}); err != nil || len(rs) != 1 || rs[0].ID != "r1" {
		t.Fatalf("ListRuns after moving r1 to a later time = %+v, %v; want r1", rs, err)
	}
	must(t, s.PutEvent(ctx, store.EventRecord{TenantID: "t1", EventID: "ev1", DispatchedAt: created.Add(time.Hour),
		Outcomes: []store.Outcome{{TriggerID: "tr3"}}}))
	must(t, s.DeleteAgent(ctx, "t1", "ag1"))
	must(t, s.DeleteTrigger(ctx, "t1", "tr1"))
	must(t, s.DeleteHook(ctx, h.ID))
	wantCounts("after moves and deletions", map[string]int{
		"runs": 2, "run-time": 2, "run-tenant": 2, "run-trigger": 1, "run-agent": 1, "run-event": 1,
		"events": 1, "event-trigger": 1, "event-time": 1, "cursors": 1,
	})

	// Pruning deletes every entry of the records it deletes.
	r.Status, r.FinishedAt = store.RunSucceeded, created.Add(2*time.Hour)
	_, err = s.UpdateRun(ctx, r)
	must(t, err)
	r2, err := s.GetRun(ctx, "t1", "r2")
	must(t, err)
	r2.Status = store.RunFailed
	_, err = s.UpdateRun(ctx, r2)
	must(t, err)
	later := created.Add(24 * time.Hour)
	if n, err := s.PruneRuns(ctx, later, 0); err != nil || n != 2 {
		t.Fatalf("PruneRuns = %d, %v; want 2", n, err)
	}
	if n, err := s.PruneEvents(ctx, later, 0); err != nil || n != 1 {
		t.Fatalf("PruneEvents = %d, %v; want 1", n, err)
	}
	wantCounts("after pruning", map[string]int{"cursors": 1})
}

// TestPruneEventsOfOldFile opens a file written before event-time
// existed: Open indexes its event records, so PruneEvents finds them.
func TestPruneEventsOfOldFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "triggerd.db")
	s := open(t, path, Options{})
	old, recent := time.Date(2025, 1, 1, 0, 0, 0, 5, time.UTC), time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i, at := range []time.Time{old, old.Add(time.Hour), recent, old.Add(time.Minute)} {
		must(t, s.PutEvent(ctx, store.EventRecord{TenantID: fmt.Sprintf("t%d", i%2), EventID: fmt.Sprintf("ev%d", i), DispatchedAt: at,
			Outcomes: []store.Outcome{{TriggerID: "tr1"}}}))
	}
	// As the file was: no event-time bucket.
	must(t, s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketEventTime) }))
	must(t, s.Close())

	s = open(t, path, Options{})
	defer func() { _ = s.Close() }() // the last store opened
	if n := count(t, s, bucketEventTime); n != 4 {
		t.Fatalf("after reopening, event-time holds %d keys, want 4", n)
	}
	if n, err := s.PruneEvents(ctx, old.Add(time.Hour), 0); err != nil || n != 2 {
		t.Fatalf("PruneEvents = %d, %v; want 2 (ev0, ev3)", n, err)
	}
	for i, want := range []error{store.ErrNotFound, nil, nil, store.ErrNotFound} {
		if _, err := s.GetEvent(ctx, fmt.Sprintf("t%d", i%2), fmt.Sprintf("ev%d", i)); !errors.Is(err, want) {
			t.Errorf("GetEvent ev%d after pruning: err = %v, want %v", i, err, want)
		}
	}
	if n, m := count(t, s, bucketEventTime), count(t, s, bucketEventTrigger); n != 2 || m != 2 {
		t.Fatalf("after pruning, event-time and event-trigger hold %d and %d keys, want 2 and 2", n, m)
	}
	// Indexed once: opening again adds nothing.
	must(t, s.Close())
	s = open(t, path, Options{})
	if n := count(t, s, bucketEventTime); n != 2 {
		t.Fatalf("after reopening again, event-time holds %d keys, want 2", n)
	}
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestTimeKeyOrder checks that timeKey sorts times as time does, far
// beyond what UnixNano can hold, whatever the zone.
func TestTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 999999999, time.UTC),
		time.Unix(-1, 0),
		time.Unix(-1, 1),
		time.Unix(0, 0),
		time.Unix(0, 1),
		time.Unix(1, 0).In(time.FixedZone("X", 3600)),
		time.Unix(1, 1),
		time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		if a, b := timeKey(times[i-1]), timeKey(times[i]); bytes.Compare(a, b) >= 0 {
			t.Errorf("timeKey(%v) = %x is not before timeKey(%v) = %x", times[i-1], a, times[i], b)
		}
	}
	if a, b := timeKey(times[6]), timeKey(times[6].UTC()); !bytes.Equal(a, b) {
		t.Errorf("timeKey depends on the zone: %x, %x", a, b)
	}
}
