package tenants

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
