package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// CodeAccountRemoved is the status code of triggers whose account was
// removed.
const CodeAccountRemoved = "account_removed"

// AccountRemoving deactivates the account's triggers and deletes its hooks
// upstream. Call it before the account's grant is revoked, while its token
// still works.
func (r *Registry) AccountRemoving(ctx context.Context, tenantID string, acc store.Account) error {
	ts, err := r.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID, AccountID: acc.ID})
	if err != nil {
		return fmt.Errorf("list the account's triggers: %w", err)
	}
	reason := fmt.Sprintf("account %s (%s) was removed on %s; reconnect it to reactivate this trigger",
		acc.ID, acc.Login, r.o.Now().UTC().Format(time.RFC3339))
	var errs []error
	for _, t := range ts {
		if err := r.setStatus(ctx, t, store.TriggerInactive, CodeAccountRemoved, reason); err != nil {
			errs = append(errs, err)
		}
	}
	hooks, err := r.o.Store.ListHooks(ctx, tenantID)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, h := range hooks {
		if h.AccountID != acc.ID {
			continue
		}
		release, err := r.lockHook(ctx, h.Key())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = r.removeHook(ctx, h)
		release()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// AccountConnected reactivates the triggers that were deactivated when the
// account was removed and registers their hooks again.
func (r *Registry) AccountConnected(ctx context.Context, tenantID, accountID string) error {
	ts, err := r.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID, AccountID: accountID})
	if err != nil {
		return fmt.Errorf("list the account's triggers: %w", err)
	}
	var errs []error
	var keys []store.HookKey
	for _, t := range ts {
		if t.Status != store.TriggerInactive || t.StatusCode != CodeAccountRemoved {
			continue
		}
		if err := r.setStatus(ctx, t, store.TriggerActive, "", ""); err != nil {
			errs = append(errs, err)
			continue
		}
		tkeys, err := r.keysOf(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, k := range tkeys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	// Each hook once, for all its reactivated triggers, rather than once
	// per trigger, widening it step by step.
	// A failing hook leaves its triggers active again: its status says
	// why and the reconcile retries.
	return errors.Join(append(errs, r.syncKeys(ctx, keys))...)
}

// setStatus changes a trigger's status, retrying lost compare-and-sets.
func (r *Registry) setStatus(ctx context.Context, t store.Trigger, status store.TriggerStatus, code, reason string) error {
	for {
		t.Status, t.StatusCode, t.StatusReason, t.UpdatedAt = status, code, reason, r.o.Now()
		updated, err := r.o.Store.UpdateTrigger(ctx, t)
		if err == nil {
			r.changed(ctx, updated)
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("update trigger %s: %w", t.ID, err)
		}
		id := t.ID
		if t, err = r.o.Store.GetTrigger(ctx, t.TenantID, id); err != nil {
			return fmt.Errorf("reread trigger %s: %w", id, err)
		}
	}
}

// ReconcileReport says what a reconcile pass did.
type ReconcileReport struct {
	// Skipped is true when another process held the reconcile lease.
	Skipped  bool `json:"skipped"`
	Checked  int  `json:"checked"`
	Repaired int  `json:"repaired"`
	Removed  int  `json:"removed"`
	Failed   int  `json:"failed"`
	// Redelivered and Abandoned add up what healing the hooks did
	// (heal.go).
	Redelivered int `json:"redelivered"`
	Abandoned   int `json:"abandoned"`
}

// reconcileLease is the lease that lets one process reconcile at a time.
const reconcileLease = "registry:reconcile"

// Reconcile compares every code-hosting hook with upstream and repairs
// drift: a hook deleted upstream is re-created, a disabled one re-enabled,
// events put back, and a hook no trigger needs removed. It then heals each
// hook: GitHub is asked to redeliver the events it failed to deliver
// (heal.go). Only one process reconciles at a time (a store lease); the
// others skip.
func (r *Registry) Reconcile(ctx context.Context) (ReconcileReport, error) {
	release, held, err := r.o.Store.TryLock(ctx, reconcileLease, 10*time.Minute)
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("reconcile lease: %w", err)
	}
	if !held {
		return ReconcileReport{Skipped: true}, nil
	}
	defer release()
	hooks, err := r.o.Store.ListHooks(ctx, "")
	if err != nil {
		return ReconcileReport{}, fmt.Errorf("list hooks: %w", err)
	}
	var rep ReconcileReport
	for _, h := range hooks {
		if h.Connector != string(triggers.CodeHost) {
			continue
		}
		rep.Checked++
		h, api, changed, removed, err := r.reconcileHook(ctx, h)
		switch {
		case err != nil:
			rep.Failed++
			r.log.Warn().Err(err).Str("hook", h.ID).Str("target", h.Target).Msg("hook repair failed")
		case removed:
			rep.Removed++
		case changed:
			rep.Repaired++
			r.log.Info().Str("hook", h.ID).Str("target", h.Target).Msg("hook repaired upstream")
		}
		if api == nil {
			continue
		}
		// Healing only reads and asks GitHub, and records its progress
		// with a compare-and-set: it runs after the hook's lease is
		// released, so trigger changes need not wait up to a hundred
		// redeliveries for it.
		healed, err := r.heal(ctx, api, h)
		rep.Redelivered += healed.redelivered
		rep.Abandoned += healed.abandoned
		if err != nil {
			r.log.Warn().Err(err).Str("hook", h.ID).Str("target", h.Target).Msg("healing the hook's failed deliveries failed; the next reconcile tries again")
		}
	}
	return rep, nil
}

// reconcileHook repairs or removes one hook under its lease. It returns
// the hook as registered and the API that reads it when it is to be
// healed (nil otherwise).
func (r *Registry) reconcileHook(ctx context.Context, h store.Hook) (_ store.Hook, _ HookAPI, changed, removed bool, err error) {
	release, err := r.lockHook(ctx, h.Key())
	if err != nil {
		return h, nil, false, false, err
	}
	defer release()
	want, err := r.desiredEvents(ctx, h.Key())
	if err != nil {
		return h, nil, false, false, err
	}
	cur, err := r.o.Store.GetHook(ctx, h.ID)
	if errors.Is(err, store.ErrNotFound) {
		// Removed since the list was read (its last trigger deleted, its
		// account removed): nothing to repair.
		return h, nil, false, false, nil
	} else if err != nil {
		return h, nil, false, false, err
	}
	h = cur
	if len(want) == 0 {
		return h, nil, false, true, r.removeHook(ctx, h)
	}
	api, err := r.api(ctx, h)
	if err != nil {
		return h, nil, false, false, r.failHook(ctx, h, err)
	}
	if h, changed, err = r.register(ctx, api, h, want); err != nil {
		return h, nil, changed, false, err
	}
	return h, api, changed, false, nil
}

// RunReconciler reconciles at once, then every interval until ctx ends.
// The first pass comes at start because a process that was down is what
// most often leaves hooks to repair and deliveries to heal, and GitHub
// redelivers only for 3 days: waiting a whole interval after a restart
// would leave every trigger on a lost hook silent meanwhile.
func (r *Registry) RunReconciler(ctx context.Context, interval time.Duration) {
	pass := func() {
		if rep, err := r.Reconcile(ctx); err != nil {
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Msg("reconcile failed")
			}
		} else if rep.Repaired+rep.Removed+rep.Failed+rep.Redelivered+rep.Abandoned > 0 {
			r.log.Info().Interface("report", rep).Msg("reconciled hooks")
		}
	}
	pass()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pass()
		}
	}
}
