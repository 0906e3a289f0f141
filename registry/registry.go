// Package registry manages what tenants subscribe: agents, triggers, and
// the webhooks that feed them. Creating the first trigger on a repository
// registers one webhook there through the trigger's connected account
// (events: the union its triggers need; a secret of its own; the URL
// <public-url>/webhooks/codehost/<hook-id>); later triggers reuse and widen
// it; deleting the last one removes it. A periodic Reconcile, run by one
// process at a time, repairs hooks deleted or disabled upstream.
//
// Deployment-platform triggers get a per-agent endpoint instead
// (/webhooks/deploy/<endpoint-id>, its own secret) that the user pastes
// into the project's webhook settings; nothing is registered upstream.
//
// Every change to a trigger is broadcast so that every process's
// dispatcher index follows.
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/internal/netguard"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Store is what the registry persists.
type Store interface {
	store.Agents
	store.Triggers
	store.Hooks
	store.Locker
	// Cursors keep each account's reach (reach.go).
	store.Cursors
}

// Accounts is the registry's view of connected accounts.
type Accounts interface {
	Get(ctx context.Context, tenantID, id string) (store.Account, error)
	Client(ctx context.Context, tenantID, id string) (*http.Client, store.Account, error)
}

// HookAPI manages a code-hosting account's webhooks (codehost.Hooks).
type HookAPI interface {
	List(ctx context.Context, t codehost.HookTarget) ([]codehost.Hook, error)
	Create(ctx context.Context, t codehost.HookTarget, s codehost.HookSpec) (codehost.Hook, error)
	Update(ctx context.Context, t codehost.HookTarget, id int64, s codehost.HookSpec) (codehost.Hook, error)
	Delete(ctx context.Context, t codehost.HookTarget, id int64) error
	Deliveries(ctx context.Context, t codehost.HookTarget, id int64, since time.Time) (codehost.Deliveries, error)
	Redeliver(ctx context.Context, t codehost.HookTarget, id, deliveryID int64) error
	// Repositories and OrgMemberships tell what the account can reach,
	// for triggers on all its repositories (reach.go).
	Repositories(ctx context.Context) ([]codehost.AccountRepo, error)
	OrgMemberships(ctx context.Context) ([]codehost.OrgMembership, error)
}

// Sealer seals and opens secrets at rest (accounts.Vault).
type Sealer interface {
	Seal(plaintext []byte, aad string) ([]byte, error)
	Open(sealed []byte, aad string) ([]byte, error)
}

// Steps is the tool step catalogue, to validate agents' pipelines.
type Steps interface {
	Has(id string) (connector string, ok bool)
}

// Notifier broadcasts changes to every process: of triggers, to their
// dispatchers; of a hook's secrets or its removal, to their ingest, which
// caches hooks (ingest.HookCache).
type Notifier interface {
	TriggerChanged(ctx context.Context, tenantID, triggerID string)
	HookChanged(ctx context.Context, connector, hookID string)
	// AgentCredentialsChanged: the agent's NATS password was replaced, or
	// the agent deleted; connections made with the old one must close.
	AgentCredentialsChanged(ctx context.Context, agentID string)
}

// Errors callers decide on. Each is wrapped with what went wrong and how
// to fix it.
var (
	// ErrInvalid: the request is wrong (unknown kind, bad parameters, an
	// account of another connector, ...).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: no such agent or trigger in the tenant.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the operation conflicts with other records (deleting an
	// agent that triggers still start).
	ErrConflict = errors.New("conflict")
	// ErrNameTaken: another agent of the tenant has the name asked for.
	ErrNameTaken = errors.New("name taken")
	// ErrHookRights: the account may not manage webhooks on the target.
	ErrHookRights = errors.New("the account cannot manage webhooks there")
	// ErrUpstream: the provider failed while registering a hook.
	ErrUpstream = errors.New("upstream")
)

// Options configures a Registry.
type Options struct {
	Store    Store
	Accounts Accounts
	Secrets  Sealer
	Steps    Steps
	Notifier Notifier
	// HookAPI returns the hook API acting as a connected account's client.
	HookAPI func(client *http.Client) HookAPI
	// PublicURL is where providers reach this service
	// ("https://triggers.example.com"); hooks deliver to
	// PublicURL/webhooks/<connector>/<hook-id>.
	PublicURL string
	// CheckAgentURL validates an HTTP agent's URL (SSRF rules); nil
	// applies netguard.CheckURL's URL rules and leaves addresses to the dialer.
	CheckAgentURL func(raw string) error
	// NewAgentSecret makes an HTTP agent's Standard Webhooks secret.
	NewAgentSecret func() (string, error)
	// NewNATSPassword makes a NATS agent's password (agent.NewNATSPassword
	// when nil).
	NewNATSPassword func() (string, error)
	// MaxRedeliveries (DefaultMaxRedeliveries) and HealBatch
	// (DefaultHealBatch) bound how Reconcile heals failed deliveries
	// (heal.go).
	MaxRedeliveries int
	HealBatch       int
	// HookConcurrency bounds how many hooks are brought in line at once
	// when many change together, as for a trigger on all the repositories
	// of an account with hundreds of them (DefaultHookConcurrency when 0;
	// 1 makes it one after another).
	HookConcurrency int
	// Registerer takes the registry's metrics (none when nil).
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
	Now        func() time.Time
}

// Registry manages agents, triggers and their hooks.
type Registry struct {
	o            Options
	log          zerolog.Logger
	metrics      *metrics
	redelivering redeliveries
	// paused are the accounts GitHub rate-limited (syncKey).
	paused pauses
}

// New returns a Registry.
func New(o Options) (*Registry, error) {
	switch {
	case o.Store == nil || o.Accounts == nil || o.Secrets == nil || o.HookAPI == nil:
		return nil, errors.New("registry: Store, Accounts, Secrets and HookAPI are required")
	case o.PublicURL == "":
		return nil, errors.New("registry: PublicURL is required")
	case o.NewAgentSecret == nil:
		return nil, errors.New("registry: NewAgentSecret is required")
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxRedeliveries <= 0 {
		o.MaxRedeliveries = DefaultMaxRedeliveries
	}
	if o.HealBatch <= 0 {
		o.HealBatch = DefaultHealBatch
	}
	if o.HookConcurrency <= 0 {
		o.HookConcurrency = DefaultHookConcurrency
	}
	if o.NewNATSPassword == nil {
		o.NewNATSPassword = agent.NewNATSPassword
	}
	if o.CheckAgentURL == nil {
		// The pusher's own URL rule (addresses are its dialer's
		// business), so nothing passes here that it then refuses.
		o.CheckAgentURL = func(raw string) error { return netguard.CheckURL(raw, true) }
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Registry{o: o, log: o.Logger.With().Str("component", "registry").Logger(), metrics: m}, nil
}

// cleanupTimeout bounds undoing a trigger whose hooks failed, which goes
// on after the caller gave up.
const cleanupTimeout = time.Minute

// hookSecretAAD is the additional data a hook's secret is sealed with.
func hookSecretAAD(id string) string { return "hook:" + id }

// HookURL is where a hook delivers.
func (r *Registry) HookURL(h store.Hook) string {
	return r.o.PublicURL + "/webhooks/" + h.Connector + "/" + h.ID
}

// ReadHookSecrets returns a hook's scope and the secrets its deliveries
// may be signed with, for ingest: the one triggerd generated, or those the
// user set (SetEndpointSecrets). It needs only the store and the sealer,
// not a Registry: triggerd's ingest resolves hooks with it from the start,
// before NATS is reached (and so before there is a Registry), so that
// deliveries to hooks are spooled, not refused, while NATS is down.
func ReadHookSecrets(ctx context.Context, hooks store.Hooks, secrets Sealer, connector, id string) (triggers.Scope, []string, error) {
	h, err := hooks.GetHook(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && h.Connector != connector {
		return triggers.Scope{}, nil, fmt.Errorf("hook %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return triggers.Scope{}, nil, err
	}
	sec, err := openHookSecrets(secrets, h)
	if err != nil {
		return triggers.Scope{}, nil, err
	}
	scope := triggers.Scope{Hook: h.ID, Tenant: h.TenantID, Account: h.AccountID}
	if h.Scope == store.HookAgentEndpoint {
		scope.Agent = h.Target
	}
	return scope, sec, nil
}

// openHookSecrets opens h's secrets, stored one per line.
func openHookSecrets(secrets Sealer, h store.Hook) ([]string, error) {
	b, err := secrets.Open(h.SealedSecret, hookSecretAAD(h.ID))
	if err != nil {
		return nil, fmt.Errorf("open the secret of hook %s: %w", h.ID, err)
	}
	return strings.Split(string(b), "\n"), nil
}

// newSecret returns a random hook secret.
func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// detailError is an error of a kind (ErrInvalid, ErrConflict) that reads
// as its detail alone: callers show the message, and match the kind with
// errors.Is.
type detailError struct {
	msg  string
	kind error
}

func (e detailError) Error() string        { return e.msg }
func (e detailError) Is(target error) bool { return target == e.kind }

func invalidf(format string, args ...any) error {
	return detailError{fmt.Sprintf(format, args...), ErrInvalid}
}

func conflictf(format string, args ...any) error {
	return detailError{fmt.Sprintf(format, args...), ErrConflict}
}

// TriggerInput is what a trigger is created from.
type TriggerInput struct {
	Kind    string          `json:"kind"`
	Account string          `json:"account"`
	Agent   string          `json:"agent"`
	Params  json.RawMessage `json:"params,omitempty"`
	Filter  string          `json:"filter,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

// delivery says how a trigger's events arrive.
type delivery int

const (
	viaHooks    delivery = iota // repository or organisation hooks
	viaEndpoint                 // the agent's deployment endpoint
	viaPolling                  // the account's gists or notifications
)

// deliveryOf returns how events of kind k with params p arrive.
func deliveryOf(k triggers.Kind, p match.Params) delivery {
	switch {
	case k.Connector() == triggers.Deploy:
		return viaEndpoint
	case k == triggers.NewGist, k == triggers.NewMention && len(p.Repositories) == 0,
		k == triggers.NewRepository && p.Organization == "":
		return viaPolling
	}
	return viaHooks
}

// Polled reports whether a stored trigger is served by polling.
func Polled(t store.Trigger) bool {
	var p match.Params
	_ = json.Unmarshal(t.Params, &p)
	return deliveryOf(triggers.Kind(t.Kind), p) == viaPolling
}

// CreateTrigger validates in, stores the trigger and makes sure its events
// will arrive: hooks registered (or widened) upstream, or the agent's
// deployment endpoint created. The dispatchers are told of the trigger
// before its hooks are made. If a hook cannot be registered, the trigger
// and its hooks are deleted again and the error says why (runs an event
// started meanwhile, through a hook the account already had, remain).
func (r *Registry) CreateTrigger(ctx context.Context, tenantID string, in TriggerInput) (store.Trigger, error) {
	t, err := r.DraftTrigger(ctx, tenantID, in)
	if err != nil {
		return store.Trigger{}, err
	}
	if t, err = r.o.Store.CreateTrigger(ctx, t); err != nil {
		return store.Trigger{}, fmt.Errorf("store trigger: %w", err)
	}
	// The dispatchers learn of the trigger before its hook exists: GitHub
	// delivers as soon as the hook is made, and an event that reached a
	// dispatcher not yet told of its trigger would be passed over.
	r.changed(ctx, t)
	if err := r.syncFor(ctx, t); err != nil {
		// Leave nothing behind: the trigger and any hook made for it, even
		// when the failure is the caller giving up (a cancelled context
		// must not keep a trigger whose events never arrive).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := r.o.Store.DeleteTrigger(cctx, tenantID, t.ID); derr != nil {
			r.log.Error().Err(derr).Str("trigger", t.ID).Msg("could not delete a trigger whose hook failed")
		}
		if serr := r.syncFor(cctx, t); serr != nil {
			r.log.Warn().Err(serr).Str("trigger", t.ID).Msg("could not narrow hooks after a failed trigger creation; the reconcile retries")
		}
		r.changed(cctx, t)
		return store.Trigger{}, err
	}
	return t, nil
}

// DraftTrigger validates in as CreateTrigger does and returns the trigger
// CreateTrigger would store, without storing it or registering anything: a
// dry run (dispatch.Dispatcher.DryRun) tests it against past events.
func (r *Registry) DraftTrigger(ctx context.Context, tenantID string, in TriggerInput) (store.Trigger, error) {
	k := triggers.Kind(in.Kind)
	if !k.Valid() {
		return store.Trigger{}, invalidf("unknown trigger kind %q; GET /v1/triggers/kinds lists them", in.Kind)
	}
	var p match.Params
	if len(in.Params) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(in.Params)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return store.Trigger{}, invalidf("params: %v; %s takes %v", err, k, match.ParamsFor(k))
		}
	}
	if err := match.ValidateParams(k, p); err != nil {
		return store.Trigger{}, invalidf("params: %v", err)
	}
	how := deliveryOf(k, p)
	acc, err := r.o.Accounts.Get(ctx, tenantID, in.Account)
	if errors.Is(err, accounts.ErrAccountNotFound) || errors.Is(err, store.ErrNotFound) {
		return store.Trigger{}, invalidf("account %q: no such account in this tenant (triggerctl accounts list shows them)", in.Account)
	} else if err != nil {
		return store.Trigger{}, fmt.Errorf("account %q: %w", in.Account, err)
	}
	if acc.Connector != string(k.Connector()) {
		return store.Trigger{}, invalidf("account %s is a %s account; %s triggers need a %s account", acc.ID, acc.Connector, k, k.Connector())
	}
	if acc.Status != store.StatusActive {
		return store.Trigger{}, invalidf("account %s is %s (%s); reconnect it first", acc.ID, acc.Status, acc.StatusReason)
	}
	if _, err := r.o.Store.GetAgent(ctx, tenantID, in.Agent); errors.Is(err, store.ErrNotFound) {
		return store.Trigger{}, invalidf("agent %q: no such agent in this tenant (triggerctl agents list shows them)", in.Agent)
	} else if err != nil {
		return store.Trigger{}, fmt.Errorf("agent %q: %w", in.Agent, err)
	}
	if k == triggers.NewMention && how == viaHooks && len(p.Mentioned) == 0 && acc.Login != "" {
		// "The account is mentioned": a repository's webhooks report
		// every login mentioned there, so take the account's own unless
		// the trigger names others (or "*" for anyone).
		p.Mentioned = []string{acc.Login}
	}
	params, err := json.Marshal(p)
	if err != nil {
		return store.Trigger{}, err
	}
	now := r.o.Now()
	t := store.Trigger{
		ID: uuid.NewString(), TenantID: tenantID, Kind: in.Kind, AccountID: acc.ID, AgentID: in.Agent,
		Enabled: in.Enabled == nil || *in.Enabled, Params: params, Filter: in.Filter,
		Status: store.TriggerActive, CreatedAt: now, UpdatedAt: now,
	}
	// The index validates parameters and compiles the filter exactly as
	// the dispatcher will.
	dt, err := match.FromStore(t)
	if err == nil {
		err = match.Validate(dt)
	}
	if err != nil {
		return store.Trigger{}, invalidf("%v", err)
	}
	return t, nil
}

// GetTrigger returns the tenant's trigger.
func (r *Registry) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	t, err := r.o.Store.GetTrigger(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Trigger{}, fmt.Errorf("trigger %s: %w", id, ErrNotFound)
	}
	return t, err
}

// ListTriggers returns the tenant's triggers.
func (r *Registry) ListTriggers(ctx context.Context, tenantID string) ([]store.Trigger, error) {
	return r.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID})
}

// SetEnabled enables or disables a trigger. A disabled trigger keeps its
// hook (its events still arrive, and are recorded as "disabled").
func (r *Registry) SetEnabled(ctx context.Context, tenantID, id string, enabled bool) (store.Trigger, error) {
	for {
		t, err := r.GetTrigger(ctx, tenantID, id)
		if err != nil {
			return store.Trigger{}, err
		}
		if t.Enabled == enabled {
			return t, nil
		}
		t.Enabled, t.UpdatedAt = enabled, r.o.Now()
		t, err = r.o.Store.UpdateTrigger(ctx, t)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return store.Trigger{}, err
		}
		r.changed(ctx, t)
		return t, nil
	}
}

// DeleteTrigger deletes a trigger and narrows or removes its hooks.
func (r *Registry) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	t, err := r.GetTrigger(ctx, tenantID, id)
	if err != nil {
		return err
	}
	if err := r.o.Store.DeleteTrigger(ctx, tenantID, id); err != nil {
		return err
	}
	r.changed(ctx, t)
	// The trigger is gone: narrow its hooks even if the caller gives up now.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := r.syncFor(sctx, t); err != nil {
		// A hook left too wide is repaired by the reconcile.
		r.log.Warn().Err(err).Str("trigger", id).Msg("could not narrow the trigger's hooks; the reconcile retries")
	}
	return nil
}

func (r *Registry) changed(ctx context.Context, t store.Trigger) {
	if r.o.Notifier != nil {
		r.o.Notifier.TriggerChanged(ctx, t.TenantID, t.ID)
	}
}

// endpointKey is the key of an agent's deployment endpoint.
func endpointKey(tenantID, agentID string) store.HookKey {
	return store.HookKey{TenantID: tenantID, Connector: string(triggers.Deploy), Scope: store.HookAgentEndpoint, Target: agentID}
}

// keysFor returns the hooks a trigger's events arrive through, given its
// account's reach (reach.go; nil or empty when the account has no
// trigger on all its repositories): a trigger on all repositories uses
// the reach's hooks, and a repository of an organisation the reach has a
// hook on is served by that hook rather than one of its own, so that no
// event of the account reaches it twice.
func keysFor(t store.Trigger, rc *Reach) []store.HookKey {
	var p match.Params
	_ = json.Unmarshal(t.Params, &p)
	k := triggers.Kind(t.Kind)
	switch deliveryOf(k, p) {
	case viaEndpoint:
		return []store.HookKey{endpointKey(t.TenantID, t.AgentID)}
	case viaPolling:
		return nil
	}
	base := store.HookKey{TenantID: t.TenantID, AccountID: t.AccountID, Connector: string(triggers.CodeHost)}
	var keys []store.HookKey
	add := func(scope store.HookScope, target string) {
		key := base
		key.Scope, key.Target = scope, strings.ToLower(target)
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	switch {
	case match.OrgKinds(k):
		add(store.HookOrganization, p.Organization)
	case match.AllRepositories(k, p):
		if rc != nil {
			for _, o := range rc.Orgs {
				add(store.HookOrganization, o)
			}
			for _, repo := range rc.Repos {
				add(store.HookRepository, repo)
			}
		}
	default:
		for _, repo := range p.Repositories {
			if owner, _, _ := strings.Cut(repo, "/"); rc.hasOrg(owner) {
				add(store.HookOrganization, owner)
			} else {
				add(store.HookRepository, repo)
			}
		}
	}
	return keys
}

// keysOf is keysFor with the account's stored reach.
func (r *Registry) keysOf(ctx context.Context, t store.Trigger) ([]store.HookKey, error) {
	if !usesHooks(t) {
		return keysFor(t, nil), nil
	}
	rc, _, err := r.loadReach(ctx, t.TenantID, t.AccountID)
	if err != nil {
		return nil, err
	}
	return keysFor(t, &rc), nil
}

// usesHooks reports whether t's events arrive through code-hosting hooks.
func usesHooks(t store.Trigger) bool {
	var p match.Params
	_ = json.Unmarshal(t.Params, &p)
	return deliveryOf(triggers.Kind(t.Kind), p) == viaHooks
}

// syncFor brings every hook of t's in line with the triggers using it. For
// a trigger on all repositories, the account's reach is read again first
// (RefreshReach): it is created, or the last one deleted.
func (r *Registry) syncFor(ctx context.Context, t store.Trigger) error {
	if AllRepositories(t) {
		_, err := r.refreshReach(ctx, t.TenantID, t.AccountID, true)
		return err
	}
	keys, err := r.keysOf(ctx, t)
	if err != nil {
		return err
	}
	return r.syncKeys(ctx, keys)
}

// DefaultHookConcurrency is how many hooks Registry brings in line at
// once by default (Options.HookConcurrency).
const DefaultHookConcurrency = 8

// syncKeys brings each hook of keys in line with the triggers using it,
// up to Options.HookConcurrency at a time, going on past failures: a
// trigger on all repositories of an account with hundreds of them would
// otherwise wait for each repository's round trips to GitHub in turn.
// What failed comes back as a *HookSyncError naming each target; the
// hooks that succeeded stay registered. Once GitHub answers an account's
// request with a rate limit, that account's hooks not yet started are not
// attempted until the limit lifts (syncKey).
func (r *Registry) syncKeys(ctx context.Context, keys []store.HookKey) error {
	if len(keys) == 0 {
		return nil
	}
	errs := make([]error, len(keys))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(r.o.HookConcurrency, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				errs[i] = r.syncKey(ctx, keys[i])
			}
		}()
	}
	wg.Wait()
	if len(keys) == 1 {
		// One hook (a trigger on chosen repositories, mostly): its own
		// error says what failed.
		return errs[0]
	}
	return newHookSyncError(keys, errs)
}

// syncKey is syncHook, unless ctx has ended or the key's account is
// paused by a rate limit, in which case it is not attempted. A rate limit
// answer pauses the account for as long as GitHub asks (a secondary
// limit: at least a minute), so that concurrent registrations stop
// instead of hammering GitHub; what was not attempted is retried by the
// next refresh of the account's reach (hooks without a record) or the
// reconcile (hooks recorded as failing).
func (r *Registry) syncKey(ctx context.Context, key store.HookKey) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not attempted: %w", err)
	}
	codehostKey := key.Connector == string(triggers.CodeHost)
	if codehostKey {
		if until, paused := r.paused.until(key.TenantID, key.AccountID, r.o.Now()); paused {
			return fmt.Errorf("%w: not attempted: GitHub rate-limited account %s until %s; the next refresh of its repositories or the reconcile retries",
				ErrUpstream, key.AccountID, until.UTC().Format(time.RFC3339))
		}
	}
	err := r.syncHook(ctx, key)
	if wait, limited := codehost.RateLimited(err); codehostKey && limited {
		r.paused.pause(key.TenantID, key.AccountID, r.o.Now().Add(max(wait, time.Second)))
	}
	return err
}

// pauses are the accounts GitHub rate-limited, until when.
type pauses struct {
	mu sync.Mutex
	m  map[[2]string]time.Time
}

func (p *pauses) pause(tenantID, accountID string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]string]time.Time{}
	}
	k := [2]string{tenantID, accountID}
	if until.After(p.m[k]) {
		p.m[k] = until
	}
}

// until reports whether the account is paused at now, and until when; a
// pause that has passed is forgotten.
func (p *pauses) until(tenantID, accountID string, now time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := [2]string{tenantID, accountID}
	t, ok := p.m[k]
	if ok && !now.Before(t) {
		delete(p.m, k)
		return time.Time{}, false
	}
	return t, ok
}

// HookSyncError is what failed when several hooks were brought in line
// at once: each target that failed and why. The others succeeded.
// errors.Is sees through it to each failure (ErrHookRights, ErrUpstream,
// ...).
type HookSyncError struct {
	// Total is how many hooks were brought in line; Failed those that
	// failed (or were not attempted), in the order they were given.
	Total  int
	Failed []HookFailure
}

// HookFailure is one hook that could not be brought in line.
type HookFailure struct {
	Scope  store.HookScope
	Target string
	Err    error
}

// maxListedFailures bounds the failures Error lists.
const maxListedFailures = 10

func (e *HookSyncError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d webhooks could not be registered or updated:", len(e.Failed), e.Total)
	for i, f := range e.Failed {
		if i == maxListedFailures {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-i)
			break
		}
		sep := " "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %s: %v", sep, f.Scope, f.Target, f.Err)
	}
	return b.String()
}

// Unwrap returns each failure's error.
func (e *HookSyncError) Unwrap() []error {
	out := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		out[i] = f.Err
	}
	return out
}

// newHookSyncError returns the failures among errs (errs[i] is keys[i]'s),
// or nil when there are none.
func newHookSyncError(keys []store.HookKey, errs []error) error {
	e := &HookSyncError{Total: len(keys)}
	for i, err := range errs {
		if err != nil {
			e.Failed = append(e.Failed, HookFailure{Scope: keys[i].Scope, Target: keys[i].Target, Err: err})
		}
	}
	if len(e.Failed) == 0 {
		return nil
	}
	return e
}

// desiredEvents returns the events the active triggers of key need, or nil
// when none uses it. An agent's deployment endpoint counts its inactive
// triggers too: its URL and secret are pasted into the project's settings
// by hand, so it lives as long as the agent has deployment triggers (an
// account removed and connected again must not change it).
func (r *Registry) desiredEvents(ctx context.Context, key store.HookKey) ([]string, error) {
	f := store.TriggerFilter{TenantID: key.TenantID, AccountID: key.AccountID}
	endpoint := key.Scope == store.HookAgentEndpoint
	if endpoint {
		f = store.TriggerFilter{TenantID: key.TenantID, AgentID: key.Target}
	}
	ts, err := r.o.Store.ListTriggers(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	var rc *Reach
	if key.Connector == string(triggers.CodeHost) {
		stored, _, err := r.loadReach(ctx, key.TenantID, key.AccountID)
		if err != nil {
			return nil, err
		}
		rc = &stored
	}
	var events []string
	for _, t := range ts {
		if t.Status != store.TriggerActive && !endpoint || !slices.Contains(keysFor(t, rc), key) {
			continue
		}
		for _, e := range triggers.Kind(t.Kind).HookEvents() {
			if !slices.Contains(events, e) {
				events = append(events, e)
			}
		}
	}
	slices.Sort(events)
	return events, nil
}

// lockHook takes the lease on one hook key, waiting for a holder to finish.
func (r *Registry) lockHook(ctx context.Context, key store.HookKey) (func(), error) {
	name := fmt.Sprintf("hook:%s:%s:%s:%s:%s", key.TenantID, key.AccountID, key.Connector, key.Scope, key.Target)
	return r.lock(ctx, name, fmt.Sprintf("hook %s/%s", key.Scope, key.Target))
}

// lock takes the store lease name, waiting up to 30s for a holder to
// finish; what names the thing locked in the error.
func (r *Registry) lock(ctx context.Context, name, what string) (func(), error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		release, held, err := r.o.Store.TryLock(ctx, name, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		if held {
			return release, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is being changed by another process; try again", what)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// syncHook makes the hook of key match what its triggers need: created
// (and registered upstream) when first needed, widened or narrowed as
// triggers come and go, removed with the last one.
func (r *Registry) syncHook(ctx context.Context, key store.HookKey) error {
	release, err := r.lockHook(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	want, err := r.desiredEvents(ctx, key)
	if err != nil {
		return err
	}
	h, err := r.o.Store.FindHook(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if len(want) == 0 {
			return nil
		}
		h, err = r.newHook(ctx, key)
		if err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("find hook: %w", err)
	}
	if len(want) == 0 {
		return r.removeHook(ctx, h)
	}
	if key.Connector != string(triggers.CodeHost) {
		if !slices.Equal(h.Events, want) {
			h.Events, h.UpdatedAt = want, r.o.Now()
			_, err = r.o.Store.UpdateHook(ctx, h)
		}
		return err
	}
	api, err := r.api(ctx, h)
	if err != nil {
		return r.failHook(ctx, h, err)
	}
	_, _, err = r.register(ctx, api, h, want)
	return err
}

// newHook stores a new hook record with a fresh secret.
func (r *Registry) newHook(ctx context.Context, key store.HookKey) (store.Hook, error) {
	now := r.o.Now()
	h := store.Hook{
		ID: "h_" + strings.ReplaceAll(uuid.NewString(), "-", ""), TenantID: key.TenantID, AccountID: key.AccountID,
		Connector: key.Connector, Scope: key.Scope, Target: key.Target, Status: store.HookActive,
		CreatedAt: now, UpdatedAt: now,
	}
	secret, err := newSecret()
	if err != nil {
		return store.Hook{}, err
	}
	if h.SealedSecret, err = r.o.Secrets.Seal([]byte(secret), hookSecretAAD(h.ID)); err != nil {
		return store.Hook{}, fmt.Errorf("seal hook secret: %w", err)
	}
	h, err = r.o.Store.CreateHook(ctx, h)
	if err != nil {
		return store.Hook{}, fmt.Errorf("store hook: %w", err)
	}
	return h, nil
}

// target returns the upstream target of a code-hosting hook.
func target(h store.Hook) codehost.HookTarget {
	if h.Scope == store.HookOrganization {
		return codehost.HookTarget{Org: h.Target}
	}
	owner, repo, _ := strings.Cut(h.Target, "/")
	return codehost.HookTarget{Owner: owner, Repo: repo}
}

// register makes the upstream hook exist, be active and carry events want
// and the hook's URL and secret. It finds an existing hook with the URL
// (listing every page) before creating one, so it never makes duplicates.
// A hook that vanished upstream is created again. It returns the hook
// as stored and whether anything upstream changed.
func (r *Registry) register(ctx context.Context, api HookAPI, h store.Hook, want []string) (store.Hook, bool, error) {
	secret, err := r.o.Secrets.Open(h.SealedSecret, hookSecretAAD(h.ID))
	if err != nil {
		return h, false, fmt.Errorf("open the secret of hook %s: %w", h.ID, err)
	}
	url, tgt := r.HookURL(h), target(h)
	spec := codehost.HookSpec{URL: url, Secret: string(secret), Events: want, Active: true}
	hooks, err := api.List(ctx, tgt)
	if err != nil {
		return h, false, r.failHook(ctx, h, r.upstreamError(h, err))
	}
	found := findUpstream(hooks, h.ExternalID, url)
	changed := false
	switch {
	case found == nil:
		created, err := api.Create(ctx, tgt, spec)
		if err != nil {
			return h, false, r.failHook(ctx, h, r.upstreamError(h, err))
		}
		h.ExternalID, changed = created.ID, true
		r.log.Info().Str("hook", h.ID).Str("tenant", h.TenantID).Str("account", h.AccountID).Str("target", h.Target).
			Strs("events", want).Msg("webhook registered upstream")
	case !found.Active || !sameSet(found.Events, want) || found.URL != url || found.ID != h.ExternalID || !slices.Equal(h.Events, want):
		// Updating also resets the secret and the URL: a hook adopted
		// from an earlier record (or tampered with, or registered under
		// an earlier --public-url) signs with ours and posts to us again.
		if _, err := api.Update(ctx, tgt, found.ID, spec); err != nil {
			return h, false, r.failHook(ctx, h, r.upstreamError(h, err))
		}
		h.ExternalID, changed = found.ID, true
		r.log.Info().Str("hook", h.ID).Str("tenant", h.TenantID).Str("target", h.Target).Strs("events", want).
			Msg("webhook updated upstream (events, URL, secret or active state)")
	}
	now := r.o.Now()
	h.Events, h.Status, h.StatusReason, h.CheckedAt, h.UpdatedAt = want, store.HookActive, "", now, now
	updated, err := r.o.Store.UpdateHook(ctx, h)
	if err != nil {
		return h, changed, fmt.Errorf("store hook %s: %w", h.ID, err)
	}
	return updated, changed, nil
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// api returns the hook API acting as the hook's account.
func (r *Registry) api(ctx context.Context, h store.Hook) (HookAPI, error) {
	client, _, err := r.o.Accounts.Client(ctx, h.TenantID, h.AccountID)
	if err != nil {
		return nil, fmt.Errorf("%w: account %s cannot be used: %v", ErrHookRights, h.AccountID, err)
	}
	return r.o.HookAPI(client), nil
}

// upstreamError explains a failed hook call.
func (r *Registry) upstreamError(h store.Hook, err error) error {
	where := "repository " + h.Target
	scope := "admin:repo_hook"
	if h.Scope == store.HookOrganization {
		where, scope = "organisation "+h.Target, "admin:org_hook"
	}
	switch {
	case errors.Is(err, codehost.ErrHookPermission):
		return fmt.Errorf("%w: account %s may not manage webhooks on %s: it needs admin rights there and the %s scope (reconnect the account with that scope, or use an account that administers it): %v",
			ErrHookRights, h.AccountID, where, scope, err)
	case errors.Is(err, codehost.ErrHookLimit):
		return invalidf("%s already has GitHub's maximum of 20 webhooks; remove one there and retry", where)
	}
	// %w twice: callers tell a rate limit apart (codehost.RateLimited).
	return fmt.Errorf("%w: registering the webhook on %s failed: %w", ErrUpstream, where, err)
}

// failHook records why a hook is failing and returns err.
func (r *Registry) failHook(ctx context.Context, h store.Hook, err error) error {
	r.log.Warn().Str("hook", h.ID).Str("tenant", h.TenantID).Str("target", h.Target).Str("reason", err.Error()).Msg("webhook failing")
	h.Status, h.StatusReason, h.CheckedAt, h.UpdatedAt = store.HookFailing, err.Error(), r.o.Now(), r.o.Now()
	if _, uerr := r.o.Store.UpdateHook(ctx, h); uerr != nil {
		r.log.Warn().Err(uerr).Str("hook", h.ID).Msg("could not record the hook's failure")
	}
	return err
}

// removeHook deletes a hook upstream (if registered) and its record.
func (r *Registry) removeHook(ctx context.Context, h store.Hook) error {
	if h.Connector == string(triggers.CodeHost) {
		if err := r.deleteUpstream(ctx, h); err != nil {
			// An account that lost its rights or was removed cannot delete
			// the hook; its deliveries will answer 404 unknown_hook.
			r.log.Warn().Err(err).Str("hook", h.ID).Str("target", h.Target).Msg("could not delete the webhook upstream; deleting the record anyway")
		}
	}
	if err := r.o.Store.DeleteHook(ctx, h.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("delete hook %s: %w", h.ID, err)
	}
	r.hookChanged(ctx, h)
	return nil
}

// hookChanged tells every process that h's secrets changed or h is gone.
func (r *Registry) hookChanged(ctx context.Context, h store.Hook) {
	if r.o.Notifier != nil {
		r.o.Notifier.HookChanged(ctx, h.Connector, h.ID)
	}
}

// deleteUpstream deletes a code-hosting hook upstream. A record without
// the provider's id may still have been registered (GitHub created it but
// its answer was lost, or the process stopped before recording it): the
// hook with the record's URL is looked for and deleted, unless the account
// cannot even list the hooks there, in which case it could not have
// created one.
func (r *Registry) deleteUpstream(ctx context.Context, h store.Hook) error {
	api, err := r.api(ctx, h)
	if err != nil {
		return err
	}
	if h.ExternalID != 0 {
		return api.Delete(ctx, target(h), h.ExternalID)
	}
	hooks, err := api.List(ctx, target(h))
	if errors.Is(err, codehost.ErrHookPermission) {
		return nil
	}
	if err != nil {
		return err
	}
	if up := findUpstream(hooks, 0, r.HookURL(h)); up != nil {
		return api.Delete(ctx, target(h), up.ID)
	}
	return nil
}

// findUpstream returns the first upstream hook with provider id id (when
// not 0) or delivering to url, or nil when there is none.
func findUpstream(hooks []codehost.Hook, id int64, url string) *codehost.Hook {
	for i := range hooks {
		if id != 0 && hooks[i].ID == id || hooks[i].URL == url {
			return &hooks[i]
		}
	}
	return nil
}

// HooksOf returns the hooks a trigger's events arrive through (none for
// polled kinds; for deployment kinds, the agent's endpoint).
func (r *Registry) HooksOf(ctx context.Context, t store.Trigger) ([]store.Hook, error) {
	keys, err := r.keysOf(ctx, t)
	if err != nil {
		return nil, err
	}
	var out []store.Hook
	for _, key := range keys {
		h, err := r.o.Store.FindHook(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// EndpointSecret returns the secret triggerd generated for an agent's
// deployment endpoint, to sign test deliveries with (triggerctl replay
// --hook) or to paste into a sender that lets its secret be chosen. Once
// the user has set the provider's secrets (SetEndpointSecrets) the
// generated one is no longer accepted and it returns "": the provider's
// secrets are the user's own and are never shown back.
func (r *Registry) EndpointSecret(ctx context.Context, h store.Hook) (string, error) {
	if h.Scope != store.HookAgentEndpoint {
		return "", invalidf("hook %s is not a deployment endpoint", h.ID)
	}
	if !h.SecretsSetAt.IsZero() {
		return "", nil
	}
	secrets, err := openHookSecrets(r.o.Secrets, h)
	if err != nil {
		return "", err
	}
	return secrets[0], nil
}

// MaxEndpointSecrets bounds the secrets one deployment endpoint accepts:
// one per webhook pointed at it (a team's, another team's), and during a
// rotation the old and the new.
const MaxEndpointSecrets = 10

// SetEndpointSecrets makes an agent's deployment endpoint accept
// deliveries signed with any of secrets, and no others: Vercel shows each
// account webhook's secret once, when it is created, and signs with it (an
// integration's webhooks, with its client secret); no secret of
// triggerd's can be given to it. Every process is told
// (Notifier.HookChanged); one that missed it takes the new secrets at the
// first delivery whose signature the secrets it knew refuse.
func (r *Registry) SetEndpointSecrets(ctx context.Context, tenantID, agentID string, secrets []string) (store.Hook, error) {
	if err := validEndpointSecrets(secrets); err != nil {
		return store.Hook{}, err
	}
	key := endpointKey(tenantID, agentID)
	release, err := r.lockHook(ctx, key)
	if err != nil {
		return store.Hook{}, err
	}
	defer release()
	h, err := r.o.Store.FindHook(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return store.Hook{}, fmt.Errorf("agent %s has no deployment endpoint: create a deployment trigger for it first: %w", agentID, ErrNotFound)
	}
	if err != nil {
		return store.Hook{}, fmt.Errorf("find the endpoint of agent %s: %w", agentID, err)
	}
	if h.SealedSecret, err = r.o.Secrets.Seal([]byte(strings.Join(secrets, "\n")), hookSecretAAD(h.ID)); err != nil {
		return store.Hook{}, fmt.Errorf("seal the endpoint's secrets: %w", err)
	}
	h.SecretsSetAt = r.o.Now()
	h.UpdatedAt = h.SecretsSetAt
	if h, err = r.o.Store.UpdateHook(ctx, h); err != nil {
		return store.Hook{}, fmt.Errorf("store the endpoint's secrets: %w", err)
	}
	r.hookChanged(ctx, h)
	r.log.Info().Str("tenant", tenantID).Str("agent", agentID).Str("hook", h.ID).Int("secrets", len(secrets)).
		Msg("deployment endpoint secrets set")
	return h, nil
}

// validEndpointSecrets checks secrets a user set, naming the first wrong
// one by its position only: an error must not carry a secret.
func validEndpointSecrets(secrets []string) error {
	switch {
	case len(secrets) == 0:
		return invalidf("secrets is empty: give the secret the deployment platform showed when the webhook was created (Vercel: Settings → Webhooks, shown once; an integration's webhooks are signed with its client secret)")
	case len(secrets) > MaxEndpointSecrets:
		return invalidf("%d secrets given; an endpoint accepts at most %d", len(secrets), MaxEndpointSecrets)
	}
	for i, s := range secrets {
		if len(s) < 8 || len(s) > 256 {
			return invalidf("secret %d is %d characters long; a webhook secret has 8 to 256 (Vercel's have 24): check that the whole secret was copied", i+1, len(s))
		}
		for j := 0; j < len(s); j++ {
			if s[j] <= ' ' || s[j] >= 0x7f || s[j] == ',' {
				return invalidf("secret %d has a space, comma, control or non-ASCII character at position %d; a webhook secret has none: check what was copied", i+1, j+1)
			}
		}
		if slices.Contains(secrets[:i], s) {
			return invalidf("secret %d is given twice", i+1)
		}
	}
	return nil
}
