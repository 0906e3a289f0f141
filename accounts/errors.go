package accounts

import (
	"errors"
	"fmt"
	"strings"

	"github.com/triggerd/triggerd/store"
)

// Errors that callers decide on. Match them with errors.Is; the errors
// returned are usually *AccountError or *CallbackError values that carry
// more detail.
var (
	// ErrUnknownConnector is returned for a connector name that has no
	// provider configured: no such connector, or one without OAuth client
	// settings (a *ConnectorError says which).
	ErrUnknownConnector = errors.New("accounts: unknown connector")
	// ErrAccountNotFound is returned for an account that does not exist in
	// the tenant (also when it belongs to another tenant).
	ErrAccountNotFound = errors.New("accounts: account not found")
	// ErrAccountRemoved is returned for an account the user removed.
	ErrAccountRemoved = errors.New("accounts: account removed, reconnect it")
	// ErrNeedsReauth is returned for an account whose grant the provider
	// refused (or whose token expired without a way to refresh it).
	ErrNeedsReauth = errors.New("accounts: the provider refused the account's grant; reconnect it")
)

// AccountError reports why an account cannot be used. errors.Is matches it
// against ErrAccountNotFound (Status empty), ErrAccountRemoved (Status
// removed) and ErrNeedsReauth (Status needs_reauth).
type AccountError struct {
	// AccountID is the account asked for.
	AccountID string
	// Status is the account's status, empty when it does not exist.
	Status store.AccountStatus
	// Reason says what happened and what to do, fit to show to the user.
	Reason string
}

// Error returns a message naming the account, its state and the reason.
func (e *AccountError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "accounts: account %q ", e.AccountID)
	switch e.Status {
	case "":
		b.WriteString("not found")
	case store.StatusRemoved:
		b.WriteString("removed")
	case store.StatusNeedsReauth:
		b.WriteString("needs reconnecting")
	default:
		b.WriteString("is " + string(e.Status))
	}
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// Is reports whether target is the sentinel error for e's Status.
func (e *AccountError) Is(target error) bool {
	switch target {
	case ErrAccountNotFound:
		return e.Status == ""
	case ErrAccountRemoved:
		return e.Status == store.StatusRemoved
	case ErrNeedsReauth:
		return e.Status == store.StatusNeedsReauth
	}
	return false
}

// CallbackError reports an OAuth callback that was refused: the user denied
// consent, the state was missing, unknown, expired, already used or meant
// for another connector, or the provider refused the code. The HTTP layer
// answers 400 with Reason. Neither holds the code or state values.
type CallbackError struct {
	// Reason says what went wrong and what to do, fit to show to the user.
	Reason string
}

// Error returns the reason.
func (e *CallbackError) Error() string {
	return "accounts: callback refused: " + e.Reason
}

// redactedError hides secret values (tokens, codes, states, verifiers) that
// an error from elsewhere might echo. It keeps the chain for errors.Is.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err with every non-empty secret replaced in its message.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// ConnectorError says why a connector cannot connect accounts on this
// server: it does not exist, or has no OAuth client settings. It matches
// ErrUnknownConnector.
type ConnectorError struct {
	Connector string
	Reason    string
}

func (e *ConnectorError) Error() string {
	return fmt.Sprintf("accounts: connector %q %s", e.Connector, e.Reason)
}

// Is reports whether target is ErrUnknownConnector.
func (e *ConnectorError) Is(target error) bool { return target == ErrUnknownConnector }
