package codehost

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// Defaults of ToolkitOptions.
const (
	DefaultUserAgent    = "triggerd"
	DefaultAPIVersion   = apiVersion
	DefaultCacheEntries = 1000
	DefaultCacheBytes   = 8 << 20
)

// Retry policy for idempotent requests: exponential backoff with full
// jitter.
const (
	retryBase     = 200 * time.Millisecond
	retryCap      = 5 * time.Second
	retryAttempts = 3
	// secondaryWait is how long to wait after a secondary rate limit
	// without Retry-After (GitHub: "at least one minute").
	secondaryWait = time.Minute
	// maxCachedBody bounds one cached response body.
	maxCachedBody = 1 << 20
	// maxErrorBody bounds how much of an error answer is read.
	maxErrorBody = 64 << 10
)

// ToolkitOptions configures NewToolkit and NewPolicy. The zero value talks
// to api.github.com.
type ToolkitOptions struct {
	// APIBaseURL is the REST API root (default https://api.github.com).
	// Steps refuse to follow pagination links to any other host.
	APIBaseURL string
	// UserAgent is sent on every request (default "triggerd"); GitHub
	// refuses requests without one.
	UserAgent string
	// APIVersion is sent as X-GitHub-Api-Version (default 2022-11-28).
	APIVersion string
	// Now is the clock rate limit resets are compared with (default
	// time.Now).
	Now func() time.Time
	// Sleep waits for d or until ctx ends, whichever is first, and returns
	// ctx.Err() in the latter case. The default uses a timer; tests inject
	// one that advances a fake clock instead of waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	// CacheEntries bounds each account's ETag cache (default 1000).
	CacheEntries int
	// CacheBytes bounds the bodies each account's ETag cache holds
	// (default 8 MiB); a body over 1 MiB is never cached.
	CacheBytes int
	// RateLimits keeps what GitHub last reported of each account's
	// budgets (default: in memory, per process). Plug in a shared store
	// when several processes act for the same accounts.
	RateLimits RateLimitStore
}

// RateLimit is what GitHub last reported of one budget: the
// x-ratelimit-limit, -remaining and -reset headers.
type RateLimit struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

// RateLimitStore keeps the last reported RateLimit per connected account
// and rate limit resource ("core", "search", "graphql", ...).
//
// MemoryRateLimits is the default. A store shared by several processes
// (Redis, say) can be plugged in through ToolkitOptions.RateLimits so that
// they all see one budget per account, which is how GitHub counts it.
// Implementations must be safe for concurrent use. The budget is advisory
// (GitHub enforces it), so the policy treats a failed Get as "unknown" and
// ignores a failed Put. Responses can arrive out of order: of two
// snapshots with the same Reset, Put should keep the lower Remaining.
type RateLimitStore interface {
	// Get returns the snapshot for accountID and resource; ok is false
	// when none is known.
	Get(ctx context.Context, accountID, resource string) (rl RateLimit, ok bool, err error)
	// Put records a snapshot.
	Put(ctx context.Context, accountID, resource string, rl RateLimit) error
}

// MemoryRateLimits is an in-memory RateLimitStore for one process.
type MemoryRateLimits struct {
	mu sync.Mutex
	m  map[[2]string]RateLimit
}

// NewMemoryRateLimits returns an empty store.
func NewMemoryRateLimits() *MemoryRateLimits {
	return &MemoryRateLimits{m: map[[2]string]RateLimit{}}
}

// Get implements RateLimitStore.
func (s *MemoryRateLimits) Get(_ context.Context, accountID, resource string) (RateLimit, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rl, ok := s.m[[2]string{accountID, resource}]
	return rl, ok, nil
}

// Put implements RateLimitStore; of two snapshots of the same window it
// keeps the lower Remaining.
func (s *MemoryRateLimits) Put(_ context.Context, accountID, resource string, rl RateLimit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{accountID, resource}
	if old, ok := s.m[k]; ok && old.Reset.Equal(rl.Reset) && old.Remaining < rl.Remaining {
		return nil
	}
	s.m[k] = rl
	return nil
}

// CacheStats counts the ETag cache's work since the Policy was made.
type CacheStats struct {
	// Lookups is how many GET requests went through the cache.
	Lookups int64
	// Revalidated is how many carried If-None-Match from a cached entry.
	Revalidated int64
	// Hits is how many were answered 304 and served from the cache; each
	// saved GitHub rate limit budget.
	Hits int64
}

// Policy is the HTTP policy every codehost step (API Call steps included)
// runs under, per connected account:
//
//   - User-Agent and X-GitHub-Api-Version are set on every request,
//     replacing the caller's; the caller's Accept is kept (the product
//     spec's application/vnd.codehost+json becomes GitHub's
//     application/vnd.github+json), else application/vnd.github+json;
//   - the x-ratelimit-* headers of every answer are kept per account and
//     resource in the RateLimitStore, and a request whose budget is known
//     to be spent waits for the reset within its context's deadline or is
//     refused unsent with CodeRateLimited;
//   - GitHub's 403 and 429 answers become *connectors.Error: rate limits
//     (primary or secondary, with RetryAfter) or permission errors (except
//     for API Call steps, which get a permission refusal as the answer;
//     see connectors.WithRawAnswers);
//   - GET answers with an ETag are cached (a bounded LRU per account) and
//     revalidated with If-None-Match: a 304, which costs no budget, is
//     served as the cached 200;
//   - idempotent requests are retried on network errors and 5xx (a pull
//     request merge and a file write or delete are not idempotent).
//
// It is safe for concurrent use.
type Policy struct {
	o    ToolkitOptions
	base *url.URL

	mu       sync.Mutex
	accounts map[string]*accountCache

	lookups, revalidated, hits atomic.Int64
}

// NewPolicy validates o, fills in its defaults and returns the policy.
func NewPolicy(o ToolkitOptions) (*Policy, error) {
	if o.APIBaseURL == "" {
		o.APIBaseURL = DefaultAPIBaseURL
	}
	if err := provhttp.CheckURL(o.APIBaseURL); err != nil {
		return nil, fmt.Errorf("codehost toolkit: APIBaseURL: %w", err)
	}
	base, _ := url.Parse(strings.TrimSuffix(o.APIBaseURL, "/"))
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.APIVersion == "" {
		o.APIVersion = DefaultAPIVersion
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.RateLimits == nil {
		o.RateLimits = NewMemoryRateLimits()
	}
	return &Policy{o: o, base: base, accounts: map[string]*accountCache{}}, nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CacheStats returns the ETag cache counters of all accounts.
func (p *Policy) CacheStats() CacheStats {
	return CacheStats{Lookups: p.lookups.Load(), Revalidated: p.revalidated.Load(), Hits: p.hits.Load()}
}

// Forget drops what the policy keeps for an account (its ETag cache), e.g.
// when the account is removed. Rate limit snapshots stay in the
// RateLimitStore.
func (p *Policy) Forget(accountID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.accounts, accountID)
}

func (p *Policy) account(id string) *accountCache {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.accounts[id]
	if a == nil {
		a = &accountCache{maxEntries: p.o.CacheEntries, maxBytes: p.o.CacheBytes, ll: list.New(), m: map[string]*list.Element{}}
		p.accounts[id] = a
	}
	return a
}

// Wrap returns the transport for one connected account around base, which
// adds the account's token. It is cheap: the account's state lives in the
// Policy, so calling Wrap per request is fine.
func (p *Policy) Wrap(accountID string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{p: p, accountID: accountID, base: base}
}

type transport struct {
	p         *Policy
	accountID string
	base      http.RoundTripper
}

// RoundTrip sends req under the policy. Rate limit and permission answers
// (GitHub's 403 and 429) and a budget known to be spent come back as a
// *connectors.Error, which http.Client wraps in a *url.Error; under
// connectors.WithRawAnswers (an API Call step) a permission refusal comes
// back as the 403 response instead.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	r := req.Clone(ctx)
	r.Header.Set("User-Agent", t.p.o.UserAgent)
	r.Header.Set("X-GitHub-Api-Version", t.p.o.APIVersion)
	switch a := r.Header.Get("Accept"); {
	case a == "":
		r.Header.Set("Accept", mediaType)
	case strings.EqualFold(strings.TrimSpace(a), "application/vnd.codehost+json"):
		// The product spec's name for GitHub's media type.
		r.Header.Set("Accept", mediaType)
	}
	resource := t.p.resourceOf(r.URL)
	if err := t.waitBudget(ctx, resource); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}

	var cache *accountCache
	var cached *cacheEntry
	key := ""
	if r.Method == http.MethodGet && r.Header.Get("If-None-Match") == "" && r.Header.Get("If-Modified-Since") == "" {
		t.p.lookups.Add(1)
		cache = t.p.account(t.accountID)
		key = r.URL.String() + "\x00" + r.Header.Get("Accept")
		if cached = cache.get(key); cached != nil {
			t.p.revalidated.Add(1)
			r.Header.Set("If-None-Match", cached.etag)
		}
	}

	resp, err := t.send(r)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusUnauthorized {
		// A 401 reports the anonymous (per IP) budget, not the account's.
		t.record(ctx, resource, resp.Header)
	}

	switch {
	case resp.StatusCode == http.StatusNotModified && cached != nil:
		drain(resp)
		t.p.hits.Add(1)
		return cached.response(r, resp), nil
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		ce := classify(resp.StatusCode, resp.Header, body, t.p.o.Now())
		if ce.Code == connectors.CodePermissionDenied && connectors.RawAnswers(ctx) {
			// An API Call step returns a refusal as output, whole: hand
			// back what was read followed by the rest.
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
			return resp, nil
		}
		resp.Body.Close()
		return nil, ce
	case resp.StatusCode == http.StatusOK && key != "" && resp.Header.Get("ETag") != "":
		return cache.store(key, resp), nil
	}
	return resp, nil
}

// resourceOf guesses the rate limit resource of a request before it is
// sent; "" means it costs nothing (GET /rate_limit).
func (p *Policy) resourceOf(u *url.URL) string {
	path := strings.TrimPrefix(u.Path, p.base.Path)
	switch {
	case path == "/rate_limit":
		return ""
	case path == "/graphql":
		return "graphql"
	case path == "/search/code":
		return "code_search"
	case strings.HasPrefix(path, "/search/"):
		return "search"
	}
	return "core"
}

// waitBudget refuses or delays a request whose budget is known to be
// spent: it waits for the reset when that falls within ctx's deadline and
// fails with CodeRateLimited otherwise (also when ctx has no deadline:
// a step must not hang for up to an hour unbounded).
func (t *transport) waitBudget(ctx context.Context, resource string) error {
	if resource == "" {
		return nil
	}
	rl, ok, err := t.p.o.RateLimits.Get(ctx, t.accountID, resource)
	if err != nil || !ok || rl.Remaining > 0 {
		return nil
	}
	wait := rl.Reset.Sub(t.p.o.Now())
	if wait <= 0 {
		return nil
	}
	if deadline, ok := ctx.Deadline(); ok && wait <= time.Until(deadline) {
		if t.p.o.Sleep(ctx, wait) == nil {
			return nil
		}
		wait = max(time.Second, rl.Reset.Sub(t.p.o.Now()))
	}
	return &connectors.Error{
		Code:       connectors.CodeRateLimited,
		Message:    fmt.Sprintf("GitHub's %s rate limit (%d requests) is spent until %s; the request was not sent", resource, rl.Limit, rl.Reset.UTC().Format(time.RFC3339)),
		RetryAfter: wait,
		Retryable:  true,
	}
}

// record keeps the x-ratelimit-* headers of a response.
func (t *transport) record(ctx context.Context, resource string, h http.Header) {
	limit, err1 := strconv.Atoi(h.Get("X-RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	reset, err3 := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	if r := h.Get("X-RateLimit-Resource"); r != "" {
		resource = r
	}
	if resource == "" {
		return
	}
	_ = t.p.o.RateLimits.Put(context.WithoutCancel(ctx), t.accountID, resource, RateLimit{
		Limit: limit, Remaining: remaining, Reset: time.Unix(reset, 0),
	})
}

// send makes up to retryAttempts attempts: idempotent requests (GET, HEAD,
// OPTIONS, and PUT and DELETE except GitHub's writes that are not
// idempotent; see idempotent) are retried on network errors and 5xx
// answers, after exponential backoff with full jitter, never past ctx's
// deadline. Other requests (POST, PATCH, those writes) are retried only
// when the connection could not be made, so nothing reached GitHub.
func (t *transport) send(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	idempotent := t.p.idempotent(r)
	replayable := r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
	for attempt := 1; ; attempt++ {
		req := r
		if attempt > 1 {
			req = r.Clone(ctx)
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, fmt.Errorf("replay the request body: %w", err)
				}
				req.Body = body
			}
		}
		resp, err := t.base.RoundTrip(req)
		retry := replayable && attempt < retryAttempts && ctx.Err() == nil
		switch {
		case err != nil:
			retry = retry && (idempotent || notSent(err))
		default:
			retry = retry && idempotent && resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
		}
		if !retry {
			return resp, err
		}
		d := backoff(attempt)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
			return resp, err
		}
		if resp != nil {
			drain(resp)
		}
		if err := t.p.o.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// idempotent reports whether sending r twice has the effect of sending it
// once, so that it may be retried after a 5xx or a lost answer, either of
// which can follow a request GitHub carried out. GET, HEAD and OPTIONS
// are; so are PUT and DELETE (star, collaborator add, workflow
// enable/disable, collaborator removal), except GitHub's writes that
// check state the first attempt changes:
//
//   - PUT /repos/{o}/{r}/pulls/{n}/merge: once merged, a retry is
//     answered 405 (not mergeable) or 409 (head moved);
//   - PUT and DELETE /repos/{o}/{r}/contents/{path}: a retry of a create
//     is 422 (sha missing, the file now exists), of an update or a
//     delete 409 or 404 (the sha sent is no longer the file's).
//
// Retried, these would report a failure although the change was made.
// The paths are also matched under /repositories/{id}.
func (p *Policy) idempotent(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	case http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, p.base.Path), "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 3 && segs[0] == "repos":
		rest = segs[3:]
	case len(segs) >= 2 && segs[0] == "repositories":
		rest = segs[2:]
	default:
		return true
	}
	switch {
	case len(rest) >= 1 && rest[0] == "contents":
		return false
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "merge" && r.Method == http.MethodPut:
		return false
	}
	return true
}

// backoff is the full-jitter delay before attempt+1: uniform in
// [0, min(cap, base·2^(attempt-1))).
func backoff(attempt int) time.Duration {
	ceil := min(retryCap, retryBase<<(attempt-1))
	return time.Duration(rand.Int64N(int64(ceil)))
}

// notSent reports whether err shows the request never left: the
// connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
}

// ghError is GitHub's error body.
type ghError struct {
	Message          string            `json:"message"`
	DocumentationURL string            `json:"documentation_url"`
	Errors           []json.RawMessage `json:"errors"`
}

// classify turns a 403 or 429 into a *connectors.Error: a primary rate
// limit (x-ratelimit-remaining 0), a secondary one (GitHub's message or
// documentation_url says so, or Retry-After is set; every 429 is one), or
// else a permission error that must not be retried. The wait follows
// GitHub's advice: Retry-After, else the reset of a spent budget, else
// one minute.
func classify(status int, h http.Header, body []byte, now time.Time) *connectors.Error {
	var ge ghError
	_ = json.Unmarshal(body, &ge)
	msg := provhttp.Clip(ge.Message)
	if msg == "" {
		msg = http.StatusText(status)
	}
	retryAfter, hasRetryAfter := provhttp.RetryAfter(h, now)
	primary := h.Get("X-RateLimit-Remaining") == "0"
	secondary := hasRetryAfter || strings.Contains(strings.ToLower(ge.Message), "secondary rate limit") ||
		strings.HasSuffix(ge.DocumentationURL, "secondary-rate-limits") || strings.HasSuffix(ge.DocumentationURL, "#abuse-rate-limits")
	if !primary && !secondary && status != http.StatusTooManyRequests {
		if status == http.StatusForbidden {
			return &connectors.Error{Code: connectors.CodePermissionDenied, Status: status, Message: "GitHub refused the request: " + msg}
		}
		return nil
	}
	kind, wait := "secondary", secondaryWait
	if primary && !secondary {
		kind = "primary"
	}
	switch {
	case hasRetryAfter:
		wait = max(time.Second, retryAfter)
	case primary:
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			wait = max(time.Second, time.Unix(reset, 0).Sub(now))
		}
	}
	return &connectors.Error{
		Code:       connectors.CodeRateLimited,
		Status:     status,
		Message:    fmt.Sprintf("GitHub's %s rate limit: %s (retry in %s)", kind, msg, wait.Round(time.Second)),
		RetryAfter: wait,
		Retryable:  true,
	}
}

// accountCache is one account's bounded LRU of GET answers with an ETag.
type accountCache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	size       int
	ll         *list.List // front is most recently used
	m          map[string]*list.Element
}

type cacheEntry struct {
	key    string
	etag   string
	header http.Header
	body   []byte
}

func (c *accountCache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[key]
	if el == nil {
		return nil
	}
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

// store caches a 200 answer with an ETag and returns the response to hand
// on, whose body is the same bytes.
func (c *accountCache) store(key string, resp *http.Response) *http.Response {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
	if err != nil || len(body) > maxCachedBody || len(body) > c.maxBytes {
		// Too big (or broken): hand on what was read plus the rest.
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		return resp
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	e := &cacheEntry{key: key, etag: resp.Header.Get("ETag"), header: resp.Header.Clone(), body: body}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[key]; el != nil {
		c.size -= len(el.Value.(*cacheEntry).body)
		c.ll.Remove(el)
	}
	c.m[key] = c.ll.PushFront(e)
	c.size += len(body)
	for c.ll.Len() > c.maxEntries || c.size > c.maxBytes {
		old := c.ll.Back()
		oe := old.Value.(*cacheEntry)
		c.ll.Remove(old)
		delete(c.m, oe.key)
		c.size -= len(oe.body)
	}
	return resp
}

// response serves the entry for a 304: status 200, the cached headers with
// the fresh rate limit headers, and the cached body.
func (e *cacheEntry) response(req *http.Request, fresh *http.Response) *http.Response {
	h := e.header.Clone()
	for k, v := range fresh.Header {
		if strings.HasPrefix(k, "X-Ratelimit-") || k == "Date" {
			h[k] = v
		}
	}
	h.Set("X-Triggerd-Cache", "hit")
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK,
		Proto: fresh.Proto, ProtoMajor: fresh.ProtoMajor, ProtoMinor: fresh.ProtoMinor,
		Header: h, Body: io.NopCloser(bytes.NewReader(e.body)), ContentLength: int64(len(e.body)),
		Request: req,
	}
}
