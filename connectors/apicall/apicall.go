// Package apicall implements the three guarded "API Call" tool steps:
// codehost.api_call, deploy.api_call and analytics.api_call. Each sends a
// request the caller describes (method, path, headers, JSON body) to its
// connector's REST API as the connected account; the platform's HTTP
// client (connectors.Env.HTTP) adds the account's token.
//
// # Guarantee
//
// The account's token never reaches any host but the connector's own. The
// caller gives a path, never a URL. Resolve, which all three steps use,
// refuses before any network I/O every endpoint that is not a plain path:
//
//   - an empty endpoint, or one longer than MaxEndpointLength bytes;
//   - control characters (bytes below 0x20 and 0x7f, so raw CR and LF),
//     invalid UTF-8, backslashes and "#" anywhere;
//   - absolute URLs of any scheme, scheme-relative "//host", and paths
//     that do not start with "/";
//   - in the path: "@", "[", "]", "{", "}", any byte outside RFC 3986's
//     unreserved characters, sub-delimiters, ":", "/" and %XX escapes,
//     and a "%" not followed by two hex digits;
//   - in the path, as written and after every round of percent-decoding
//     (up to eight rounds; more is refused): "." and ".." segments (also
//     "...", "..;param" and blank-padded forms, so %2e%2e, %2E., .%2e and
//     %252e%252e), empty segments ("//"; one trailing "/" is allowed),
//     encoded control characters (%0d, %0a, ... in any case), encoded
//     backslashes (%5c), encoded "@" (%40) and bytes that do not decode
//     to valid UTF-8 (such as the overlong %c0%ae);
//   - encoded slashes (%2f) in the path, for the deployment platform and
//     analytics steps and for Resolve itself. The code-host step accepts
//     %2F, which GitHub requires inside a path parameter (a label or branch
//     name containing "/"); the dot-segment and empty-segment rules are
//     applied to the decoded path, so the result stays under the base path
//     even for a server that decodes %2F;
//   - in the query: encoded control characters at any level of decoding
//     and anything url.ParseQuery refuses (such as ";"). The query is
//     parsed and re-encoded, so it reaches the wire fully escaped.
//
// Resolve then joins the path onto the base URL's path and asserts, on the
// URL as the HTTP client will parse it, that scheme, host and port equal
// the base's and that the path starts with the base's path. The step
// checks the built request's scheme and host once more before sending.
//
// Caller headers pass an allow-list: names are letters, digits and "-";
// Authorization, Proxy-Authorization, Cookie, Host, Forwarded,
// X-Forwarded-*, X-Real-IP, Proxy-*, the hop-by-hop headers (Connection,
// Keep-Alive, Transfer-Encoding, TE, Trailer, Upgrade), Content-Length,
// Accept-Encoding and the method and URL override headers
// (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override,
// X-Original-URL, X-Rewrite-URL) are refused, as are values with control
// characters other than tab. Methods outside each step's list are refused.
//
// Redirects are never followed: the step sends through a shallow copy of
// env.HTTP whose CheckRedirect returns http.ErrUseLastResponse and whose
// cookie jar is removed, so a 3xx answer comes back as the output.
// Messages never contain header values, and the step never logs.
//
// # Output and errors
//
// The output is an Output: the status, a safe subset of the response
// headers and the body (parsed JSON when the response says it is JSON,
// otherwise text). Because the caller asked for the raw call, an upstream
// answer with a non-2xx status is an output, not a step error. The
// exceptions are rate limits, which the platform must be able to retry: a
// 429, and for the code host a 403 carrying x-ratelimit-remaining: 0, a
// Retry-After header or a secondary-rate-limit documentation_url, become a
// connectors.Error with CodeRateLimited, Retryable set and RetryAfter taken
// from Retry-After, else x-ratelimit-reset, else 60 s. A typed refusal of
// the connector's policy (the transport of connectors.Env.HTTP) is
// returned with its code, status and RetryAfter: a rate limit or quota
// known to be spent (nothing sent), one the provider answered, a provider
// held back (CodeUnavailable). The requests carry
// connectors.WithRawAnswers, so the policy hands back a refusal that is no
// rate limit (the code host's 403 permission refusal) as the answer, which
// becomes the output like any other non-2xx. Other network failures
// are CodeUpstream and retryable; a response body over MaxResponseBytes is
// CodeUpstream ("response too large"). Refused input is CodeValidation,
// and nothing was sent.
package apicall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// MaxResponseBytes bounds the response body read; a larger body is a
// CodeUpstream error.
const MaxResponseBytes = 10 << 20

// maxRequestBody bounds the JSON body sent.
const maxRequestBody = 5 << 20

// defaultRetryAfter is the wait when a rate-limited answer says nothing
// of when to retry (GitHub advises at least a minute).
const defaultRetryAfter = 60 * time.Second

// maxRetryAfter caps the wait read from an answer.
const maxRetryAfter = 24 * time.Hour

// userAgent is sent when the caller gives no User-Agent (GitHub requires
// one).
const userAgent = "triggerd-apicall"

// Output is the result of an API Call step.
type Output struct {
	// Status is the upstream HTTP status.
	Status int `json:"status"`
	// Headers is the safe subset of the response headers, keyed by
	// lower-case name.
	Headers map[string]string `json:"headers"`
	// Body is the response body: a json.RawMessage when the response is
	// JSON, a string otherwise, nil when it is empty.
	Body any `json:"body"`
}

// target is one connector's pinned API.
type target struct {
	connector string
	// base is the API's base URL; nil when baseErr is set.
	base   *url.URL
	prefix string
	// baseErr reports a misconfigured base URL; every run fails with it.
	baseErr error
	// codeHost turns on the GitHub rules: %2F in paths, and 403 rate
	// limits.
	codeHost bool
}

func newTarget(connector, raw, def string, codeHost bool) *target {
	t := &target{connector: connector, codeHost: codeHost}
	if raw == "" {
		raw = def
	}
	base, err := url.Parse(raw)
	if err == nil {
		t.prefix, err = basePrefix(base)
	}
	if err != nil {
		t.baseErr = &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("the %s connector's base URL is misconfigured", connector)}
		return t
	}
	t.base = base
	return t
}

// resolve is Resolve with the target's rules.
func (t *target) resolve(p string) (*url.URL, error) {
	if t.baseErr != nil {
		return nil, t.baseErr
	}
	return resolve(t.base, p, t.codeHost)
}

// do sends the request and turns the answer into an Output.
func (t *target) do(ctx context.Context, env connectors.Env, method string, u *url.URL, header http.Header, body []byte) (any, error) {
	if env.HTTP == nil {
		return nil, connectors.Errorf(connectors.CodeUpstream, "no HTTP client for the connected account")
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// The connector's policy then hands back refusals that are no rate
	// limit as answers: this step returns them as output.
	req, err := http.NewRequestWithContext(connectors.WithRawAnswers(ctx), method, u.String(), rd)
	if err != nil {
		return nil, invalid("the request could not be built from the endpoint")
	}
	if req.URL.Scheme != t.base.Scheme || req.URL.Host != t.base.Host || req.Host != t.base.Host {
		return nil, invalid("the endpoint does not resolve to a path of the connector's API")
	}
	req.Header = header.Clone()
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", userAgent)
	}

	hc := *env.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc.Jar = nil
	resp, err := hc.Do(req)
	if err != nil {
		// The connector's policy (env.HTTP's transport) refuses with a
		// typed error: a rate limit or quota, spent or answered, with
		// RetryAfter, or a provider held back. Keep its code, status and
		// wait, so the platform waits and retries instead of failing.
		var ce *connectors.Error
		if errors.As(err, &ce) {
			out := *ce
			out.Message = fmt.Sprintf("the request to the %s API: %s", t.connector, ce.Message)
			return nil, &out
		}
		return nil, &connectors.Error{
			Code:      connectors.CodeUpstream,
			Message:   fmt.Sprintf("the request to the %s API failed: %s", t.connector, networkReason(ctx, err)),
			Retryable: true,
		}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, &connectors.Error{
			Code:      connectors.CodeUpstream,
			Status:    resp.StatusCode,
			Message:   fmt.Sprintf("reading the %s API's answer failed: %s", t.connector, networkReason(ctx, err)),
			Retryable: true,
		}
	}
	if len(data) > MaxResponseBytes {
		return nil, &connectors.Error{
			Code:    connectors.CodeUpstream,
			Status:  resp.StatusCode,
			Message: fmt.Sprintf("response too large: the %s API answered with more than %d MiB", t.connector, MaxResponseBytes>>20),
		}
	}
	if wait, ok := t.rateLimited(resp.StatusCode, resp.Header, data, time.Now()); ok {
		return nil, &connectors.Error{
			Code:       connectors.CodeRateLimited,
			Status:     resp.StatusCode,
			Message:    fmt.Sprintf("the %s API rate-limited the request; retry after %s", t.connector, wait),
			RetryAfter: wait,
			Retryable:  true,
		}
	}
	return Output{
		Status:  resp.StatusCode,
		Headers: responseHeaders(resp.Header, req.URL, t.base, t.prefix),
		Body:    outputBody(resp.Header.Get("Content-Type"), data),
	}, nil
}

// rateLimited reports whether the answer is a rate-limit refusal and how
// long to wait.
func (t *target) rateLimited(status int, h http.Header, body []byte, now time.Time) (time.Duration, bool) {
	switch {
	case status == http.StatusTooManyRequests:
	case status == http.StatusForbidden && t.codeHost:
		if h.Get("X-Ratelimit-Remaining") != "0" && h.Get("Retry-After") == "" && !secondaryLimit(body) {
			return 0, false
		}
	default:
		return 0, false
	}
	return retryAfter(h, now), true
}

// secondaryLimit reports whether a GitHub error body points at the
// secondary rate limit documentation.
func secondaryLimit(body []byte) bool {
	var e struct {
		DocumentationURL string `json:"documentation_url"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	return strings.HasSuffix(e.DocumentationURL, "secondary-rate-limits") || strings.HasSuffix(e.DocumentationURL, "#abuse-rate-limits")
}

// retryAfter reads the wait from Retry-After (seconds or an HTTP date),
// else from x-ratelimit-reset (epoch seconds), else defaultRetryAfter.
func retryAfter(h http.Header, now time.Time) time.Duration {
	d := defaultRetryAfter
	if ra, ok := provhttp.RetryAfter(h, now); ok {
		d = ra
	} else if v := strings.TrimSpace(h.Get("X-Ratelimit-Reset")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			d = time.Unix(n, 0).Sub(now)
		}
	}
	return min(max(d, time.Second), maxRetryAfter)
}

// networkReason describes a transport failure without quoting the error
// text, which a transport could have built from the request.
func networkReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "the step was cancelled or ran out of time"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "the API host name could not be resolved"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "network error (" + op.Op + ")"
	}
	return "network error"
}

// outputBody returns body as parsed JSON when contentType says JSON and it
// parses, as text otherwise, and nil when it is empty.
func outputBody(contentType string, body []byte) any {
	if len(body) == 0 {
		return nil
	}
	if isJSONType(contentType) && json.Valid(body) {
		return json.RawMessage(body)
	}
	return string(body)
}

func isJSONType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// requestBody checks the optional JSON body: absent or null means none; it
// must otherwise be an object, and GET takes none.
func requestBody(method string, raw json.RawMessage, header http.Header) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if method == http.MethodGet {
		return nil, invalid("a GET request takes no body; put parameters in the endpoint's query")
	}
	if raw[0] != '{' {
		return nil, invalid("the body must be a JSON object")
	}
	if len(raw) > maxRequestBody {
		return nil, invalid("the body is larger than %d MiB", maxRequestBody>>20)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, invalid("the body is not valid JSON")
	}
	if ct := header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		return nil, invalid("the body is sent as JSON; set the Content-Type header to application/json (or a +json type) or leave it out")
	}
	return buf.Bytes(), nil
}

// decodeInput decodes a step's input strictly into v.
func decodeInput(input json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("the input is not valid: %v", err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return invalid("the input is not valid: data after the JSON object")
	}
	return nil
}

// checkMethod refuses a method outside allowed.
func checkMethod(method string, allowed []string) error {
	for _, m := range allowed {
		if method == m {
			return nil
		}
	}
	return invalid("method %q is not accepted; use one of %s", clip(method), strings.Join(allowed, ", "))
}
