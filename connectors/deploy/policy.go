package deploy

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

// Retry policy defaults.
const (
	maxAttempts      = 3
	defaultRetryBase = 250 * time.Millisecond
	maxRetryDelay    = 4 * time.Second
)

// policy is the HTTP policy every deploy step (API Call steps included)
// runs under: Vercel's per-endpoint rate limits tracked per connected
// account, and retries of idempotent requests. One policy serves every
// account of a Toolkit; Wrap may be called per request.
type policy struct {
	now       func() time.Time
	retryBase time.Duration

	mu sync.Mutex
	// limits is account id → bucket key → the latest rate-limit state.
	limits map[string]map[string]rateState
}

// rateState is what Vercel last said about one endpoint bucket.
type rateState struct {
	limit, remaining int
	reset            time.Time
}

func newPolicy(now func() time.Time, retryBase time.Duration) *policy {
	return &policy{now: now, retryBase: retryBase, limits: map[string]map[string]rateState{}}
}

// wrap is Toolkit.Wrap.
func (p *policy) wrap(accountID string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &policyTransport{p: p, account: accountID, base: base}
}

type policyTransport struct {
	p       *policy
	account string
	base    http.RoundTripper
}

// RoundTrip refuses a request whose endpoint bucket is known to be spent
// (a *connectors.Error with CodeRateLimited, nothing sent), else sends it,
// retrying idempotent requests on network errors and 5xx, and records the
// rate-limit headers of every answer.
func (t *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	key := bucketKey(req.Method, req.URL.Path)
	if err := t.p.refuse(t.account, key); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return retry(req, t.p.retryBase, func(r *http.Request) (*http.Response, error) {
		resp, err := t.base.RoundTrip(r)
		if err == nil {
			t.p.observe(t.account, key, resp)
		}
		return resp, err
	})
}

// bucketKey names the endpoint bucket of a request: the method and the
// path with its id segments replaced by "{}". Vercel paths alternate
// collection names and ids after the version
// (/v9/projects/{id}/env/{id}), so even segments after the first two are
// ids.
func bucketKey(method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range segs {
		if i >= 2 && i%2 == 0 {
			segs[i] = "{}"
		}
	}
	return method + " /" + strings.Join(segs, "/")
}

// refuse returns a rate-limit error when the account's bucket is known to
// be spent until a reset still in the future.
func (p *policy) refuse(account, key string) error {
	p.mu.Lock()
	st, ok := p.limits[account][key]
	p.mu.Unlock()
	if !ok || st.remaining > 0 {
		return nil
	}
	now := p.now()
	if !now.Before(st.reset) {
		return nil
	}
	wait := st.reset.Sub(now)
	return &connectors.Error{
		Code:       connectors.CodeRateLimited,
		Message:    fmt.Sprintf("the vercel rate limit for %s (%d requests) is spent until %s; nothing was sent", key, st.limit, st.reset.UTC().Format(time.RFC3339)),
		RetryAfter: wait,
		Retryable:  true,
	}
}

// observe records the rate-limit headers of resp; a 429 marks the bucket
// spent until Retry-After or the reset, whichever is later.
func (p *policy) observe(account, key string, resp *http.Response) {
	h := resp.Header
	remaining, errR := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	limited := resp.StatusCode == http.StatusTooManyRequests
	if errR != nil && !limited {
		return
	}
	now := p.now()
	st := rateState{remaining: remaining}
	st.limit, _ = strconv.Atoi(h.Get("X-RateLimit-Limit"))
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		st.reset = time.Unix(reset, 0)
	}
	if limited {
		st.remaining = 0
		if ra, ok := retryAfterHeader(h, now); ok && now.Add(ra).After(st.reset) {
			st.reset = now.Add(ra)
		}
		if st.reset.IsZero() {
			st.reset = now.Add(time.Second)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.limits[account]
	if m == nil {
		m = map[string]rateState{}
		p.limits[account] = m
	}
	m[key] = st
}

// retryAfterHeader parses Retry-After as seconds or an HTTP date.
func retryAfterHeader(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// idempotent reports whether req may be sent again: an idempotent method
// or an Idempotency-Key header, as net/http decides.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// retry sends req through send, and sends an idempotent request again on
// a network error or a 500, 502, 503 or 504 answer: at most maxAttempts
// attempts, waiting base·2ⁿ with jitter (or the answer's Retry-After, when
// shorter than maxRetryDelay) between them, and never past the context's
// deadline: when the wait would cross it, the last answer is returned.
func retry(req *http.Request, base time.Duration, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx := req.Context()
	canRetry := idempotent(req) && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			r = req.Clone(ctx)
			if req.Body != nil && req.Body != http.NoBody {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := send(r)
		if !canRetry || attempt >= maxAttempts || !retryable(resp, err) || ctx.Err() != nil {
			return resp, err
		}
		wait := backoff(base, attempt, resp)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

func retryable(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the wait before attempt+1: base·2^(attempt-1), capped, with
// "equal jitter" (half fixed, half random), or a shorter Retry-After.
func backoff(base time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra, ok := retryAfterHeader(resp.Header, time.Now()); ok && ra <= maxRetryDelay {
			return ra
		}
	}
	d := min(base<<(attempt-1), maxRetryDelay)
	half := d / 2
	return half + rand.N(half+1)
}
