package daemon

import (
	"context"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/store"
)

// sharedRateLimits keeps the code-hosting policy's per-account budgets in
// the store, so that every triggerd process sharing Redis sees one budget
// per account, as GitHub counts it.
type sharedRateLimits struct{ s store.RateLimits }

func rateLimitKey(accountID, resource string) string {
	return "codehost:" + accountID + ":" + resource
}

// Get implements codehost.RateLimitStore.
func (r sharedRateLimits) Get(ctx context.Context, accountID, resource string) (codehost.RateLimit, bool, error) {
	rl, ok, err := r.s.GetRateLimit(ctx, rateLimitKey(accountID, resource))
	return codehost.RateLimit{Limit: rl.Limit, Remaining: rl.Remaining, Reset: rl.Reset}, ok, err
}

// Put implements codehost.RateLimitStore.
func (r sharedRateLimits) Put(ctx context.Context, accountID, resource string, rl codehost.RateLimit) error {
	return r.s.PutRateLimit(ctx, rateLimitKey(accountID, resource), store.RateLimit{Limit: rl.Limit, Remaining: rl.Remaining, Reset: rl.Reset})
}
