package specfetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

const spec = `{"openapi":"3.0.3","paths":{}}`

// registries serves a Go module proxy and an npm registry for vercel/sdk
// on loopback; zipSpec and tgzSpec say whether their archives hold the
// description, badSum spoils npm's integrity.
type registries struct {
	proxy, npm *httptest.Server
	zips       atomic.Int32
}

func newRegistries(t *testing.T, zipSpec, tgzSpec, badSum bool, proxyStatus int) *registries {
	t.Helper()
	r := &registries{}
	const version = "v1.0.1-0.20251027000000-1aada4a8abcd"
	r.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if proxyStatus != 0 {
			http.Error(w, "This module version is not available.", proxyStatus)
			return
		}
		switch req.URL.Path {
		case "/" + VercelModule + "/@latest":
			json.NewEncoder(w).Encode(map[string]string{"Version": version})
		case "/" + VercelModule + "/@v/" + version + ".zip":
			r.zips.Add(1)
			var b bytes.Buffer
			zw := zip.NewWriter(&b)
			prefix := VercelModule + "@" + version + "/"
			names := []string{prefix + "README.md"}
			if zipSpec {
				names = append(names, prefix+VercelSpecFile)
			}
			for _, n := range names {
				f, _ := zw.Create(n)
				f.Write([]byte(spec))
			}
			zw.Close()
			w.Write(b.Bytes())
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.proxy.Close)
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	files := map[string]string{"package/package.json": `{}`}
	if tgzSpec {
		files["package/"+VercelSpecFile] = spec
	}
	for n, body := range files {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	sri := "sha512-" + vercelSRI(tgz.Bytes())
	if badSum {
		sri = "sha512-" + vercelSRI([]byte("other"))
	}
	r.npm = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.URL.EscapedPath() {
		case "/@vercel%2fsdk/latest":
			json.NewEncoder(w).Encode(map[string]any{"version": "1.28.35", "dist": map[string]string{
				"tarball": "http://" + req.Host + "/sdk.tgz", "integrity": sri}})
		case "/sdk.tgz":
			w.Write(tgz.Bytes())
		default:
			http.NotFound(w, req)
		}
	}))
	t.Cleanup(r.npm.Close)
	return r
}

func (r *registries) options(t *testing.T) VercelOptions {
	return VercelOptions{CacheDir: t.TempDir(), GoProxy: r.proxy.URL, NPMRegistry: r.npm.URL}
}

func TestVercelSpecFromGoProxyIsCached(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	r := newRegistries(t, true, false, false, 0)
	o := r.options(t)
	for range 2 {
		b, src, err := VercelSpec(context.Background(), o)
		if err != nil || string(b) != spec || src.Where != "goproxy" || !strings.Contains(src.Version, "1aada4a8") {
			t.Fatalf("VercelSpec = %q %v %v", b, src, err)
		}
	}
	if n := r.zips.Load(); n != 1 {
		t.Errorf("the module zip was fetched %d times, want once (then the cache)", n)
	}
}

func TestVercelSpecFallsBackToNPM(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	r := newRegistries(t, false, true, false, 0)
	b, src, err := VercelSpec(context.Background(), r.options(t))
	if err != nil || string(b) != spec || src.Where != "npm" || src.Version != "1.28.35" {
		t.Fatalf("VercelSpec = %q %v %v", b, src, err)
	}
}

func TestVercelSpecUnavailable(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	r := newRegistries(t, false, false, false, http.StatusForbidden)
	_, _, err := VercelSpec(context.Background(), r.options(t))
	if !errors.Is(err, ErrVercelUnavailable) || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "has no "+VercelSpecFile) {
		t.Errorf("err = %v, want ErrVercelUnavailable saying what each registry answered", err)
	}
}

func TestVercelSpecIntegrity(t *testing.T) {
	t.Setenv(VercelSpecEnv, "")
	r := newRegistries(t, false, true, true, http.StatusNotFound)
	_, _, err := VercelSpec(context.Background(), r.options(t))
	if err == nil || errors.Is(err, ErrVercelUnavailable) || !strings.Contains(err.Error(), "sha512") {
		t.Errorf("err = %v, want a checksum error (not 'unavailable')", err)
	}
}

func TestVercelSpecLocalFile(t *testing.T) {
	p := t.TempDir() + "/vercel-spec.json"
	if err := writeFile(p, spec); err != nil {
		t.Fatal(err)
	}
	t.Setenv(VercelSpecEnv, p)
	b, src, err := VercelSpec(context.Background(), VercelOptions{GoProxy: "http://127.0.0.1:1", NPMRegistry: "http://127.0.0.1:1"})
	if err != nil || string(b) != spec || src.Where != "file" {
		t.Errorf("VercelSpec = %q %v %v", b, src, err)
	}
}

func writeFile(p, s string) error { return vercelKeep(p, []byte(s)) }
