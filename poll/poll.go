// Package poll produces the code-hosting events no webhook delivers, by
// polling each connected account that has a trigger for them:
//
//   - new_gist: the account's gists (GET /gists, with the stored ETag so that
//     a quiet poll is a free 304), one event per gist created after the
//     account's earliest active new_gist trigger and not emitted before;
//   - new_mention for triggers with no repositories (account-wide): the
//     account's participating notifications (GET /notifications, with
//     If-Modified-Since, no more often than X-Poll-Interval), one event per
//     thread with reason "mention" updated after the trigger's creation and
//     after the last event emitted for that thread, so a thread mentioned
//     again later emits again;
//   - new_repository for triggers with no organisation: the repositories
//     the account owns (GET /user/repos?affiliation=owner, newest first,
//     with the stored ETag), one event per repository created after the
//     account's earliest such trigger and not emitted before: GitHub has
//     no webhook for a personal account's new repositories;
//   - the reach of accounts with triggers on all their repositories
//     (Options.Reach, registry.RefreshReach): what they own, administer and
//     may not hook is read again each pass, so that a repository created
//     later gets its hook within one interval.
//
// Each item is committed like a webhook delivery of its own (bus.Commit):
// its capture is keyed by a stable delivery id ("gist-<id>",
// "notification-<thread>-<updated_at>") under the account's poll scope, so
// the archive recognises an item emitted again after a crash as a
// duplicate. What was emitted is recorded in a store.Cursor per tenant,
// account and kind (ETag or Last-Modified, the high-water mark, the ids at
// it), advanced by compare-and-set only after Commit succeeded; a restart
// therefore emits nothing old.
//
// Every process may run a Poller: a store lease per account
// ("poll:<tenant>:<account>") makes one process at a time poll it.
package poll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

const (
	// DefaultInterval is how often Run polls when Options.Interval is zero.
	DefaultInterval = time.Minute
	// DefaultConcurrency is how many accounts one pass polls at once when
	// Options.Concurrency is zero.
	DefaultConcurrency = 4
	// HeaderPoll is the header the archived capture of a polled item carries
	// instead of a webhook's headers; its value is "gists",
	// "notifications" or "repositories".
	HeaderPoll = "X-Triggerd-Poll"
	// SourceGists, SourceNotifications and SourceRepositories are the
	// SourceEvent of polled new_gist, new_mention and new_repository
	// events.
	SourceGists         = "poll.gists"
	SourceNotifications = "poll.notifications"
	SourceRepositories  = "poll.repositories"
)

// minAccountTimeout bounds one account's poll from below when the interval
// is short.
const minAccountTimeout = 30 * time.Second

// Store is what the poller reads and keeps: the triggers (to know which
// accounts to poll), its cursors and the per-account leases.
type Store interface {
	ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error)
	store.Cursors
	store.Locker
}

// Accounts gives an HTTP client acting as a connected account
// (*accounts.Service). It fails for an account that cannot be used
// (removed, needing reauthorisation).
type Accounts interface {
	Client(ctx context.Context, tenantID, accountID string) (*http.Client, store.Account, error)
}

// Committer makes an item's event durable exactly once per delivery key
// (*bus.Bus).
type Committer interface {
	Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate bool, err error)
}

// Reach reads again what an account with triggers on all its
// repositories reaches, and registers hooks where that changed
// (*registry.Registry).
type Reach interface {
	RefreshReach(ctx context.Context, tenantID, accountID string) (registry.Reach, error)
}

// Options configures a Poller.
type Options struct {
	Store     Store
	Accounts  Accounts
	Committer Committer
	// Reach, when set, is refreshed each pass for every account with an
	// active trigger on all its repositories.
	Reach Reach
	// CodeHostAPI is the code-hosting REST API root (default
	// https://api.github.com).
	CodeHostAPI string
	// Interval is how often Run polls (default DefaultInterval).
	// Notifications are polled no more often than the provider's
	// X-Poll-Interval, whatever the interval.
	Interval time.Duration
	// Concurrency is how many accounts a pass polls at once (default
	// DefaultConcurrency).
	Concurrency int
	Logger      zerolog.Logger
	// Now is the clock (default time.Now): events' ReceivedAt and the
	// X-Poll-Interval schedule follow it.
	Now func() time.Time
}

// Poller polls the accounts that have gist or account-wide mention
// triggers. It is safe for concurrent use, and several Pollers (in one
// process or several sharing the store) may run at once.
type Poller struct {
	o   Options
	log zerolog.Logger
}

// New returns a Poller.
func New(o Options) (*Poller, error) {
	if o.Store == nil || o.Accounts == nil || o.Committer == nil {
		return nil, errors.New("poll: Store, Accounts and Committer are required")
	}
	if o.Interval < 0 || o.Concurrency < 0 {
		return nil, errors.New("poll: Interval and Concurrency must not be negative")
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Poller{o: o, log: o.Logger.With().Str("component", "poll").Logger()}, nil
}

// Run polls every Interval, starting at once, until ctx ends. Failures are
// logged; Run returns only when ctx ends, after the pass in progress has
// stopped.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	for {
		if err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn().Err(err).Msg("poll pass failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PollOnce polls every account that has an active polled trigger once,
// Concurrency at a time, and returns when all are done. An account that
// cannot be polled (the account cannot be used, the provider fails, the
// lease is held elsewhere) is logged and skipped until the next pass; the
// error is only for a pass that could not run at all (the triggers could
// not be listed) or ctx ending.
func (p *Poller) PollOnce(ctx context.Context) error {
	targets, err := p.targets(ctx)
	if err != nil {
		return err
	}
	jobs := make(chan target)
	var wg sync.WaitGroup
	for range min(p.o.Concurrency, len(targets)) {
		wg.Go(func() {
			for t := range jobs {
				p.pollAccount(ctx, t)
			}
		})
	}
feed:
	for _, t := range targets {
		select {
		case jobs <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return ctx.Err()
}

// target is one account to poll, with what to poll on it.
type target struct {
	tenant, account string
	// gistsFrom, mentionsFrom and reposFrom are the creation time,
	// floored to the second, of the account's earliest active new_gist,
	// account-wide new_mention and polled new_repository trigger; zero
	// when it has none.
	gistsFrom, mentionsFrom, reposFrom time.Time
	// reach is set when the account has an active trigger on all its
	// repositories.
	reach bool
}

// targets lists the accounts to poll, ordered by tenant and account.
func (p *Poller) targets(ctx context.Context) ([]target, error) {
	ts, err := p.o.Store.ListTriggers(ctx, store.TriggerFilter{})
	if err != nil {
		return nil, fmt.Errorf("poll: list triggers: %w", err)
	}
	byAccount := map[[2]string]*target{}
	earliest := func(cur *time.Time, created time.Time) {
		// Provider timestamps have whole seconds: an item of the trigger's
		// own second counts as after it rather than being lost.
		created = created.Truncate(time.Second)
		if cur.IsZero() || created.Before(*cur) {
			*cur = created
		}
	}
	for _, t := range ts {
		k := triggers.Kind(t.Kind)
		if t.Status != store.TriggerActive || t.AccountID == "" {
			continue
		}
		polled := registry.Polled(t) && (k == triggers.NewGist || k == triggers.NewMention || k == triggers.NewRepository)
		reach := p.o.Reach != nil && registry.AllRepositories(t)
		if !polled && !reach {
			continue
		}
		key := [2]string{t.TenantID, t.AccountID}
		tg := byAccount[key]
		if tg == nil {
			tg = &target{tenant: t.TenantID, account: t.AccountID}
			byAccount[key] = tg
		}
		switch {
		case reach:
			tg.reach = true
		case k == triggers.NewGist:
			earliest(&tg.gistsFrom, t.CreatedAt)
		case k == triggers.NewMention:
			earliest(&tg.mentionsFrom, t.CreatedAt)
		default:
			earliest(&tg.reposFrom, t.CreatedAt)
		}
	}
	out := make([]target, 0, len(byAccount))
	for _, tg := range byAccount {
		out = append(out, *tg)
	}
	slices.SortFunc(out, func(a, b target) int {
		if c := strings.Compare(a.tenant, b.tenant); c != 0 {
			return c
		}
		return strings.Compare(a.account, b.account)
	})
	return out, nil
}

// account is a connected account being polled.
type account struct {
	tenant, id, login string
	api               codehost.Hooks
}

// scope is the scope of the account's polled events: only the tenant's
// triggers of the account are candidates.
func (a account) scope() *triggers.Scope {
	return &triggers.Scope{Hook: triggers.PolledHookPrefix + a.id, Tenant: a.tenant, Account: a.id}
}

func (p *Poller) accountTimeout() time.Duration { return max(p.o.Interval, minAccountTimeout) }

// leaseTTL outlasts one account's poll, which accountTimeout bounds, so the
// lease only expires when its holder died.
func (p *Poller) leaseTTL() time.Duration { return p.accountTimeout() + 30*time.Second }

// lockKey is the name of the store lease held while an account is polled.
func lockKey(tenantID, accountID string) string { return "poll:" + tenantID + ":" + accountID }

// cursorKey is the name of the cursor of an account's polled kind
// (new_gist, new_mention or new_repository).
func cursorKey(tenantID, accountID string, k triggers.Kind) string {
	return "poll:" + tenantID + ":" + accountID + ":" + string(k)
}

// pollAccount polls one account, under its lease.
func (p *Poller) pollAccount(ctx context.Context, t target) {
	log := p.log.With().Str("tenant_id", t.tenant).Str("account_id", t.account).Logger()
	defer func() {
		if r := recover(); r != nil {
			log.Error().Interface("panic", r).Msg("polling the account panicked; skipped this pass")
		}
	}()
	release, held, err := p.o.Store.TryLock(ctx, lockKey(t.tenant, t.account), p.leaseTTL())
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("poll lease not taken; account skipped this pass")
		}
		return
	}
	if !held {
		log.Debug().Msg("another poller holds the account's lease")
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, p.accountTimeout())
	defer cancel()
	client, acc, err := p.o.Accounts.Client(ctx, t.tenant, t.account)
	if err != nil {
		log.Warn().Err(err).Msg("account cannot be polled; skipped this pass")
		return
	}
	if acc.Connector != "" && acc.Connector != string(triggers.CodeHost) {
		log.Warn().Str("connector", acc.Connector).Msg("account is not a code-hosting account; not polled")
		return
	}
	a := account{tenant: t.tenant, id: t.account, login: acc.Login, api: codehost.Hooks{HTTP: client, BaseURL: p.o.CodeHostAPI}}
	if !t.gistsFrom.IsZero() {
		n, err := p.pollGists(ctx, a, t.gistsFrom)
		p.report(log, "gists", n, err)
	}
	if !t.mentionsFrom.IsZero() {
		n, err := p.pollMentions(ctx, a, t.mentionsFrom)
		p.report(log, "notifications", n, err)
	}
	if !t.reposFrom.IsZero() {
		n, err := p.pollRepos(ctx, a, t.reposFrom)
		p.report(log, "repositories", n, err)
	}
	if t.reach {
		if _, err := p.o.Reach.RefreshReach(ctx, t.tenant, t.account); err != nil {
			log.Warn().Err(err).Msg("reading what the account reaches failed; its hooks stay as they were until the next pass")
		}
	}
}

// counts are what one poll of an account's gists or notifications emitted.
type counts struct {
	// emitted counts the events published; duplicates the items the
	// archive already held (emitted before a crash, or by another poller).
	emitted, duplicates int
}

func (c *counts) add(duplicate bool) {
	if duplicate {
		c.duplicates++
	} else {
		c.emitted++
	}
}

// report logs the outcome of one poll of an account's gists or
// notifications.
func (p *Poller) report(log zerolog.Logger, what string, n counts, err error) {
	switch {
	case errors.Is(err, store.ErrConflict):
		log.Info().Str("poll", what).Int("emitted", n.emitted).Int("duplicates", n.duplicates).
			Msg("another poller advanced the cursor first; its cursor stands")
	case err != nil:
		log.Warn().Err(err).Str("poll", what).Int("emitted", n.emitted).Int("duplicates", n.duplicates).
			Msg("poll failed; retried next pass")
	case n.emitted+n.duplicates > 0:
		log.Info().Str("poll", what).Int("emitted", n.emitted).Int("duplicates", n.duplicates).Msg("polled new items")
	}
}

// item is one polled item to commit as an event of its own.
type item struct {
	kind       triggers.Kind
	deliveryID string
	source     string
	action     string
	sender     string
	repo       *triggers.Repository
	resource   triggers.Resource
	raw        json.RawMessage
	marker     string
}

// emit commits it: one event, archived under its own delivery key.
func (p *Poller) emit(ctx context.Context, a account, it item) (duplicate bool, err error) {
	now := p.o.Now().UTC()
	scope := a.scope()
	c := triggers.Capture{
		Connector:  triggers.CodeHost,
		DeliveryID: it.deliveryID,
		ReceivedAt: now,
		Header:     map[string][]string{HeaderPoll: {it.marker}, "Content-Type": {"application/json"}},
		Body:       it.raw,
		Scope:      scope,
	}
	ev := triggers.Event{
		ID:          triggers.EventID(triggers.CodeHost, c.Key(), it.kind, 0),
		Kind:        it.kind,
		Connector:   triggers.CodeHost,
		DeliveryID:  it.deliveryID,
		SourceEvent: it.source,
		Action:      it.action,
		ReceivedAt:  now,
		Repository:  it.repo,
		Account:     a.login,
		Sender:      it.sender,
		Resource:    it.resource,
		Payload:     it.raw,
		Scope:       scope,
	}
	dup, err := p.o.Committer.Commit(ctx, c, []triggers.Event{ev})
	if err != nil {
		return false, fmt.Errorf("commit %s: %w", it.deliveryID, err)
	}
	return dup, nil
}

// loadCursor reads a cursor and decodes its value into v. A value that
// cannot be decoded is logged and read as empty (keeping the version, so
// the next write replaces it): the poll starts again from the triggers'
// creation, and the archive recognises what was already emitted.
//
// The cursor is returned with its Value re-encoded from v, so that
// saveCursor recognises an unchanged v, also when none was stored or what
// was could not be read.
func (p *Poller) loadCursor(ctx context.Context, key string, v any) (store.Cursor, error) {
	c, err := p.o.Store.GetCursor(ctx, key)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("read cursor: %w", err)
	}
	if len(c.Value) > 0 {
		if err := json.Unmarshal(c.Value, v); err != nil {
			p.log.Warn().Err(err).Str("cursor", key).Msg("unreadable poll cursor; starting it again")
		}
	}
	if b, err := json.Marshal(v); err == nil {
		c.Value = b
	}
	return c, nil
}

// saveCursor stores v in c by compare-and-set, unless v encodes to c's
// Value already (an unchanged cursor is not written). A conflict means
// another poller advanced the cursor meanwhile (its lease expired, say):
// its value stands, and the archive keeps what both emitted single.
func (p *Poller) saveCursor(ctx context.Context, c store.Cursor, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode cursor: %w", err)
	}
	if bytes.Equal(b, c.Value) {
		return nil
	}
	c.Value = b
	c.UpdatedAt = p.o.Now().UTC()
	if _, err := p.o.Store.PutCursor(ctx, c); err != nil {
		return fmt.Errorf("store cursor: %w", err)
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
