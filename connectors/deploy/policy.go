package deploy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// defaultRetryBase is the first retry's base wait (see provhttp.Retry).
const defaultRetryBase = 250 * time.Millisecond

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
	return provhttp.Retry(req, t.p.retryBase, provhttp.Idempotent(req), func(r *http.Request) (*http.Response, error) {
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
		if ra, ok := provhttp.RetryAfter(h, now); ok && now.Add(ra).After(st.reset) {
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
