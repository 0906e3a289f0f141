package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normTenant(x store.Tenant) store.Tenant {
	x.CreatedAt = normTime(x.CreatedAt)
	return x
}

func normAPIKey(x store.APIKey) store.APIKey {
	x.CreatedAt = normTime(x.CreatedAt)
	return x
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
