package specfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Where Vercel's OpenAPI description is published: vercel-spec.json at
// the root of the vercel/sdk repository, which the Go module proxy would
// serve as a module zip (the repository has no go.mod; its versions are
// its tags or pseudo-versions) and the npm package @vercel/sdk would ship
// if it listed the file.
const (
	VercelSpecFile   = "vercel-spec.json"
	VercelModule     = "github.com/vercel/sdk"
	VercelNPMPackage = "@vercel/sdk"
	// VercelSpecEnv names a local copy of the description to use instead
	// of fetching one (a path to vercel-spec.json).
	VercelSpecEnv = "TRIGGERD_VERCEL_SPEC"
)

// ErrUnavailable is wrapped by the error of a fetch that every source
// refused (answered that it does not have the file), as opposed to one
// that could not reach them.
var ErrUnavailable = errors.New("specfetch: no source serves the file")

// Vercel returns Vercel's OpenAPI description (vercel-spec.json of
// vercel/sdk) and says where it came from, trying in order: the file
// $TRIGGERD_VERCEL_SPEC names; the Go module proxy's latest version of
// github.com/vercel/sdk (checked against the checksum database, kept in
// the cache); the latest @vercel/sdk on npm. When every registry answers
// that it has no such file, the error wraps ErrUnavailable and says what
// each answered.
func (f *Fetcher) Vercel(ctx context.Context) ([]byte, string, error) {
	if p := os.Getenv(VercelSpecEnv); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, "", fmt.Errorf("specfetch: $%s: %w", VercelSpecEnv, err)
		}
		return b, "the file " + p, nil
	}
	var refusals []error
	b, src, err := f.vercelFromGoProxy(ctx)
	if err == nil {
		return b, src, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	refusals = append(refusals, err)
	b, err = f.NPM(ctx, VercelNPMPackage, "latest", VercelSpecFile)
	if err == nil {
		return b, "npm " + VercelNPMPackage + "@latest", nil
	}
	if !errors.Is(err, ErrNotFound) {
		return nil, "", err
	}
	refusals = append(refusals, err)
	return nil, "", fmt.Errorf("%w: %s: %w", ErrUnavailable, VercelSpecFile, errors.Join(refusals...))
}

// vercelFromGoProxy asks the proxy for the module's latest version and
// reads the description from that version's zip.
func (f *Fetcher) vercelFromGoProxy(ctx context.Context) ([]byte, string, error) {
	esc := escapeModule(VercelModule)
	raw, err := f.get(ctx, f.goProxy()+"/"+esc+"/@latest", "application/json")
	if err != nil {
		return nil, "", err
	}
	var info struct{ Version string }
	if err := json.Unmarshal(raw, &info); err != nil || !strings.HasPrefix(info.Version, "v") {
		return nil, "", fmt.Errorf("specfetch: %s/@latest is not a version: %.200s", VercelModule, raw)
	}
	files, err := f.GoModule(ctx, VercelModule, info.Version, VercelSpecFile)
	if err != nil {
		return nil, "", err
	}
	return files[VercelSpecFile], "Go module " + VercelModule + "@" + info.Version, nil
}
