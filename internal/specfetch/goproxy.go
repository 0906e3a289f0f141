package specfetch

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultGoProxy is the Go module proxy asked when neither
// Fetcher.GoProxy nor $GOPROXY names one.
const DefaultGoProxy = "https://proxy.golang.org"

// ErrModuleChecksum is wrapped by the error for a module zip whose hash
// is not the one the checksum database gives.
var ErrModuleChecksum = errors.New("specfetch: module checksum mismatch")

// GoModule returns files (paths inside the module, such as
// "analyticsdata/v1beta/analyticsdata-api.json") of the Go module module
// at version (an exact version such as v0.312.0), by path. It reads the
// module zip from the Go module proxy (GET <proxy>/<module>/@v/<version>.zip)
// and checks it against the go.sum hash the checksum database gives for
// it, read through the same proxy (<proxy>/sumdb/sum.golang.org/lookup/…),
// before using any file of it; the files asked for are then kept in the
// cache, so a version costs the network once per machine.
func (f *Fetcher) GoModule(ctx context.Context, module, version string, files ...string) (map[string][]byte, error) {
	if module == "" || !strings.HasPrefix(version, "v") || len(files) == 0 {
		return nil, fmt.Errorf("specfetch: GoModule(%q, %q, %v): a module, an exact version and files are needed", module, version, files)
	}
	esc := escapeModule(module)
	out := map[string][]byte{}
	keys := map[string]string{}
	var missing []string
	for _, file := range files {
		if file == "" || !filepath.IsLocal(filepath.FromSlash(file)) {
			return nil, fmt.Errorf("specfetch: %q is not a path inside a module", file)
		}
		key, err := cacheKey("gomod", esc+"@"+version, file)
		if err != nil {
			return nil, err
		}
		keys[file] = key
		if b := f.cached(key); b != nil {
			out[file] = b
			continue
		}
		missing = append(missing, file)
	}
	if len(missing) == 0 {
		return out, nil
	}
	proxy := f.goProxy()
	zipBody, err := f.get(ctx, proxy+"/"+esc+"/@v/"+version+".zip", "")
	if err != nil {
		return nil, err
	}
	lookup, err := f.get(ctx, proxy+"/sumdb/sum.golang.org/lookup/"+esc+"@"+version, "")
	if err != nil {
		return nil, fmt.Errorf("specfetch: the checksum database (through %s) cannot confirm %s@%s: %w", proxy, module, version, err)
	}
	want := sumLine(lookup, module, version)
	zr, err := zip.NewReader(bytes.NewReader(zipBody), int64(len(zipBody)))
	if err != nil {
		return nil, fmt.Errorf("specfetch: %s@%s: %w", module, version, err)
	}
	got, err := hashZip(zr)
	if err != nil {
		return nil, fmt.Errorf("specfetch: %s@%s: %w", module, version, err)
	}
	if want == "" || got != want {
		return nil, fmt.Errorf("%w: %s@%s hashes to %s, the checksum database says %q", ErrModuleChecksum, module, version, got, want)
	}
	prefix := module + "@" + version + "/"
	for _, file := range missing {
		i := slices.IndexFunc(zr.File, func(zf *zip.File) bool { return zf.Name == prefix+file })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s@%s has no file %s", ErrNotFound, module, version, file)
		}
		b, err := readZipFile(zr.File[i])
		if err != nil {
			return nil, fmt.Errorf("specfetch: %s@%s: %s: %w", module, version, file, err)
		}
		if err := f.keep(keys[file], b); err != nil {
			return nil, err
		}
		out[file] = b
	}
	return out, nil
}

// goProxy is the proxy's base URL: Fetcher.GoProxy, else the first
// http(s) entry of $GOPROXY, else DefaultGoProxy.
func (f *Fetcher) goProxy() string {
	if f.GoProxy != "" {
		return strings.TrimRight(f.GoProxy, "/")
	}
	for _, p := range strings.FieldsFunc(os.Getenv("GOPROXY"), func(r rune) bool { return r == ',' || r == '|' }) {
		if strings.HasPrefix(p, "https://") || strings.HasPrefix(p, "http://") {
			return strings.TrimRight(p, "/")
		}
	}
	return DefaultGoProxy
}

// escapeModule escapes a module path as the proxy protocol does: each
// upper-case letter becomes "!" and its lower case.
func escapeModule(m string) string {
	var b strings.Builder
	for _, r := range m {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sumLine finds "<module> <version> h1:…" in a checksum database lookup
// and returns the hash, or "".
func sumLine(lookup []byte, module, version string) string {
	sc := bufio.NewScanner(bytes.NewReader(lookup))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == module && f[1] == version {
			return f[2]
		}
	}
	return ""
}

// hashZip is the go.sum "h1:" hash of a module zip: the SHA-256 of the
// lines "<hex sha256 of file>  <name>\n" of its files, sorted by name.
func hashZip(zr *zip.Reader) (string, error) {
	files := slices.Clone(zr.File)
	slices.SortFunc(files, func(a, b *zip.File) int { return strings.Compare(a.Name, b.Name) })
	sum := sha256.New()
	for _, zf := range files {
		if strings.Contains(zf.Name, "\n") {
			return "", errors.New("a file name contains a newline")
		}
		b, err := readZipFile(zf)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(sum, "%x  %s\n", sha256.Sum256(b), zf.Name)
	}
	return "h1:" + base64.StdEncoding.EncodeToString(sum.Sum(nil)), nil
}

// readZipFile reads one file of a zip, at most MaxDownload bytes.
func readZipFile(zf *zip.File) ([]byte, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readAtMost(rc, zf.Name)
}
