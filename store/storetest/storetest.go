// Package storetest is the conformance suite that every store.Store
// backend must pass, plus helpers for tests that need a Redis server.
//
// A backend's test calls Run with a Backend that opens fresh stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Backend{Open: ..., Reopen: ...})
//	}
//
// Expiry (of flow states and leases) is checked against the real clock,
// with short lifetimes and polling, so that a server-side TTL is tested as
// honestly as an in-process clock.
package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// Backend is a store implementation under test.
type Backend struct {
	// Open returns a store over new, empty data (a new file, a new key
	// prefix, ...). The suite closes it. Subtests run in parallel, each
	// with its own store.
	Open func(t *testing.T) store.Store
	// Reopen closes old and returns a store over the same data, as the
	// process would see it after a restart. The suite closes the new
	// store. If nil, the persistence test is skipped.
	Reopen func(t *testing.T, old store.Store) store.Store
}

// Lifetimes used by the expiry tests, and how long to wait for expiry.
const (
	shortTTL    = 150 * time.Millisecond
	longTTL     = time.Minute
	waitTimeout = 5 * time.Second
)

// base is a creation time with nanoseconds and a zone other than UTC, to
// check that times round-trip.
var base = time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	if b.Open == nil {
		t.Fatal("storetest: Backend.Open is nil")
	}
	open := func(t *testing.T) store.Store {
		t.Helper()
		s := b.Open(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"Tenants", testTenants},
		{"APIKeys", testAPIKeys},
		{"APIKeys/List", testAPIKeyList},
		{"APIKeys/Delete", testAPIKeyDelete},
		{"APIKeys/DeleteLast", testAPIKeyDeleteLast},
		{"APIKeys/ConcurrentDeletes", testAPIKeyConcurrentDeletes},
		{"APIKeys/ConcurrentDeletesOfLastTwo", testAPIKeyConcurrentDeletesOfLastTwo},
		{"Accounts/CreateGet", testAccountCreateGet},
		{"Accounts/DefaultTimes", testAccountDefaultTimes},
		{"Accounts/Find", testAccountFind},
		{"Accounts/DuplicateExternalID", testAccountDuplicateExternalID},
		{"Accounts/List", testAccountList},
		{"Accounts/Update", testAccountUpdate},
		{"Accounts/UpdateExternalID", testAccountUpdateExternalID},
		{"Accounts/ConcurrentUpdates", testAccountConcurrentUpdates},
		{"Accounts/RoundTrip", testAccountRoundTrip},
		{"RateLimits", testRateLimits},
		{"FlowStates/TakeOnce", testFlowTakeOnce},
		{"FlowStates/ConcurrentTakes", testFlowConcurrentTakes},
		{"FlowStates/Expiry", testFlowExpiry},
		{"Locks/Held", testLockHeld},
		{"Locks/Concurrent", testLockConcurrent},
		{"Locks/Expiry", testLockExpiry},
		{"Locks/StaleRelease", testLockStaleRelease},
		{"Agents/CreateGet", testAgentCreateGet},
		{"Agents/List", testAgentList},
		{"Agents/Update", testAgentUpdate},
		{"Agents/Delete", testAgentDelete},
		{"Agents/ConcurrentNamedCreates", testAgentConcurrentNamedCreates},
		{"Triggers/CreateGet", testTriggerCreateGet},
		{"Triggers/List", testTriggerList},
		{"Triggers/Update", testTriggerUpdate},
		{"Triggers/Delete", testTriggerDelete},
		{"Hooks/CreateGet", testHookCreateGet},
		{"Hooks/Keys", testHookKeys},
		{"Hooks/List", testHookList},
		{"Hooks/Update", testHookUpdate},
		{"Hooks/Delete", testHookDelete},
		{"Hooks/Activity", testHookActivity},
		{"Runs/CreateGet", testRunCreateGet},
		{"Runs/ConcurrentCreates", testRunConcurrentCreates},
		{"Runs/Update", testRunUpdate},
		{"Runs/ConcurrentUpdates", testRunConcurrentUpdates},
		{"Runs/List", testRunList},
		{"Runs/ListAfterUpdates", testRunListAfterUpdates},
		{"Runs/Prune", testRunPrune},
		{"Runs/CreateAfterPrune", testRunCreateAfterPrune},
		{"Events/PutGet", testEventPutGet},
		{"Events/List", testEventList},
		{"Events/Replace", testEventReplace},
		{"Events/ConcurrentPuts", testEventConcurrentPuts},
		{"Events/Prune", testEventPrune},
		{"Events/PutAfterPrune", testEventPutAfterPrune},
		{"Activity/Deliveries", testActivityDeliveries},
		{"Activity/Runs", testActivityRuns},
		{"Deliveries/PutGet", testDeliveryPutGet},
		{"Deliveries/List", testDeliveryList},
		{"Deliveries/Prune", testDeliveryPrune},
		{"Cursors/PutGet", testCursorPutGet},
		{"Cursors/ConcurrentPuts", testCursorConcurrentPuts},
		{"Dispatch/DefaultTimes", testDispatchDefaultTimes},
		{"Dispatch/Validation", testDispatchValidation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t))
		})
	}
	t.Run("Persistence", func(t *testing.T) {
		t.Parallel()
		if b.Reopen == nil {
			t.Skip("Backend.Reopen is nil")
		}
		first := b.Open(t)
		reopened := false
		t.Cleanup(func() {
			if !reopened { // the test failed before Reopen
				_ = first.Close()
			}
		})
		testPersistence(t, first, func(old store.Store) store.Store {
			t.Helper()
			reopened = true
			s := b.Reopen(t, old)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			return s
		})
	})
}

// wantErr fails the test unless err wraps want.
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// normTime drops the monotonic reading and the zone, which a backend need
// not keep; the instant must survive.
func normTime(t time.Time) time.Time { return t.Round(0).UTC() }

// same fails the test unless got and want are equal after norm.
func same[T any](t *testing.T, what string, norm func(T) T, got, want T) {
	t.Helper()
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

// sameList is same for slices.
func sameList[T any](t *testing.T, what string, norm func(T) T, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d items, want %d:\n got %+v\nwant %+v", what, len(got), len(want), got, want)
	}
	for i := range got {
		same(t, fmt.Sprintf("%s[%d]", what, i), norm, got[i], want[i])
	}
}

// runConcurrently runs f from n goroutines released together, and returns
// how many returned nil. Other errors than allowed fail the test.
func runConcurrently(t *testing.T, n int, allowed error, f func(i int) error) int {
	t.Helper()
	var (
		wins  atomic.Int32
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			err := f(i)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, allowed):
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("goroutine: unexpected error: %v", err)
	}
	return int(wins.Load())
}

// OneWins runs write from n goroutines released together, as competing
// writers (or processes) would. Each write may succeed or fail with
// store.ErrConflict; any other error fails the test, and so does a count
// of successes other than exactly one. It returns the winner's result.
func OneWins[T any](t *testing.T, what string, n int, write func(i int) (T, error)) T {
	t.Helper()
	var (
		mu     sync.Mutex
		winner T
	)
	wins := runConcurrently(t, n, store.ErrConflict, func(i int) error {
		v, err := write(i)
		if err == nil {
			mu.Lock()
			winner = v
			mu.Unlock()
		}
		return err
	})
	if wins != 1 {
		t.Fatalf("%s: %d of %d concurrent writes succeeded, want exactly 1", what, wins, n)
	}
	return winner
}

func testPersistence(t *testing.T, s store.Store, reopen func(store.Store) store.Store) {
	ctx := t.Context()
	tn := store.Tenant{ID: "t1", Name: "Tenant", CreatedAt: base}
	must(t, "CreateTenant", s.CreateTenant(ctx, tn))
	k := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{4, 5, 6}, Name: "ci", CreatedAt: base}
	must(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	a, err := s.CreateAccount(ctx, fullAccount("t1", "a1"))
	must(t, "CreateAccount", err)
	a.Login = "updated"
	a, err = s.UpdateAccount(ctx, a)
	must(t, "UpdateAccount", err)
	b, err := s.CreateAccount(ctx, account("t1", "a2", "deploy", "team_1", base.Add(time.Second)))
	must(t, "CreateAccount", err)
	f := flowState("state-1", time.Now().Add(longTTL))
	must(t, "PutFlowState", s.PutFlowState(ctx, f))
	d := putDispatchRecords(t, s)

	s = reopen(s)

	gotT, err := s.GetTenant(ctx, "t1")
	must(t, "GetTenant after reopen", err)
	same(t, "GetTenant after reopen", normTenant, gotT, tn)
	list, err := s.ListTenants(ctx)
	must(t, "ListTenants after reopen", err)
	sameList(t, "ListTenants after reopen", normTenant, list, []store.Tenant{tn})
	wantErr(t, "CreateTenant after reopen", s.CreateTenant(ctx, tn), store.ErrConflict)

	gotK, err := s.APIKeyByHash(ctx, k.Hash)
	must(t, "APIKeyByHash after reopen", err)
	same(t, "APIKeyByHash after reopen", normAPIKey, gotK, k)
	wantErr(t, "CreateAPIKey after reopen", s.CreateAPIKey(ctx, store.APIKey{ID: "key1", Hash: [32]byte{1}}), store.ErrConflict)
	keys, err := s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys after reopen", err)
	sameList(t, "ListAPIKeys after reopen", normAPIKey, keys, []store.APIKey{k})

	gotA, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount after reopen", err)
	same(t, "GetAccount after reopen", normAccount, gotA, a)
	gotA, err = s.FindAccount(ctx, "t1", "deploy", "team_1")
	must(t, "FindAccount after reopen", err)
	same(t, "FindAccount after reopen", normAccount, gotA, b)
	accounts, err := s.ListAccounts(ctx, "t1")
	must(t, "ListAccounts after reopen", err)
	sameList(t, "ListAccounts after reopen", normAccount, accounts, []store.Account{a, b})
	_, err = s.CreateAccount(ctx, account("t1", "a3", "deploy", "team_1", base))
	wantErr(t, "CreateAccount with a taken external id after reopen", err, store.ErrConflict)
	stale := a
	stale.Version = 1
	_, err = s.UpdateAccount(ctx, stale)
	wantErr(t, "UpdateAccount with a stale version after reopen", err, store.ErrConflict)
	a.Login = "after reopen"
	up, err := s.UpdateAccount(ctx, a)
	must(t, "UpdateAccount after reopen", err)
	if up.Version != 3 {
		t.Fatalf("UpdateAccount after reopen: Version = %d, want 3", up.Version)
	}

	gotF, err := s.TakeFlowState(ctx, "state-1")
	must(t, "TakeFlowState after reopen", err)
	same(t, "TakeFlowState after reopen", normFlow, gotF, f)

	checkDispatchRecords(t, s, d)
}
