package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
)

// TestSecretFilesAreReloaded rewrites a webhook secret file under a
// running watcher: a removed secret stops verifying, a file that holds
// nothing or is gone keeps the secrets as they were, with one warning
// each, and no secret reaches the log.
func TestSecretFilesAreReloaded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "codehost-secret")
	// Written whole and renamed into place, as secret managers and
	// Kubernetes do: the watcher never reads a half-written file.
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("old-secret-1\nnew-secret-2\n")
	secrets := ingest.SplitSecrets("old-secret-1\nnew-secret-2\n")
	v, err := ingest.NewVerifier(ingest.CodeHostScheme, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"zen":"x"}`)
	verifies := func(secret string) bool { return v.Verify(ingest.CodeHostScheme.Sign([]byte(secret), body), body) }
	if !verifies("old-secret-1") || !verifies("new-secret-2") {
		t.Fatal("a file with one secret per line did not give both secrets")
	}
	var logs testenv.Buffer
	stop := watchSecrets([]*secretFile{{flag: "codehost-webhook-secret-file", path: path, v: v, secrets: secrets}},
		5*time.Millisecond, zerolog.New(&logs))
	defer stop()

	write("new-secret-2")
	testenv.Eventually(t, 5*time.Second, "the removed secret to stop verifying", func() bool { return !verifies("old-secret-1") })
	if !verifies("new-secret-2") {
		t.Fatal("the secret kept in the file no longer verifies")
	}

	write(" , \n")
	testenv.Eventually(t, 5*time.Second, "a warning about the empty file", func() bool {
		return strings.Contains(logs.String(), "holds no secret")
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "a warning about the missing file", func() bool {
		return strings.Contains(logs.String(), "cannot read")
	})
	if !verifies("new-secret-2") {
		t.Fatal("an empty or missing file changed the secrets")
	}
	write("newest-secret-3")
	testenv.Eventually(t, 5*time.Second, "the file's new secret", func() bool { return verifies("newest-secret-3") })
	stop()

	out := logs.String()
	if n := strings.Count(out, "holds no secret"); n != 1 {
		t.Errorf("the empty file was reported %d times; want once until it changes:\n%s", n, out)
	}
	if n := strings.Count(out, "webhook secrets reloaded"); n != 2 {
		t.Errorf("%d reloads logged, want 2:\n%s", n, out)
	}
	for _, s := range []string{"old-secret-1", "new-secret-2", "newest-secret-3"} {
		if strings.Contains(out, s) {
			t.Fatalf("a secret appears in the log:\n%s", out)
		}
	}
}

// TestSIGHUPWithoutSecretFilesIsIgnored: without secret files SIGHUP has
// nothing to reload, and must not end the process (Go's default for it)
// with requests and steps in hand.
func TestSIGHUPWithoutSecretFilesIsIgnored(t *testing.T) {
	var logs testenv.Buffer
	stop := watchSecrets(nil, time.Millisecond, zerolog.New(&logs))
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "SIGHUP logged as ignored", func() bool {
		return strings.Contains(logs.String(), "ignored")
	})
}
