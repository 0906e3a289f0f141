package apicall

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/triggerd/triggerd/connectors"
)

// MaxEndpointLength is the longest endpoint (path and query) accepted, in
// bytes.
const MaxEndpointLength = 2048

// maxDecodeLevels bounds how many rounds of percent-decoding the path
// checks look through (%2e, %252e, %25252e, ...). An endpoint still
// changing after that many rounds is refused.
const maxDecodeLevels = 8

// Resolve joins the endpoint p (a path starting with "/", optionally
// followed by a query) onto base and returns the URL to request. It
// refuses, without any network I/O, every endpoint that could name another
// host or climb out of base's path, and then asserts that the result has
// base's scheme, host and port and lies under base's path.
//
// Resolve refuses percent-encoded slashes and backslashes (%2F, %5C) in
// the path; see the package documentation for the full rule set. Refusals
// are *connectors.Error values with code CodeValidation whose message says
// what to fix; an unusable base is a plain error.
func Resolve(base *url.URL, p string) (*url.URL, error) {
	return resolve(base, p, false)
}

// resolve is Resolve for all three steps. allowEncodedSlash lets "%2F"
// through in the path (the code host requires it inside a path parameter,
// such as a label or branch name that contains a slash); every other rule
// still holds on the decoded path, so the invariant is kept.
func resolve(base *url.URL, p string, allowEncodedSlash bool) (*url.URL, error) {
	prefix, err := basePrefix(base)
	if err != nil {
		return nil, err
	}
	rawPath, rawQuery, err := splitEndpoint(p)
	if err != nil {
		return nil, err
	}
	if err := checkPath(rawPath, allowEncodedSlash); err != nil {
		return nil, err
	}
	query, err := cleanQuery(rawQuery)
	if err != nil {
		return nil, err
	}
	wire := prefix + rawPath
	decoded, err := url.PathUnescape(wire)
	if err != nil {
		return nil, invalid("the endpoint's path has malformed percent-encoding; write %% as %%25")
	}
	u := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: decoded, RawPath: wire, RawQuery: query}
	return assertPinned(base, prefix, u, allowEncodedSlash)
}

// basePrefix checks base and returns its escaped path without a trailing
// slash ("" for a bare host).
func basePrefix(base *url.URL) (string, error) {
	if base == nil {
		return "", errors.New("apicall: no base URL")
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.Opaque != "" {
		return "", errors.New("apicall: the base URL must be an absolute http or https URL")
	}
	if base.User != nil || base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		return "", errors.New("apicall: the base URL must not carry user info, a query or a fragment")
	}
	prefix := strings.TrimSuffix(base.EscapedPath(), "/")
	if prefix != "" {
		if err := checkPath(prefix+"/", false); err != nil {
			return "", errors.New("apicall: the base URL's path must be a clean path")
		}
	}
	return prefix, nil
}

// splitEndpoint applies the checks that concern the whole endpoint text
// and splits it into its path and its raw query.
func splitEndpoint(p string) (path, query string, err error) {
	if p == "" {
		return "", "", invalid("the endpoint is empty; give a path such as /repos/{owner}/{repo}/issues")
	}
	if len(p) > MaxEndpointLength {
		return "", "", invalid("the endpoint is %d bytes long; at most %d are accepted", len(p), MaxEndpointLength)
	}
	for i := 0; i < len(p); i++ {
		if isControl(p[i]) {
			return "", "", invalid("the endpoint contains a control character (such as a line break) at byte %d; remove it", i)
		}
	}
	if !utf8.ValidString(p) {
		return "", "", invalid("the endpoint is not valid UTF-8")
	}
	if strings.ContainsRune(p, '\\') {
		return "", "", invalid("the endpoint contains a backslash; separate path segments with \"/\"")
	}
	if hasScheme(p) {
		return "", "", invalid("the endpoint is an absolute URL; give only the path, the host is always the connector's own API")
	}
	if strings.HasPrefix(p, "//") {
		return "", "", invalid("the endpoint starts with \"//\", which names a host; give a path that starts with a single \"/\"")
	}
	if strings.ContainsRune(p, '#') {
		return "", "", invalid("the endpoint contains \"#\"; fragments are not sent, remove it (write a literal # as %%23)")
	}
	if p[0] != '/' {
		return "", "", invalid("the endpoint must be a path starting with \"/\"")
	}
	path, query, _ = strings.Cut(p, "?")
	return path, query, nil
}

// hasScheme reports whether p starts with a URL scheme ("https:",
// "javascript:", ...), i.e. is an absolute URL.
func hasScheme(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') && i > 0:
		case c == ':':
			return i > 0
		default:
			return false
		}
	}
	return false
}

// checkPath checks a raw path (starting with "/") as written and then at
// every level of percent-decoding.
func checkPath(path string, allowEncodedSlash bool) error {
	if path == "" || path[0] != '/' {
		return invalid("the endpoint must be a path starting with \"/\"")
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '@':
			return invalid("the endpoint's path contains \"@\", which is not accepted in a path")
		case c == '[' || c == ']':
			return invalid("the endpoint's path contains %q, which is not accepted in a path", string(c))
		case c == '{' || c == '}':
			return invalid("the endpoint's path contains %q; replace placeholders such as {owner} with their values", string(c))
		case c == '%':
			if i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
				return invalid("the endpoint's path has a %% not followed by two hex digits; write a literal %% as %%25")
			}
		case c >= utf8.RuneSelf:
			return invalid("the endpoint's path contains a non-ASCII character; percent-encode its UTF-8 bytes")
		case !isPathChar(c):
			return invalid("the endpoint's path contains %q; percent-encode it (for example a space as %%20)", string(rune(c)))
		}
	}
	slashes := strings.Count(path, "/")
	if err := checkSegments(path, 0); err != nil {
		return err
	}
	s := path
	for level := 1; ; level++ {
		d := unescapeLenient(s)
		if d == s {
			return nil
		}
		if level > maxDecodeLevels {
			return invalid("the endpoint's path is percent-encoded more than %d times over; decode it", maxDecodeLevels)
		}
		for i := 0; i < len(d); i++ {
			switch c := d[i]; {
			case isControl(c):
				return invalid("the endpoint's path contains an encoded control character (such as %%0d%%0a); remove it")
			case c == '\\':
				return invalid("the endpoint's path contains an encoded backslash (%%5c); remove it")
			case c == '@':
				return invalid("the endpoint's path contains an encoded \"@\" (%%40), which is not accepted in a path")
			}
		}
		if !utf8.ValidString(d) {
			return invalid("the endpoint's path contains percent-encoded bytes that are not valid UTF-8 (such as the overlong %%c0%%ae); remove them")
		}
		if !allowEncodedSlash && strings.Count(d, "/") != slashes {
			return invalid("the endpoint's path contains an encoded slash (%%2f), which is not accepted here")
		}
		if err := checkSegments(d, level); err != nil {
			return err
		}
		s = d
	}
}

// checkSegments refuses empty segments ("//", a trailing "/" excepted)
// and dot segments in a path starting with "/".
func checkSegments(path string, level int) error {
	segs := strings.Split(path[1:], "/")
	for i, seg := range segs {
		if seg == "" && i != len(segs)-1 {
			if level == 0 {
				return invalid("the endpoint's path contains an empty segment (\"//\"); remove the extra \"/\"")
			}
			return invalid("the endpoint's path contains an encoded empty segment (\"//\" after decoding); remove it")
		}
		if isDotSegment(seg) {
			if level == 0 {
				return invalid("the endpoint's path contains a \".\" or \"..\" segment; give the path without it")
			}
			return invalid("the endpoint's path contains an encoded \".\" or \"..\" segment (such as %%2e%%2e); give the path without it")
		}
	}
	return nil
}

// isDotSegment reports whether seg, with any ";parameters" and surrounding
// blanks removed, is made only of dots ("." and ".." and lookalikes such
// as "...", "..;x" or ". .").
func isDotSegment(seg string) bool {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	seg = strings.Trim(seg, " \t")
	return seg != "" && strings.Trim(seg, ".") == ""
}

// cleanQuery checks the raw query and returns it parsed and re-encoded.
func cleanQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	s := raw
	for level := 1; ; level++ {
		d := unescapeLenient(s)
		if d == s {
			break
		}
		if level > maxDecodeLevels {
			return "", invalid("the endpoint's query is percent-encoded more than %d times over; decode it", maxDecodeLevels)
		}
		for i := 0; i < len(d); i++ {
			if isControl(d[i]) {
				return "", invalid("the endpoint's query contains an encoded control character (such as %%0d%%0a); remove it")
			}
		}
		s = d
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return "", invalid("the endpoint's query cannot be parsed: %v", err)
	}
	return v.Encode(), nil
}

// assertPinned re-parses the serialised URL, as the HTTP client will, and
// checks that it is on base's scheme, host and port and under base's
// path, with no dot segment at any level of decoding.
func assertPinned(base *url.URL, prefix string, u *url.URL, allowEncodedSlash bool) (*url.URL, error) {
	refuse := invalid("the endpoint does not resolve to a path of the connector's API; give a plain path such as /repos/{owner}/{repo}")
	v, err := url.Parse(u.String())
	if err != nil {
		return nil, refuse
	}
	if v.Scheme != base.Scheme || v.Host != base.Host || v.Hostname() != base.Hostname() || v.Port() != base.Port() {
		return nil, refuse
	}
	if v.User != nil || v.Opaque != "" || v.Fragment != "" || v.RawFragment != "" {
		return nil, refuse
	}
	ep := v.EscapedPath()
	if ep != u.RawPath || v.RawQuery != u.RawQuery || !strings.HasPrefix(ep, prefix+"/") {
		return nil, refuse
	}
	if err := checkPath(ep, allowEncodedSlash); err != nil {
		return nil, refuse
	}
	return v, nil
}

// unescapeLenient decodes every valid %XX escape in s and leaves anything
// else as it is, so that a stray "%" cannot hide deeper escapes.
func unescapeLenient(s string) string {
	if !strings.ContainsRune(s, '%') {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// isPathChar reports whether c may appear unencoded in an endpoint's path:
// RFC 3986 unreserved characters, sub-delimiters, ":" and "/". ("@" is a
// pchar but refused; "%" is checked separately.)
func isPathChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:/", c) >= 0
}

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// invalid returns a CodeValidation error.
func invalid(format string, a ...any) *connectors.Error {
	return &connectors.Error{Code: connectors.CodeValidation, Message: fmt.Sprintf(format, a...)}
}
