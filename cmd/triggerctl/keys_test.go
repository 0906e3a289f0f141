package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/tenants"
)

// realAPI serves triggerd's management API over a fresh bolt store, with
// adminKeys, and returns its URL, the tenant service and a count of the
// requests served.
func realAPI(t *testing.T, adminKeys ...string) (string, *tenants.Service, *atomic.Int32) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	vault, err := accounts.NewVault(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	acct, err := accounts.New(accounts.Options{Store: st, Vault: vault, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ten := tenants.New(st, nil)
	a, err := api.New(api.Options{Accounts: acct, Auth: ten, Tenants: ten, AdminKeys: adminKeys, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	a.Register(e)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		e.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ten, &requests
}

// TestKeysCommandRotates rotates the default tenant's key with triggerctl
// against the real API, as the README says: keys create, switch to the new
// key, keys revoke the old one, which is then refused.
func TestKeysCommandRotates(t *testing.T) {
	dir := setTestEnv(t)
	url, ten, requests := realAPI(t)
	tenant, oldKey, err := ten.Create(context.Background(), tenants.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, tenants.DefaultKeyFile, oldKey+"\n")
	keys := func(args ...string) (int, string, string) {
		t.Helper()
		return runCtl(append([]string{"keys", "--url", url, "--data-dir", dir}, args...)...)
	}

	// Mistakes are refused before anything is sent.
	for _, args := range [][]string{{"create"}, {"revoke"}, {"revoke", "a", "b"}, {"rotate"}} {
		if code, _, stderr := keys(args...); code != 2 || !strings.Contains(stderr, "want: keys list") && !strings.Contains(stderr, "--name NAME") {
			t.Errorf("keys %v: exit %d, stderr %q; want 2 saying what to run", args, code, stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("refused commands sent %d requests", n)
	}

	code, stdout, stderr := keys("create", "--name", "ci")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	var created struct {
		Key    tenants.Key `json:"key"`
		APIKey string      `json:"api_key"`
	}
	if err := json.Unmarshal([]byte(stdout), &created); err != nil || !strings.HasPrefix(created.APIKey, tenants.KeyPrefix) || created.Key.Name != "ci" {
		t.Fatalf("keys create printed %q (%v), want the new key and its id", stdout, err)
	}
	if !strings.Contains(stderr, "will not be shown again") || strings.Contains(stderr, created.APIKey) {
		t.Fatalf("keys create: stderr %q, want a note that the key is not shown again (and not the key)", stderr)
	}

	// Clients switch to the new key; the list shows both, without keys.
	t.Setenv("TRIGGERD_API_KEY", created.APIKey)
	code, stdout, stderr = keys("list")
	if code != 0 {
		t.Fatalf("keys list: %d %s", code, stderr)
	}
	var listed struct{ Keys []tenants.Key }
	if err := json.Unmarshal([]byte(stdout), &listed); err != nil || len(listed.Keys) != 2 || listed.Keys[1] != created.Key {
		t.Fatalf("keys list printed %q (%v), want the initial key and ci", stdout, err)
	}
	if strings.Contains(stdout, oldKey) || strings.Contains(stdout, created.APIKey) {
		t.Fatal("keys list printed a key")
	}
	oldID := listed.Keys[0].ID

	if code, _, stderr := keys("revoke", oldID); code != 0 || !strings.Contains(stderr, "revoked "+oldID) {
		t.Fatalf("keys revoke %s: %d %q", oldID, code, stderr)
	}
	if got, err := ten.Keys(context.Background(), tenant.ID); err != nil || len(got) != 1 || got[0].ID != created.Key.ID {
		t.Fatalf("the tenant's keys after the revoke: %+v, %v; want only the new one", got, err)
	}
	// The old key, still in default_tenant_key, is refused.
	t.Setenv("TRIGGERD_API_KEY", "")
	if code, _, stderr := keys("list"); code != 1 || !strings.Contains(stderr, "not valid") {
		t.Fatalf("keys list with the revoked key: %d %q, want 1 and the server's refusal", code, stderr)
	}
	// The last key is kept, and the server says what to do instead.
	t.Setenv("TRIGGERD_API_KEY", created.APIKey)
	if code, _, stderr := keys("revoke", created.Key.ID); code != 1 || !strings.Contains(stderr, "create a new key first") {
		t.Fatalf("keys revoke of the last key: %d %q, want 1 saying to create a new key first", code, stderr)
	}

	if code, stdout, _ := runCtl("help"); code != 0 || !strings.Contains(stdout, "keys ") {
		t.Errorf("help does not list keys:\n%s", stdout)
	}
}

// TestTenantsCreateDuringAdminKeyRotation creates tenants while the admin
// key lists two keys, as TRIGGERD_ADMIN_KEY does during a rotation, in
// either order: triggerctl sends one of them, not the list.
func TestTenantsCreateDuringAdminKeyRotation(t *testing.T) {
	dir := setTestEnv(t)
	url, _, _ := realAPI(t, "old-admin-key", "new-admin-key")
	for _, v := range []string{"old-admin-key,new-admin-key", "new-admin-key, old-admin-key", "new-admin-key"} {
		t.Setenv("TRIGGERD_ADMIN_KEY", v)
		if code, stdout, stderr := runCtl("tenants", "--url", url, "--data-dir", dir, "create", "acme"); code != 0 || !strings.Contains(stdout, `"api_key":"tdk_`) {
			t.Fatalf("TRIGGERD_ADMIN_KEY=%q: tenants create: %d %q %q", v, code, stdout, stderr)
		}
	}
	t.Setenv("TRIGGERD_ADMIN_KEY", "retired-admin-key,new-admin-key")
	if code, _, stderr := runCtl("tenants", "--url", url, "--data-dir", dir, "create", "acme"); code != 1 || !strings.Contains(stderr, "admin key") {
		t.Fatalf("a retired first admin key: %d %q, want 1 and the server's refusal", code, stderr)
	}
}
