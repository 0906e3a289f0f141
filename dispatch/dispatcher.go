package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
)

// Store is what the dispatcher reads and writes.
type Store interface {
	store.Triggers
	store.Agents
	store.Runs
	store.Events
}

// Queue is the dispatcher's view of JetStream (package bus).
type Queue interface {
	Work(ctx context.Context, spec bus.WorkSpec, handle func(ctx context.Context, j *bus.Job)) error
	SetWorkFilters(ctx context.Context, stream, durable string, filters []string) (changed bool, err error)
	Publish(ctx context.Context, subject, msgID string, data []byte) error
	EventAt(ctx context.Context, seq uint64) (subject string, data []byte, err error)
	// ReadBack reads events on filters from the newest back (DryRun).
	ReadBack(ctx context.Context, filters []string, maxRead int, visit func(data []byte), done func() bool) (read int, exhausted bool, err error)
	// FindEvent finds an event by id among the newest maxRead
	// (LookUpUnrecorded).
	FindEvent(ctx context.Context, id string, maxRead int) (seq uint64, found, exhausted bool, err error)
}

// StepRunner runs one tool step as a connected account (steps.Runner).
type StepRunner interface {
	Run(ctx context.Context, tenantID, stepID, accountID string, input json.RawMessage) (json.RawMessage, error)
}

// Opener opens sealed secrets (accounts.Vault).
type Opener interface {
	Open(sealed []byte, aad string) ([]byte, error)
}

// Consumer names and subjects.
const (
	EventsConsumer  = "dispatch"
	PushConsumer    = "push"
	ResultsConsumer = "results"
	ReplayConsumer  = "replay"
	ResumeConsumer  = "resume"
	// ControlSubject carries "a trigger changed" broadcasts between
	// processes (core NATS, nothing stored).
	ControlSubject = "triggerd.control.triggers"
)

// pushSubject is where runs of an HTTP agent wait to be POSTed.
func pushSubject(agentID string) string { return "push.agent." + agentID }

// replaySubject carries operators' replays of one event to one trigger.
func replaySubject(tenantID string) string { return "push.replay." + tenantID }

// resumeSubject carries the runs whose step waits (see park).
func resumeSubject(tenantID string) string { return "push.resume." + tenantID }

// Defaults for Options.
const (
	DefaultAckWait     = 30 * time.Second
	DefaultMaxDeliver  = 8
	DefaultConcurrency = 8
	DefaultStepTimeout = 2 * time.Minute
	DefaultResync      = 30 * time.Second
	// A step the provider refuses for a rate limit waits and runs again,
	// at most DefaultMaxStepWaits times and no later than
	// DefaultMaxStepWait after its run started; past either its run fails
	// with the rate_limited error. A day covers GitHub's hourly budget,
	// Vercel's windows and GA4's daily quotas. A step held back because
	// its provider keeps failing waits within DefaultMaxStepWait only.
	DefaultMaxStepWait  = 24 * time.Hour
	DefaultMaxStepWaits = 10
)

// Options configures a Dispatcher.
type Options struct {
	Store   Store
	Queue   Queue
	Steps   StepRunner
	Secrets Opener
	// Pusher POSTs runs to HTTP agents; nil leaves HTTP agents' runs
	// queued.
	Pusher Pusher
	// SharedTenant is the id of the tenant that owns the shared webhook
	// endpoints (POST /webhooks/codehost and /webhooks/deploy, verified
	// with the operator's own secrets). Their events carry no Scope, and
	// only this tenant's triggers are candidates for them: to start, to
	// replay and to dry-run. Empty means no tenant's: unscoped events then
	// start nothing and leave no record. Events of a tenant's own hooks and
	// deployment endpoints carry its scope and are not affected.
	SharedTenant string
	// Archive reads archived deliveries ((*bus.Bus).Delivery): the
	// payloads of events that carry theirs by reference (payload_ref),
	// for filters and step templates that read the payload. Nil: those
	// filters and templates fail, saying so. MaxPayloadBytes (default
	// DefaultMaxPayloadBytes) bounds such a payload, PayloadTimeout
	// (default DefaultPayloadTimeout) reading it.
	Archive         Archive
	MaxPayloadBytes int
	PayloadTimeout  time.Duration
	// AckWait is how long a worker may hold a message without a heartbeat;
	// MaxDeliver bounds deliveries before dead-lettering.
	AckWait    time.Duration
	MaxDeliver int
	// Concurrency is how many events (and, separately, pushes) one process
	// works on at once.
	Concurrency int
	// StepTimeout bounds one tool step.
	StepTimeout time.Duration
	// MaxStepWait bounds how long after its run started a step may still
	// wait; MaxStepWaits how often a step refused for a rate limit waits.
	MaxStepWait  time.Duration
	MaxStepWaits int
	// Resync is how often the whole trigger index is reloaded from the
	// store, besides the change broadcasts.
	Resync time.Duration
	// Retention is how long finished runs and event records are kept
	// (default DefaultRetention); every PruneInterval (default
	// DefaultPruneInterval) older ones are deleted. Keep it at least as
	// long as the events stream and the delivery archive keep what could
	// start the same run again: a pruned run no longer stops it.
	Retention     time.Duration
	PruneInterval time.Duration
	// OnRunStarted, when set, is told of each run this process starts,
	// once its agent has been sent the run and the event's record (its
	// outcomes) is stored: MCP clients subscribed to the trigger hear of
	// it and may read the event at once. It must not block.
	OnRunStarted func(store.Run)

	Logger     zerolog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Dispatcher consumes trigger events, matches them to triggers, starts
// agents and runs their tool steps.
type Dispatcher struct {
	o       Options
	log     zerolog.Logger
	index   atomic.Pointer[match.Index]
	metrics *metrics
	// reloadMu serialises index reloads so a full resync and a single
	// trigger's reload do not interleave.
	reloadMu sync.Mutex
	// interestMu serialises applyInterest, so the last filters applied
	// are those of the latest index.
	interestMu sync.Mutex
	// dryRuns holds a slot per dry run in progress (DryRun).
	dryRuns chan struct{}
	// fields names project fields (nameProjectField).
	fields fieldNames
}

// defaultTo sets *v to d when it is zero or negative (unset).
func defaultTo[T ~int | ~int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// New returns a Dispatcher; Run starts it.
func New(o Options) (*Dispatcher, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("dispatch: nil Store")
	case o.Queue == nil:
		return nil, errors.New("dispatch: nil Queue")
	case o.Steps == nil:
		return nil, errors.New("dispatch: nil StepRunner")
	}
	defaultTo(&o.AckWait, DefaultAckWait)
	defaultTo(&o.MaxDeliver, DefaultMaxDeliver)
	defaultTo(&o.Concurrency, DefaultConcurrency)
	defaultTo(&o.StepTimeout, DefaultStepTimeout)
	defaultTo(&o.Resync, DefaultResync)
	defaultTo(&o.Retention, DefaultRetention)
	defaultTo(&o.PruneInterval, DefaultPruneInterval)
	defaultTo(&o.MaxStepWait, DefaultMaxStepWait)
	defaultTo(&o.MaxStepWaits, DefaultMaxStepWaits)
	defaultTo(&o.MaxPayloadBytes, DefaultMaxPayloadBytes)
	defaultTo(&o.PayloadTimeout, DefaultPayloadTimeout)
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		o: o, log: o.Logger.With().Str("component", "dispatch").Logger(), metrics: m,
		dryRuns: make(chan struct{}, maxDryRuns),
	}
	d.index.Store(match.NewIndex(o.SharedTenant))
	return d, nil
}

// Index returns the current trigger index.
func (d *Dispatcher) Index() *match.Index { return d.index.Load() }

// lease is how long a claimed run stays claimed without progress: longer
// than any one step, so a worker is never overtaken mid-step.
func (d *Dispatcher) lease() time.Duration { return d.o.StepTimeout + d.o.AckWait }

// Run loads the triggers and works until ctx ends: the event consumer, the
// HTTP push, replay and resume consumers, the agents' results consumer and
// the periodic resync. It returns once all of them have stopped.
func (d *Dispatcher) Run(ctx context.Context) error {
	if err := d.Resync(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 7)
	run := func(name string, fn func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("events", func(ctx context.Context) error {
		return d.o.Queue.Work(ctx, bus.WorkSpec{
			Stream: bus.EventsStream, Durable: EventsConsumer, Filters: Interest(d.index.Load().Kinds()),
			AckWait: d.o.AckWait, MaxDeliver: d.o.MaxDeliver, Concurrency: d.o.Concurrency,
			// A trigger change between computing the filters above and
			// the consumer's creation found no consumer to apply to.
			Created: func() {
				filters := d.applyInterest(ctx)
				d.log.Info().Strs("filters", filters).Msg("events consumer ready: JetStream passes over events of other kinds")
			},
		}, d.holding(ctx, d.handleEvent))
	})
	run("replays", func(ctx context.Context) error {
		return d.o.Queue.Work(ctx, bus.WorkSpec{
			Stream: bus.PushStream, Durable: ReplayConsumer, Filter: "push.replay.>",
			AckWait: d.o.AckWait, MaxDeliver: d.o.MaxDeliver, Concurrency: 2,
		}, d.holding(ctx, d.handleReplay))
	})
	run("resumes", func(ctx context.Context) error {
		return d.o.Queue.Work(ctx, bus.WorkSpec{
			Stream: bus.PushStream, Durable: ResumeConsumer, Filter: "push.resume.>",
			AckWait: d.o.AckWait, MaxDeliver: d.o.MaxDeliver, Concurrency: 2,
		}, d.holding(ctx, d.handleResume))
	})
	if d.o.Pusher != nil {
		run("push", func(ctx context.Context) error {
			return d.o.Queue.Work(ctx, bus.WorkSpec{
				Stream: bus.PushStream, Durable: PushConsumer, Filter: "push.agent.>",
				AckWait: d.o.AckWait, MaxDeliver: d.o.MaxDeliver, Concurrency: d.o.Concurrency,
			}, d.holding(ctx, d.handlePush))
		})
	}
	run("results", func(ctx context.Context) error {
		return d.o.Queue.Work(ctx, bus.WorkSpec{
			Stream: bus.AgentsStream, Durable: ResultsConsumer, Filter: agent.ResultsSubject("*", "*"),
			AckWait: d.o.AckWait, MaxDeliver: d.o.MaxDeliver, Concurrency: 2,
		}, d.holding(ctx, d.handleResult))
	})
	run("prune", d.pruneLoop)
	run("resync", func(ctx context.Context) error {
		t := time.NewTicker(d.o.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if err := d.Resync(ctx); err != nil && ctx.Err() == nil {
					d.log.Warn().Err(err).Msg("trigger resync failed; keeping the current index")
				}
			}
		}
	})
	wg.Wait()
	close(errs)
	return <-errs
}

// Resync rebuilds the index from every trigger in the store, and narrows
// the events consumer to what it needs (see applyInterest).
func (d *Dispatcher) Resync(ctx context.Context) error {
	if err := d.resync(ctx); err != nil {
		return err
	}
	d.applyInterest(ctx)
	return nil
}

func (d *Dispatcher) resync(ctx context.Context) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	all, err := d.o.Store.ListTriggers(ctx, store.TriggerFilter{})
	if err != nil {
		return fmt.Errorf("load triggers: %w", err)
	}
	x := match.NewIndex(d.o.SharedTenant)
	for _, st := range all {
		t, err := match.FromStore(st)
		if err == nil {
			err = x.Put(t)
		}
		if err != nil {
			d.log.Error().Err(err).Str("trigger", st.ID).Msg("stored trigger is invalid; it will not fire")
		}
	}
	d.index.Store(x)
	return nil
}

// Reload refreshes one trigger in the index from the store (after a change
// broadcast): it is added, replaced, or removed when deleted; then the
// events consumer is widened or narrowed to match (see applyInterest).
func (d *Dispatcher) Reload(ctx context.Context, tenantID, id string) error {
	if err := d.reload(ctx, tenantID, id); err != nil {
		return err
	}
	d.applyInterest(ctx)
	return nil
}

func (d *Dispatcher) reload(ctx context.Context, tenantID, id string) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	st, err := d.o.Store.GetTrigger(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		d.index.Load().Remove(id)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reload trigger %s: %w", id, err)
	}
	t, err := match.FromStore(st)
	if err != nil {
		return err
	}
	return d.index.Load().Put(t)
}

// Change is the broadcast body announcing that a trigger changed.
type Change struct {
	TenantID  string `json:"tenant_id"`
	TriggerID string `json:"trigger_id"`
}

// HandleChange applies a Change broadcast.
func (d *Dispatcher) HandleChange(ctx context.Context, data []byte) {
	var c Change
	if err := json.Unmarshal(data, &c); err != nil || c.TriggerID == "" {
		d.log.Warn().Msg("ignoring a malformed trigger change broadcast")
		return
	}
	if err := d.Reload(ctx, c.TenantID, c.TriggerID); err != nil {
		d.log.Warn().Err(err).Str("trigger", c.TriggerID).Msg("trigger reload failed; the next resync repairs it")
	}
}

// runNamespace scopes run ids.
var runNamespace = uuid.MustParse("2b0f6c1e-8a57-4d55-9e0e-5c1d3c7b9f40")

// RunID is the id of the run of trigger triggerID for event eventID: the
// same pair always gives the same run, which is what makes starting an
// agent idempotent. Replays add their replay id.
func RunID(eventID, triggerID, replayID string) string {
	name := eventID + "\x00" + triggerID
	if replayID != "" {
		name += "\x00replay\x00" + replayID
	}
	return uuid.NewSHA1(runNamespace, []byte(name)).String()
}
