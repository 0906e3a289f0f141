package store

import (
	"context"
	"time"
)

// RateLimit is a provider's last reported request budget for one key
// (an account and a rate-limit resource).
type RateLimit struct {
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// RateLimits keeps providers' request budgets so that every process using
// the store sees one budget per account, as the provider counts it.
type RateLimits interface {
	// GetRateLimit returns the budget for key; ok is false when none is
	// known or it has passed its Reset.
	GetRateLimit(ctx context.Context, key string) (rl RateLimit, ok bool, err error)
	// PutRateLimit records a budget. Answers arrive out of order, so of two
	// budgets with the same Reset the lower Remaining is kept; a later
	// Reset replaces an earlier one; an earlier Reset is ignored.
	PutRateLimit(ctx context.Context, key string, rl RateLimit) error
}

// MergeRateLimit applies PutRateLimit's rule: it returns what to keep when
// next arrives while prev (ok: known) is stored.
func MergeRateLimit(prev RateLimit, ok bool, next RateLimit) RateLimit {
	switch {
	case !ok || next.Reset.After(prev.Reset):
		return next
	case next.Reset.Before(prev.Reset):
		return prev
	case next.Remaining < prev.Remaining:
		return next
	}
	return prev
}
