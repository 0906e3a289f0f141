// Package deliverylog records every delivery to a tenant's hook, with the
// answer triggerd gave it, in the store's delivery log (store.Deliveries);
// those to the shared endpoints go to the log of the tenant whose
// triggers they start (Options.SharedTenant),
// for the console's Deliveries and Events pages; and makes redeliveries
// of archived deliveries, recorded the same way.
//
// Recording never slows ingest: Record hands the outcome to a buffered
// channel and returns (dropping it, counted, when the buffer is full), and
// one goroutine writes what arrived in batches.
package deliverylog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Store is what the log needs of the store.
type Store interface {
	PutDeliveries(ctx context.Context, ds []store.DeliveryRecord) error
	PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
	GetHook(ctx context.Context, id string) (store.Hook, error)
}

// Options configures a Log.
type Options struct {
	Store Store
	// SharedTenant returns the tenant whose log records the deliveries to
	// the shared endpoints (the tenant whose triggers they start: the
	// default tenant), "" while there is none; nil: not recorded.
	SharedTenant func(ctx context.Context) (string, error)
	// Buffer is how many outcomes wait at most (default 8192).
	Buffer int
	// Batch is how many records one write takes at most (default 500).
	Batch int
	// FlushEvery bounds how long an outcome waits to be written (default
	// 250 ms).
	FlushEvery time.Duration
	// Retention is how long records are kept (0: for ever); Run prunes
	// older ones every PruneEvery (default 10 minutes).
	Retention  time.Duration
	PruneEvery time.Duration
	Logger     zerolog.Logger
	Registerer prometheus.Registerer
}

// Log is the delivery log's writer; it implements ingest.DeliveryLog.
type Log struct {
	o       Options
	log     zerolog.Logger
	ch      chan ingest.DeliveryOutcome
	dropped prometheus.Counter
	failed  prometheus.Counter
	// tenants caches hook id -> tenant for refusals made before the hook
	// was resolved ("" for a hook that does not exist).
	mu      sync.Mutex
	tenants map[string]string
	// shared is the tenant of the shared endpoints, once found (Run's
	// goroutine only).
	shared       string
	sharedLooked time.Time
}

// New returns a Log; Run writes what it records.
func New(o Options) (*Log, error) {
	if o.Store == nil {
		return nil, errors.New("deliverylog: nil Store")
	}
	if o.Buffer <= 0 {
		o.Buffer = 8192
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = 250 * time.Millisecond
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = 10 * time.Minute
	}
	l := &Log{
		o: o, log: o.Logger.With().Str("component", "deliverylog").Logger(),
		ch: make(chan ingest.DeliveryOutcome, o.Buffer), tenants: map[string]string{},
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "triggerd_delivery_log_dropped_total",
			Help: "Deliveries not recorded in the delivery log because its buffer was full."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "triggerd_delivery_log_write_failures_total",
			Help: "Batches of the delivery log the store failed to write."}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{l.dropped, l.failed} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("deliverylog: register metrics: %w", err)
			}
		}
	}
	return l, nil
}

// Record queues o without blocking.
func (l *Log) Record(o ingest.DeliveryOutcome) {
	select {
	case l.ch <- o:
	default:
		l.dropped.Inc()
	}
}

// Run writes queued outcomes until ctx ends, then writes what is queued
// (bounded by a few seconds) and returns.
func (l *Log) Run(ctx context.Context) {
	tick := time.NewTicker(l.o.FlushEvery)
	defer tick.Stop()
	prune := time.NewTicker(l.o.PruneEvery)
	defer prune.Stop()
	batch := make([]store.DeliveryRecord, 0, l.o.Batch)
	flush := func(ctx context.Context) {
		if len(batch) == 0 {
			return
		}
		if err := l.o.Store.PutDeliveries(ctx, batch); err != nil {
			l.failed.Inc()
			l.log.Warn().Err(err).Int("records", len(batch)).Msg("writing the delivery log failed; those deliveries will not be listed")
		}
		batch = batch[:0]
	}
	add := func(ctx context.Context, o ingest.DeliveryOutcome) {
		if rec, ok := l.record(ctx, o); ok {
			batch = append(batch, rec)
			if len(batch) == l.o.Batch {
				flush(ctx)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			drain, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for {
				select {
				case o := <-l.ch:
					add(drain, o)
				default:
					flush(drain)
					return
				}
			}
		case o := <-l.ch:
			add(ctx, o)
		case <-tick.C:
			flush(ctx)
		case <-prune.C:
			l.prune(ctx)
		}
	}
}

// prune deletes the records older than Retention, a bounded number per
// call.
func (l *Log) prune(ctx context.Context) {
	if l.o.Retention <= 0 {
		return
	}
	for range 100 {
		n, err := l.o.Store.PruneDeliveries(ctx, time.Now().Add(-l.o.Retention), store.DefaultPruneLimit)
		if err != nil {
			l.log.Warn().Err(err).Msg("pruning the delivery log")
			return
		}
		if n < store.DefaultPruneLimit {
			return
		}
	}
}

// record turns an outcome into a record of its tenant; ok is false when
// the tenant is unknown (a hook that does not exist).
func (l *Log) record(ctx context.Context, o ingest.DeliveryOutcome) (store.DeliveryRecord, bool) {
	tenant := ""
	switch {
	case o.Scope != nil:
		tenant = o.Scope.Tenant
	case o.Hook != "":
		tenant = l.tenantOf(ctx, o.Hook)
	default:
		tenant = l.sharedTenant(ctx)
	}
	if tenant == "" {
		return store.DeliveryRecord{}, false
	}
	return Record(tenant, o), true
}

// Record returns the delivery log's record of o for tenant.
func Record(tenant string, o ingest.DeliveryOutcome) store.DeliveryRecord {
	rec := store.DeliveryRecord{
		ID: store.NewDeliveryID(o.ReceivedAt), TenantID: tenant, Connector: string(o.Connector),
		DeliveryID: o.DeliveryID, Key: o.Key, Hook: o.Hook, Event: o.Event, Action: o.Action,
		Answer: o.Answer, Status: o.Status, Code: o.Code, Message: o.Message, ReceivedAt: o.ReceivedAt,
	}
	if o.Answer == store.AnswerRefused {
		rec.Key = "" // not archived
	}
	for _, e := range o.Events {
		de := store.DeliveryEvent{ID: e.ID, Kind: string(e.Kind), Summary: e.Summary()}
		rec.Events = append(rec.Events, de)
		if rec.Summary == "" {
			rec.Summary = de.Summary
		}
	}
	return rec
}

// sharedTenant returns the tenant of the shared endpoints, "" when there
// is none (yet): it is looked up at most every 10 seconds until found,
// then kept.
func (l *Log) sharedTenant(ctx context.Context) string {
	if l.shared != "" || l.o.SharedTenant == nil || time.Since(l.sharedLooked) < 10*time.Second {
		return l.shared
	}
	l.sharedLooked = time.Now()
	t, err := l.o.SharedTenant(ctx)
	if err != nil {
		l.log.Warn().Err(err).Msg("looking up the tenant of the shared endpoints; their deliveries are not recorded meanwhile")
		return ""
	}
	l.shared = t
	return t
}

// tenantOf returns the tenant of hook id, "" when there is no such hook.
func (l *Log) tenantOf(ctx context.Context, id string) string {
	l.mu.Lock()
	t, ok := l.tenants[id]
	l.mu.Unlock()
	if ok {
		return t
	}
	h, err := l.o.Store.GetHook(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		l.log.Warn().Err(err).Str("hook", id).Msg("looking up a refused delivery's hook")
		return ""
	default:
		t = h.TenantID
	}
	l.mu.Lock()
	if len(l.tenants) > 10000 {
		clear(l.tenants)
	}
	l.tenants[id] = t
	l.mu.Unlock()
	return t
}

// Bus makes deliveries durable and publishes events (bus.Bus).
type Bus interface {
	Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate bool, err error)
	PublishEvents(ctx context.Context, events []triggers.Event, payloadRef string) ([]bus.Published, error)
}

// Redeliverer makes new attempts at archived deliveries, as a sender's
// Redeliver button does, and records them in the delivery log.
type Redeliverer struct {
	Bus   Bus
	Store Store
	Now   func() time.Time
}

// Redeliver maps capture again. Without asNew it commits it as the same
// delivery: the archive knows it, so it is answered duplicate and
// nothing is published again (triggerctl redeliver publishes the events
// a mapping yields for the first time). asNew publishes its events under
// fresh ids, as triggerctl redeliver --as-new does, so their triggers
// start again.
//
// tenantID is the tenant whose delivery log records the attempt: the
// hook's tenant, or for a delivery to the shared endpoints (no scope) the
// tenant that owns them, which the caller knows from its own record.
func (r *Redeliverer) Redeliver(ctx context.Context, tenantID string, capture triggers.Capture, asNew bool) (store.DeliveryRecord, error) {
	if tenantID == "" || (capture.Scope != nil && capture.Scope.Tenant != tenantID) {
		return store.DeliveryRecord{}, errors.New("deliverylog: the delivery is not the tenant's")
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	payload, err := capture.Payload()
	if err != nil {
		return store.DeliveryRecord{}, err
	}
	c, key := capture.Connector, capture.Key()
	d := triggers.Delivery{Connector: c, ReceivedAt: capture.ReceivedAt, Payload: payload, Scope: capture.Scope}
	if c == triggers.CodeHost {
		d.ID = capture.DeliveryID
		if ev := capture.Header["X-Github-Event"]; len(ev) > 0 {
			d.Event = ev[0]
		}
	}
	res, err := triggers.Map(d)
	if err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("map the archived delivery: %w", err)
	}
	at := now()
	hook := ""
	if capture.Scope != nil {
		hook = capture.Scope.Hook
	}
	o := ingest.DeliveryOutcome{
		Connector: c, Hook: hook, Scope: capture.Scope, DeliveryID: res.DeliveryID,
		Key: key, Event: res.SourceEvent, Action: res.Action, ReceivedAt: at,
	}
	switch {
	case len(res.Events) == 0:
		o.Answer, o.Status, o.Code, o.Message = store.AnswerIgnored, 202, "no_event", res.Ignored
	case asNew:
		nonce := store.NewDeliveryID(at)
		seen := map[triggers.Kind]int{}
		for i := range res.Events {
			e := &res.Events[i]
			e.ID = triggers.EventID(c, key+"#redelivery-"+nonce, e.Kind, seen[e.Kind])
			seen[e.Kind]++
		}
		if _, err := r.Bus.PublishEvents(ctx, res.Events, bus.ArchiveSubject(c, key)); err != nil {
			return store.DeliveryRecord{}, fmt.Errorf("publish the redelivery's events: %w", err)
		}
		o.Answer, o.Status, o.Events = store.AnswerAccepted, 202, res.Events
	default:
		dup, err := r.Bus.Commit(ctx, capture, res.Events)
		switch {
		case err != nil:
			return store.DeliveryRecord{}, fmt.Errorf("commit the redelivery: %w", err)
		case dup:
			o.Answer, o.Status = store.AnswerDuplicate, 200
		default:
			o.Answer, o.Status, o.Events = store.AnswerAccepted, 202, res.Events
		}
	}
	rec := Record(tenantID, o)
	rec.Redelivery = true
	if rec.Summary == "" && len(res.Events) > 0 {
		// A duplicate or ignored attempt published nothing; its title is
		// still its first event's.
		rec.Summary = res.Events[0].Summary()
	}
	if err := r.Store.PutDeliveries(ctx, []store.DeliveryRecord{rec}); err != nil {
		return rec, fmt.Errorf("record the redelivery: %w", err)
	}
	return rec, nil
}
