// Package provhttp holds the small HTTP helpers the connector packages
// share: a client that does not follow redirects, bounded response reads,
// URL checks, and sanitising of provider error text so that no token or
// code can leak through an error.
package provhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
)

// MaxBody bounds how much of a response is read.
const MaxBody = 1 << 20

// DefaultClient times out after 30 s and does not follow redirects.
func DefaultClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// Do sends req and reads the bounded response body.
func Do(c *http.Client, req *http.Request) (int, http.Header, []byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("read response: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// TransportError describes a step request (op) that got no answer from
// upstream ("google", "vercel"): a policy's refusal (*connectors.Error)
// stays as it is; a context that ended or a network failure is a
// retryable CodeUpstream error carrying the cause, not the URL.
func TransportError(ctx context.Context, op, upstream string, err error) error {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s: %v", op, ctxErr), Retryable: true}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s: %s could not be reached: %v", op, upstream, err), Retryable: true}
}

// CheckURL accepts absolute http and https URLs.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http or https URL")
	}
	return nil
}

// ExtraString reads a string field of the token response.
func ExtraString(tok *oauth2.Token, key string) string {
	if s, ok := tok.Extra(key).(string); ok {
		return s
	}
	return ""
}

// SplitScopes splits a comma- or space-separated scope list.
func SplitScopes(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(f) == 0 {
		return nil
	}
	return f
}

// ErrorCode keeps a provider's error code printable: codes are short
// words of letters, digits, '_', '-' and '.'; anything else is replaced.
func ErrorCode(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 64 {
		return "an unrecognised error"
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return "an unrecognised error"
		}
	}
	return s
}

// Clip bounds a server-supplied message.
func Clip(s string) string {
	const limit = 200
	if r := []rune(s); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return s
}

// GetJSON GETs url with token as a bearer credential and decodes a 200
// answer into v; any other status becomes apiError(status, body), so each
// provider keeps its own error shape.
func GetJSON(ctx context.Context, c *http.Client, url, token string, v any, apiError func(status int, body []byte) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	status, _, body, err := Do(c, req)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return apiError(status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// Retry policy shared by the connectors' transports.
const (
	// MaxAttempts bounds the sends of one request, the first included.
	MaxAttempts = 3
	// MaxRetryDelay caps the wait between attempts; a longer Retry-After
	// is not waited for.
	MaxRetryDelay = 4 * time.Second
)

// Idempotent reports whether req may be sent again: an idempotent method
// or an Idempotency-Key header, as net/http decides.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// RetryAfter parses a Retry-After header, in seconds or as an HTTP date.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		// A day is already "not now"; the cap keeps a hostile value from
		// overflowing time.Duration.
		return time.Duration(min(s, 86400)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Retry is RetryAttempts with MaxAttempts attempts.
func Retry(req *http.Request, base time.Duration, canRetry bool, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return RetryAttempts(req, base, MaxAttempts, canRetry, send)
}

// RetryAttempts sends req through send and, when canRetry, sends it again
// on a network error or a 500, 502, 503 or 504 answer: at most attempts
// attempts in all (fewer than one counts as one), waiting base·2ⁿ with
// jitter (or the answer's Retry-After, when shorter than MaxRetryDelay)
// between them, and never past the context's deadline: when the wait
// would cross it, the last answer is returned. A request whose body cannot
// be replayed (no GetBody) is sent once.
func RetryAttempts(req *http.Request, base time.Duration, attempts int, canRetry bool, send func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	ctx := req.Context()
	canRetry = canRetry && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
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
		if !canRetry || attempt >= attempts || !retryable(resp, err) || ctx.Err() != nil {
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
		// A refusal that says it will not pass (the dial guard's) is not
		// tried again.
		var ce *connectors.Error
		return !errors.As(err, &ce) || ce.Retryable
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// backoff is the wait before attempt+1: base·2^(attempt-1), capped, with
// "equal jitter", or a shorter Retry-After.
func backoff(base time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if ra, ok := RetryAfter(resp.Header, time.Now()); ok && ra <= MaxRetryDelay {
			return ra
		}
	}
	d := min(base<<(attempt-1), MaxRetryDelay)
	half := d / 2
	return half + rand.N(half+1)
}
