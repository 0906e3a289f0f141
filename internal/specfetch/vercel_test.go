package specfetch

import (
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

const vercelSpec = `{"openapi":"3.0.3","paths":{}}`

// vercelRegistries serves vercel/sdk from a Go module proxy (with the
// checksum database's lookup) and from an npm registry, on loopback.
// withZip and withTgz say whether each archive holds the description;
// refuse makes the proxy answer 403 as it does for a module it will not
// serve.
func vercelRegistries(t *testing.T, withZip, withTgz, refuse bool) (f *Fetcher, zips *atomic.Int32) {
	t.Helper()
	const version = "v1.28.35"
	files := map[string]string{"README.md": "sdk"}
	if withZip {
		files[VercelSpecFile] = vercelSpec
	}
	body, sum := moduleZip(t, VercelModule, version, files)
	zips = &atomic.Int32{}
	esc := escapeModule(VercelModule)
	gp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse {
			http.Error(w, "This module version is not available.", http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/" + esc + "/@latest":
			json.NewEncoder(w).Encode(map[string]string{"Version": version})
		case "/" + esc + "/@v/" + version + ".zip":
			zips.Add(1)
			w.Write(body)
		case "/sumdb/sum.golang.org/lookup/" + esc + "@" + version:
			fmt.Fprintf(w, "1\n%s %s %s\n\ngo.sum database tree\n", VercelModule, version, sum)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(gp.Close)
	pkg := map[string]string{"package.json": "{}"}
	if withTgz {
		pkg[VercelSpecFile] = vercelSpec
	}
	tgz := tarball(t, pkg)
	sri := sha512.Sum512(tgz)
	var npm *httptest.Server
	npm = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/@vercel%2Fsdk/latest":
			json.NewEncoder(w).Encode(map[string]any{"version": "1.28.35", "dist": map[string]string{
				"tarball": npm.URL + "/sdk.tgz", "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sri[:])}})
		case "/sdk.tgz":
			w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(npm.Close)
	return &Fetcher{GoProxy: gp.URL, NPMRegistry: npm.URL, CacheDir: t.TempDir()}, zips
}

func TestVercelFromTheGoProxyIsCached(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	f, zips := vercelRegistries(t, true, false, false)
	for range 2 {
		b, src, err := f.Vercel(context.Background())
		if err != nil || string(b) != vercelSpec || !strings.Contains(src, VercelModule+"@v1.28.35") {
			t.Fatalf("Vercel = %q, %q, %v", b, src, err)
		}
	}
	if n := zips.Load(); n != 1 {
		t.Errorf("the module zip was fetched %d times, want once (then the cache)", n)
	}
}

func TestVercelFallsBackToNPM(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	f, _ := vercelRegistries(t, false, true, true)
	b, src, err := f.Vercel(context.Background())
	if err != nil || string(b) != vercelSpec || !strings.Contains(src, "npm") {
		t.Fatalf("Vercel = %q, %q, %v", b, src, err)
	}
}

// Neither registry serving the file is ErrUnavailable, saying what each
// answered; a registry that cannot be reached is not.
func TestVercelUnavailable(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	f, _ := vercelRegistries(t, false, false, true)
	_, _, err := f.Vercel(context.Background())
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "no file "+VercelSpecFile) {
		t.Errorf("err = %v, want ErrUnavailable with the proxy's 403 and npm's missing file", err)
	}
	f = &Fetcher{GoProxy: "http://127.0.0.1:1", NPMRegistry: "http://127.0.0.1:1", CacheDir: t.TempDir()}
	if _, _, err := f.Vercel(context.Background()); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("unreachable registries: err = %v, want an error that is not ErrUnavailable", err)
	}
}

func TestVercelLocalFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), VercelSpecFile)
	if err := os.WriteFile(p, []byte(vercelSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(VercelSpecEnv, p)
	f := &Fetcher{GoProxy: "http://127.0.0.1:1", NPMRegistry: "http://127.0.0.1:1"}
	b, src, err := f.Vercel(context.Background())
	if err != nil || string(b) != vercelSpec || !strings.Contains(src, p) {
		t.Errorf("Vercel = %q, %q, %v", b, src, err)
	}
}
