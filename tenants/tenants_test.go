package tenants

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store/boltstore"
)

func newService(t *testing.T) *Service {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "t.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return New(s, nil)
}

func TestCreateAndAuthenticate(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	a, keyA, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, keyB, err := s.Create(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(keyA, KeyPrefix) || keyA == keyB {
		t.Fatalf("keys %q %q", keyA, keyB)
	}
	for key, want := range map[string]string{keyA: a.ID, keyB: b.ID} {
		got, err := s.Authenticate(ctx, key)
		if err != nil || got != want {
			t.Fatalf("Authenticate = %q, %v; want %q", got, err, want)
		}
	}
	for _, bad := range []string{"", "tdk_short", keyA[:len(keyA)-1] + "x", strings.ToUpper(keyA), "Bearer " + keyA} {
		if _, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Authenticate(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	if _, _, err := s.Create(ctx, "  "); err == nil {
		t.Fatal("a tenant without a name was created")
	}
}

func TestEnsureDefault(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	dir := filepath.Join(t.TempDir(), "data")
	path, created, err := s.EnsureDefault(ctx, dir)
	if err != nil || !created {
		t.Fatalf("EnsureDefault = %v, %v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file %s: %v %v, want mode 0600", path, err, st.Mode())
	}
	key, _ := os.ReadFile(path)
	if _, err := s.Authenticate(ctx, strings.TrimSpace(string(key))); err != nil {
		t.Fatalf("the written default key does not authenticate: %v", err)
	}
	if _, created, err := s.EnsureDefault(ctx, dir); err != nil || created {
		t.Fatalf("second EnsureDefault created=%v err=%v, want nothing done", created, err)
	}
}

// TestEnsureDefaultReplacesAStaleKeyFile: a key file left from a store
// since replaced does not keep a fresh store from its default tenant; it
// is set aside, not deleted. A key the store knows, or another process's
// claim still being written, is left alone.
func TestEnsureDefaultReplacesAStaleKeyFile(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if _, created, err := newService(t).EnsureDefault(ctx, dir); err != nil || !created {
		t.Fatalf("first store: created=%v err=%v", created, err)
	}
	path := filepath.Join(dir, DefaultKeyFile)
	old, _ := os.ReadFile(path)

	fresh := newService(t) // a new store, the same data dir
	path, created, err := fresh.EnsureDefault(ctx, dir)
	if err != nil || !created {
		t.Fatalf("fresh store with a stale key file: created=%v err=%v, want a default tenant", created, err)
	}
	key, _ := os.ReadFile(path)
	if string(key) == string(old) {
		t.Fatal("the stale key was kept")
	}
	if _, err := fresh.Authenticate(ctx, strings.TrimSpace(string(key))); err != nil {
		t.Fatalf("the new key does not authenticate: %v", err)
	}
	kept, _ := filepath.Glob(path + ".stale-*")
	if len(kept) != 1 {
		t.Fatalf("stale files %v, want the old one set aside", kept)
	}
	if data, _ := os.ReadFile(kept[0]); string(data) != string(old) {
		t.Fatalf("the set-aside file holds %q, want the old key", data)
	}

	// An empty file younger than claimGrace is another process's claim.
	claimed := filepath.Join(t.TempDir(), "claimed")
	if err := os.MkdirAll(claimed, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(claimed, DefaultKeyFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, created, err := newService(t).EnsureDefault(ctx, claimed); err != nil || created {
		t.Fatalf("with a fresh claim: created=%v err=%v, want nothing done", created, err)
	}
	// The same claim, past its grace: the process that made it is gone.
	later := New(newService(t).store, func() time.Time { return time.Now().Add(2 * claimGrace) })
	if _, created, err := later.EnsureDefault(ctx, claimed); err != nil || !created {
		t.Fatalf("with an abandoned claim: created=%v err=%v, want a default tenant", created, err)
	}
}

// TestRotateKeys rotates a tenant's key as the README says: create a new
// key, revoke the old one; the old key stops working at once, the tenant's
// last key cannot be revoked, and another tenant's keys are out of reach.
func TestRotateKeys(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	ten, oldKey, err := s.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	other, otherKey, err := s.Create(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s.Keys(ctx, ten.ID)
	if err != nil || len(keys) != 1 || keys[0].Name != "initial" {
		t.Fatalf("Keys of a new tenant = %+v, %v; want its initial key", keys, err)
	}
	initial := keys[0]

	if _, _, err := s.CreateKey(ctx, ten.ID, " "); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("CreateKey without a name: %v, want ErrInvalidName", err)
	}
	created, newKey, err := s.CreateKey(ctx, ten.ID, " ci ")
	if err != nil {
		t.Fatal(err)
	}
	if created.Name != "ci" || !strings.HasPrefix(newKey, KeyPrefix) || newKey == oldKey {
		t.Fatalf("CreateKey = %+v %q", created, newKey)
	}
	if got, err := s.Authenticate(ctx, newKey); err != nil || got != ten.ID {
		t.Fatalf("Authenticate with the new key = %q, %v; want %q", got, err, ten.ID)
	}
	keys, err = s.Keys(ctx, ten.ID)
	if err != nil || len(keys) != 2 || keys[0] != initial || keys[1] != created {
		t.Fatalf("Keys after CreateKey = %+v, %v; want %+v then %+v", keys, err, initial, created)
	}

	otherKeys, err := s.Keys(ctx, other.ID)
	if err != nil || len(otherKeys) != 1 {
		t.Fatalf("Keys of the other tenant = %+v, %v", otherKeys, err)
	}
	if err := s.Revoke(ctx, ten.ID, otherKeys[0].ID); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Revoke of another tenant's key: %v, want ErrKeyNotFound", err)
	}
	if err := s.Revoke(ctx, ten.ID, "key_nope"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Revoke of an unknown key: %v, want ErrKeyNotFound", err)
	}
	if err := s.Revoke(ctx, other.ID, otherKeys[0].ID); !errors.Is(err, ErrLastKey) {
		t.Fatalf("Revoke of the other tenant's only key: %v, want ErrLastKey", err)
	}
	if _, err := s.Authenticate(ctx, otherKey); err != nil {
		t.Fatalf("the refused revoke broke the key: %v", err)
	}

	if err := s.Revoke(ctx, ten.ID, initial.ID); err != nil {
		t.Fatalf("Revoke of the old key: %v", err)
	}
	if _, err := s.Authenticate(ctx, oldKey); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Authenticate with a revoked key: %v, want ErrInvalidKey", err)
	}
	if got, err := s.Authenticate(ctx, newKey); err != nil || got != ten.ID {
		t.Fatalf("Authenticate with the new key after the revoke = %q, %v", got, err)
	}
	if err := s.Revoke(ctx, ten.ID, initial.ID); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("second Revoke: %v, want ErrKeyNotFound", err)
	}
	if err := s.Revoke(ctx, ten.ID, created.ID); !errors.Is(err, ErrLastKey) || !strings.Contains(err.Error(), "create a new key first") {
		t.Fatalf("Revoke of the last key: %v, want ErrLastKey saying what to do", err)
	}
}

// TestRevokeLastTwoAtOnce revokes a tenant's two keys at once, again and
// again, from two Services over one store that share no lock, as two
// processes would not: one revoke wins each time and the tenant keeps a
// key.
func TestRevokeLastTwoAtOnce(t *testing.T) {
	ctx := context.Background()
	s := newService(t)
	services := []*Service{s, New(s.store, nil)}
	for range 20 {
		ten, _, err := s.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateKey(ctx, ten.ID, "second"); err != nil {
			t.Fatal(err)
		}
		keys, err := s.Keys(ctx, ten.ID)
		if err != nil || len(keys) != 2 {
			t.Fatalf("Keys = %+v, %v", keys, err)
		}
		errs := make(chan error, 2)
		start := make(chan struct{})
		for i, k := range keys {
			go func() {
				<-start
				errs <- services[i].Revoke(ctx, ten.ID, k.ID)
			}()
		}
		close(start)
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), ErrLastKey) {
			t.Fatalf("two revokes at once: %v and %v; want one to succeed and one ErrLastKey", e1, e2)
		}
		if keys, err := s.Keys(ctx, ten.ID); err != nil || len(keys) != 1 {
			t.Fatalf("Keys after the revokes = %+v, %v; want one left", keys, err)
		}
	}
}

// TestEnsureDefaultOnceOnASharedStore: processes started together on one
// store, each with a data dir of its own (the members of a cluster),
// create one default tenant between them, and only the one that created
// it writes a key file.
func TestEnsureDefaultOnceOnASharedStore(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		shared := newService(t)
		const procs = 3
		var wg sync.WaitGroup
		created := make([]bool, procs)
		errs := make([]error, procs)
		dirs := make([]string, procs)
		start := make(chan struct{})
		for i := range procs {
			dirs[i] = filepath.Join(t.TempDir(), "data")
			s := New(shared.store, nil) // another process, the same store
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, created[i], errs[i] = s.EnsureDefault(ctx, dirs[i])
			}()
		}
		close(start)
		wg.Wait()
		n := 0
		for i := range procs {
			if errs[i] != nil {
				t.Fatalf("round %d, process %d: %v", round, i, errs[i])
			}
			_, err := os.Stat(filepath.Join(dirs[i], DefaultKeyFile))
			if created[i] {
				n++
				if err != nil {
					t.Fatalf("round %d: process %d created the tenant but wrote no key file: %v", round, i, err)
				}
			} else if err == nil {
				t.Fatalf("round %d: process %d wrote a key file without creating the tenant", round, i)
			}
		}
		ts, err := shared.store.ListTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || len(ts) != 1 {
			t.Fatalf("round %d: %d processes created a default tenant, the store has %d tenants; want 1 and 1", round, n, len(ts))
		}
	}
}
