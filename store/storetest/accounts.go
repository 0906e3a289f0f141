package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normAccount(x store.Account) store.Account {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.RemovedAt = normTime(x.RemovedAt)
	x.TokenExpiry = normTime(x.TokenExpiry)
	return x
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
