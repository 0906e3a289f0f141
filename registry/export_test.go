package registry

import (
	"context"

	"github.com/triggerd/triggerd/store"
)

// NewHookRecord stores a hook record for key exactly as the registry does
// when a key is first needed (fresh id and sealed secret), without
// registering anything upstream. Tests use it to recreate the state a
// process leaves when it dies between registering a hook upstream and
// recording the provider's id.
func (r *Registry) NewHookRecord(ctx context.Context, key store.HookKey) (store.Hook, error) {
	return r.newHook(ctx, key)
}
