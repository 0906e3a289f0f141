package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
)

// Streams of the dispatcher's work, besides the events themselves.
const (
	// AgentsStream holds agent runs on "agents.<agent-id>.runs" (agents
	// consume them) and agents' results on "agents.<agent-id>.results.<run-id>".
	AgentsStream = agent.Stream
	// PushStream is the work queue of runs to POST to HTTP agents, on
	// "push.<agent-id>".
	PushStream = "TRIGGERD_PUSH"
	// DeadStream keeps what could not be processed, on "dead.<source>",
	// with the original subject, headers and data and the reason.
	DeadStream = "TRIGGERD_DEAD"
)

// Dead-letter headers.
const (
	HeaderDeadReason  = "Triggerd-Dead-Reason"
	HeaderDeadSubject = "Triggerd-Dead-Subject"
	HeaderDeadStream  = "Triggerd-Dead-Stream"
	HeaderDeadSeq     = "Triggerd-Dead-Seq"
	HeaderDeadTries   = "Triggerd-Dead-Deliveries"
	HeaderDeadAt      = "Triggerd-Dead-At"
)

// DefaultDeadRetention is how long dead letters are kept.
const DefaultDeadRetention = 30 * 24 * time.Hour

// provisionWork creates the agents, push and dead-letter streams.
func (b *Bus) provisionWork(ctx context.Context) error {
	cfgs := []jetstream.StreamConfig{{
		Name:        AgentsStream,
		Description: "triggerd agent runs (agents.<agent>.runs, Nats-Msg-Id = run id) and results (agents.<agent>.results.<run>)",
		Subjects:    []string{"agents.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      b.opts.EventRetention,
		Duplicates:  b.opts.DedupWindow,
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
	}, {
		Name:        PushStream,
		Description: "triggerd runs waiting to be POSTed to HTTP agents",
		Subjects:    []string{"push.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  b.opts.DedupWindow,
		MaxAge:      b.opts.EventRetention,
	}, {
		Name:        DeadStream,
		Description: "triggerd dead letters: messages that could not be processed, with the reason",
		Subjects:    []string{"dead.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		MaxAge:      DefaultDeadRetention,
		Discard:     jetstream.DiscardOld,
	}}
	for _, cfg := range cfgs {
		if _, err := b.ensureStream(ctx, cfg); err != nil {
			return err
		}
	}
	return nil
}

// Publish publishes data to subject with msgID as Nats-Msg-Id and waits for
// JetStream to store it, or to recognise msgID as one it already holds
// within its dedup window (which is what makes republishing safe).
func (b *Bus) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	msg := &nats.Msg{Subject: subject, Data: data}
	if _, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// ErrEventGone reports that the events stream no longer holds an event
// (its retention ended, or it was deleted).
var ErrEventGone = errors.New("the events stream no longer holds the event")

// EventAt returns the event at sequence seq of EventsStream: its subject
// and data. A sequence the stream no longer holds is an error wrapping
// ErrEventGone (and jetstream.ErrMsgNotFound).
func (b *Bus) EventAt(ctx context.Context, seq uint64) (subject string, data []byte, err error) {
	msg, err := b.events.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", nil, fmt.Errorf("event at sequence %d: %w: %w", seq, ErrEventGone, err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("event at sequence %d: %w", seq, err)
	}
	return msg.Subject, msg.Data, nil
}

// WorkSpec describes a durable consumer that several processes share.
type WorkSpec struct {
	// Stream and Durable name the stream and the consumer.
	Stream  string
	Durable string
	// Filter is the subject filter ("" for the whole stream).
	Filter string
	// Filters, when set, replaces Filter with several subject filters,
	// which must not overlap. SetWorkFilters changes them while the
	// consumer is in use.
	Filters []string
	// AckWait is how long a job may go without Ack or InProgress before
	// JetStream gives it to another worker.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one message; a job that asks for a
	// retry on its last delivery is dead-lettered instead.
	MaxDeliver int
	// Concurrency is how many jobs this process works on at once.
	Concurrency int
	// Created, when set, is called once Work has created or updated the
	// consumer, before the first job: a caller that changes Filters as it
	// goes re-applies its latest ones there, so a change made while Work
	// was starting is not lost.
	Created func()
}

// Job is one message of a WorkSpec's consumer. Exactly one of Ack, Retry,
// Dead must be called, once.
type Job struct {
	b    *Bus
	spec WorkSpec
	msg  jetstream.Msg
	meta *jetstream.MsgMetadata
}

// Subject, Header and Data return the message's.
func (j *Job) Subject() string     { return j.msg.Subject() }
func (j *Job) Header() nats.Header { return j.msg.Headers() }
func (j *Job) Data() []byte        { return j.msg.Data() }

// Delivered is how many times the message has been delivered, this time
// included.
func (j *Job) Delivered() int {
	if j.meta == nil {
		return 1
	}
	return int(j.meta.NumDelivered)
}

// Sequence is the message's stream sequence.
func (j *Job) Sequence() uint64 {
	if j.meta == nil {
		return 0
	}
	return j.meta.Sequence.Stream
}

// LastDelivery reports whether JetStream will not deliver the message again.
func (j *Job) LastDelivery() bool {
	return j.spec.MaxDeliver > 0 && j.Delivered() >= j.spec.MaxDeliver
}

// Ack acknowledges the job, waiting for the server to confirm, so that a
// completed job is not delivered again.
func (j *Job) Ack(ctx context.Context) error {
	if err := j.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("ack %s: %w", j.msg.Subject(), err)
	}
	return nil
}

// AckNoWait acknowledges the job without waiting for the server: for jobs
// whose redelivery, should the ack be lost, would do no harm.
func (j *Job) AckNoWait() error {
	if err := j.msg.Ack(); err != nil {
		return fmt.Errorf("ack %s: %w", j.msg.Subject(), err)
	}
	return nil
}

// InProgress tells JetStream the job is still being worked on, resetting
// its AckWait.
func (j *Job) InProgress() error { return j.msg.InProgress() }

// Retry asks for the job again after delay. On the last delivery it is
// dead-lettered with reason instead.
func (j *Job) Retry(ctx context.Context, delay time.Duration, reason string) error {
	if j.LastDelivery() {
		return j.Dead(ctx, "gave up after "+strconv.Itoa(j.Delivered())+" deliveries: "+reason)
	}
	return j.msg.NakWithDelay(delay)
}

// Dead dead-letters the job with reason (a copy of the message goes to
// DeadStream on "dead.<durable>") and terminates it, so it is never
// delivered again.
func (j *Job) Dead(ctx context.Context, reason string) error {
	if err := j.b.DeadLetter(ctx, j.spec.Durable, j.spec.Stream, j.Sequence(), j.Delivered(), j.msg.Subject(), j.msg.Headers(), j.msg.Data(), reason); err != nil {
		// Leave the message to be redelivered rather than lose it.
		_ = j.msg.NakWithDelay(time.Second)
		return err
	}
	if err := j.msg.TermWithReason(reason); err != nil {
		return fmt.Errorf("terminate %s: %w", j.msg.Subject(), err)
	}
	return nil
}

// DeadLetter stores a message that could not be processed on
// "dead.<source>", with the reason and where it came from.
func (b *Bus) DeadLetter(ctx context.Context, source, stream string, seq uint64, delivered int, subject string, header nats.Header, data []byte, reason string) error {
	h := nats.Header{}
	for k, vs := range header {
		// Nats-* headers are instructions to the server (msg id, expected
		// sequences, TTL) or its annotations (Nats-Msg-Size): obeyed
		// again on the dead stream they would refuse or expire the copy.
		if strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h.Set(HeaderDeadReason, reason)
	h.Set(HeaderDeadSubject, subject)
	h.Set(HeaderDeadStream, stream)
	h.Set(HeaderDeadSeq, strconv.FormatUint(seq, 10))
	h.Set(HeaderDeadTries, strconv.Itoa(delivered))
	h.Set(HeaderDeadAt, time.Now().UTC().Format(time.RFC3339Nano))
	msg := &nats.Msg{Subject: "dead." + source, Header: h, Data: data}
	opts := []jetstream.PublishOpt{}
	if seq != 0 {
		opts = append(opts, jetstream.WithMsgID(stream+":"+strconv.FormatUint(seq, 10)))
	}
	if _, err := b.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("dead-letter %s: %w", subject, err)
	}
	return nil
}

// Work runs handle for the messages of spec's durable consumer, at most
// spec.Concurrency at once, until ctx ends; then it stops fetching, waits
// for the jobs in hand and returns nil. A handler must settle its job (Ack,
// Retry or Dead); one that returns without doing so leaves the message to
// be redelivered after AckWait.
func (b *Bus) Work(ctx context.Context, spec WorkSpec, handle func(ctx context.Context, j *Job)) error {
	if spec.Concurrency <= 0 {
		spec.Concurrency = 1
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxDeliver,
		MaxAckPending: max(1000, spec.Concurrency*4),
	}
	setFilters(&cfg, spec.Filter, spec.Filters)
	cons, err := b.js.CreateOrUpdateConsumer(ctx, spec.Stream, cfg)
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", spec.Durable, spec.Stream, err)
	}
	if spec.Created != nil {
		spec.Created()
	}
	// Jobs in hand finish under their own context: stopping the worker
	// does not cut a tool step short; the caller bounds shutdown.
	jobCtx := context.WithoutCancel(ctx)
	// spec.Concurrency long-lived goroutines take the jobs: a goroutine per
	// job would start on a small stack and grow it (copying it) on every
	// job, which under load cost more than the handoff.
	jobs := make(chan *Job)
	stop := make(chan struct{})
	var (
		workers sync.WaitGroup
		busy    atomic.Int64
	)
	for range spec.Concurrency {
		workers.Go(func() {
			for {
				select {
				case j := <-jobs:
					busy.Add(1)
					handle(jobCtx, j)
					busy.Add(-1)
				case <-stop:
					return
				}
			}
		})
	}
	lost := make(chan error, 1)
	var lastMsg atomic.Int64
	lastMsg.Store(time.Now().UnixNano())
	handler := func(msg jetstream.Msg) {
		lastMsg.Store(time.Now().UnixNano())
		meta, _ := msg.Metadata()
		// While every worker is busy the callback waits here, and the
		// messages already pulled wait in the subscription.
		select {
		case jobs <- &Job{b: b, spec: spec, msg: msg, meta: meta}:
		case <-stop:
			// Unacknowledged: redelivered after AckWait.
		}
	}
	consume := func() (jetstream.ConsumeContext, error) {
		cc, err := cons.Consume(handler, jetstream.PullMaxMessages(spec.Concurrency),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				// Missed heartbeats and disconnects are retried by
				// Consume itself; a consumer deleted under it ends the
				// worker.
				if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
					select {
					case lost <- err:
					default:
					}
				}
			}))
		if err != nil {
			return nil, fmt.Errorf("consume %s: %w", spec.Durable, err)
		}
		if b.consumed != nil {
			b.consumed(cc)
		}
		return cc, nil
	}
	cc, err := consume()
	if err != nil {
		return err
	}
	defer func() {
		cc.Stop()
		// A worker finishes the job in hand, then returns; a callback still
		// waiting to hand one over gives up.
		close(stop)
		workers.Wait()
	}()
	// The watchdog. Under load the client sometimes loses track of its
	// pull requests: the server then holds none (NumWaiting 0) while
	// messages wait (NumPending > 0), and the client sends no new one until
	// its heartbeat check fires 30 s later. In a burst of webhooks that
	// left the dispatcher sitting on tens of thousands of events. A worker
	// with a free slot and no message for workStallAfter asks the server,
	// and pulls afresh when it finds that state.
	check := time.NewTicker(workStallAfter)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-lost:
			return fmt.Errorf("consume %s: %w", spec.Durable, err)
		case <-check.C:
			if time.Since(time.Unix(0, lastMsg.Load())) < workStallAfter || busy.Load() == int64(spec.Concurrency) {
				continue
			}
			info, err := cons.Info(ctx)
			if err != nil || info.NumPending == 0 || info.NumWaiting > 0 {
				continue
			}
			if b.opts.OnWorkStall != nil {
				b.opts.OnWorkStall(spec.Durable, info.NumPending)
			}
			cc.Stop()
			lastMsg.Store(time.Now().UnixNano())
			if cc, err = consume(); err != nil {
				return err
			}
		}
	}
}

// setFilters sets cfg's subject filters: filters when there are several,
// else the one of filters or filter.
func setFilters(cfg *jetstream.ConsumerConfig, filter string, filters []string) {
	switch len(filters) {
	case 0:
		cfg.FilterSubject, cfg.FilterSubjects = filter, nil
	case 1:
		cfg.FilterSubject, cfg.FilterSubjects = filters[0], nil
	default:
		cfg.FilterSubject, cfg.FilterSubjects = "", slices.Clone(filters)
	}
}

// SetWorkFilters changes the subject filters of the durable consumer of a
// WorkSpec (see WorkSpec.Filters), keeping the rest of its configuration
// and its position: messages it has already passed over are not looked at
// again, and those it had delivered stay pending. It reports whether the
// filters changed; a consumer that does not exist (yet) is left to Work to
// create, and changed is false.
func (b *Bus) SetWorkFilters(ctx context.Context, stream, durable string, filters []string) (changed bool, err error) {
	if len(filters) == 0 {
		return false, errors.New("set work filters: no filter (a consumer without filters would take every message)")
	}
	cons, err := b.js.Consumer(ctx, stream, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s on %s: %w", durable, stream, err)
	}
	cfg := cons.CachedInfo().Config
	current := cfg.FilterSubjects
	if cfg.FilterSubject != "" {
		current = []string{cfg.FilterSubject}
	}
	if sameSet(current, filters) {
		return false, nil
	}
	setFilters(&cfg, "", filters)
	if _, err := b.js.UpdateConsumer(ctx, stream, cfg); err != nil {
		return false, fmt.Errorf("set filters of consumer %s on %s: %w", durable, stream, err)
	}
	return true, nil
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// workStallAfter is how long a worker with a free slot goes without a
// message before it checks that it is still pulling.
const workStallAfter = 2 * time.Second

// Heartbeat calls j.InProgress every interval until the returned stop is
// called, so a long job keeps its message.
func Heartbeat(j *Job, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = j.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Notify publishes data on a core NATS subject, for broadcasts between
// triggerd processes (nothing is stored).
func (b *Bus) Notify(subject string, data []byte) error {
	if err := b.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("notify %s: %w", subject, err)
	}
	return nil
}

// Listen calls fn for every message on a core NATS subject until ctx ends.
func (b *Bus) Listen(ctx context.Context, subject string, fn func(data []byte)) error {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) { fn(m.Data) })
	if err != nil {
		return fmt.Errorf("listen %s: %w", subject, err)
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
	return nil
}
