package apicall

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/connectors"
)

// fuzzBases are the pinned bases the fuzzer resolves against: bare hosts,
// a path prefix with and without its trailing slash, a port, IPv6.
var fuzzBases = []string{
	"https://api.github.com",
	"http://127.0.0.1:1234/api/",
	"http://127.0.0.1:1234/api",
	"https://[::1]:8443/a/b/",
	"https://analyticsdata.googleapis.com/",
}

// FuzzResolve checks the invariant "the request goes to the pinned host or
// nowhere": for any endpoint, resolve refuses with CodeValidation, or
// returns a URL on the base's scheme, host and port whose path starts
// with the base's path and has no "." or ".." segment at any level of
// percent-decoding. It covers the strict rules (deployment platform,
// analytics, Resolve), the code host's (%2F allowed) and the analytics
// step's "/"+endpoint form.
func FuzzResolve(f *testing.F) {
	for _, e := range hostileEndpoints() {
		f.Add(e)
	}
	for _, e := range []string{
		"/repos/o/r/issues?state=open&per_page=2",
		"/repos/o/r/collaborators/u/permission",
		"/repos/o/r/labels/type%2Fbug",
		"/repos/o/r/contents/a/b%20c.md",
		"/v13/deployments?teamId=t",
		"v1beta/properties/1:runReport",
		"/v1beta/properties?filter=parent:accounts/1",
		"/a/%2e%2e%2f",
		"/a/%2e%2E%2F%2e%2e%2Fb",
		"/%25%32%65%25%32%65/x",
		"/a%2f%2e%2e",
		"/a/.%252e",
		"/a/..%3b/b",
		"/a/%2e%2e%3bx/b",
		"/a;/..;/b",
		"/a/%20../b",
		"/a/..%20/b",
		"/a/%09../b",
		"/a?b=%2e%2e/../c",
		"/?",
		"/??",
		"/a?%zz",
		"/a?x=%2",
		"/:@x",
		"/x:y@z",
	} {
		f.Add(e)
	}
	bases := make([]*url.URL, len(fuzzBases))
	for i, b := range fuzzBases {
		u, err := url.Parse(b)
		if err != nil {
			f.Fatal(err)
		}
		bases[i] = u
	}
	f.Fuzz(func(t *testing.T, p string) {
		for _, base := range bases {
			for _, in := range []struct {
				endpoint   string
				allowSlash bool
			}{{p, false}, {p, true}, {"/" + p, false}} {
				u, err := resolve(base, in.endpoint, in.allowSlash)
				if err != nil {
					var ce *connectors.Error
					if !errors.As(err, &ce) || ce.Code != connectors.CodeValidation {
						t.Fatalf("resolve(%s, %q): %v; want a CodeValidation refusal", base, in.endpoint, err)
					}
					continue
				}
				checkPinned(t, base, in.endpoint, u)
			}
		}
	})
}

// checkPinned asserts the invariant, with code independent of resolve's.
func checkPinned(t *testing.T, base *url.URL, endpoint string, u *url.URL) {
	t.Helper()
	s := u.String()
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || c == '\\' || c >= 0x80 {
			t.Fatalf("resolve(%s, %q) = %q: byte %#x on the wire", base, endpoint, s, c)
		}
	}
	// Parse what would be sent, as the HTTP client does.
	req, err := http.NewRequest(http.MethodGet, s, nil)
	if err != nil {
		t.Fatalf("resolve(%s, %q) = %q: %v", base, endpoint, s, err)
	}
	v := req.URL
	if v.Scheme != base.Scheme || v.Host != base.Host || v.Hostname() != base.Hostname() || v.Port() != base.Port() || req.Host != base.Host {
		t.Fatalf("resolve(%s, %q) = %q: left the pinned host", base, endpoint, s)
	}
	if v.User != nil || v.Opaque != "" || v.Fragment != "" {
		t.Fatalf("resolve(%s, %q) = %q: user info, opaque part or fragment", base, endpoint, s)
	}
	basePath := strings.TrimSuffix(base.Path, "/") + "/"
	if !strings.HasPrefix(v.Path, basePath) {
		t.Fatalf("resolve(%s, %q) = %q: path %q is not under %q", base, endpoint, s, v.Path, basePath)
	}
	// Decode again and again, as a lax server might, and look for dot
	// segments and a way out of the base path at every level.
	d := v.EscapedPath()
	for level := 0; level < 64; level++ {
		if !strings.HasPrefix(d, basePath) {
			t.Fatalf("resolve(%s, %q) = %q: decoding %d times gives %q, outside %q", base, endpoint, s, level, d, basePath)
		}
		if strings.Contains(d+"/", "/../") || strings.Contains(d+"/", "/./") {
			t.Fatalf("resolve(%s, %q) = %q: decoding %d times gives the dot segment in %q", base, endpoint, s, level, d)
		}
		if strings.ContainsAny(d, "\r\n\\@") {
			t.Fatalf("resolve(%s, %q) = %q: decoding %d times gives %q", base, endpoint, s, level, d)
		}
		next, err := url.PathUnescape(d)
		if err != nil || next == d {
			break
		}
		d = next
	}
	q, err := url.ParseQuery(v.RawQuery)
	if err != nil {
		t.Fatalf("resolve(%s, %q) = %q: query does not parse: %v", base, endpoint, s, err)
	}
	for _, vs := range q {
		for _, x := range vs {
			if strings.ContainsAny(x, "\r\n") {
				t.Fatalf("resolve(%s, %q) = %q: line break in the query", base, endpoint, s)
			}
		}
	}
}
