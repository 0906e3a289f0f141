package specfetch

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"path"
	"strings"
)

// NPM returns file (a path inside the package, as "generated/x.json") of
// version of the npm package pkg ("@octokit/openapi"). version is an
// exact version ("23.0.2"), whose file is read from the cache when it is
// there, or a dist-tag ("latest"), which always asks the registry which
// version it names. The archive is checked against the integrity (or,
// for old packages, the shasum) the registry gives for the version.
func (f *Fetcher) NPM(ctx context.Context, pkg, version, file string) ([]byte, error) {
	if pkg == "" || version == "" || file == "" {
		return nil, fmt.Errorf("specfetch: NPM(%q, %q, %q): a package, a version and a file are needed", pkg, version, file)
	}
	file = strings.TrimPrefix(path.Clean("/"+file), "/")
	if exactVersion(version) {
		if key, err := cacheKey("npm", pkg+"@"+version, file); err == nil {
			if b := f.cached(key); b != nil {
				return b, nil
			}
		}
	}
	m, err := f.npmManifest(ctx, pkg, version)
	if err != nil {
		return nil, err
	}
	key, err := cacheKey("npm", pkg+"@"+m.Version, file)
	if err != nil {
		return nil, err
	}
	if b := f.cached(key); b != nil {
		return b, nil
	}
	tgz, err := f.get(ctx, m.Dist.Tarball, "")
	if err != nil {
		return nil, err
	}
	if err := m.Dist.verify(tgz); err != nil {
		return nil, fmt.Errorf("%s@%s (%s): %w", pkg, m.Version, m.Dist.Tarball, err)
	}
	b, err := extract(tgz, file)
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", pkg, m.Version, err)
	}
	if err := f.keep(key, b); err != nil {
		return nil, err
	}
	return b, nil
}

// npmManifest is the part of a version's document in the registry that
// NPM reads.
type npmManifest struct {
	Version string  `json:"version"`
	Dist    npmDist `json:"dist"`
}

type npmDist struct {
	Tarball   string `json:"tarball"`
	Integrity string `json:"integrity"` // Subresource Integrity: "sha512-<base64>", possibly several
	Shasum    string `json:"shasum"`    // hex SHA-1, all that old packages have
}

// npmManifest asks the registry for the document of version (exact or a
// dist-tag) of pkg.
func (f *Fetcher) npmManifest(ctx context.Context, pkg, version string) (npmManifest, error) {
	base := f.NPMRegistry
	if base == "" {
		base = "https://registry.npmjs.org"
	}
	// A scoped name keeps its "@" and escapes its "/": the registry's own
	// spelling, "@octokit%2fopenapi".
	u := strings.TrimSuffix(base, "/") + "/" + strings.ReplaceAll(url.PathEscape(pkg), "%40", "@") + "/" + url.PathEscape(version)
	raw, err := f.get(ctx, u, "application/json")
	if err != nil {
		return npmManifest{}, fmt.Errorf("%s@%s: %w", pkg, version, err)
	}
	var m npmManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return npmManifest{}, fmt.Errorf("specfetch: %s@%s: the registry's answer is not a version document: %w", pkg, version, err)
	}
	if m.Version == "" || m.Dist.Tarball == "" {
		return npmManifest{}, fmt.Errorf("specfetch: %s@%s: the registry's answer names no version or no tarball", pkg, version)
	}
	if exactVersion(version) && m.Version != version {
		return npmManifest{}, fmt.Errorf("specfetch: %s@%s: the registry answered for version %s", pkg, version, m.Version)
	}
	return m, nil
}

// verify checks b against the strongest checksum d gives.
func (d npmDist) verify(b []byte) error {
	if d.Integrity != "" {
		return verifySRI(d.Integrity, b)
	}
	if d.Shasum != "" {
		sum := sha1.Sum(b)
		if !strings.EqualFold(hex.EncodeToString(sum[:]), d.Shasum) {
			return fmt.Errorf("%w: sha1 is %x, the registry gives %s", ErrIntegrity, sum, d.Shasum)
		}
		return nil
	}
	return fmt.Errorf("%w: the registry gives no integrity and no shasum", ErrIntegrity)
}

// verifySRI checks b against a Subresource Integrity value: one or more
// "algo-base64" tokens, of which the strongest algorithm present must
// match (as npm does).
func verifySRI(sri string, b []byte) error {
	algos := []struct {
		name string
		h    func() hash.Hash
	}{{"sha512", sha512.New}, {"sha384", sha512.New384}, {"sha256", sha256.New}, {"sha1", sha1.New}}
	tokens := strings.Fields(sri)
	for _, a := range algos {
		var want []string
		for _, t := range tokens {
			if v, ok := strings.CutPrefix(t, a.name+"-"); ok {
				v, _, _ = strings.Cut(v, "?") // SRI options
				want = append(want, v)
			}
		}
		if len(want) == 0 {
			continue
		}
		h := a.h()
		h.Write(b)
		got := base64.StdEncoding.EncodeToString(h.Sum(nil))
		for _, w := range want {
			if w == got {
				return nil
			}
		}
		return fmt.Errorf("%w: %s is %s, the registry gives %s", ErrIntegrity, a.name, got, strings.Join(want, " "))
	}
	return fmt.Errorf("%w: no algorithm of integrity %q is known", ErrIntegrity, sri)
}

// extract returns the file at name, relative to the package's top folder
// ("package/" in npm's archives), from the gzipped tar tgz.
func extract(tgz []byte, name string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("specfetch: the archive is not gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: no file %s in the archive", ErrNotFound, name)
		}
		if err != nil {
			return nil, fmt.Errorf("specfetch: reading the archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		_, rest, ok := strings.Cut(strings.TrimPrefix(path.Clean("/"+h.Name), "/"), "/")
		if ok && rest == name {
			return readAtMost(tr, name+" in the archive")
		}
	}
}

// exactVersion reports whether v names one version (a dist-tag does not):
// npm's dist-tags may not look like versions, so a leading digit decides.
func exactVersion(v string) bool {
	return v != "" && v[0] >= '0' && v[0] <= '9' && !strings.ContainsAny(v, " <>=^~*|")
}
