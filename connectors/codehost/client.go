package codehost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

const (
	// maxResponse bounds a step's read of one answer (a 1 MB file is
	// about 1.4 MB of base64 in JSON).
	maxResponse = 4 << 20
	// maxRedirects bounds the same-host redirects one request follows (a
	// renamed or transferred repository answers 301; one renamed twice
	// may chain).
	maxRedirects = 3
	// perPage is the page size list steps ask for (GitHub's maximum).
	perPage = 100
	// maxPages guards against a server whose pages never end.
	maxPages = 50
)

// client makes the steps' GitHub calls through the account's HTTP client
// and maps every failure onto a *connectors.Error.
type client struct {
	hc   *http.Client
	base *url.URL
	now  func() time.Time
	// login is the connected account's GitHub login ("" when unknown).
	login string
}

// answer is GitHub's answer to one request.
type answer struct {
	status int
	header http.Header
	body   []byte
	// path is the path of the request answered (after redirects), for
	// messages.
	path string
}

// seg escapes one path parameter: a slash inside it becomes %2F.
func seg(s string) string { return url.PathEscape(s) }

// segs escapes a multi-segment parameter (a file path, a ref), keeping
// its slashes.
func segs(s string) string {
	parts := strings.Split(s, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// repoPath is /repos/{owner}/{repo} plus the escaped rest.
func repoPath(owner, repo string, rest ...string) string {
	return "/repos/" + seg(owner) + "/" + seg(repo) + strings.Join(rest, "")
}

// do sends one request to path (already escaped) below the API root. in,
// when not nil, is sent as JSON. Same-host redirects are followed as
// exchange describes. Any answer outside 2xx becomes a *connectors.Error.
func (c *client) do(ctx context.Context, method, path string, q url.Values, in any) (*answer, error) {
	if _, err := url.PathUnescape(path); err != nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "bad request path %q: %v", path, err)
	}
	return c.doURL(ctx, method, c.url(path, q), in)
}

// doURL is do for an absolute URL (a next page link).
func (c *client) doURL(ctx context.Context, method, rawURL string, in any) (*answer, error) {
	a, err := c.exchange(ctx, method, rawURL, nil, in)
	if err != nil {
		return nil, err
	}
	if a.status/100 != 2 {
		return nil, c.statusError(method, a.path, a.status, a.header, a.body)
	}
	return a, nil
}

// url is the absolute URL of path (escaped, below the API root) with q.
func (c *client) url(path string, q url.Values) string {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// exchange sends one request with GitHub's headers plus hdr, in as JSON
// when not nil, following at most maxRedirects same-host redirects (see
// follows). A redirect to another host is never followed: the account's
// client adds the token to every request it sends, so following would
// hand the token to that host; the 3xx is returned instead. It returns
// the answer whatever its status; an error is a transport failure or an
// answer too large to read (a *connectors.Error).
func (c *client) exchange(ctx context.Context, method, rawURL string, hdr http.Header, in any) (*answer, error) {
	var payload []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, connectors.Errorf(connectors.CodeValidation, "encode the request: %v", err)
		}
		payload = b
	}
	for redirects := 0; ; redirects++ {
		// Each attempt gets a fresh reader over the same bytes, so a
		// followed redirect repeats the body verbatim.
		var body io.Reader
		if payload != nil {
			body = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, rawURL, body)
		if err != nil {
			return nil, connectors.Errorf(connectors.CodeValidation, "build the request: %v", err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		setAPIHeaders(req)
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, transportError(ctx, method, req.URL.Path, err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
		resp.Body.Close()
		if err != nil {
			return nil, &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("read GitHub's answer to %s %s: %v", method, req.URL.Path, err), Retryable: true}
		}
		if len(b) > maxResponse {
			return nil, &connectors.Error{Code: connectors.CodeUpstream, Status: resp.StatusCode, Message: fmt.Sprintf("GitHub's answer to %s %s is larger than %d bytes", method, req.URL.Path, maxResponse)}
		}
		if loc, ok := c.follows(method, req.URL, resp); ok && redirects < maxRedirects {
			rawURL = loc.String()
			continue
		}
		return &answer{status: resp.StatusCode, header: resp.Header, body: b, path: req.URL.Path}, nil
	}
}

// follows reports whether the answer resp to method on from is a redirect
// to repeat, unchanged, at loc. GitHub's documentation has clients follow
// 301 (a renamed or transferred repository), 302 and 307, repeating the
// request verbatim for the temporary ones. So:
//   - GET and HEAD follow 301, 302, 307 and 308;
//   - other methods follow 307 and 308, which by definition keep the
//     method and body;
//   - other methods follow 301 and 302 only for a repository path
//     (/repos/… or /repositories/…), where GitHub uses them for a renamed
//     repository and means the same request at the new place. Elsewhere
//     a 301/302 to a write may mean "switch to GET" (as browsers do), so
//     it is reported rather than guessed at.
//
// Only a Location on the API's own scheme and host is followed.
func (c *client) follows(method string, from *url.URL, resp *http.Response) (*url.URL, bool) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, false
	}
	loc, err := resp.Location()
	if err != nil || !c.sameHost(loc) {
		return nil, false
	}
	switch {
	case method == http.MethodGet || method == http.MethodHead:
	case resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect:
	case c.repositoryPath(from) && c.repositoryPath(loc):
	default:
		return nil, false
	}
	return loc, true
}

// repositoryPath reports whether u names a repository or something in
// one: /repos/{owner}/{repo}… or /repositories/{id}… below the API root.
func (c *client) repositoryPath(u *url.URL) bool {
	rest, ok := strings.CutPrefix(u.EscapedPath(), strings.TrimRight(c.base.EscapedPath(), "/")+"/")
	if !ok {
		return false
	}
	return strings.HasPrefix(rest, "repos/") || strings.HasPrefix(rest, "repositories/")
}

func (c *client) sameHost(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, c.base.Scheme) && strings.EqualFold(u.Host, c.base.Host)
}

// pageLink checks a Link rel="next" URL before it is followed: GitHub
// builds them, and one that is not absolute or not on the API's host is
// refused (ok false).
func (c *client) pageLink(link string) (next string, ok bool) {
	u, err := url.Parse(link)
	if err != nil || !u.IsAbs() || !c.sameHost(u) {
		return "", false
	}
	return u.String(), true
}

// transportError maps a failed round trip: the policy's own errors (rate
// limits, permission) pass through, everything else may succeed later.
func transportError(ctx context.Context, method, path string, err error) error {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctx.Err() != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s %s: gave up waiting for GitHub: %v", method, path, ctx.Err()), Retryable: true}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s %s: %v", method, path, err), Retryable: true}
}

// statusError maps a GitHub error answer onto the step error codes.
func (c *client) statusError(method, path string, status int, h http.Header, body []byte) error {
	var ge ghError
	_ = json.Unmarshal(body, &ge)
	msg := provhttp.Clip(ge.Message)
	if msg == "" {
		msg = http.StatusText(status)
	}
	where := method + " " + path
	switch status {
	case http.StatusUnauthorized:
		return &connectors.Error{Code: connectors.CodeNeedsReauth, Status: status, Message: fmt.Sprintf("GitHub refused the account's token on %s: %s", where, msg)}
	case http.StatusForbidden, http.StatusTooManyRequests:
		return classify(status, h, body, c.now())
	case http.StatusNotFound:
		return &connectors.Error{Code: connectors.CodeNotFound, Status: status, Message: fmt.Sprintf("%s: %s (it does not exist or the account cannot see it)", where, msg)}
	case http.StatusUnprocessableEntity:
		if details := foldErrors(ge.Errors); details != "" {
			msg += ": " + details
		}
		return &connectors.Error{Code: connectors.CodeValidation, Status: status, Message: fmt.Sprintf("%s: %s", where, provhttp.Clip(msg))}
	}
	if status/100 == 3 {
		msg = "redirected to " + provhttp.Clip(h.Get("Location"))
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Status: status, Message: fmt.Sprintf("%s: %s", where, msg), Retryable: status >= 500}
}

// foldErrors renders GitHub's errors[]: objects {resource, field, code,
// message} or plain strings.
func foldErrors(errs []json.RawMessage) string {
	var parts []string
	for _, raw := range errs {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			parts = append(parts, s)
			continue
		}
		var e struct {
			Resource string `json:"resource"`
			Field    string `json:"field"`
			Code     string `json:"code"`
			Message  string `json:"message"`
			Value    any    `json:"value"`
		}
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		var p []string
		if e.Field != "" {
			f := e.Field
			if e.Resource != "" {
				f = e.Resource + "." + f
			}
			p = append(p, f)
		}
		if e.Code != "" && e.Code != "custom" {
			p = append(p, e.Code)
		}
		if e.Value != nil {
			p = append(p, fmt.Sprintf("(value %v)", e.Value))
		}
		if e.Message != "" {
			p = append(p, e.Message)
		}
		parts = append(parts, strings.Join(p, " "))
	}
	return strings.Join(parts, "; ")
}

// decodeAnswer unmarshals a successful answer.
func decodeAnswer(a *answer, what string, v any) error {
	if err := json.Unmarshal(a.body, v); err != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Status: a.status, Message: fmt.Sprintf("decode GitHub's %s: %v", what, err)}
	}
	return nil
}

// getJSON GETs path and decodes the answer into v.
func (c *client) getJSON(ctx context.Context, path string, q url.Values, v any) error {
	a, err := c.do(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	return decodeAnswer(a, path, v)
}

// sendJSON sends in and decodes a body (if v is not nil) into v; it
// returns the success status.
func (c *client) sendJSON(ctx context.Context, method, path string, in, v any) (int, error) {
	a, err := c.do(ctx, method, path, nil, in)
	if err != nil {
		return 0, err
	}
	if v != nil && len(bytes.TrimSpace(a.body)) > 0 {
		if err := decodeAnswer(a, path, v); err != nil {
			return 0, err
		}
	}
	return a.status, nil
}

// page is one list page: its items and the total GitHub reports for
// wrapped lists.
type page[T any] struct {
	items []T
	total int
}

// listPages GETs path with per_page=100 and follows Link rel="next" until
// maxItems items are read. GitHub builds the next URLs; a next URL on
// another host is refused. decode reads one page's body (nil means a JSON
// array of T). more reports whether items were left unread.
func listPages[T any](ctx context.Context, c *client, path string, q url.Values, maxItems int, decode func([]byte) (page[T], error)) (items []T, total int, more bool, err error) {
	if q == nil {
		q = url.Values{}
	}
	q.Set("per_page", strconv.Itoa(perPage))
	if decode == nil {
		decode = func(b []byte) (page[T], error) {
			var p page[T]
			err := json.Unmarshal(b, &p.items)
			return p, err
		}
	}
	items = []T{}
	a, err := c.do(ctx, http.MethodGet, path, q, nil)
	for pages := 1; ; pages++ {
		if err != nil {
			return nil, 0, false, err
		}
		p, derr := decode(a.body)
		if derr != nil {
			return nil, 0, false, &connectors.Error{Code: connectors.CodeUpstream, Status: a.status, Message: fmt.Sprintf("decode GitHub's page of %s: %v", path, derr)}
		}
		total = p.total
		next := nextLink(a.header.Get("Link"))
		room := maxItems - len(items)
		if len(p.items) > room {
			return append(items, p.items[:room]...), total, true, nil
		}
		items = append(items, p.items...)
		if next == "" || len(p.items) == 0 {
			return items, total, false, nil
		}
		if len(items) >= maxItems || pages >= maxPages {
			return items, total, true, nil
		}
		u, ok := c.pageLink(next)
		if !ok {
			return nil, 0, false, &connectors.Error{Code: connectors.CodeUpstream, Status: a.status,
				Message: fmt.Sprintf("refusing GitHub's next page link for %s: it is not on %s", path, c.base.Host)}
		}
		a, err = c.doURL(ctx, http.MethodGet, u, nil)
	}
}

// nextLink returns the rel="next" URL of a Link header.
func nextLink(h string) string {
	for _, part := range strings.Split(h, ",") {
		target, params, found := strings.Cut(part, ";")
		if !found {
			continue
		}
		target = strings.TrimSpace(target)
		if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "rel") && slicesContainsField(strings.Trim(v, `"`), "next") {
				return target[1 : len(target)-1]
			}
		}
	}
	return ""
}

// slicesContainsField reports whether the space-separated rel list has
// rel.
func slicesContainsField(list, rel string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, rel) {
			return true
		}
	}
	return false
}
