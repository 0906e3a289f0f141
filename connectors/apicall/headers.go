package apicall

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Bounds on the caller's headers.
const (
	maxHeaders         = 64
	maxHeaderNameLen   = 128
	maxHeaderValueLen  = 8192
	printableNameLimit = 64
)

// deniedHeaders are the request headers a caller may not set, by lower-case
// name, with the reason given in the refusal.
var deniedHeaders = map[string]string{
	"authorization":          "the platform sets authentication",
	"proxy-authorization":    "the platform sets authentication",
	"cookie":                 "the platform sets authentication",
	"host":                   "the host is always the connector's own API",
	"forwarded":              "the platform does not forward client addresses",
	"x-real-ip":              "the platform does not forward client addresses",
	"connection":             "it is a hop-by-hop header the HTTP client manages",
	"keep-alive":             "it is a hop-by-hop header the HTTP client manages",
	"transfer-encoding":      "it is a hop-by-hop header the HTTP client manages",
	"te":                     "it is a hop-by-hop header the HTTP client manages",
	"trailer":                "it is a hop-by-hop header the HTTP client manages",
	"upgrade":                "it is a hop-by-hop header the HTTP client manages",
	"content-length":         "the HTTP client sets the body's length",
	"accept-encoding":        "the HTTP client negotiates compression",
	"x-http-method-override": "the method is given by the method field",
	"x-http-method":          "the method is given by the method field",
	"x-method-override":      "the method is given by the method field",
	"x-original-url":         "the path is given by the endpoint field",
	"x-rewrite-url":          "the path is given by the endpoint field",
}

// deniedHeaderPrefixes are refused header name prefixes, with the reason.
var deniedHeaderPrefixes = []struct{ prefix, reason string }{
	{"proxy-", "proxy headers are the platform's"},
	{"x-forwarded-", "the platform does not forward client addresses"},
}

// requestHeaders checks the caller's headers and returns them as an
// http.Header. Names are checked in sorted order so the refusal is stable.
func requestHeaders(h map[string]string) (http.Header, error) {
	if len(h) > maxHeaders {
		return nil, invalid("%d headers given; at most %d are accepted", len(h), maxHeaders)
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make(http.Header, len(h))
	for _, name := range names {
		if !validHeaderName(name) {
			return nil, invalid("header name %q is not accepted; names are letters, digits and \"-\"", clip(name))
		}
		lower := strings.ToLower(name)
		if reason, ok := deniedHeaders[lower]; ok {
			return nil, invalid("header %q is not accepted: %s; remove %q from headers", name, reason, name)
		}
		for _, d := range deniedHeaderPrefixes {
			if strings.HasPrefix(lower, d.prefix) {
				return nil, invalid("header %q is not accepted: %s; remove %q from headers", name, d.reason, name)
			}
		}
		key := http.CanonicalHeaderKey(name)
		if _, dup := out[key]; dup {
			return nil, invalid("header %q is given twice (header names ignore case); keep one", name)
		}
		value := h[name]
		if len(value) > maxHeaderValueLen {
			return nil, invalid("the value of header %q is longer than %d bytes", name, maxHeaderValueLen)
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; isControl(c) && c != '\t' {
				return nil, invalid("the value of header %q contains a line break or control character; remove it", name)
			}
		}
		out[key] = []string{value}
	}
	return out, nil
}

func validHeaderName(name string) bool {
	if name == "" || len(name) > maxHeaderNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// clip bounds a caller-supplied name quoted in a message.
func clip(s string) string {
	if len(s) > printableNameLimit {
		return s[:printableNameLimit] + "..."
	}
	return s
}

// safeResponseHeaders are the response headers passed back, by lower-case
// name; every header starting "x-ratelimit-" is passed back too, and
// "location" only when it points at the connector's API.
var safeResponseHeaders = map[string]bool{
	"content-type":        true,
	"etag":                true,
	"last-modified":       true,
	"link":                true,
	"retry-after":         true,
	"x-github-request-id": true,
	"x-vercel-id":         true,
}

// responseHeaders returns the safe subset of h, keyed by lower-case name,
// with repeated values joined by ", ". reqURL is the URL that was asked,
// against which a relative Location resolves.
func responseHeaders(h http.Header, reqURL *url.URL, base *url.URL, prefix string) map[string]string {
	out := map[string]string{}
	for key, values := range h {
		lower := strings.ToLower(key)
		switch {
		case safeResponseHeaders[lower], strings.HasPrefix(lower, "x-ratelimit-"):
		case lower == "location":
			if len(values) != 1 || !onPinnedHost(values[0], reqURL, base, prefix) {
				continue
			}
		default:
			continue
		}
		out[lower] = strings.Join(values, ", ")
	}
	return out
}

// onPinnedHost reports whether the Location value loc, resolved against
// reqURL, is on base's scheme, host and port and under its path.
func onPinnedHost(loc string, reqURL *url.URL, base *url.URL, prefix string) bool {
	if loc == "" || strings.ContainsAny(loc, "\\\r\n") {
		return false
	}
	l, err := url.Parse(loc)
	if err != nil {
		return false
	}
	r := reqURL.ResolveReference(l)
	return r.Scheme == base.Scheme && r.Host == base.Host && r.User == nil &&
		strings.HasPrefix(r.EscapedPath(), prefix+"/")
}
