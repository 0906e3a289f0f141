package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/triggers"
)

// SpoolDisk keeps records on local disk, each fsync'd before Append
// returns, until they are removed. store/spool implements it.
type SpoolDisk interface {
	Append(data []byte) (name string, err error)
	// List returns the records' names in the order they were appended.
	List() ([]string, error)
	// Read returns a record, checked against its checksum. Its error wraps
	// fs.ErrNotExist when another process removed the record first, and
	// has a method Corrupt() bool reporting true when the record is torn
	// or damaged.
	Read(name string) ([]byte, error)
	Remove(name string) error
	// Quarantine sets aside a record that cannot be read or decoded, for
	// an operator.
	Quarantine(name string) error
	Len() int
}

// Spooler is the fallback of a Committer that cannot make a delivery
// durable in time (NATS unreachable, hung or out of budget): the Server
// writes the delivery and its events to the spool, fsync'd, and answers 202
// with "spooled": true instead of 503. A code-hosting sender does not retry
// a delivery that failed; a 503 during an outage would lose it.
//
// Run forwards spooled deliveries to the Committer, oldest first, once it
// is ready again, and removes each only after the Committer has made it
// durable. A delivery is forwarded with the events it was answered with;
// their ids are deterministic, so a delivery that reached NATS after all
// (an answer lost in an outage, a commit finished after its deadline) is
// recognised as a duplicate and stored once.
type Spooler struct {
	disk      SpoolDisk
	committer Committer
	ready     func() bool
	log       zerolog.Logger
	timeout   time.Duration
	workers   int
	header    func(map[string][]string) map[string][]string
	retry     time.Duration
	maxRetry  time.Duration
	// kick wakes Run when a delivery is spooled.
	kick chan struct{}
	// passes serialises forwarding passes (Run's and Flush's).
	passes sync.Mutex

	spooled   prometheus.Counter
	forwarded *prometheus.CounterVec
	published *prometheus.CounterVec
}

// SpoolerOptions configures a Spooler.
type SpoolerOptions struct {
	Disk      SpoolDisk
	Committer Committer
	// Ready reports whether the Committer can currently make deliveries
	// durable (the Server's Options.Ready); Run forwards only while it is
	// true. Nil means always.
	Ready func() bool
	// CommitTimeout bounds each forwarded commit (default
	// DefaultCommitTimeout).
	CommitTimeout time.Duration
	// RetryInterval is the wait before a pass after one that failed,
	// doubled after each failure up to MaxRetryInterval (defaults 1 s and
	// 30 s). Run also looks at the spool every RetryInterval.
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// Header, when set, chooses the headers a spooled delivery keeps
	// (bus.ArchivedHeader: what the archive would keep, so no credentials
	// are written to the spool); nil keeps them all.
	Header func(map[string][]string) map[string][]string
	// Concurrency is how many spooled deliveries are forwarded at once
	// (default 16): one at a time, each waits for its acknowledgements
	// and its delivery index entry, about a millisecond.
	Concurrency int
	Logger      zerolog.Logger
	// Registerer receives the spool's metrics; nil registers nowhere.
	Registerer prometheus.Registerer
}

// NewSpooler returns a Spooler; Run must be running for spooled deliveries
// to be forwarded.
func NewSpooler(o SpoolerOptions) (*Spooler, error) {
	if o.Disk == nil || o.Committer == nil {
		return nil, errors.New("ingest: a Spooler needs a Disk and a Committer")
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.MaxRetryInterval < o.RetryInterval {
		o.MaxRetryInterval = max(30*time.Second, o.RetryInterval)
	}
	s := &Spooler{
		disk: o.Disk, committer: o.Committer, ready: o.Ready,
		log:     o.Logger.With().Str("component", "spool").Logger(),
		timeout: o.CommitTimeout, workers: o.Concurrency, header: o.Header, retry: o.RetryInterval, maxRetry: o.MaxRetryInterval,
		kick: make(chan struct{}, 1),
		spooled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "triggerd_spool_deliveries_total",
			Help: "Deliveries written to the local spool because NATS could not make them durable in time.",
		}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_spool_forwarded_total",
			Help: "Spooled deliveries taken off the spool, by outcome: accepted, duplicate (NATS had it already) or quarantined (unreadable, set aside).",
		}, []string{"outcome"}),
		published: newPublishedCounter(),
	}
	if o.Registerer != nil {
		var err error
		if s.published, err = registerPublished(o.Registerer, s.published); err != nil {
			return nil, err
		}
		pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "triggerd_spool_pending",
			Help: "Deliveries in the local spool waiting to be forwarded to NATS.",
		}, func() float64 { return float64(o.Disk.Len()) })
		for _, c := range []prometheus.Collector{s.spooled, s.forwarded, pending} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("ingest: register spool metrics: %w", err)
			}
		}
	}
	return s, nil
}

// spoolRecord is a spooled delivery: the capture and the events it was
// answered with, in their JSON encoding. An event whose payload is the body
// byte for byte (nearly all of them) is stored without it and listed in
// BodyEvents, so a record holds the body once.
type spoolRecord struct {
	Version    int                 `json:"version"`
	Connector  triggers.Connector  `json:"connector"`
	DeliveryID string              `json:"delivery_id"`
	ReceivedAt time.Time           `json:"received_at"`
	Header     map[string][]string `json:"header"`
	Body       []byte              `json:"body"`
	Scope      *triggers.Scope     `json:"scope,omitempty"`
	Events     []json.RawMessage   `json:"events"`
	BodyEvents []int               `json:"body_events,omitempty"`
	SpooledAt  time.Time           `json:"spooled_at"`
}

const spoolRecordVersion = 1

// Spool writes a delivery and its events to the spool; once it returns nil
// the delivery is durable on local disk and will be forwarded.
func (s *Spooler) Spool(c triggers.Capture, events []triggers.Event) error {
	header := c.Header
	if s.header != nil {
		header = s.header(header)
	}
	rec := spoolRecord{
		Version: spoolRecordVersion, Connector: c.Connector, DeliveryID: c.DeliveryID,
		ReceivedAt: c.ReceivedAt, Header: header, Body: c.Body, Scope: c.Scope,
		Events: make([]json.RawMessage, len(events)), SpooledAt: time.Now().UTC(),
	}
	// The payload events carry: the body, or its form field. Events
	// carrying it leave it out and get it back from the body on forward,
	// byte for byte (a payload kept in the record's JSON would come back
	// compacted and HTML-escaped).
	payload, err := c.Payload()
	if err != nil {
		payload = c.Body
	}
	for i := range events {
		e := events[i]
		if e.Payload != nil && bytes.Equal(e.Payload, payload) {
			e.Payload = nil
			rec.BodyEvents = append(rec.BodyEvents, i)
		}
		b, err := e.AppendJSON(nil)
		if err != nil {
			return fmt.Errorf("spool delivery %s: encode event %s: %w", c.DeliveryID, events[i].ID, err)
		}
		rec.Events[i] = b
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("spool delivery %s: %w", c.DeliveryID, err)
	}
	if _, err := s.disk.Append(data); err != nil {
		return fmt.Errorf("spool delivery %s: %w", c.DeliveryID, err)
	}
	s.spooled.Inc()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

// Run forwards spooled deliveries until ctx ends: at once when one is
// spooled, and every RetryInterval while some wait. While the Committer is
// not ready it only looks (and says so once); after a pass that failed it
// waits longer each time, up to MaxRetryInterval.
func (s *Spooler) Run(ctx context.Context) {
	var backoff time.Duration
	waiting := false
	t := time.NewTimer(0) // a first pass at once: deliveries left by an earlier run
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			if backoff > 0 {
				continue // the pass after a failure waits for the timer
			}
		case <-t.C:
		}
		switch {
		case s.disk.Len() == 0:
			backoff = 0
		case !s.ready():
			if !waiting {
				s.log.Warn().Int("pending", s.disk.Len()).Msg("NATS is unreachable; spooled deliveries wait for it")
			}
			waiting = true
		default:
			waiting = false
			if err := s.Flush(ctx); err != nil && ctx.Err() == nil {
				backoff = min(max(2*backoff, s.retry), s.maxRetry)
				s.log.Warn().Err(err).Int("pending", s.disk.Len()).Dur("retry_in", backoff).
					Msg("spooled deliveries could not be forwarded yet")
				t.Reset(backoff)
				continue
			}
			backoff = 0
		}
		t.Reset(s.retry)
	}
}

// Flush makes one pass over the spool, in the order deliveries were
// spooled, forwarding up to Concurrency at once to the Committer and
// removing each once durable. A delivery the Committer refuses stays for
// the next pass, and the pass goes on, so that one delivery NATS keeps
// refusing does not hold up the rest; after Concurrency refusals it stops
// starting new ones (NATS itself is failing, and later deliveries would
// fare no better). It returns the first refusal. It does nothing while the
// Committer is not ready.
func (s *Spooler) Flush(ctx context.Context) error {
	s.passes.Lock()
	defer s.passes.Unlock()
	if s.disk.Len() == 0 {
		return nil
	}
	if !s.ready() {
		return errors.New("NATS is unreachable")
	}
	names, err := s.disk.List()
	if err != nil {
		return fmt.Errorf("list spool: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		first    error
		refusals int
	)
	slots := make(chan struct{}, s.workers)
	for _, name := range names {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			err := s.forward(ctx, name)
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
			}
			if refusals++; refusals >= s.workers {
				cancel()
			}
		})
	}
	wg.Wait()
	if first == nil {
		return ctx.Err()
	}
	return first
}

// forward commits one spooled delivery and removes it. A record that
// cannot be read or decoded is quarantined, not retried forever nor
// deleted.
func (s *Spooler) forward(ctx context.Context, name string) error {
	data, err := s.disk.Read(name)
	var corrupt interface{ Corrupt() bool }
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // another process forwarded it
	case err != nil && !(errors.As(err, &corrupt) && corrupt.Corrupt()):
		return fmt.Errorf("read spooled record %s: %w", name, err)
	}
	var (
		capture   triggers.Capture
		events    []triggers.Event
		spooledAt time.Time
	)
	if err == nil {
		capture, events, spooledAt, err = decodeSpoolRecord(data)
	}
	if err != nil {
		if qerr := s.disk.Quarantine(name); qerr != nil {
			return fmt.Errorf("quarantine spooled record %s (%v): %w", name, err, qerr)
		}
		s.forwarded.WithLabelValues("quarantined").Inc()
		s.log.Error().Err(err).Str("record", name).
			Msg("a spooled delivery could not be read; it was set aside in the spool's corrupt/ folder for an operator")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	duplicate, err := s.committer.Commit(cctx, capture, events)
	cancel()
	if err != nil {
		return fmt.Errorf("forward spooled delivery %s: %w", capture.DeliveryID, err)
	}
	if err := s.disk.Remove(name); err != nil {
		// Forwarded: a second forward would be recognised as a duplicate.
		return fmt.Errorf("remove forwarded delivery %s from the spool: %w", capture.DeliveryID, err)
	}
	outcome := "accepted"
	if duplicate {
		outcome = "duplicate"
	} else {
		for i := range events {
			s.published.WithLabelValues(string(events[i].Kind)).Inc()
		}
	}
	s.forwarded.WithLabelValues(outcome).Inc()
	s.log.Info().Str("delivery_id", capture.DeliveryID).Str("connector", string(capture.Connector)).
		Str("outcome", outcome).Dur("spooled_for", time.Since(spooledAt)).Msg("spooled delivery forwarded")
	return nil
}

// decodeSpoolRecord decodes a record, refusing one of another version or
// without the fields a delivery needs.
func decodeSpoolRecord(data []byte) (triggers.Capture, []triggers.Event, time.Time, error) {
	var rec spoolRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return triggers.Capture{}, nil, time.Time{}, fmt.Errorf("decode spooled delivery: %w", err)
	}
	switch {
	case rec.Version != spoolRecordVersion:
		return triggers.Capture{}, nil, time.Time{}, fmt.Errorf("spooled delivery has record version %d; this triggerd reads version %d", rec.Version, spoolRecordVersion)
	case !rec.Connector.Valid() || rec.DeliveryID == "":
		return triggers.Capture{}, nil, time.Time{}, errors.New("spooled delivery lacks its connector or delivery id")
	}
	events := make([]triggers.Event, len(rec.Events))
	for i, raw := range rec.Events {
		if err := triggers.DecodeEvent(raw, &events[i]); err != nil {
			return triggers.Capture{}, nil, time.Time{}, fmt.Errorf("decode event %d of spooled delivery %s: %w", i, rec.DeliveryID, err)
		}
	}
	c := triggers.Capture{
		Connector: rec.Connector, DeliveryID: rec.DeliveryID, ReceivedAt: rec.ReceivedAt,
		Header: rec.Header, Body: rec.Body, Scope: rec.Scope,
	}
	if len(rec.BodyEvents) > 0 {
		payload, err := c.Payload()
		if err != nil {
			return triggers.Capture{}, nil, time.Time{}, fmt.Errorf("spooled delivery %s: its payload: %w", rec.DeliveryID, err)
		}
		for _, i := range rec.BodyEvents {
			if i < 0 || i >= len(events) {
				return triggers.Capture{}, nil, time.Time{}, fmt.Errorf("spooled delivery %s names event %d of %d as carrying the body", rec.DeliveryID, i, len(events))
			}
			events[i].Payload = payload
		}
	}
	return c, events, rec.SpooledAt, nil
}
