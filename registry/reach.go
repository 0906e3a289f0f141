package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Reach is what serves an account's triggers on all its repositories
// (match.AllRepositories): one organisation hook on each organisation the
// account owns (GitHub delivers every repository of the organisation
// through it, those created later too), and one repository hook on each
// other repository it administers. Where it can see repositories but may
// not register a hook, Lacking says so.
//
// The reach is read from GitHub when such a trigger is created or
// deleted, and again by the poller (RefreshReach), which is how
// repositories created later, and rights gained or lost, are picked up.
// It is kept per tenant and account (a store.Cursor) while the account has
// such triggers; the account's triggers on chosen repositories use it too,
// so that a repository an organisation hook serves has no hook of its own
// and no event reaches a trigger twice.
type Reach struct {
	// Orgs are the organisations (lower-case logins) served by an
	// organisation hook.
	Orgs []string `json:"orgs,omitempty"`
	// Repos are the repositories (lower-case owner/name) served by a
	// repository hook: those the account administers outside Orgs.
	Repos []string `json:"repos,omitempty"`
	// Lacking are the places the account reaches without the rights to
	// register a hook there, and why, sorted by target.
	Lacking []Gap `json:"lacking,omitempty"`
	// CheckedAt is when the reach was last read from GitHub.
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// Gap is a repository or organisation an account reaches but cannot
// register a hook on.
type Gap struct {
	Scope  store.HookScope `json:"scope"`
	Target string          `json:"target"`
	Reason string          `json:"reason"`
}

// hasOrg reports whether rc serves organisation org with its hook.
func (rc *Reach) hasOrg(org string) bool {
	return rc != nil && slices.Contains(rc.Orgs, strings.ToLower(org))
}

// empty reports whether rc serves nothing and lacks nothing.
func (rc Reach) empty() bool {
	return len(rc.Orgs) == 0 && len(rc.Repos) == 0 && len(rc.Lacking) == 0
}

// sameTargets reports whether a and b serve and lack the same places.
func (rc Reach) sameTargets(b Reach) bool {
	return slices.Equal(rc.Orgs, b.Orgs) && slices.Equal(rc.Repos, b.Repos) && slices.Equal(rc.Lacking, b.Lacking)
}

// keys returns the hooks rc serves for tenantID's account accountID.
func (rc Reach) keys(tenantID, accountID string) []store.HookKey {
	base := store.HookKey{TenantID: tenantID, AccountID: accountID, Connector: string(triggers.CodeHost)}
	var out []store.HookKey
	for _, o := range rc.Orgs {
		k := base
		k.Scope, k.Target = store.HookOrganization, o
		out = append(out, k)
	}
	for _, r := range rc.Repos {
		k := base
		k.Scope, k.Target = store.HookRepository, r
		out = append(out, k)
	}
	return out
}

// AllRepositories reports whether t takes the events of every repository
// its account reaches.
func AllRepositories(t store.Trigger) bool {
	var p match.Params
	_ = json.Unmarshal(t.Params, &p)
	k := triggers.Kind(t.Kind)
	return deliveryOf(k, p) == viaHooks && match.AllRepositories(k, p)
}

// reachKey is the name of the cursor an account's reach is kept in.
func reachKey(tenantID, accountID string) string { return "reach:" + tenantID + ":" + accountID }

// loadReach reads an account's stored reach (a zero Reach when none is).
func (r *Registry) loadReach(ctx context.Context, tenantID, accountID string) (Reach, store.Cursor, error) {
	c, err := r.o.Store.GetCursor(ctx, reachKey(tenantID, accountID))
	if err != nil {
		return Reach{}, store.Cursor{}, fmt.Errorf("read the reach of account %s: %w", accountID, err)
	}
	var rc Reach
	if len(c.Value) > 0 {
		if err := json.Unmarshal(c.Value, &rc); err != nil {
			// Read again from GitHub at the next refresh.
			r.log.Warn().Err(err).Str("account", accountID).Msg("unreadable stored reach; taken as empty")
			rc = Reach{}
		}
	}
	return rc, c, nil
}

// saveReach stores rc in c by compare-and-set.
func (r *Registry) saveReach(ctx context.Context, c store.Cursor, rc Reach) error {
	b, err := json.Marshal(rc)
	if err != nil {
		return err
	}
	c.Value, c.UpdatedAt = b, r.o.Now().UTC()
	if _, err := r.o.Store.PutCursor(ctx, c); err != nil {
		return fmt.Errorf("store the reach of %s: %w", strings.TrimPrefix(c.Key, "reach:"), err)
	}
	return nil
}

// ReachOf returns the reach serving t, or nil when t is not on all
// repositories.
func (r *Registry) ReachOf(ctx context.Context, t store.Trigger) (*Reach, error) {
	if !AllRepositories(t) {
		return nil, nil
	}
	rc, _, err := r.loadReach(ctx, t.TenantID, t.AccountID)
	if err != nil {
		return nil, err
	}
	return &rc, nil
}

// RefreshReach reads again what an account reaches and, when it changed
// (a repository created or deleted, rights gained or lost) or a hook of
// it has no record yet, brings the account's hooks in line. An account
// without a trigger on all repositories has its reach cleared. The poller
// calls it for every account with such a trigger (poll.Options.Reach).
func (r *Registry) RefreshReach(ctx context.Context, tenantID, accountID string) (Reach, error) {
	return r.refreshReach(ctx, tenantID, accountID, false)
}

// refreshReach is RefreshReach; force syncs the account's hooks even when
// the reach did not change (a trigger on all repositories was just
// created or deleted). Its error is for a reach that could not be read or
// stored: a hook that could not be registered shows on the hook and in
// Lacking, and the reconcile retries it.
func (r *Registry) refreshReach(ctx context.Context, tenantID, accountID string, force bool) (Reach, error) {
	release, err := r.lock(ctx, reachKey(tenantID, accountID), "the reach of account "+accountID)
	if err != nil {
		return Reach{}, err
	}
	defer release()
	old, cur, err := r.loadReach(ctx, tenantID, accountID)
	if err != nil {
		return Reach{}, err
	}
	ts, err := r.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID, AccountID: accountID})
	if err != nil {
		return Reach{}, fmt.Errorf("list the account's triggers: %w", err)
	}
	wanted := slices.ContainsFunc(ts, func(t store.Trigger) bool { return t.Status == store.TriggerActive && AllRepositories(t) })
	var next Reach
	if wanted {
		if next, err = r.readReach(ctx, tenantID, accountID); err != nil {
			return old, err
		}
	} else if old.empty() && !force {
		return old, nil
	}
	changed := !next.sameTargets(old)
	if changed || wanted {
		if err := r.saveReach(ctx, cur, next); err != nil {
			return old, err
		}
	}
	if !changed && !force && !r.missingHooks(ctx, next.keys(tenantID, accountID)) {
		return next, nil
	}
	if changed {
		r.log.Info().Str("tenant", tenantID).Str("account", accountID).Strs("orgs", next.Orgs).Int("repos", len(next.Repos)).
			Int("lacking", len(next.Lacking)).Msg("the account's reach changed; syncing its hooks")
	}
	r.syncAccount(ctx, tenantID, accountID, ts, old, next)
	return next, nil
}

// missingHooks reports whether any of keys has no hook record.
func (r *Registry) missingHooks(ctx context.Context, keys []store.HookKey) bool {
	for _, k := range keys {
		if _, err := r.o.Store.FindHook(ctx, k); errors.Is(err, store.ErrNotFound) {
			return true
		}
	}
	return false
}

// syncAccount brings every hook the account's triggers use, under the old
// reach or the new one, in line with them. Failures are recorded on the
// hooks (and logged); the reconcile retries them.
func (r *Registry) syncAccount(ctx context.Context, tenantID, accountID string, ts []store.Trigger, old, next Reach) {
	var keys []store.HookKey
	add := func(ks []store.HookKey) {
		for _, k := range ks {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	add(old.keys(tenantID, accountID))
	add(next.keys(tenantID, accountID))
	for _, t := range ts {
		add(keysFor(t, &old))
		add(keysFor(t, &next))
	}
	if err := r.syncKeys(ctx, keys); err != nil {
		ev := r.log.Warn().Err(err).Str("tenant", tenantID).Str("account", accountID)
		var hse *HookSyncError
		if errors.As(err, &hse) {
			// Every target, where the message stops at ten.
			failed := make([]string, len(hse.Failed))
			for i, f := range hse.Failed {
				failed[i] = string(f.Scope) + " " + f.Target
			}
			ev = ev.Strs("failed", failed).Int("hooks", hse.Total)
		}
		ev.Msg("some of the account's hooks could not be registered; the reconcile retries those that failed, the next refresh those not attempted")
	}
}

// readReach reads from GitHub what the account reaches: its organisation
// memberships, and every repository it can see with its permissions. An
// organisation it owns is served by an organisation hook when its token
// may list that organisation's hooks (the same rights as creating one:
// ownership and admin:org_hook); otherwise its repositories are taken one
// by one like any other.
func (r *Registry) readReach(ctx context.Context, tenantID, accountID string) (Reach, error) {
	client, acc, err := r.o.Accounts.Client(ctx, tenantID, accountID)
	if err != nil {
		return Reach{}, fmt.Errorf("%w: account %s cannot be used: %v", ErrHookRights, accountID, err)
	}
	api := r.o.HookAPI(client)
	who := acc.Login
	if who == "" {
		who = "account " + accountID
	}
	members, err := api.OrgMemberships(ctx)
	if err != nil {
		return Reach{}, fmt.Errorf("%w: reading the organisations of %s: %v", ErrUpstream, who, err)
	}
	repos, err := api.Repositories(ctx)
	if err != nil {
		return Reach{}, fmt.Errorf("%w: reading the repositories of %s: %v", ErrUpstream, who, err)
	}
	rc := Reach{CheckedAt: r.o.Now().UTC()}
	for _, m := range members {
		org := strings.ToLower(m.Org)
		if m.Role != codehost.OrgRoleAdmin {
			continue
		}
		_, err := api.List(ctx, codehost.HookTarget{Org: m.Org})
		switch {
		case err == nil:
			rc.Orgs = append(rc.Orgs, org)
		case errors.Is(err, codehost.ErrHookPermission):
			rc.Lacking = append(rc.Lacking, Gap{Scope: store.HookOrganization, Target: org,
				Reason: fmt.Sprintf("%s owns the organisation but its token may not manage the organisation's webhooks: reconnect the account granting admin:org_hook; meanwhile each repository of it %s administers gets a hook of its own", who, who)})
		default:
			return Reach{}, fmt.Errorf("%w: reading the webhooks of organisation %s: %v", ErrUpstream, m.Org, err)
		}
	}
	for _, repo := range repos {
		name := strings.ToLower(repo.FullName)
		switch {
		case rc.hasOrg(repo.Owner), repo.Archived:
			// Served by the organisation's hook; or read-only, with
			// nothing to report until it is unarchived (a later refresh
			// hooks it then).
		case repo.Admin:
			rc.Repos = append(rc.Repos, name)
		default:
			right := repo.Permission
			if right == "" {
				right = "no"
			}
			why := fmt.Sprintf("%s has %s rights on it, not admin: GitHub lets only a repository's admins manage its webhooks", who, right)
			if repo.OwnerIsOrg {
				why += " (or an owner of organisation " + repo.Owner + ", through an organisation hook)"
			}
			rc.Lacking = append(rc.Lacking, Gap{Scope: store.HookRepository, Target: name, Reason: why})
		}
	}
	slices.Sort(rc.Orgs)
	rc.Orgs = slices.Compact(rc.Orgs)
	slices.Sort(rc.Repos)
	rc.Repos = slices.Compact(rc.Repos)
	slices.SortFunc(rc.Lacking, func(a, b Gap) int { return strings.Compare(a.Target, b.Target) })
	return rc, nil
}

// Coverage is what serves a trigger on all repositories, for its owner to
// read: how many hooks it holds and where its account lacks the rights
// to one.
type Coverage struct {
	// Hooks counts the trigger's hooks that are registered and active.
	Hooks int `json:"hooks"`
	// Organizations are the organisations an organisation hook serves;
	// Repositories counts the repositories served by a hook of their own.
	Organizations []string `json:"organizations"`
	Repositories  int      `json:"repositories"`
	// Lacking are where the account reaches repositories without the
	// rights to a hook, and the hooks that failed for want of them.
	Lacking []Gap `json:"lacking"`
	// Failing are the hooks that failed for another reason (GitHub's
	// errors, its rate limits), with it; the reconcile retries them.
	Failing []Gap `json:"failing"`
	// Pending counts the organisations and repositories served that have
	// no hook yet, nor a failure: not attempted (GitHub's rate limit
	// stopped the registration, or the caller gave up) or still being
	// registered. The next refresh of the reach, or the reconcile,
	// registers them.
	Pending int `json:"pending"`
	// CheckedAt is when the account's reach was last read from GitHub.
	CheckedAt time.Time `json:"checked_at,omitzero"`
}

// CoverageOf returns the coverage of t given its hooks (HooksOf), or nil
// when t is not on all repositories.
func (r *Registry) CoverageOf(ctx context.Context, t store.Trigger, hooks []store.Hook) (*Coverage, error) {
	rc, err := r.ReachOf(ctx, t)
	if rc == nil || err != nil {
		return nil, err
	}
	c := &Coverage{Organizations: slices.Clone(rc.Orgs), Repositories: len(rc.Repos), Lacking: slices.Clone(rc.Lacking), CheckedAt: rc.CheckedAt}
	if c.Organizations == nil {
		c.Organizations = []string{}
	}
	accounted := map[[2]string]bool{} // registered, or failing with a reason
	for _, h := range hooks {
		accounted[[2]string{string(h.Scope), h.Target}] = h.ExternalID != 0 || h.Status == store.HookFailing
		switch {
		case h.Status == store.HookActive && h.ExternalID != 0:
			c.Hooks++
		case h.Status == store.HookFailing && strings.Contains(h.StatusReason, ErrHookRights.Error()):
			c.Lacking = append(c.Lacking, Gap{Scope: h.Scope, Target: h.Target, Reason: h.StatusReason})
		case h.Status == store.HookFailing:
			c.Failing = append(c.Failing, Gap{Scope: h.Scope, Target: h.Target, Reason: h.StatusReason})
		}
	}
	for _, k := range rc.keys(t.TenantID, t.AccountID) {
		if !accounted[[2]string{string(k.Scope), k.Target}] {
			c.Pending++
		}
	}
	if c.Lacking == nil {
		c.Lacking = []Gap{}
	}
	if c.Failing == nil {
		c.Failing = []Gap{}
	}
	return c, nil
}
