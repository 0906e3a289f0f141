package analytics

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

// googleError is Google's error envelope. details holds google.rpc
// messages; an ErrorInfo among them carries a machine-readable reason.
type googleError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type   string `json:"@type"`
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
}

// scopeInsufficient reports whether e is Google's refusal of a token
// that lacks the scope the method needs (the user unticked a permission
// on the consent screen): 403 PERMISSION_DENIED with the ErrorInfo reason
// ACCESS_TOKEN_SCOPE_INSUFFICIENT, or, from a server that sends no
// details, its fixed message.
func (e *googleError) scopeInsufficient() bool {
	for _, d := range e.Error.Details {
		if d.Reason == "ACCESS_TOKEN_SCOPE_INSUFFICIENT" {
			return true
		}
	}
	return strings.Contains(strings.ToLower(e.Error.Message), "insufficient authentication scopes")
}

// Scope names for messages.
const (
	scopeReadonly = "analytics.readonly"
	scopeEdit     = "analytics.edit"
)

// client sends one step's requests to the Data and Admin APIs as the
// step's account and turns failures into *connectors.Error values.
type client struct {
	hc    *http.Client
	data  string
	admin string
	now   func() time.Time
	quota *quotaTracker
}

func (tk *toolkit) newClient(env connectors.Env) (*client, error) {
	if env.HTTP == nil {
		return nil, errors.New("analytics: the step environment has no HTTP client")
	}
	return &client{hc: env.HTTP, data: tk.data, admin: tk.admin, now: tk.now, quota: tk.quota}, nil
}

// call describes one request of a step.
type call struct {
	// op names the operation in messages ("run report on properties/1").
	op string
	// denied is the message for a 403 (what role is needed), "" for
	// Google's own.
	denied string
	method string
	url    string
	body   any
	// property and category say which quota a 429 spent.
	property string
	category quotaCategory
}

// do sends c and decodes a 2xx answer into out (when not nil).
func (cl *client) do(ctx context.Context, c call, out any) error {
	var rd io.Reader
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return fmt.Errorf("%s: encode request: %w", c.op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", c.op, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cl.hc.Do(req)
	if err != nil {
		return provhttp.TransportError(ctx, c.op, "google", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDataBody+1))
	if err != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: fmt.Sprintf("%s: read google's answer: %v", c.op, err), Retryable: true}
	}
	if len(data) > maxDataBody {
		return connectors.Errorf(connectors.CodeUpstream, "%s: google's answer exceeds %d bytes", c.op, maxDataBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return cl.apiError(c, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return &connectors.Error{Code: connectors.CodeUpstream, Status: resp.StatusCode, Message: fmt.Sprintf("%s: decode google's answer: %v", c.op, err)}
		}
	}
	return nil
}

// apiError maps a non-2xx answer: 400 → CodeValidation with Google's
// message, 401 → CodeNeedsReauth, 403 for a missing OAuth scope →
// CodeNeedsReauth (only a new consent can add it), any other 403 →
// CodePermissionDenied (with the role the operation needs), 404 →
// CodeNotFound, 409 → CodeValidation,
// 429 → CodeRateLimited with RetryAfter read from the message (see
// quotaTracker.classify), anything else CodeUpstream (retryable for 5xx).
func (cl *client) apiError(c call, status int, body []byte) *connectors.Error {
	var e googleError
	_ = json.Unmarshal(body, &e) // a foreign body leaves e zero
	msg := provhttp.Clip(strings.TrimSpace(e.Error.Message))
	detail := fmt.Sprintf("google answered HTTP %d", status)
	if s := provhttp.ErrorCode(e.Error.Status); s != "" {
		detail += " " + s
	}
	if msg != "" {
		detail += ": " + msg
	}
	out := &connectors.Error{Status: status, Message: c.op + ": " + detail}
	switch status {
	case http.StatusBadRequest:
		out.Code = connectors.CodeValidation
		if msg != "" {
			out.Message = c.op + ": " + msg
		}
	case http.StatusUnauthorized:
		out.Code = connectors.CodeNeedsReauth
		out.Message = c.op + ": google refused the account's token; reconnect the account (" + detail + ")"
	case http.StatusForbidden:
		if e.scopeInsufficient() {
			out.Code = connectors.CodeNeedsReauth
			out.Message = fmt.Sprintf("%s: the account's Google grant lacks the %s scope; reconnect the account and allow it on Google's consent screen (%s)", c.op, scopeFor(c), detail)
			break
		}
		out.Code = connectors.CodePermissionDenied
		if c.denied != "" {
			out.Message = c.denied
			if msg != "" {
				out.Message += " (google: " + msg + ")"
			}
		}
	case http.StatusNotFound:
		out.Code = connectors.CodeNotFound
	case http.StatusConflict:
		out.Code = connectors.CodeValidation
	case http.StatusTooManyRequests:
		out.Code = connectors.CodeRateLimited
		out.Retryable = true
		if c.property != "" {
			out.RetryAfter = cl.quota.exhausted(c.property, c.category, e.Error.Message)
		} else {
			out.RetryAfter, _ = cl.quota.classify(e.Error.Message, cl.now())
		}
	default:
		out.Code = connectors.CodeUpstream
		out.Retryable = status >= 500
	}
	return out
}

// scopeFor names the scope call c needs: Data API calls (those with a
// property quota) and Admin API reads need analytics.readonly, Admin API
// writes analytics.edit.
func scopeFor(c call) string {
	if c.method == http.MethodGet || c.property != "" {
		return scopeReadonly
	}
	return scopeEdit
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

// listPages GETs a token-paginated Admin list, following nextPageToken
// until limit items are read; it returns the items and the token of the
// rest ("" at the end).
func listPages[T any](ctx context.Context, c *client, base call, key string, limit int, pageToken string) ([]T, string, error) {
	var items []T
	seen := map[string]bool{}
	u, err := url.Parse(base.url)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", base.op, err)
	}
	q := u.Query()
	for range maxListPages {
		q.Set("pageSize", strconv.Itoa(min(limit-len(items), maxAdminPageSize)))
		q.Del("pageToken")
		if pageToken != "" {
			q.Set("pageToken", pageToken)
		}
		u.RawQuery = q.Encode()
		cl := base
		cl.url = u.String()
		var page map[string]json.RawMessage
		if err := c.do(ctx, cl, &page); err != nil {
			return nil, "", err
		}
		if raw, ok := page[key]; ok {
			var got []T
			if err := json.Unmarshal(raw, &got); err != nil {
				return nil, "", connectors.Errorf(connectors.CodeUpstream, "%s: decode %s: %v", base.op, key, err)
			}
			items = append(items, got...)
		}
		next := ""
		if raw, ok := page["nextPageToken"]; ok {
			json.Unmarshal(raw, &next)
		}
		if next == "" || len(items) >= limit {
			return items[:min(len(items), limit)], next, nil
		}
		if seen[next] {
			return nil, "", connectors.Errorf(connectors.CodeUpstream, "%s: google repeated a page token", base.op)
		}
		seen[next] = true
		pageToken = next
	}
	return nil, "", connectors.Errorf(connectors.CodeUpstream, "%s: more than %d pages", base.op, maxListPages)
}
