package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A secret source that is set but holds no secret is a startup error that
// says how to fix it; triggerd never falls back to accepting unsigned or
// empty-keyed deliveries.
func TestEmptySecretSourcesAreRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-secret")
	if err := os.WriteFile(empty, []byte(" ,\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		name   string
		file   string
		lookup func(string) (string, bool)
		want   string
	}{
		{"file flag", empty, noEnv, "holds no secret"},
		{"variable of separators", "", func(k string) (string, bool) {
			return " , ", k == CodeHostSecret.Env
		}, CodeHostSecret.Env + " is set but holds no secret"},
		{"missing file", filepath.Join(dir, "nope"), noEnv, "--" + CodeHostSecret.FileFlag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := loadSecrets(CodeHostSecret, tc.file, t.TempDir(), tc.lookup)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// A generated secret file emptied by hand is refused, not regenerated.
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, CodeHostSecret.GenFile), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadSecrets(CodeHostSecret, "", data, noEnv); err == nil || !strings.Contains(err.Error(), "delete it to have a new secret generated") {
		t.Fatalf("emptied generated file: %v", err)
	}
}

// TestSecretVariablesHoldSeveralSecrets: each webhook secret variable may
// list several secrets, comma-separated, for rotation; all are kept.
func TestSecretVariablesHoldSeveralSecrets(t *testing.T) {
	for _, ws := range []SecretSource{CodeHostSecret, DeploySecret} {
		lookup := func(k string) (string, bool) { return " new-secret-1,old-secret-2 ", k == ws.Env }
		dir := t.TempDir()
		got, from, err := loadSecrets(ws, "", dir, lookup)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{"new-secret-1", "old-secret-2"}) || !strings.Contains(from, ws.Env) {
			t.Errorf("%s: secrets %q from %q, want both, from the variable", ws.Env, got, from)
		}
		if _, err := os.Stat(filepath.Join(dir, ws.GenFile)); !os.IsNotExist(err) {
			t.Errorf("%s set, yet a secret was generated into the data dir (%v)", ws.Env, err)
		}
	}
}

// TestPublicURLFollowsHTTPAddr checks that a triggerd given no public URL
// registers hooks where it listens: started on another port, its hooks
// at localhost:8080 reached nobody.
func TestPublicURLFollowsHTTPAddr(t *testing.T) {
	for _, c := range []struct {
		public, bound, want string
	}{
		{"", "[::]:8080", "http://localhost:8080"},
		{"", "127.0.0.1:8181", "http://127.0.0.1:8181"},
		{"", "0.0.0.0:9090", "http://localhost:9090"},
		{"", "[::1]:7000", "http://[::1]:7000"},
		{"", "127.0.0.1:4567", "http://127.0.0.1:4567"},
		{"https://hooks.example.com", "127.0.0.1:8181", "https://hooks.example.com"},
	} {
		cfg := Config{PublicURL: c.public}
		cfg.listeningOn(c.bound)
		if cfg.PublicURL != c.want || cfg.ConnectReturnOrigins()[0] != c.want {
			t.Errorf("public %q bound on %s: public URL %q, origins %q; want %q", c.public, c.bound, cfg.PublicURL, cfg.ConnectReturnOrigins(), c.want)
		}
	}
}
