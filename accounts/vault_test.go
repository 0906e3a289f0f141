package accounts

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func mustVault(t *testing.T, keys ...[]byte) *Vault {
	t.Helper()
	v, err := NewVault(keys...)
	if err != nil {
		t.Fatalf("NewVault: %v", err)
	}
	return v
}

func TestVaultRoundTrip(t *testing.T) {
	v := mustVault(t, newKey(t))
	plain := []byte(`{"access_token":"gho_secret"}`)
	sealed, err := v.Seal(plain, "account:acc_1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, plain) || bytes.Contains(sealed, []byte("gho_secret")) {
		t.Fatal("sealed data holds the plaintext")
	}
	if len(sealed) != headerSize+len(plain)+16 || sealed[0] != sealVersion {
		t.Fatalf("unexpected sealed layout: %d bytes, version %d", len(sealed), sealed[0])
	}
	got, err := v.Open(sealed, "account:acc_1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, want %q", got, plain)
	}
	again, _ := v.Seal(plain, "account:acc_1")
	if bytes.Equal(again, sealed) {
		t.Fatal("two seals of the same plaintext are equal: nonce reused")
	}
}

func TestVaultRefusesWrongAADAndTampering(t *testing.T) {
	v := mustVault(t, newKey(t))
	plain := []byte("refresh-token-value")
	sealed, err := v.Seal(plain, tokenAAD("acc_A"))
	if err != nil {
		t.Fatal(err)
	}
	// A ciphertext moved to another account does not open there.
	if _, err := v.Open(sealed, tokenAAD("acc_B")); !errors.Is(err, ErrUndecryptable) {
		t.Fatalf("open under another account's AAD: err = %v, want ErrUndecryptable", err)
	}
	for i := range sealed {
		tampered := bytes.Clone(sealed)
		tampered[i] ^= 0x01
		got, err := v.Open(tampered, tokenAAD("acc_A"))
		if !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("byte %d flipped: err = %v, want ErrUndecryptable", i, err)
		}
		if got != nil || strings.Contains(err.Error(), string(plain)) {
			t.Fatalf("byte %d flipped: plaintext leaked", i)
		}
	}
	for _, short := range [][]byte{nil, {}, sealed[:headerSize], sealed[:len(sealed)-1]} {
		if _, err := v.Open(short, tokenAAD("acc_A")); !errors.Is(err, ErrUndecryptable) {
			t.Fatalf("truncated to %d bytes: err = %v", len(short), err)
		}
	}
}

func TestVaultRotation(t *testing.T) {
	oldKey, newK := newKey(t), newKey(t)
	old := mustVault(t, oldKey)
	sealedOld, err := old.Seal([]byte("one"), "a")
	if err != nil {
		t.Fatal(err)
	}
	rotated := mustVault(t, newK, oldKey)
	if got, err := rotated.Open(sealedOld, "a"); err != nil || string(got) != "one" {
		t.Fatalf("open old-key data after rotation: %q, %v", got, err)
	}
	sealedNew, err := rotated.Seal([]byte("two"), "a")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sealedNew[1:5], keyIDBytes(newK)) {
		t.Fatal("the rotated vault does not seal with the first key")
	}
	if _, err := old.Open(sealedNew, "a"); !errors.Is(err, ErrUndecryptable) {
		t.Fatalf("old-only vault opened new-key data: err = %v", err)
	}
	if got, err := mustVault(t, newK).Open(sealedNew, "a"); err != nil || string(got) != "two" {
		t.Fatalf("open with the new key alone: %q, %v", got, err)
	}
}

func keyIDBytes(k []byte) []byte {
	id := idOf(k)
	return id[:]
}

func TestNewVaultRefusesBadKeys(t *testing.T) {
	for _, keys := range [][][]byte{
		nil,
		{make([]byte, 16)},
		{make([]byte, 31)},
		{make([]byte, 33)},
		{newKey(t), make([]byte, 24)},
	} {
		if _, err := NewVault(keys...); err == nil {
			t.Fatalf("NewVault accepted keys of sizes %v", sizes(keys))
		} else if len(keys) > 0 && !strings.Contains(err.Error(), "32") {
			t.Fatalf("error does not say the size wanted: %v", err)
		}
	}
}

func sizes(keys [][]byte) []int {
	var out []int
	for _, k := range keys {
		out = append(out, len(k))
	}
	return out
}

func TestLoadKeysFromEnvironment(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	for name, env := range map[string]string{
		"std base64":        base64.StdEncoding.EncodeToString(k1),
		"raw url base64":    base64.RawURLEncoding.EncodeToString(k1),
		"hex":               hex.EncodeToString(k1),
		"upper hex, spaces": "  " + strings.ToUpper(hex.EncodeToString(k1)) + " \n",
	} {
		keys, source, err := LoadKeys(env, "/nonexistent/key", "/nonexistent/dir")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if source != "environment TRIGGERD_ENCRYPTION_KEY" || len(keys) != 1 || !bytes.Equal(keys[0], k1) {
			t.Fatalf("%s: got %d keys from %q", name, len(keys), source)
		}
	}
	keys, _, err := LoadKeys(base64.URLEncoding.EncodeToString(k2)+", "+hex.EncodeToString(k1), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !bytes.Equal(keys[0], k2) || !bytes.Equal(keys[1], k1) {
		t.Fatal("two keys not loaded in order")
	}
	if _, err := NewVault(keys...); err != nil {
		t.Fatal(err)
	}

	// Bad values are refused without echoing them.
	short := base64.StdEncoding.EncodeToString(k1[:16])
	three := strings.Repeat(hex.EncodeToString(k1)+",", 3)
	for _, bad := range []string{short, "not-a-key-at-all-" + short, three, hex.EncodeToString(k1) + ",zz" + short} {
		_, _, err := LoadKeys(bad, "", "")
		if err == nil {
			t.Fatalf("LoadKeys accepted a bad value")
		}
		if strings.Contains(err.Error(), short) || strings.Contains(err.Error(), hex.EncodeToString(k1)) {
			t.Fatalf("error echoes the key: %v", err)
		}
	}
}

func TestLoadKeysFromFile(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	path := filepath.Join(t.TempDir(), "key")
	content := base64.StdEncoding.EncodeToString(k1) + "\n" + hex.EncodeToString(k2) + "\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, source, err := LoadKeys("", path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if source != path || len(keys) != 2 || !bytes.Equal(keys[0], k1) || !bytes.Equal(keys[1], k2) {
		t.Fatalf("got %d keys from %q", len(keys), source)
	}

	secretish := "c2VjcmV0LWJ1dC1ub3Qta2V5"
	if err := os.WriteFile(path, []byte(secretish), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadKeys("", path, "")
	if err == nil || strings.Contains(err.Error(), secretish) || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad key file: err = %v", err)
	}
	if _, _, err := LoadKeys("", filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Fatal("missing key file accepted")
	}
}

func TestLoadKeysGenerated(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	keys, source, err := LoadKeys("", "", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dataDir, "encryption_key")
	if source != want || len(keys) != 1 || len(keys[0]) != 32 {
		t.Fatalf("got %d keys from %q, want one from %q", len(keys), source, want)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	di, err := os.Stat(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v, want 0700", di.Mode().Perm())
	}
	content, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(content)) != base64.StdEncoding.EncodeToString(keys[0]) {
		t.Fatal("key file does not hold the key as base64")
	}

	again, source2, err := LoadKeys("", "", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if source2 != want || len(again) != 1 || !bytes.Equal(again[0], keys[0]) {
		t.Fatal("second start did not reuse the generated key")
	}

	// A corrupt key file is an error that does not quote it.
	if err := os.WriteFile(want, []byte("corrupt-content-123"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadKeys("", "", dataDir); err == nil || strings.Contains(err.Error(), "corrupt-content-123") {
		t.Fatalf("corrupt generated key file: err = %v", err)
	}
	if _, _, err := LoadKeys("", "", ""); err == nil {
		t.Fatal("no key source at all was accepted")
	}
}
