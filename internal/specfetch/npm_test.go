package specfetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// registry is a local npm registry holding one version of one package.
type registry struct {
	*httptest.Server
	tgz       []byte
	integrity string
	shasum    string
	hits      atomic.Int64
}

func tarball(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "package/generated/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newRegistry(t *testing.T, files map[string]string) *registry {
	t.Helper()
	r := &registry{tgz: tarball(t, files)}
	sum512 := sha512.Sum512(r.tgz)
	sum1 := sha1.Sum(r.tgz)
	r.integrity = "sha512-" + base64.StdEncoding.EncodeToString(sum512[:])
	r.shasum = hex.EncodeToString(sum1[:])
	mux := http.NewServeMux()
	manifest := func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		json.NewEncoder(w).Encode(map[string]any{
			"name":    "@acme/spec",
			"version": "1.2.3",
			"dist": map[string]string{
				"tarball":   r.URL + "/@acme/spec/-/spec-1.2.3.tgz",
				"integrity": r.integrity,
				"shasum":    r.shasum,
			},
		})
	}
	// The registry's own spelling of a scoped name escapes its slash.
	mux.HandleFunc("GET /@acme%2Fspec/1.2.3", manifest)
	mux.HandleFunc("GET /@acme%2Fspec/latest", manifest)
	mux.HandleFunc("GET /@acme/spec/-/spec-1.2.3.tgz", func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		w.Write(r.tgz)
	})
	r.Server = httptest.NewServer(mux)
	t.Cleanup(r.Close)
	return r
}

func TestNPMFetchesVerifiesAndCaches(t *testing.T) {
	reg := newRegistry(t, map[string]string{"generated/api.json": `{"openapi":"3.0.3"}`, "README.md": "x"})
	f := &Fetcher{NPMRegistry: reg.URL, CacheDir: t.TempDir()}
	b, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/api.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"openapi":"3.0.3"}` {
		t.Fatalf("got %q", b)
	}
	if n := reg.hits.Load(); n != 2 {
		t.Fatalf("first fetch made %d requests, want 2 (metadata, tarball)", n)
	}
	// An exact version is read from the cache without the registry.
	reg.Close()
	b2, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/api.json")
	if err != nil {
		t.Fatalf("cached fetch: %v", err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatalf("cached copy differs: %q", b2)
	}
}

func TestNPMResolvesADistTag(t *testing.T) {
	reg := newRegistry(t, map[string]string{"generated/api.json": `{}`})
	f := &Fetcher{NPMRegistry: reg.URL, CacheDir: t.TempDir()}
	if _, err := f.NPM(t.Context(), "@acme/spec", "latest", "generated/api.json"); err != nil {
		t.Fatal(err)
	}
	// The file is kept under the version the tag named.
	if _, err := os.Stat(filepath.Join(f.CacheDir, "npm", "@acme", "spec@1.2.3", "generated", "api.json")); err != nil {
		t.Fatalf("not cached under the resolved version: %v", err)
	}
}

func TestNPMRefusesATamperedTarball(t *testing.T) {
	reg := newRegistry(t, map[string]string{"generated/api.json": `{}`})
	reg.tgz = tarball(t, map[string]string{"generated/api.json": `{"tampered":true}`})
	f := &Fetcher{NPMRegistry: reg.URL, CacheDir: t.TempDir()}
	_, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/api.json")
	if !errors.Is(err, ErrIntegrity) {
		t.Fatalf("err = %v, want ErrIntegrity", err)
	}
	entries, _ := os.ReadDir(filepath.Join(f.CacheDir, "npm", "@acme"))
	if len(entries) != 0 {
		t.Fatalf("a tampered file was cached: %v", entries)
	}
}

func TestNPMFallsBackToShasum(t *testing.T) {
	d := npmDist{Shasum: "da39a3ee5e6b4b0d3255bfef95601890afd80709"} // sha1 of nothing
	if err := d.verify(nil); err != nil {
		t.Fatal(err)
	}
	if err := d.verify([]byte("x")); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("err = %v, want ErrIntegrity", err)
	}
	if err := (npmDist{}).verify(nil); !errors.Is(err, ErrIntegrity) {
		t.Fatalf("no checksum: err = %v, want ErrIntegrity", err)
	}
}

func TestNPMMissingFileAndVersion(t *testing.T) {
	reg := newRegistry(t, map[string]string{"generated/api.json": `{}`})
	f := &Fetcher{NPMRegistry: reg.URL, CacheDir: t.TempDir()}
	if _, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/other.json"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing file: err = %v, want ErrNotFound", err)
	}
	if _, err := f.NPM(t.Context(), "@acme/spec", "9.9.9", "generated/api.json"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing version: err = %v, want ErrNotFound", err)
	}
}

func TestNPMRefetchesACorruptedCache(t *testing.T) {
	reg := newRegistry(t, map[string]string{"generated/api.json": `{"v":1}`})
	f := &Fetcher{NPMRegistry: reg.URL, CacheDir: t.TempDir()}
	if _, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/api.json"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.CacheDir, "npm", "@acme", "spec@1.2.3", "generated", "api.json")
	if err := os.WriteFile(path, []byte(`{"v":`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := f.NPM(t.Context(), "@acme/spec", "1.2.3", "generated/api.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"v":1}` {
		t.Fatalf("got %q, want the registry's copy", b)
	}
}

func TestCacheKeyStaysInTheCache(t *testing.T) {
	for _, p := range []string{"../x", "/etc/passwd", ""} {
		if _, err := cacheKey("npm", p); err == nil {
			t.Errorf("cacheKey(%q) accepted", p)
		}
	}
}
