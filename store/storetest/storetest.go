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

	"github.com/triggerd/triggerd/internal/testenv"
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

func normTenant(x store.Tenant) store.Tenant {
	x.CreatedAt = normTime(x.CreatedAt)
	return x
}

func normAPIKey(x store.APIKey) store.APIKey {
	x.CreatedAt = normTime(x.CreatedAt)
	return x
}

func normAccount(x store.Account) store.Account {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.RemovedAt = normTime(x.RemovedAt)
	x.TokenExpiry = normTime(x.TokenExpiry)
	return x
}

func normFlow(x store.FlowState) store.FlowState {
	x.CreatedAt = normTime(x.CreatedAt)
	x.ExpiresAt = normTime(x.ExpiresAt)
	return x
}

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

// account returns a minimal valid account.
func account(tenantID, id, connector, externalID string, created time.Time) store.Account {
	return store.Account{
		ID:          id,
		TenantID:    tenantID,
		Connector:   connector,
		ExternalID:  externalID,
		Login:       "login-" + id,
		Scopes:      []string{"repo", "read:user"},
		Status:      store.StatusActive,
		CreatedAt:   created,
		UpdatedAt:   created,
		SealedToken: []byte("sealed-" + id),
	}
}

// fullAccount returns an account with every field set, to check that
// everything round-trips.
func fullAccount(tenantID, id string) store.Account {
	return store.Account{
		ID:           id,
		TenantID:     tenantID,
		Connector:    "analytics",
		ExternalID:   "1170-ext:" + id,
		Login:        "Zoë <zoe@example.com>",
		Scopes:       []string{"openid", "https://www.googleapis.com/auth/analytics.readonly", ""},
		Status:       store.StatusNeedsReauth,
		StatusReason: "refresh token revoked \"by user\"\n",
		Metadata: map[string]string{
			"team_id":          "team_42",
			"configuration_id": "icfg_9",
			"unicode ☃":        "tab\tnewline\nquote\"",
			"":                 "empty key",
		},
		CreatedAt:   base,
		UpdatedAt:   base.Add(time.Hour + time.Nanosecond),
		RemovedAt:   base.Add(2 * time.Hour).In(time.FixedZone("PDT", -7*3600)),
		SealedToken: everyByte(),
		TokenExpiry: base.Add(3*time.Hour + 987654321),
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

func testTenants(t *testing.T, s store.Store) {
	ctx := t.Context()
	if ts, err := s.ListTenants(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("ListTenants on an empty store = %v, %v; want none", ts, err)
	}
	t2 := store.Tenant{ID: "t2", Name: "Second", CreatedAt: base.Add(time.Second)}
	t1 := store.Tenant{ID: "t1", Name: "First", CreatedAt: base}
	t3 := store.Tenant{ID: "t3", Name: "Third", CreatedAt: base.Add(time.Second + time.Nanosecond)}
	for _, tn := range []store.Tenant{t2, t1, t3} {
		must(t, "CreateTenant "+tn.ID, s.CreateTenant(ctx, tn))
	}
	got, err := s.GetTenant(ctx, "t1")
	must(t, "GetTenant", err)
	same(t, "GetTenant", normTenant, got, t1)

	wantErr(t, "CreateTenant with a taken id", s.CreateTenant(ctx, store.Tenant{ID: "t1", Name: "Other", CreatedAt: base}), store.ErrConflict)
	got, err = s.GetTenant(ctx, "t1")
	must(t, "GetTenant after conflict", err)
	same(t, "GetTenant after conflict", normTenant, got, t1)

	_, err = s.GetTenant(ctx, "nope")
	wantErr(t, "GetTenant unknown", err, store.ErrNotFound)

	list, err := s.ListTenants(ctx)
	must(t, "ListTenants", err)
	sameList(t, "ListTenants (oldest first)", normTenant, list, []store.Tenant{t1, t2, t3})
}

func testAPIKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{1, 2, 3, 31: 0xff}, Name: "ci", CreatedAt: base}
	must(t, "CreateAPIKey", s.CreateAPIKey(ctx, k))
	got, err := s.APIKeyByHash(ctx, k.Hash)
	must(t, "APIKeyByHash", err)
	same(t, "APIKeyByHash", normAPIKey, got, k)

	_, err = s.APIKeyByHash(ctx, [32]byte{9})
	wantErr(t, "APIKeyByHash unknown", err, store.ErrNotFound)

	dupHash := store.APIKey{ID: "key2", TenantID: "t2", Hash: k.Hash, Name: "dup", CreatedAt: base}
	wantErr(t, "CreateAPIKey with a taken hash", s.CreateAPIKey(ctx, dupHash), store.ErrConflict)
	dupID := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{7}, Name: "dup", CreatedAt: base}
	wantErr(t, "CreateAPIKey with a taken id", s.CreateAPIKey(ctx, dupID), store.ErrConflict)
	// A refused create writes nothing.
	_, err = s.APIKeyByHash(ctx, dupID.Hash)
	wantErr(t, "APIKeyByHash of a refused key", err, store.ErrNotFound)
	got, err = s.APIKeyByHash(ctx, k.Hash)
	must(t, "APIKeyByHash after conflicts", err)
	same(t, "APIKeyByHash after conflicts", normAPIKey, got, k)

	// key2 is still free.
	k2 := store.APIKey{ID: "key2", TenantID: "t2", Hash: [32]byte{2}, Name: "second", CreatedAt: base}
	must(t, "CreateAPIKey key2", s.CreateAPIKey(ctx, k2))
	got, err = s.APIKeyByHash(ctx, k2.Hash)
	must(t, "APIKeyByHash key2", err)
	same(t, "APIKeyByHash key2", normAPIKey, got, k2)
}

func testAccountCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := account("t1", "a1", "codehost", "1001", base)
	a.Version = 42 // ignored: a new account is version 1
	created, err := s.CreateAccount(ctx, a)
	must(t, "CreateAccount", err)
	if created.Version != 1 {
		t.Fatalf("CreateAccount: Version = %d, want 1", created.Version)
	}
	want := a
	want.Version = 1
	same(t, "CreateAccount result", normAccount, created, want)

	got, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount", err)
	same(t, "GetAccount", normAccount, got, want)

	_, err = s.GetAccount(ctx, "t2", "a1")
	wantErr(t, "GetAccount with another tenant id", err, store.ErrNotFound)
	_, err = s.GetAccount(ctx, "t1", "nope")
	wantErr(t, "GetAccount unknown", err, store.ErrNotFound)

	_, err = s.CreateAccount(ctx, account("t1", "a1", "deploy", "other", base))
	wantErr(t, "CreateAccount with a taken id", err, store.ErrConflict)
	// The refused account did not claim its external id.
	_, err = s.FindAccount(ctx, "t1", "deploy", "other")
	wantErr(t, "FindAccount of a refused account", err, store.ErrNotFound)
	got, err = s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount after conflict", err)
	same(t, "GetAccount after conflict", normAccount, got, want)
}

func testAccountDefaultTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now().Add(-time.Minute)
	created, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1", time.Time{}))
	must(t, "CreateAccount with zero times", err)
	if created.CreatedAt.Before(before) || !created.UpdatedAt.Equal(created.CreatedAt) {
		t.Fatalf("CreateAccount with zero times: CreatedAt %v, UpdatedAt %v; want now, and UpdatedAt = CreatedAt", created.CreatedAt, created.UpdatedAt)
	}
	got, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount", err)
	same(t, "GetAccount", normAccount, got, created)

	must(t, "CreateTenant with zero time", s.CreateTenant(ctx, store.Tenant{ID: "t1"}))
	tn, err := s.GetTenant(ctx, "t1")
	must(t, "GetTenant", err)
	if tn.CreatedAt.Before(before) {
		t.Fatalf("CreateTenant with zero time: CreatedAt = %v, want now", tn.CreatedAt)
	}
}

func testAccountFind(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1001", base))
	must(t, "CreateAccount", err)
	b, err := s.CreateAccount(ctx, account("t1", "a2", "deploy", "1001", base))
	must(t, "CreateAccount same external id, other connector", err)

	got, err := s.FindAccount(ctx, "t1", "codehost", "1001")
	must(t, "FindAccount", err)
	same(t, "FindAccount codehost", normAccount, got, a)
	got, err = s.FindAccount(ctx, "t1", "deploy", "1001")
	must(t, "FindAccount", err)
	same(t, "FindAccount deploy", normAccount, got, b)

	_, err = s.FindAccount(ctx, "t2", "codehost", "1001")
	wantErr(t, "FindAccount from another tenant", err, store.ErrNotFound)
	_, err = s.FindAccount(ctx, "t1", "analytics", "1001")
	wantErr(t, "FindAccount other connector", err, store.ErrNotFound)
	_, err = s.FindAccount(ctx, "t1", "codehost", "1002")
	wantErr(t, "FindAccount unknown external id", err, store.ErrNotFound)
}

func testAccountDuplicateExternalID(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1001", base))
	must(t, "CreateAccount", err)

	_, err = s.CreateAccount(ctx, account("t1", "a2", "codehost", "1001", base))
	wantErr(t, "CreateAccount with a taken external id", err, store.ErrConflict)
	_, err = s.GetAccount(ctx, "t1", "a2")
	wantErr(t, "GetAccount of the refused account", err, store.ErrNotFound)
	got, err := s.FindAccount(ctx, "t1", "codehost", "1001")
	must(t, "FindAccount after conflict", err)
	same(t, "FindAccount after conflict", normAccount, got, a)

	// Another tenant may connect the same external account.
	b, err := s.CreateAccount(ctx, account("t2", "a2", "codehost", "1001", base))
	must(t, "CreateAccount same external id in another tenant", err)
	got, err = s.FindAccount(ctx, "t2", "codehost", "1001")
	must(t, "FindAccount t2", err)
	same(t, "FindAccount t2", normAccount, got, b)
	// Ids are per tenant too.
	_, err = s.CreateAccount(ctx, account("t2", "a1", "deploy", "x", base))
	must(t, "CreateAccount with another tenant's account id", err)
}

func testAccountList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if as, err := s.ListAccounts(ctx, "t1"); err != nil || len(as) != 0 {
		t.Fatalf("ListAccounts on an empty store = %v, %v; want none", as, err)
	}
	var want []store.Account
	// Created out of order; listed by CreatedAt, nanoseconds apart.
	for _, c := range []struct {
		id  string
		off time.Duration
	}{{"c", 2}, {"a", 0}, {"d", time.Hour}, {"b", 1}} {
		a, err := s.CreateAccount(ctx, account("t1", c.id, "codehost", "ext-"+c.id, base.Add(c.off)))
		must(t, "CreateAccount", err)
		want = append(want, a)
	}
	_, err := s.CreateAccount(ctx, account("t2", "other", "codehost", "ext-other", base.Add(-time.Hour)))
	must(t, "CreateAccount t2", err)
	// Tenant ids that extend t1 with the backends' key separators.
	for _, tenant := range []string{"t", "t1/x", "t1:x", "t1x"} {
		_, err = s.CreateAccount(ctx, account(tenant, "e", "codehost", "ext-e", base))
		must(t, "CreateAccount "+tenant, err)
	}

	want = []store.Account{want[1], want[3], want[0], want[2]}
	got, err := s.ListAccounts(ctx, "t1")
	must(t, "ListAccounts", err)
	sameList(t, "ListAccounts t1", normAccount, got, want)

	got, err = s.ListAccounts(ctx, "t3")
	must(t, "ListAccounts t3", err)
	if len(got) != 0 {
		t.Fatalf("ListAccounts of a tenant without accounts = %+v", got)
	}
}

func testAccountUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1001", base))
	must(t, "CreateAccount", err)

	a.Login = "renamed"
	a.Status = store.StatusNeedsReauth
	a.StatusReason = "invalid_grant"
	a.UpdatedAt = base.Add(time.Minute)
	a.SealedToken = []byte("new token")
	a.Metadata = map[string]string{"k": "v"}
	up, err := s.UpdateAccount(ctx, a)
	must(t, "UpdateAccount", err)
	if up.Version != 2 {
		t.Fatalf("UpdateAccount: Version = %d, want 2", up.Version)
	}
	want := a
	want.Version = 2
	same(t, "UpdateAccount result", normAccount, up, want)
	got, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount", err)
	same(t, "GetAccount after update", normAccount, got, want)

	// a still has Version 1: stale.
	a.Login = "stale"
	_, err = s.UpdateAccount(ctx, a)
	wantErr(t, "UpdateAccount with a stale version", err, store.ErrConflict)
	got, err = s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount after stale update", err)
	same(t, "GetAccount after stale update", normAccount, got, want)

	// A version from the future is no better.
	future := up
	future.Version = 7
	_, err = s.UpdateAccount(ctx, future)
	wantErr(t, "UpdateAccount with a future version", err, store.ErrConflict)

	up.Status = store.StatusRemoved
	up.RemovedAt = base.Add(time.Hour)
	up.SealedToken = nil
	up3, err := s.UpdateAccount(ctx, up)
	must(t, "UpdateAccount from the returned account", err)
	if up3.Version != 3 {
		t.Fatalf("second UpdateAccount: Version = %d, want 3", up3.Version)
	}
	got, err = s.FindAccount(ctx, "t1", "codehost", "1001")
	must(t, "FindAccount after updates", err)
	same(t, "FindAccount after updates", normAccount, got, up3)

	missing := account("t1", "nope", "codehost", "2", base)
	missing.Version = 1
	_, err = s.UpdateAccount(ctx, missing)
	wantErr(t, "UpdateAccount unknown", err, store.ErrNotFound)
	other := up3
	other.TenantID = "t2"
	_, err = s.UpdateAccount(ctx, other)
	wantErr(t, "UpdateAccount with another tenant id", err, store.ErrNotFound)
}

func testAccountUpdateExternalID(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1001", base))
	must(t, "CreateAccount", err)
	_, err = s.CreateAccount(ctx, account("t1", "a2", "codehost", "2002", base))
	must(t, "CreateAccount", err)

	a.ExternalID = "2002"
	_, err = s.UpdateAccount(ctx, a)
	wantErr(t, "UpdateAccount to another account's external id", err, store.ErrConflict)

	a.ExternalID = "3003"
	up, err := s.UpdateAccount(ctx, a)
	must(t, "UpdateAccount to a new external id", err)
	got, err := s.FindAccount(ctx, "t1", "codehost", "3003")
	must(t, "FindAccount new external id", err)
	same(t, "FindAccount new external id", normAccount, got, up)
	_, err = s.FindAccount(ctx, "t1", "codehost", "1001")
	wantErr(t, "FindAccount old external id", err, store.ErrNotFound)
	// The old external id is free again.
	_, err = s.CreateAccount(ctx, account("t1", "a3", "codehost", "1001", base))
	must(t, "CreateAccount with the freed external id", err)
}

func testAccountConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAccount(ctx, account("t1", "a1", "codehost", "1001", base))
	must(t, "CreateAccount", err)
	winner := OneWins(t, "UpdateAccount from version 1", 10, func(i int) (store.Account, error) {
		b := a
		b.Login = fmt.Sprintf("writer-%d", i)
		return s.UpdateAccount(ctx, b)
	})
	got, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount", err)
	same(t, "GetAccount after concurrent updates", normAccount, got, winner)
	if got.Version != 2 {
		t.Fatalf("Version = %d after one successful update, want 2", got.Version)
	}
}

func testAccountRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := fullAccount("t1", "a1")
	created, err := s.CreateAccount(ctx, a)
	must(t, "CreateAccount", err)
	want := a
	want.Version = 1
	same(t, "CreateAccount", normAccount, created, want)
	got, err := s.GetAccount(ctx, "t1", "a1")
	must(t, "GetAccount", err)
	same(t, "GetAccount", normAccount, got, want)
	if !got.TokenExpiry.Equal(a.TokenExpiry) || got.TokenExpiry.Nanosecond() != a.TokenExpiry.Nanosecond() {
		t.Fatalf("TokenExpiry = %v, want %v", got.TokenExpiry, a.TokenExpiry)
	}

	// Zero and empty values stay zero.
	bare := store.Account{ID: "a2", TenantID: "t1", Connector: "deploy", ExternalID: "team_1", CreatedAt: base, UpdatedAt: base}
	_, err = s.CreateAccount(ctx, bare)
	must(t, "CreateAccount bare", err)
	got, err = s.GetAccount(ctx, "t1", "a2")
	must(t, "GetAccount bare", err)
	bare.Version = 1
	same(t, "GetAccount bare", normAccount, got, bare)
	if !got.TokenExpiry.IsZero() || !got.RemovedAt.IsZero() {
		t.Fatalf("zero times came back as TokenExpiry %v, RemovedAt %v", got.TokenExpiry, got.RemovedAt)
	}
}

func flowState(state string, expires time.Time) store.FlowState {
	return store.FlowState{
		State:          state,
		TenantID:       "t1",
		Connector:      "codehost",
		SealedVerifier: []byte{0, 1, 2, 0xfe, 0xff, 'v'},
		ReturnTo:       "https://app.example.com/settings?tab=integrations&x=ü",
		CreatedAt:      time.Now().Truncate(time.Second).Add(123456789),
		ExpiresAt:      expires,
	}
}

func testFlowTakeOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := flowState("state-1", time.Now().Add(longTTL))
	must(t, "PutFlowState", s.PutFlowState(ctx, f))
	must(t, "PutFlowState other", s.PutFlowState(ctx, flowState("state-2", time.Now().Add(longTTL))))
	got, err := s.TakeFlowState(ctx, "state-1")
	must(t, "TakeFlowState", err)
	same(t, "TakeFlowState", normFlow, got, f)
	_, err = s.TakeFlowState(ctx, "state-1")
	wantErr(t, "second TakeFlowState", err, store.ErrNotFound)
	_, err = s.TakeFlowState(ctx, "unknown")
	wantErr(t, "TakeFlowState unknown", err, store.ErrNotFound)
	_, err = s.TakeFlowState(ctx, "state-2")
	must(t, "TakeFlowState other", err)
}

func testFlowConcurrentTakes(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "PutFlowState", s.PutFlowState(ctx, flowState("state-1", time.Now().Add(longTTL))))
	const n = 10
	wins := runConcurrently(t, n, store.ErrNotFound, func(int) error {
		_, err := s.TakeFlowState(ctx, "state-1")
		return err
	})
	if wins != 1 {
		t.Fatalf("%d of %d concurrent takes succeeded, want exactly 1", wins, n)
	}
}

// testFlowExpiry puts several states that expire soon, then takes one
// after another, with growing pauses, until one is gone. Each state is
// taken at most once, so a state that is gone has expired.
func testFlowExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 24
	states := make([]store.FlowState, n)
	for i := range states {
		states[i] = flowState(fmt.Sprintf("expiring-%d", i), time.Now().Add(shortTTL))
		must(t, "PutFlowState", s.PutFlowState(ctx, states[i]))
	}
	// Taken before it expires, it is there.
	if time.Until(states[0].ExpiresAt) > shortTTL/3 {
		got, err := s.TakeFlowState(ctx, states[0].State)
		must(t, "TakeFlowState before expiry", err)
		same(t, "TakeFlowState before expiry", normFlow, got, states[0])
	}
	deadline := time.Now().Add(waitTimeout)
	pause := 10 * time.Millisecond
	for i := 1; ; i++ {
		if i == n || time.Now().After(deadline) {
			t.Fatalf("flow states with ExpiresAt %v could still be taken at %v", states[0].ExpiresAt, time.Now())
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
		_, err := s.TakeFlowState(ctx, states[i].State)
		if errors.Is(err, store.ErrNotFound) {
			// Redis counts whole milliseconds: allow a little.
			if now := time.Now(); now.Before(states[i].ExpiresAt.Add(-10 * time.Millisecond)) {
				t.Fatalf("flow state gone at %v, before its ExpiresAt %v", now, states[i].ExpiresAt)
			}
			break
		}
		must(t, "TakeFlowState while waiting for expiry", err)
	}
	// An expired state stays gone, and does not block a new one.
	for i := range states {
		before := time.Now()
		if _, err := s.TakeFlowState(ctx, states[i].State); err == nil && before.After(states[i].ExpiresAt.Add(10*time.Millisecond)) {
			t.Fatalf("expired flow state %s could be taken", states[i].State)
		}
	}
	fresh := flowState(states[1].State, time.Now().Add(longTTL))
	must(t, "PutFlowState reusing an expired state", s.PutFlowState(ctx, fresh))
	got, err := s.TakeFlowState(ctx, fresh.State)
	must(t, "TakeFlowState fresh", err)
	same(t, "TakeFlowState fresh", normFlow, got, fresh)

	// A state put already expired is not there.
	must(t, "PutFlowState expired", s.PutFlowState(ctx, flowState("past", time.Now().Add(-time.Second))))
	_, err = s.TakeFlowState(ctx, "past")
	wantErr(t, "TakeFlowState of a state put expired", err, store.ErrNotFound)
}

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

func testAPIKeyList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if ks, err := s.ListAPIKeys(ctx, "t1"); err != nil || len(ks) != 0 {
		t.Fatalf("ListAPIKeys of a tenant without keys = %v, %v; want none", ks, err)
	}
	// Created out of order; two at the same instant, which the id orders.
	kz := store.APIKey{ID: "kz", TenantID: "t1", Hash: [32]byte{1}, Name: "z", CreatedAt: base.Add(time.Second)}
	kb := store.APIKey{ID: "kb", TenantID: "t1", Hash: [32]byte{2}, Name: "b", CreatedAt: base}
	ka := store.APIKey{ID: "ka", TenantID: "t1", Hash: [32]byte{3}, Name: "a", CreatedAt: base.Add(time.Second)}
	other := store.APIKey{ID: "ko", TenantID: "t2", Hash: [32]byte{4}, Name: "other", CreatedAt: base}
	for _, k := range []store.APIKey{kz, kb, ka, other} {
		must(t, "CreateAPIKey "+k.ID, s.CreateAPIKey(ctx, k))
	}
	list, err := s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys t1", err)
	sameList(t, "ListAPIKeys t1 (oldest first, then by id)", normAPIKey, list, []store.APIKey{kb, ka, kz})
	list, err = s.ListAPIKeys(ctx, "t2")
	must(t, "ListAPIKeys t2", err)
	sameList(t, "ListAPIKeys t2", normAPIKey, list, []store.APIKey{other})
}

func testAPIKeyDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	k1 := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{1}, Name: "old", CreatedAt: base}
	k2 := store.APIKey{ID: "key2", TenantID: "t1", Hash: [32]byte{2}, Name: "new", CreatedAt: base.Add(time.Second)}
	k3 := store.APIKey{ID: "key3", TenantID: "t2", Hash: [32]byte{3}, Name: "theirs", CreatedAt: base}
	for _, k := range []store.APIKey{k1, k2, k3} {
		must(t, "CreateAPIKey "+k.ID, s.CreateAPIKey(ctx, k))
	}

	wantErr(t, "DeleteAPIKey of another tenant's key", s.DeleteAPIKey(ctx, "t2", "key1"), store.ErrNotFound)
	got, err := s.APIKeyByHash(ctx, k1.Hash)
	must(t, "APIKeyByHash after another tenant's delete", err)
	same(t, "APIKeyByHash after another tenant's delete", normAPIKey, got, k1)
	wantErr(t, "DeleteAPIKey unknown", s.DeleteAPIKey(ctx, "t1", "nope"), store.ErrNotFound)

	must(t, "DeleteAPIKey", s.DeleteAPIKey(ctx, "t1", "key1"))
	_, err = s.APIKeyByHash(ctx, k1.Hash)
	wantErr(t, "APIKeyByHash of a deleted key", err, store.ErrNotFound)
	list, err := s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys after delete", err)
	sameList(t, "ListAPIKeys after delete", normAPIKey, list, []store.APIKey{k2})
	list, err = s.ListAPIKeys(ctx, "t2")
	must(t, "ListAPIKeys of the other tenant after delete", err)
	sameList(t, "ListAPIKeys of the other tenant after delete", normAPIKey, list, []store.APIKey{k3})
	wantErr(t, "DeleteAPIKey again", s.DeleteAPIKey(ctx, "t1", "key1"), store.ErrNotFound)
	// key2 is t1's only key now: to another tenant it is not found.
	wantErr(t, "DeleteAPIKey of another tenant's only key", s.DeleteAPIKey(ctx, "t2", "key2"), store.ErrNotFound)

	// Nothing of the key is left behind: its id and hash are free again.
	again := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{9}, Name: "again", CreatedAt: base.Add(2 * time.Second)}
	must(t, "CreateAPIKey with a deleted key's id", s.CreateAPIKey(ctx, again))
	rehash := store.APIKey{ID: "key4", TenantID: "t1", Hash: k1.Hash, Name: "rehash", CreatedAt: base.Add(3 * time.Second)}
	must(t, "CreateAPIKey with a deleted key's hash", s.CreateAPIKey(ctx, rehash))
	list, err = s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys after creates", err)
	sameList(t, "ListAPIKeys after creates", normAPIKey, list, []store.APIKey{k2, again, rehash})
}

// testAPIKeyDeleteLast deletes a tenant's only key: the store refuses and
// keeps it, and so after the tenant's other keys are deleted.
func testAPIKeyDeleteLast(t *testing.T, s store.Store) {
	ctx := t.Context()
	only := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{1}, Name: "only", CreatedAt: base}
	theirs := store.APIKey{ID: "key2", TenantID: "t2", Hash: [32]byte{2}, Name: "theirs", CreatedAt: base}
	for _, k := range []store.APIKey{only, theirs} {
		must(t, "CreateAPIKey "+k.ID, s.CreateAPIKey(ctx, k))
	}
	// Another tenant's keys do not count as t1's.
	wantErr(t, "DeleteAPIKey of the only key", s.DeleteAPIKey(ctx, "t1", "key1"), store.ErrLastAPIKey)
	got, err := s.APIKeyByHash(ctx, only.Hash)
	must(t, "APIKeyByHash of the refused key", err)
	same(t, "APIKeyByHash of the refused key", normAPIKey, got, only)
	list, err := s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys after the refused delete", err)
	sameList(t, "ListAPIKeys after the refused delete", normAPIKey, list, []store.APIKey{only})

	// With a second key either may go, and then the other is the last.
	second := store.APIKey{ID: "key3", TenantID: "t1", Hash: [32]byte{3}, Name: "second", CreatedAt: base.Add(time.Second)}
	must(t, "CreateAPIKey key3", s.CreateAPIKey(ctx, second))
	must(t, "DeleteAPIKey of the first of two keys", s.DeleteAPIKey(ctx, "t1", "key1"))
	wantErr(t, "DeleteAPIKey of the key left", s.DeleteAPIKey(ctx, "t1", "key3"), store.ErrLastAPIKey)
	got, err = s.APIKeyByHash(ctx, second.Hash)
	must(t, "APIKeyByHash of the key left", err)
	same(t, "APIKeyByHash of the key left", normAPIKey, got, second)
	wantErr(t, "DeleteAPIKey of the other tenant's only key", s.DeleteAPIKey(ctx, "t2", "key2"), store.ErrLastAPIKey)
}

// testAPIKeyConcurrentDeletes deletes one of a tenant's two keys from many
// goroutines (or processes): one delete wins, the others find nothing.
func testAPIKeyConcurrentDeletes(t *testing.T, s store.Store) {
	ctx := t.Context()
	k := store.APIKey{ID: "key1", TenantID: "t1", Hash: [32]byte{1}, Name: "ci", CreatedAt: base}
	kept := store.APIKey{ID: "key2", TenantID: "t1", Hash: [32]byte{2}, Name: "kept", CreatedAt: base.Add(time.Second)}
	for _, k := range []store.APIKey{k, kept} {
		must(t, "CreateAPIKey "+k.ID, s.CreateAPIKey(ctx, k))
	}
	if wins := runConcurrently(t, 10, store.ErrNotFound, func(int) error { return s.DeleteAPIKey(ctx, "t1", "key1") }); wins != 1 {
		t.Fatalf("%d of 10 concurrent deletes of one key succeeded, want exactly 1", wins)
	}
	_, err := s.APIKeyByHash(ctx, k.Hash)
	wantErr(t, "APIKeyByHash after concurrent deletes", err, store.ErrNotFound)
	list, err := s.ListAPIKeys(ctx, "t1")
	must(t, "ListAPIKeys after concurrent deletes", err)
	sameList(t, "ListAPIKeys after concurrent deletes", normAPIKey, list, []store.APIKey{kept})
}

// testAPIKeyConcurrentDeletesOfLastTwo deletes both of a tenant's two keys
// from many goroutines at once, again and again: each time exactly one
// delete succeeds and the other key remains.
func testAPIKeyConcurrentDeletesOfLastTwo(t *testing.T, s store.Store) {
	ConcurrentDeletesOfLastTwo(t, []store.Store{s})
}

// errRefused wraps the errors a delete that lost a race may return.
var errRefused = errors.New("refused")

// ConcurrentDeletesOfLastTwo has many goroutines, spread over stores (one
// store, or several over the same data as several processes would be),
// delete both of a tenant's two API keys at once, for several tenants in
// turn: each time exactly one delete succeeds, the others fail with
// store.ErrNotFound or store.ErrLastAPIKey, and the other key remains and
// authenticates.
func ConcurrentDeletesOfLastTwo(t *testing.T, stores []store.Store) {
	t.Helper()
	ctx := t.Context()
	const n = 20
	for round := range 10 {
		tenant := fmt.Sprintf("t%d", round)
		keys := [2]store.APIKey{
			{ID: tenant + "-a", TenantID: tenant, Hash: [32]byte{byte(round), 1}, Name: "a", CreatedAt: base},
			{ID: tenant + "-b", TenantID: tenant, Hash: [32]byte{byte(round), 2}, Name: "b", CreatedAt: base.Add(time.Second)},
		}
		for _, k := range keys {
			must(t, "CreateAPIKey "+k.ID, stores[0].CreateAPIKey(ctx, k))
		}
		wins := runConcurrently(t, n, errRefused, func(i int) error {
			err := stores[i%len(stores)].DeleteAPIKey(ctx, tenant, keys[i%2].ID)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLastAPIKey) {
				return fmt.Errorf("%w: %w", errRefused, err)
			}
			return err
		})
		if wins != 1 {
			t.Fatalf("round %d: %d of %d concurrent deletes of a tenant's two keys succeeded, want exactly 1", round, wins, n)
		}
		for _, s := range stores {
			list, err := s.ListAPIKeys(ctx, tenant)
			must(t, "ListAPIKeys after the deletes", err)
			if len(list) != 1 {
				t.Fatalf("round %d: ListAPIKeys after the deletes = %+v, want one key left", round, list)
			}
			got, err := s.APIKeyByHash(ctx, list[0].Hash)
			must(t, "APIKeyByHash of the key left", err)
			same(t, "APIKeyByHash of the key left", normAPIKey, got, list[0])
			wantErr(t, "DeleteAPIKey of the key left", s.DeleteAPIKey(ctx, tenant, list[0].ID), store.ErrLastAPIKey)
		}
	}
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

// testRateLimits checks the merge rule every process relies on: answers
// arrive out of order, so the same reset keeps the lower remaining, a later
// reset replaces, an earlier one is ignored; keys are independent.
func testRateLimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	reset := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if _, ok, err := s.GetRateLimit(ctx, "acc_1:core"); err != nil || ok {
		t.Fatalf("unknown budget: ok=%v err=%v", ok, err)
	}
	put := func(key string, remaining int, reset time.Time) {
		t.Helper()
		if err := s.PutRateLimit(ctx, key, store.RateLimit{Limit: 5000, Remaining: remaining, Reset: reset}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) store.RateLimit {
		t.Helper()
		rl, ok, err := s.GetRateLimit(ctx, key)
		if err != nil || !ok {
			t.Fatalf("GetRateLimit(%s): ok=%v err=%v", key, ok, err)
		}
		return rl
	}
	put("acc_1:core", 4990, reset)
	put("acc_1:core", 4995, reset) // an older answer arriving late
	if rl := get("acc_1:core"); rl.Remaining != 4990 || rl.Limit != 5000 || !rl.Reset.Equal(reset) {
		t.Fatalf("same reset: %+v, want remaining 4990 kept", rl)
	}
	put("acc_1:core", 3, reset.Add(-time.Hour+time.Minute)) // an earlier window
	if rl := get("acc_1:core"); rl.Remaining != 4990 {
		t.Fatalf("an earlier reset replaced the budget: %+v", rl)
	}
	put("acc_1:core", 5000, reset.Add(time.Hour)) // the next window
	if rl := get("acc_1:core"); rl.Remaining != 5000 || !rl.Reset.Equal(reset.Add(time.Hour)) {
		t.Fatalf("a later reset did not replace the budget: %+v", rl)
	}
	put("acc_1:search", 7, reset)
	if get("acc_1:core").Remaining != 5000 || get("acc_1:search").Remaining != 7 {
		t.Fatal("budgets of different keys interfere")
	}
	put("acc_2:core", 1, time.Now().Add(-time.Second)) // already past its reset
	if _, ok, err := s.GetRateLimit(ctx, "acc_2:core"); err != nil || ok {
		t.Fatalf("a budget past its reset: ok=%v err=%v, want not reported", ok, err)
	}
}
