package connectors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Step is one tool step: a named action run as a connected account.
type Step struct {
	// ID is stable: "<connector>.<snake_case_action>", e.g.
	// "codehost.create_issue".
	ID string `json:"id"`
	// Name is the human name the product shows ("Create Issue").
	Name      string `json:"name"`
	Connector string `json:"connector"`
	// Description says what the step does, in one sentence.
	Description string `json:"description"`
	// Input and Output are JSON Schemas (draft 2020-12) of the step's input
	// and its structured output.
	Input  json.RawMessage `json:"input_schema"`
	Output json.RawMessage `json:"output_schema"`
	// Run performs the step. The input has already been validated against
	// Input. The output is marshalled to JSON; it is structured, never the
	// raw upstream body (except for API Call steps, whose output is the
	// upstream answer). Errors are *Error.
	Run func(ctx context.Context, env Env, input json.RawMessage) (any, error) `json:"-"`
}

// Env is what a step runs with.
type Env struct {
	// HTTP is authorised as the connected account (the platform adds the
	// token) and does not follow redirects.
	HTTP *http.Client
	// Account describes the connected account.
	Account AccountInfo
}

// AccountInfo is the non-secret part of a connected account.
type AccountInfo struct {
	ID         string
	Login      string
	ExternalID string
	// Metadata is the account's provider details (the deployment
	// platform's team_id, the analytics accounts).
	Metadata map[string]string
}

// ErrorCode classifies a step failure so callers can decide on it.
type ErrorCode string

// Step error codes.
const (
	// CodeValidation: the input is wrong; nothing was sent upstream.
	CodeValidation ErrorCode = "validation"
	// CodeNotFound: the provider says the resource does not exist (or is
	// not visible to the account).
	CodeNotFound ErrorCode = "not_found"
	// CodePermissionDenied: the account lacks the right.
	CodePermissionDenied ErrorCode = "permission_denied"
	// CodeRateLimited: a rate limit or quota is spent; RetryAfter says
	// when to try again.
	CodeRateLimited ErrorCode = "rate_limited"
	// CodeAccountRemoved: the connected account was removed.
	CodeAccountRemoved ErrorCode = "account_removed"
	// CodeNeedsReauth: the provider refused the account's grant.
	CodeNeedsReauth ErrorCode = "needs_reauth"
	// CodeUpstream: the provider failed otherwise; Status and Message say
	// how.
	CodeUpstream ErrorCode = "upstream"
	// CodeUnavailable: the provider has failed the account's requests
	// again and again (5xx answers, or none), so the step was held back
	// unsent; RetryAfter says when it may be tried again.
	CodeUnavailable ErrorCode = "unavailable"
)

// Error is a step failure. Its message never contains a token.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
	// Status is the upstream HTTP status, when there was one.
	Status int `json:"status,omitempty"`
	// RetryAfter is set for CodeRateLimited and CodeUnavailable.
	RetryAfter time.Duration `json:"-"`
	// Retryable reports whether the same request may succeed later.
	Retryable bool `json:"retryable"`
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (upstream %d): %s", e.Code, e.Status, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches another *Error by code, so errors.Is(err,
// &connectors.Error{Code: connectors.CodeRateLimited}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with a formatted message.
func Errorf(code ErrorCode, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// callerKey marks a step run's context with what asked for it; see
// WithCaller.
type callerKey struct{}

// WithCaller returns ctx marked as a step run asked for by caller ("api",
// "mcp", "pipeline"), for the runner's audit line.
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// Caller returns what WithCaller marked ctx with, or "".
func Caller(ctx context.Context) string {
	v, _ := ctx.Value(callerKey{}).(string)
	return v
}

// rawAnswersKey marks a request context; see WithRawAnswers.
type rawAnswersKey struct{}

// WithRawAnswers returns ctx marked as an API Call step's. A connector's
// policy normally turns some provider answers into an *Error (the code
// host's 403 permission refusals) so that named steps get a typed error;
// an API Call step promises its caller every non-2xx answer as output, so
// under this mark the policy hands such an answer back as the response.
// Rate limits and refusals made without sending stay *Error either way:
// the platform must see them to wait and retry.
func WithRawAnswers(ctx context.Context) context.Context {
	return context.WithValue(ctx, rawAnswersKey{}, true)
}

// RawAnswers reports whether ctx was marked by WithRawAnswers.
func RawAnswers(ctx context.Context) bool {
	v, _ := ctx.Value(rawAnswersKey{}).(bool)
	return v
}

// Toolkit is one connector's named steps and the HTTP policy every step of
// that connector (API Call steps included) runs under.
type Toolkit struct {
	Connector string
	Steps     []Step
	// Wrap returns the transport for one connected account: the
	// connector's rate-limit tracking, response caching and retry policy
	// around base, which adds the account's token. Nil means base as is.
	Wrap func(accountID string, base http.RoundTripper) http.RoundTripper
}
