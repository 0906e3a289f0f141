package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/dispatch/push"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/netguard"
	"github.com/triggerd/triggerd/poll"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/steps"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
	"github.com/triggerd/triggerd/triggers"
)

// dispatchParts are the dispatcher, the registry and what runs them.
type dispatchParts struct {
	registry   *registry.Registry
	dispatcher *dispatch.Dispatcher
	poller     *poll.Poller // nil with --poll-interval 0
	// hooks resolves tenants' hooks for ingest, caching them; the
	// registry's changes to them reach it through notifier.
	hooks *ingest.HookCache
	// embedded is this process's NATS server (nil with --nats-url),
	// whose agent connections other processes' changes close; origin
	// tells this process's own broadcasts apart (notifier.origin).
	embedded *bus.Embedded
	origin   string
}

// newIngestHooks returns what ingest needs of tenants' hooks: a cache
// resolving them, and the recorder of what reaches them. Both need only the
// store, so that ingest takes deliveries to hooks before NATS is reached.
func newIngestHooks(st store.Store, vault *accounts.Vault, reg prometheus.Registerer, log zerolog.Logger) (*ingest.HookCache, *registry.ActivityRecorder, error) {
	hooks := ingest.NewHookCache(hookSecrets{hooks: st, secrets: vault}, ingest.HookCacheOptions{Logger: log})
	activity, err := registry.NewActivityRecorder(st, registry.ActivityOptions{Logger: log, Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	return hooks, activity, nil
}

// runActivity stores what the recorder hears every 2 s until the returned
// stop is called, then once more, within 2 s. It runs from the start, as
// ingest takes deliveries to hooks before NATS is reached: a triggerd
// stopped before then keeps what those deliveries did too.
func runActivity(activity *registry.ActivityRecorder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		activity.Run(ctx, 2*time.Second)
	}()
	return func() {
		cancel()
		<-done
	}
}

// newDispatch builds the registry and the dispatcher, around ingest's hook
// cache (newIngestHooks).
func newDispatch(ctx context.Context, cfg Config, b *bus.Bus, embedded *bus.Embedded, st store.Store, acct *accounts.Service, vault *accounts.Vault,
	runner *steps.Runner, hooks *ingest.HookCache, reg prometheus.Registerer, log zerolog.Logger) (*dispatchParts, error) {
	dc := cfg.Dispatch
	shared, err := sharedTenant(ctx, st, log)
	if err != nil {
		return nil, err
	}
	pusher := &pusher{sender: &push.Sender{Client: push.NewClient(30*time.Second, dc.AllowPrivateURLs), UserAgent: "triggerd"}}
	d, err := dispatch.New(dispatch.Options{
		Store: st, Queue: b, Steps: runner, Secrets: vault, Pusher: pusher, SharedTenant: shared, Archive: b,
		AckWait: dc.AckWait, MaxDeliver: dc.MaxDeliver, Concurrency: dc.Concurrency, StepTimeout: dc.StepTimeout,
		Retention: dc.RunRetention, Logger: log, Registerer: reg,
		OnRunStarted: broadcastRun(b, log), // MCP (mcp.go)
	})
	if err != nil {
		return nil, err
	}
	origin, err := newOrigin()
	if err != nil {
		return nil, err
	}
	r, err := registry.New(registry.Options{
		Store: st, Accounts: acct, Secrets: vault, Steps: stepCatalog{runner},
		Notifier: notifier{b: b, embedded: embedded, origin: origin, hooks: hooks, dispatcher: d, log: log},
		HookAPI: func(client *http.Client) registry.HookAPI {
			return codehost.Hooks{HTTP: client, BaseURL: cfg.Providers.CodeHostAPIBaseURL}
		},
		PublicURL:      cfg.PublicURL,
		CheckAgentURL:  func(raw string) error { return checkAgentURL(raw, dc.AllowPrivateURLs) },
		NewAgentSecret: agent.NewSecret,
		Registerer:     reg,
		Logger:         log,
	})
	if err != nil {
		return nil, err
	}
	parts := &dispatchParts{registry: r, dispatcher: d, hooks: hooks, embedded: embedded, origin: origin}
	if dc.PollInterval > 0 { // 0: never (poll.New would take it for its default)
		if parts.poller, err = poll.New(poll.Options{
			Store: st, Accounts: acct, Committer: b, Reach: r, CodeHostAPI: cfg.Providers.CodeHostAPIBaseURL,
			Interval: dc.PollInterval, Logger: log,
		}); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// checkAgentURL applies the pusher's URL rules to an HTTP agent's URL, and
// says how an operator lets agents on the same host or network through.
func checkAgentURL(raw string, allowPrivate bool) error {
	err := netguard.CheckURL(raw, allowPrivate)
	if errors.Is(err, netguard.ErrForbiddenAddress) {
		return fmt.Errorf("%w (a loopback, private or link-local address; the operator can allow them with --allow-private-agent-urls, for agents on the same host or network)", err)
	}
	return err
}

// sharedTenant returns the id of the tenant that owns the shared webhook
// endpoints, whose events carry no scope (dispatch.Options.SharedTenant):
// the default tenant (defaultTenant). Without one, events of the shared
// endpoints start no trigger.
func sharedTenant(ctx context.Context, st store.Tenants, log zerolog.Logger) (string, error) {
	id, err := tenants.New(st, nil).Default(ctx)
	if err != nil {
		return "", fmt.Errorf("find the tenant of the shared webhook endpoints: %w", err)
	}
	if id == "" {
		log.Warn().Msg("no tenant is named " + tenants.DefaultName + ": deliveries to /webhooks/codehost and /webhooks/deploy start no trigger; tenants' own hooks are not affected")
		return "", nil
	}
	log.Info().Str("tenant", id).Msg("deliveries to /webhooks/codehost and /webhooks/deploy go to the triggers of the tenant named " + tenants.DefaultName + " only")
	return id, nil
}

// run starts the dispatcher's workers, the change listener and the
// reconciler; the returned stop waits for them, at most until ctx ends.
func (p *dispatchParts) run(cfg Config, b *bus.Bus, log zerolog.Logger) (stop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if err := b.Listen(ctx, dispatch.ControlSubject, func(data []byte) { p.dispatcher.HandleChange(ctx, data) }); err != nil {
		log.Warn().Err(err).Msg("trigger changes from other processes arrive only with the periodic resync")
	}
	if err := listenHookChanges(ctx, b, p.hooks); err != nil {
		log.Warn().Err(err).Msg("hook secret changes from other processes take effect at the first delivery they refuse")
	}
	if err := listenAgentChanges(ctx, b, p.embedded, p.origin, log); err != nil {
		log.Warn().Err(err).Msg("agents whose NATS password another process replaced keep their connections to this process's NATS until they reconnect")
	}
	if cfg.Dispatch.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := p.dispatcher.Run(ctx)
				if err == nil || ctx.Err() != nil {
					return
				}
				log.Error().Err(err).Msg("dispatch workers stopped; restarting in 5s")
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Second):
				}
			}
		}()
	} else if err := p.dispatcher.Resync(ctx); err != nil {
		// Replays still need the index.
		log.Warn().Err(err).Msg("loading triggers failed")
	}
	if p.poller != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.poller.Run(ctx)
		}()
	}
	if cfg.Dispatch.ReconcileInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.registry.RunReconciler(ctx, cfg.Dispatch.ReconcileInterval)
		}()
	}
	return func(shutdown context.Context) {
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-shutdown.Done():
			log.Warn().Msg("dispatch did not stop within the shutdown timeout; unacked work is redelivered")
		}
	}
}

// hookChangesSubject carries "a hook's secrets changed, or it is gone"
// broadcasts between processes (core NATS, nothing stored), so that each
// process's ingest.HookCache forgets the hook.
const hookChangesSubject = "triggerd.control.hooks"

// hookChange is one such broadcast.
type hookChange struct {
	Connector string `json:"connector"`
	Hook      string `json:"hook"`
}

// listenHookChanges makes cache forget each hook another process changes,
// until ctx ends.
func listenHookChanges(ctx context.Context, b *bus.Bus, cache *ingest.HookCache) error {
	return b.Listen(ctx, hookChangesSubject, func(data []byte) {
		var c hookChange
		if json.Unmarshal(data, &c) == nil {
			cache.Forget(triggers.Connector(c.Connector), c.Hook)
		}
	})
}

// agentChangesSubject carries "an agent's NATS password changed, or the
// agent is gone" broadcasts between processes (core NATS, nothing stored),
// so that every process with an embedded server closes the agent's
// connections to it: on a cluster of embedded servers (--nats-routes) an
// agent may be connected to any member, and a process on another's
// embedded NATS (--nats-url) has no server of its own to close them on.
const agentChangesSubject = "triggerd.control.agents"

// agentChange is one such broadcast.
type agentChange struct {
	Agent string `json:"agent"`
	// Origin is the sending process's notifier.origin: it closed its own
	// server's connections already, and a second close could cut one the
	// agent made with its new password meanwhile.
	Origin string `json:"origin"`
}

// newOrigin returns a random id for this process's broadcasts.
func newOrigin() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("process id for broadcasts: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// listenAgentChanges closes, on embedded, the connections of each agent
// whose credentials another process changed, until ctx ends. Without an
// embedded server there is nothing to close.
func listenAgentChanges(ctx context.Context, b *bus.Bus, embedded *bus.Embedded, origin string, log zerolog.Logger) error {
	if embedded == nil {
		return nil
	}
	return b.Listen(ctx, agentChangesSubject, func(data []byte) {
		var c agentChange
		if json.Unmarshal(data, &c) != nil || c.Origin == origin || agent.CheckAgentID(c.Agent) != nil {
			return
		}
		if closed := embedded.DisconnectUser(c.Agent); closed > 0 {
			log.Info().Str("agent", c.Agent).Int("connections", closed).Msg("closed the agent's NATS connections: another process changed its password or deleted it")
		}
	})
}

// notifier broadcasts trigger, hook and agent changes over core NATS, and
// closes the embedded NATS's connections of agents whose credentials
// changed.
type notifier struct {
	b *bus.Bus
	// embedded is nil with --nats-url: agents' users on that NATS are
	// its operator's business, or those of the triggerd whose embedded
	// server it is (the broadcast reaches it).
	embedded *bus.Embedded
	// origin is this process's id in its agent broadcasts.
	origin string
	hooks  *ingest.HookCache
	// dispatcher is this process's: it reloads a changed trigger before
	// the change's API answer leaves.
	dispatcher *dispatch.Dispatcher
	log        zerolog.Logger
}

// AgentCredentialsChanged closes the agent's connections to the embedded
// NATS, and tells the other processes to close theirs: they were made with
// a password that no longer holds, or by an agent that no longer exists. A
// client that reconnects is checked again.
func (n notifier) AgentCredentialsChanged(_ context.Context, agentID string) {
	if n.embedded != nil {
		if closed := n.embedded.DisconnectUser(agentID); closed > 0 {
			n.log.Info().Str("agent", agentID).Int("connections", closed).Msg("closed the agent's NATS connections: its password changed or it was deleted")
		}
	}
	data, _ := json.Marshal(agentChange{Agent: agentID, Origin: n.origin})
	if err := n.b.Notify(agentChangesSubject, data); err != nil {
		n.log.Warn().Err(err).Str("agent", agentID).Msg("agent change not broadcast; its connections to other processes' NATS stay open until they reconnect")
	}
}

// HookChanged makes this process's ingest forget the hook before the
// change's API answer leaves, and tells the others.
func (n notifier) HookChanged(_ context.Context, connector, hookID string) {
	n.hooks.Forget(triggers.Connector(connector), hookID)
	data, _ := json.Marshal(hookChange{Connector: connector, Hook: hookID})
	if err := n.b.Notify(hookChangesSubject, data); err != nil {
		n.log.Warn().Err(err).Str("hook", hookID).Msg("hook change not broadcast; other processes take it at the first delivery they refuse")
	}
}

// TriggerChanged reloads the trigger in this process's dispatcher before
// the change's API answer leaves, and tells the others. The reload widens
// the events consumer to the trigger's kind: an event accepted after the
// answer (a test delivery sent at once) is then never passed over, as it
// was when only the broadcast, arriving a moment later, applied it.
func (n notifier) TriggerChanged(ctx context.Context, tenantID, triggerID string) {
	if err := n.dispatcher.Reload(ctx, tenantID, triggerID); err != nil {
		n.log.Warn().Err(err).Str("trigger", triggerID).Msg("trigger reload failed; the broadcast and the next resync repair it")
	}
	data, _ := json.Marshal(dispatch.Change{TenantID: tenantID, TriggerID: triggerID})
	if err := n.b.Notify(dispatch.ControlSubject, data); err != nil {
		n.log.Warn().Err(err).Str("trigger", triggerID).Msg("trigger change not broadcast; the periodic resync applies it")
	}
}

// stepCatalog answers the registry's questions about steps.
type stepCatalog struct{ r *steps.Runner }

func (c stepCatalog) Has(id string) (string, bool) {
	s, ok := c.r.Get(id)
	return s.Connector, ok
}

// OutputSchema gives the registry a step's output schema, to check the
// templates that read it (registry.OutputSchemas).
func (c stepCatalog) OutputSchema(id string) (json.RawMessage, bool) {
	s, ok := c.r.Get(id)
	return s.Output, ok
}

// hookSecrets resolves per-hook endpoints for ingest, as the registry
// would (registry.ReadHookSecrets), without needing one.
type hookSecrets struct {
	hooks   store.Hooks
	secrets registry.Sealer
}

func (h hookSecrets) Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *ingest.Verifier, error) {
	scope, secrets, err := registry.ReadHookSecrets(ctx, h.hooks, h.secrets, string(c), id)
	if errors.Is(err, registry.ErrNotFound) {
		return triggers.Scope{}, nil, fmt.Errorf("%w: %s", ingest.ErrUnknownHook, id)
	}
	if err != nil {
		return triggers.Scope{}, nil, err
	}
	scheme := ingest.CodeHostScheme
	if c == triggers.Deploy {
		scheme = ingest.DeployScheme
	}
	v, err := ingest.NewVerifier(scheme, secrets...)
	return scope, v, err
}

// pusher adapts push.Sender to the dispatcher.
type pusher struct{ sender *push.Sender }

func (p *pusher) Push(ctx context.Context, url, secret string, run agent.Run) (dispatch.PushReply, error) {
	d, err := p.sender.Send(ctx, url, secret, run)
	if err != nil {
		return dispatch.PushReply{}, err
	}
	return dispatch.PushReply{Result: d.Result, Unrecognized: d.Unrecognized}, nil
}

func (p *pusher) Retry(err error, attempt int) (time.Duration, bool) {
	if push.IsPermanent(err) {
		return 0, false
	}
	return push.Delay(err, attempt), true
}
