// Package specfetch fetches the providers' machine-readable API
// descriptions from the registries that publish them, verifies them
// against the checksums the registries give, and keeps them in a cache on
// disk, so that conformance tests can hold the fakes and the connector
// clients to the real descriptions without copying them into the
// repository. Only tests import it.
//
// A Fetcher has one method per registry (NPM here; the Go module proxy
// and others in their own files); each returns one file of one published
// version. A file once fetched and verified is read from the cache, so a
// pinned version costs the network once per machine.
package specfetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Fetcher fetches files of published packages. The zero value is ready
// to use.
type Fetcher struct {
	// Client sends the requests; nil means http.DefaultClient. Requests
	// carry the caller's context, so its deadline bounds each fetch.
	Client *http.Client
	// CacheDir is where fetched files are kept; "" means
	// os.UserCacheDir()/triggerd-specs.
	CacheDir string
	// NPMRegistry is the npm registry's base URL; "" means
	// https://registry.npmjs.org.
	NPMRegistry string
	// GoProxy is the Go module proxy's base URL; "" means the first
	// http(s) entry of $GOPROXY, else DefaultGoProxy.
	GoProxy string
}

// MaxDownload bounds every body a Fetcher reads (metadata, archives and
// the files in them): the largest description fetched today is GitHub's
// dereferenced one, about 75 MB.
const MaxDownload = 256 << 20

// ErrNotFound is wrapped by errors for a package, version or file the
// registry does not have.
var ErrNotFound = errors.New("specfetch: not found")

// ErrIntegrity is wrapped by errors for a download whose checksum is not
// the one the registry gives.
var ErrIntegrity = errors.New("specfetch: checksum mismatch")

func (f *Fetcher) client() *http.Client {
	if f.Client != nil {
		return f.Client
	}
	return http.DefaultClient
}

func (f *Fetcher) cacheDir() (string, error) {
	if f.CacheDir != "" {
		return f.CacheDir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("specfetch: no cache directory (set Fetcher.CacheDir or $XDG_CACHE_HOME): %w", err)
	}
	return filepath.Join(dir, "triggerd-specs"), nil
}

// get GETs url and returns its body, at most MaxDownload bytes; a status
// other than 200 is an error (404, 403 and 410 wrap ErrNotFound).
func (f *Fetcher) get(ctx context.Context, url, accept string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("specfetch: %w", err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("User-Agent", "triggerd-specfetch")
	resp, err := f.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("specfetch: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone, http.StatusForbidden:
		// 403 and 410 are how the Go module proxy refuses a module it
		// will not serve ("This module version is not available.").
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("%w: GET %s answered %s %q", ErrNotFound, url, resp.Status, bytes.TrimSpace(msg))
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("specfetch: GET %s answered %s: %s", url, resp.Status, bytes.TrimSpace(msg))
	}
	return readAtMost(resp.Body, "GET "+url)
}

// readAtMost reads r to its end, refusing more than MaxDownload bytes.
func readAtMost(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDownload+1))
	if err != nil {
		return nil, fmt.Errorf("specfetch: %s: %w", what, err)
	}
	if len(b) > MaxDownload {
		return nil, fmt.Errorf("specfetch: %s: more than %d bytes", what, MaxDownload)
	}
	return b, nil
}

// cached returns the file kept under key, or nil when there is none or
// it no longer matches the digest written beside it (a torn or altered
// copy is fetched again).
func (f *Fetcher) cached(key string) []byte {
	dir, err := f.cacheDir()
	if err != nil {
		return nil
	}
	path := filepath.Join(dir, key)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	want, err := os.ReadFile(path + ".sha256")
	if err != nil || strings.TrimSpace(string(want)) != digest(b) {
		return nil
	}
	return b
}

// keep writes b to the cache under key, with its digest beside it. Each
// file is written beside its final name and renamed, so that tests
// fetching at once each read a whole file or none.
func (f *Fetcher) keep(key string, b []byte) error {
	dir, err := f.cacheDir()
	if err != nil {
		return err
	}
	path := filepath.Join(dir, key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("specfetch: cache: %w", err)
	}
	if err := writeAtomic(path, b); err != nil {
		return err
	}
	return writeAtomic(path+".sha256", []byte(digest(b)+"\n"))
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("specfetch: cache: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("specfetch: cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("specfetch: cache: %w", err)
	}
	return nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// cacheKey joins the parts of a cache key, refusing any that would climb
// out of the cache directory.
func cacheKey(parts ...string) (string, error) {
	for _, p := range parts {
		clean := filepath.ToSlash(filepath.Clean(p))
		if p == "" || filepath.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") {
			return "", fmt.Errorf("specfetch: %q cannot name a file in the cache", p)
		}
	}
	return filepath.Join(parts...), nil
}
