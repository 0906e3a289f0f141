package specfetch

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// moduleZip builds a module zip of files (path → content) and returns it
// with its go.sum hash.
func moduleZip(t *testing.T, module, version string, files map[string]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(module + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := hashZip(zr)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), h
}

// proxy serves one module version as the Go module proxy does, and the
// checksum database's lookup with sum; it counts the zips it serves.
func proxy(t *testing.T, module, version string, zipBody []byte, sum string, served *atomic.Int32) *httptest.Server {
	t.Helper()
	esc := escapeModule(module)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/" + esc + "/@v/" + version + ".zip":
			served.Add(1)
			w.Write(zipBody)
		case "/sumdb/sum.golang.org/lookup/" + esc + "@" + version:
			fmt.Fprintf(w, "123\n%s %s %s\n%s %s/go.mod h1:x=\n\ngo.sum database tree\n", module, version, sum, module, version)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestGoProxyFetchesVerifiesAndCaches(t *testing.T) {
	const module, version = "example.com/Some/api", "v1.2.3"
	files := map[string]string{"a/v1/a-api.json": `{"a":1}`, "b/v1/b-api.json": `{"b":2}`, "go.mod": "module example.com/Some/api\n"}
	body, sum := moduleZip(t, module, version, files)
	var served atomic.Int32
	srv := proxy(t, module, version, body, sum, &served)
	f := &Fetcher{GoProxy: srv.URL, CacheDir: t.TempDir()}
	ctx := context.Background()

	got, err := f.GoModule(ctx, module, version, "a/v1/a-api.json", "b/v1/b-api.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(got["a/v1/a-api.json"]) != `{"a":1}` || string(got["b/v1/b-api.json"]) != `{"b":2}` || served.Load() != 1 {
		t.Fatalf("files %q after %d downloads", got, served.Load())
	}
	// Both files come from the cache now, even with the proxy gone.
	srv.Close()
	got, err = f.GoModule(ctx, module, version, "b/v1/b-api.json", "a/v1/a-api.json")
	if err != nil || string(got["b/v1/b-api.json"]) != `{"b":2}` {
		t.Fatalf("from the cache: %q %v", got, err)
	}
	// A file not cached needs the proxy.
	if _, err := f.GoModule(ctx, module, version, "go.mod"); err == nil {
		t.Fatal("a file never fetched came from nowhere")
	}
}

func TestGoProxyRefuses(t *testing.T) {
	const module, version = "example.com/api", "v0.1.0"
	body, sum := moduleZip(t, module, version, map[string]string{"x.json": "{}"})
	ctx := context.Background()

	// A zip whose hash is not the checksum database's.
	var served atomic.Int32
	srv := proxy(t, module, version, body, "h1:"+strings.Repeat("A", 43)+"=", &served)
	f := &Fetcher{GoProxy: srv.URL, CacheDir: t.TempDir()}
	if _, err := f.GoModule(ctx, module, version, "x.json"); !errors.Is(err, ErrModuleChecksum) {
		t.Errorf("a tampered zip: %v; want ErrModuleChecksum", err)
	}

	srv = proxy(t, module, version, body, sum, &served)
	f = &Fetcher{GoProxy: srv.URL, CacheDir: t.TempDir()}
	for _, tc := range []struct {
		version string
		files   []string
		want    string
	}{
		{version, []string{"missing.json"}, "has no file missing.json"},
		{version, []string{"../escape.json"}, "not a path inside a module"},
		{"v9.9.9", []string{"x.json"}, "404"},
		{"latest", []string{"x.json"}, "an exact version"},
		{version, nil, "files are needed"},
	} {
		_, err := f.GoModule(ctx, module, tc.version, tc.files...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v; want an error mentioning %q", tc.version, tc.files, err, tc.want)
		}
	}
}

func TestGoProxyURL(t *testing.T) {
	for _, tc := range []struct{ url, env, want string }{
		{"https://mirror.example/", "", "https://mirror.example"},
		{"", "off", DefaultGoProxy},
		{"", "direct", DefaultGoProxy},
		{"", "https://goproxy.example,direct", "https://goproxy.example"},
		{"", "direct|http://127.0.0.1:3000/", "http://127.0.0.1:3000"},
	} {
		t.Setenv("GOPROXY", tc.env)
		f := &Fetcher{GoProxy: tc.url}
		if got := f.goProxy(); got != tc.want {
			t.Errorf("URL %q GOPROXY %q: %s; want %s", tc.url, tc.env, got, tc.want)
		}
	}
	if got := escapeModule("github.com/Azure/SDK"); got != "github.com/!azure/!s!d!k" {
		t.Errorf("escapeModule = %s", got)
	}
}
