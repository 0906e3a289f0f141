package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// maxAPIBody bounds how much of a Vercel answer a step reads.
const maxAPIBody = 8 << 20

// client sends one step's requests to the Vercel REST API as the step's
// account: it adds ?teamId= for team accounts, encodes and decodes JSON,
// and turns failures into *connectors.Error values.
type client struct {
	hc     *http.Client
	base   string
	teamID string
	now    func() time.Time
}

// newClient returns a client for env's account.
func (tk *toolkit) newClient(env connectors.Env) (*client, error) {
	if env.HTTP == nil {
		return nil, errors.New("deploy: the step environment has no HTTP client")
	}
	return &client{hc: env.HTTP, base: tk.base, teamID: env.Account.Metadata[MetaTeamID], now: tk.now}, nil
}

// do sends method path?query with body (JSON-encoded when not nil) and
// decodes a 2xx answer into out (when not nil). op names the operation in
// error messages.
func (c *client) do(ctx context.Context, op, method, path string, query url.Values, body, out any) error {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	if c.teamID != "" {
		q.Set("teamId", c.teamID)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return provhttp.TransportError(ctx, op, "vercel", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBody+1))
	if err != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s: read the vercel answer: %v", op, err), Retryable: true}
	}
	if len(data) > maxAPIBody {
		return connectors.Errorf(connectors.CodeUpstream, "%s: the vercel answer exceeds %d bytes", op, maxAPIBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return stepAPIError(op, resp.StatusCode, resp.Header, data, c.now())
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &connectors.Error{Code: connectors.CodeUpstream, Status: resp.StatusCode, Message: fmt.Sprintf("%s: decode the vercel answer: %v", op, err)}
		}
	}
	return nil
}

// vercelError is Vercel's error envelope.
type vercelError struct {
	Error struct {
		Code         string `json:"code"`
		Message      string `json:"message"`
		InvalidToken bool   `json:"invalidToken"`
		Limit        *struct {
			Reset   int64 `json:"reset"`
			ResetMs int64 `json:"resetMs"`
		} `json:"limit"`
	} `json:"error"`
}

// stepAPIError maps a non-2xx Vercel answer onto a step error: 400 →
// CodeValidation, 401 and 403 with invalidToken → CodeNeedsReauth, other
// 403 → CodePermissionDenied, 404 → CodeNotFound, 429 → CodeRateLimited
// with RetryAfter from Retry-After, X-RateLimit-Reset or the body's
// limit.reset (at least one second), anything else CodeUpstream
// (retryable for 5xx).
func stepAPIError(op string, status int, h http.Header, body []byte, now time.Time) *connectors.Error {
	var e vercelError
	_ = json.Unmarshal(body, &e) // an empty or foreign body leaves e zero
	detail := fmt.Sprintf("vercel answered HTTP %d", status)
	if c := provhttp.ErrorCode(e.Error.Code); c != "" {
		detail += " " + c
	}
	if m := strings.TrimSpace(e.Error.Message); m != "" {
		detail += ": " + provhttp.Clip(m)
	}
	out := &connectors.Error{Status: status, Message: op + ": " + detail}
	switch {
	case status == http.StatusBadRequest:
		out.Code = connectors.CodeValidation
	case status == http.StatusUnauthorized, status == http.StatusForbidden && e.Error.InvalidToken:
		out.Code = connectors.CodeNeedsReauth
		out.Message = op + ": vercel refused the account's token; reconnect the account (" + detail + ")"
	case status == http.StatusForbidden:
		out.Code = connectors.CodePermissionDenied
	case status == http.StatusNotFound:
		out.Code = connectors.CodeNotFound
	case status == http.StatusTooManyRequests:
		out.Code = connectors.CodeRateLimited
		out.Retryable = true
		out.RetryAfter = rateLimitWait(h, e, now)
	default:
		out.Code = connectors.CodeUpstream
		out.Retryable = status >= 500
	}
	return out
}

// rateLimitWait says how long a 429 asks to wait.
func rateLimitWait(h http.Header, e vercelError, now time.Time) time.Duration {
	if d, ok := provhttp.RetryAfter(h, now); ok && d > 0 {
		return d
	}
	var reset time.Time
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		var s int64
		if _, err := fmt.Sscan(v, &s); err == nil {
			reset = time.Unix(s, 0)
		}
	}
	if reset.IsZero() && e.Error.Limit != nil {
		switch {
		case e.Error.Limit.ResetMs > 0:
			reset = time.UnixMilli(e.Error.Limit.ResetMs)
		case e.Error.Limit.Reset > 0:
			reset = time.Unix(e.Error.Limit.Reset, 0)
		}
	}
	if d := reset.Sub(now); d > time.Second {
		return d
	}
	return time.Second
}

// decodeInput decodes a step input strictly: unknown fields are refused.
func decodeInput(input json.RawMessage, v any) error {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return connectors.Errorf(connectors.CodeValidation, "input: %v", err)
	}
	return nil
}
