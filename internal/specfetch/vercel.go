package specfetch

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Where Vercel's OpenAPI description is published: vercel-spec.json at
// the root of the vercel/sdk repository, which the Go module proxy serves
// as a module zip (the repository has no go.mod, so its versions are
// +incompatible or pseudo-versions) and which the npm package @vercel/sdk
// would ship if it listed the file.
const (
	VercelSpecFile   = "vercel-spec.json"
	VercelModule     = "github.com/vercel/sdk"
	VercelNPMPackage = "@vercel/sdk"
	// VercelSpecEnv names a local copy of the description to use instead
	// of fetching one (a path to vercel-spec.json).
	VercelSpecEnv = "TRIGGERD_VERCEL_SPEC"
)

// ErrVercelUnavailable is wrapped by VercelSpec's error when every source
// answered that it does not have the description (as opposed to a
// network failure, which is a plain error).
var ErrVercelUnavailable = errors.New("specfetch: no source serves vercel-spec.json")

// VercelOptions configures VercelSpec. The zero value uses the public
// registries and os.UserCacheDir()/triggerd-specs.
type VercelOptions struct {
	// Client sends the requests; nil means http.DefaultClient. Each
	// request carries the caller's context.
	Client *http.Client
	// CacheDir is where the description is kept; "" means
	// os.UserCacheDir()/triggerd-specs.
	CacheDir string
	// GoProxy and NPMRegistry are the registries' base URLs; "" means
	// https://proxy.golang.org and https://registry.npmjs.org.
	GoProxy, NPMRegistry string
}

// VercelSource says where a description came from.
type VercelSource struct {
	// Where is "file", "cache", "goproxy" or "npm".
	Where string
	// Version is the module or package version ("" for a local file).
	Version string
	// Location is the file, URL or cache path read.
	Location string
}

func (s VercelSource) String() string {
	if s.Version == "" {
		return s.Where + " " + s.Location
	}
	return fmt.Sprintf("%s %s@%s", s.Where, s.Location, s.Version)
}

// vercelMaxDownload bounds every body read: a module zip of vercel/sdk is
// tens of megabytes, the description about 10 MB.
const vercelMaxDownload = 512 << 20

// VercelSpec returns Vercel's OpenAPI description (vercel-spec.json of
// vercel/sdk) and where it came from, trying in order: the file named by
// $TRIGGERD_VERCEL_SPEC; the Go module proxy's latest version of
// github.com/vercel/sdk (kept in the cache under its version, so a
// version once fetched costs nothing more); the latest @vercel/sdk on npm.
// When every registry answers that it has no such file, the error wraps
// ErrVercelUnavailable and says what each answered; the newest cached
// copy is then returned instead, if there is one.
func VercelSpec(ctx context.Context, o VercelOptions) ([]byte, VercelSource, error) {
	if p := os.Getenv(VercelSpecEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, VercelSource{}, fmt.Errorf("specfetch: $%s: %w", VercelSpecEnv, err)
		}
		return b, VercelSource{Where: "file", Location: p}, nil
	}
	dir, err := vercelCacheDir(o.CacheDir)
	if err != nil {
		return nil, VercelSource{}, err
	}
	var refusals []error
	b, src, err := vercelFromGoProxy(ctx, o, dir)
	if err == nil {
		return b, src, nil
	}
	if !errors.Is(err, errVercelNotServed) {
		return nil, VercelSource{}, err
	}
	refusals = append(refusals, err)
	b, src, err = vercelFromNPM(ctx, o, dir)
	if err == nil {
		return b, src, nil
	}
	if !errors.Is(err, errVercelNotServed) {
		return nil, VercelSource{}, err
	}
	refusals = append(refusals, err)
	if b, src, ok := vercelNewestCached(dir); ok {
		return b, src, nil
	}
	return nil, VercelSource{}, fmt.Errorf("%w: %w", ErrVercelUnavailable, errors.Join(refusals...))
}

// errVercelNotServed marks a registry's definite "no": a 4xx answer, or
// a published archive without the file.
var errVercelNotServed = errors.New("not served")

func vercelCacheDir(dir string) (string, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("specfetch: no cache directory (set VercelOptions.CacheDir or $XDG_CACHE_HOME): %w", err)
		}
		dir = filepath.Join(base, "triggerd-specs")
	}
	return filepath.Join(dir, "vercel"), nil
}

// vercelFromGoProxy reads the proxy's latest version of the module and
// the description in its zip, from the cache when that version is there.
func vercelFromGoProxy(ctx context.Context, o VercelOptions, dir string) ([]byte, VercelSource, error) {
	base := strings.TrimSuffix(vercelOr(o.GoProxy, "https://proxy.golang.org"), "/")
	mod := base + "/" + VercelModule
	raw, err := vercelGet(ctx, o.Client, mod+"/@latest")
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("go module proxy: %w", err)
	}
	var info struct{ Version string }
	if err := json.Unmarshal(raw, &info); err != nil || info.Version == "" || strings.ContainsAny(info.Version, "/\\") {
		return nil, VercelSource{}, fmt.Errorf("specfetch: go module proxy: %s/@latest is not a version: %.200s", mod, raw)
	}
	src := VercelSource{Where: "goproxy", Version: info.Version, Location: VercelModule}
	key := filepath.Join(dir, "goproxy-"+info.Version+".json")
	if b, ok := vercelCached(key); ok {
		return b, src, nil
	}
	zb, err := vercelGet(ctx, o.Client, mod+"/@v/"+info.Version+".zip")
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("go module proxy: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("specfetch: go module proxy: %s@%s: the module zip: %w", VercelModule, info.Version, err)
	}
	// Files in a module zip are under "<module>@<version>/".
	want := VercelModule + "@" + info.Version + "/" + VercelSpecFile
	for _, f := range zr.File {
		if f.Name != want {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, VercelSource{}, fmt.Errorf("specfetch: %s: %w", want, err)
		}
		b, err := vercelReadAll(rc, want)
		rc.Close()
		if err != nil {
			return nil, VercelSource{}, err
		}
		return b, src, vercelKeep(key, b)
	}
	return nil, VercelSource{}, fmt.Errorf("go module proxy: %s@%s has no %s: %w", VercelModule, info.Version, VercelSpecFile, errVercelNotServed)
}

// vercelFromNPM reads the latest @vercel/sdk and the description in its
// tarball, checked against the registry's integrity.
func vercelFromNPM(ctx context.Context, o VercelOptions, dir string) ([]byte, VercelSource, error) {
	base := strings.TrimSuffix(vercelOr(o.NPMRegistry, "https://registry.npmjs.org"), "/")
	raw, err := vercelGet(ctx, o.Client, base+"/@vercel%2fsdk/latest")
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("npm: %w", err)
	}
	var m struct {
		Version string
		Dist    struct{ Tarball, Integrity string }
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Version == "" || m.Dist.Tarball == "" || strings.ContainsAny(m.Version, "/\\") {
		return nil, VercelSource{}, fmt.Errorf("specfetch: npm: %s/latest is not a version document", VercelNPMPackage)
	}
	src := VercelSource{Where: "npm", Version: m.Version, Location: VercelNPMPackage}
	key := filepath.Join(dir, "npm-"+m.Version+".json")
	if b, ok := vercelCached(key); ok {
		return b, src, nil
	}
	tgz, err := vercelGet(ctx, o.Client, m.Dist.Tarball)
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("npm: %w", err)
	}
	if err := vercelIntegrity(m.Dist.Integrity, tgz); err != nil {
		return nil, VercelSource{}, fmt.Errorf("specfetch: npm: %s@%s: %w", VercelNPMPackage, m.Version, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, VercelSource{}, fmt.Errorf("specfetch: npm: %s@%s: %w", VercelNPMPackage, m.Version, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, VercelSource{}, fmt.Errorf("npm: %s@%s has no %s: %w", VercelNPMPackage, m.Version, VercelSpecFile, errVercelNotServed)
		}
		if err != nil {
			return nil, VercelSource{}, fmt.Errorf("specfetch: npm: %s@%s: %w", VercelNPMPackage, m.Version, err)
		}
		// npm archives hold the package under one top folder ("package/").
		_, rest, _ := strings.Cut(strings.TrimPrefix(path.Clean("/"+h.Name), "/"), "/")
		if h.Typeflag == tar.TypeReg && rest == VercelSpecFile {
			b, err := vercelReadAll(tr, h.Name)
			if err != nil {
				return nil, VercelSource{}, err
			}
			return b, src, vercelKeep(key, b)
		}
	}
}

// vercelIntegrity checks a sha512 Subresource Integrity value.
func vercelIntegrity(sri string, b []byte) error {
	for _, tok := range strings.Fields(sri) {
		if v, ok := strings.CutPrefix(tok, "sha512-"); ok {
			if vercelSRI(b) == v {
				return nil
			}
			return fmt.Errorf("the archive's sha512 is not the registry's %s", v)
		}
	}
	return fmt.Errorf("the registry gives no sha512 integrity (%q)", sri)
}

// vercelGet GETs u; a 4xx answer wraps errVercelNotServed, with what the
// registry said.
func vercelGet(ctx context.Context, c *http.Client, u string) ([]byte, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("specfetch: %w", err)
	}
	req.Header.Set("User-Agent", "triggerd-specfetch")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("specfetch: GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return nil, fmt.Errorf("GET %s answered %s %q: %w", u, resp.Status, bytes.TrimSpace(msg), errVercelNotServed)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("specfetch: GET %s answered %s", u, resp.Status)
	}
	return vercelReadAll(resp.Body, "GET "+u)
}

func vercelReadAll(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, vercelMaxDownload+1))
	if err != nil {
		return nil, fmt.Errorf("specfetch: %s: %w", what, err)
	}
	if len(b) > vercelMaxDownload {
		return nil, fmt.Errorf("specfetch: %s: more than %d bytes", what, vercelMaxDownload)
	}
	return b, nil
}

// vercelCached returns the copy at key when the digest beside it matches.
func vercelCached(key string) ([]byte, bool) {
	b, err := os.ReadFile(key)
	if err != nil {
		return nil, false
	}
	want, err := os.ReadFile(key + ".sha256")
	if err != nil || strings.TrimSpace(string(want)) != vercelDigest(b) {
		return nil, false
	}
	return b, true
}

// vercelNewestCached returns the most recently written good copy.
func vercelNewestCached(dir string) ([]byte, VercelSource, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, VercelSource{}, false
	}
	var best string
	var bestInfo os.FileInfo
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if err == nil && (bestInfo == nil || info.ModTime().After(bestInfo.ModTime())) {
			best, bestInfo = e.Name(), info
		}
	}
	if best == "" {
		return nil, VercelSource{}, false
	}
	key := filepath.Join(dir, best)
	b, ok := vercelCached(key)
	return b, VercelSource{Where: "cache", Location: key}, ok
}

// vercelKeep writes b at key with its digest beside it, each through a
// temporary file renamed into place, so concurrent tests read a whole
// copy or none.
func vercelKeep(key string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		return fmt.Errorf("specfetch: cache: %w", err)
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{key, b}, {key + ".sha256", []byte(vercelDigest(b) + "\n")}} {
		tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".*.tmp")
		if err != nil {
			return fmt.Errorf("specfetch: cache: %w", err)
		}
		_, werr := tmp.Write(f.data)
		if err := errors.Join(werr, tmp.Close()); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("specfetch: cache: %w", err)
		}
		if err := os.Rename(tmp.Name(), f.path); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("specfetch: cache: %w", err)
		}
	}
	return nil
}

// vercelSRI is b's sha512 as Subresource Integrity spells it (base64).
func vercelSRI(b []byte) string {
	sum := sha512.Sum512(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

func vercelDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// vercelOr is a, or b when a is empty.
func vercelOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
