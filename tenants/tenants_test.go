package tenants

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
