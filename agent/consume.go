package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Consume's options.
const (
	// DefaultAckWait is how long the server waits for news of a run before
	// it delivers the run again.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxDeliver is how many times a run is delivered at most.
	DefaultMaxDeliver = 5
	// DefaultRetryBase and DefaultRetryMax bound the delay before a run
	// whose RunFunc failed is delivered again: a random duration up to
	// DefaultRetryBase doubled for every earlier delivery, at most
	// DefaultRetryMax.
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// pollWait is how long one pull request waits for a run; errorPause how
// long a worker waits after a failed pull before it pulls again.
const (
	// pollWait bounds one pull: a pull the server forgot (it restarted)
	// is noticed within it, and a stopped worker's pull is gone from the
	// server after it (see finish).
	pollWait   = 2 * time.Second
	errorPause = time.Second
)

// Option configures Consume.
type Option func(*options)

type options struct {
	ackWait     time.Duration
	maxDeliver  int
	concurrency int
	retryBase   time.Duration
	retryMax    time.Duration
	onError     func(error)
}

// WithAckWait sets the consumer's AckWait (DefaultAckWait when not given):
// how long the server waits before it delivers a run again. While the
// RunFunc works, Consume tells the server so every AckWait/3, so AckWait
// bounds how long a crashed agent holds a run, not how long a run may take.
func WithAckWait(d time.Duration) Option { return func(o *options) { o.ackWait = d } }

// WithMaxDeliver sets how many times a run is delivered at most
// (DefaultMaxDeliver when not given).
func WithMaxDeliver(n int) Option { return func(o *options) { o.maxDeliver = n } }

// WithConcurrency sets how many runs Consume works on at once (1 when not
// given). A run is pulled only when a worker is free to take it, so no run
// waits in a client buffer while its AckWait runs out.
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// WithRetryBackoff sets the delays before a failed run is delivered again:
// a random duration, uniform between zero and base doubled for each earlier
// delivery, capped at max ("full jitter"). The defaults are
// DefaultRetryBase and DefaultRetryMax.
func WithRetryBackoff(base, max time.Duration) Option {
	return func(o *options) { o.retryBase, o.retryMax = base, max }
}

// WithErrorHandler sets a function Consume tells of the errors it handles
// itself: runs it could not decode, results it could not publish,
// acknowledgements that failed, pulls that failed and will be retried. It
// is called from Consume's workers, possibly concurrently. Consume never
// logs; without a handler these errors are dropped.
func WithErrorHandler(fn func(error)) Option { return func(o *options) { o.onError = fn } }

// ConsumerName is the name of the durable consumer Consume uses for
// agentID.
func ConsumerName(agentID string) string { return "agent-" + agentID }

type attemptKey struct{}

// Attempt returns which delivery of its run the RunFunc called with ctx is
// working on, 1 for the first, as the server counts them; 0 outside
// Consume.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// Consume works on agentID's runs until ctx is done, then returns nil once
// every run in hand is finished and every goroutine it started is gone.
//
// It creates, or updates, the durable pull consumer ConsumerName(agentID)
// on Stream, filtered on RunsSubject(agentID), with explicit
// acknowledgement, and pulls one run per free worker. For each run it
// calls fn, telling the server the run is in progress every AckWait/3
// while fn works, and then:
//
//   - when fn returns a Result, publishes it with Report (RunID and Agent
//     set to the run's, Status and FinishedAt filled in when left out: the
//     status is failed when Error is set) and acknowledges the run;
//   - when fn returns an error, or a Result that cannot be reported, asks
//     for the run again after a backoff (see WithRetryBackoff) and reports
//     nothing; on the last delivery WithMaxDeliver allows (even when
//     Consume is stopping), it reports a StatusFailed Result carrying the
//     error's text instead and terminates the run, so that the failure is
//     known;
//   - when the message is not a run for agentID, terminates it with the
//     reason.
//
// fn's context is cancelled when ctx is. An error fn returns once Consume
// is stopping gives the run back, for another instance to take within
// three seconds, while a Result it returns is still reported.
//
// Consume needs no more than Permissions(agentID) allows: connect with
// Connect. It finds a run's result with a direct get, which Stream allows
// on triggerd's NATS.
//
// Consume returns an error when it cannot set up the consumer, or when
// the connection is closed or the consumer deleted under it; other errors
// go to the WithErrorHandler function and Consume carries on.
func Consume(ctx context.Context, js jetstream.JetStream, agentID string, fn RunFunc, opts ...Option) error {
	if err := CheckAgentID(agentID); err != nil {
		return err
	}
	if fn == nil {
		return errors.New("agent: Consume with a nil RunFunc")
	}
	o := options{
		ackWait:     DefaultAckWait,
		maxDeliver:  DefaultMaxDeliver,
		concurrency: 1,
		retryBase:   DefaultRetryBase,
		retryMax:    DefaultRetryMax,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.ackWait < 3*time.Millisecond:
		return fmt.Errorf("agent: ack wait %s is too short", o.ackWait)
	case o.maxDeliver < 1:
		return fmt.Errorf("agent: max deliver %d: want at least 1", o.maxDeliver)
	case o.concurrency < 1:
		return fmt.Errorf("agent: concurrency %d: want at least 1", o.concurrency)
	case o.retryBase <= 0 || o.retryMax < o.retryBase:
		return fmt.Errorf("agent: retry backoff %s..%s: want 0 < base <= max", o.retryBase, o.retryMax)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Durable:       ConsumerName(agentID),
		Description:   "runs of agent " + agentID,
		FilterSubject: RunsSubject(agentID),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.ackWait,
		MaxDeliver:    o.maxDeliver,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("agent: consumer %s on %s: %w", ConsumerName(agentID), Stream, err)
	}
	c := &consumer{js: js, cons: cons, agentID: agentID, fn: fn, o: o}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, o.concurrency)
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.work(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	c.finish()
	close(errs)
	return <-errs
}

// flushWait bounds the flush that ends Consume.
const flushWait = 5 * time.Second

type consumer struct {
	js      jetstream.JetStream
	cons    jetstream.Consumer
	agentID string
	fn      RunFunc
	o       options

	mu       sync.Mutex
	giveBack []jetstream.Msg
}

// giveBackLater sets msg aside, to be given back to the server once every
// worker has stopped.
func (c *consumer) giveBackLater(msg jetstream.Msg) {
	c.mu.Lock()
	c.giveBack = append(c.giveBack, msg)
	c.mu.Unlock()
}

// giveBackDelay is how long after Consume stops its interrupted runs are
// delivered again: once the stopped workers' pull requests have expired.
const giveBackDelay = pollWait + 500*time.Millisecond

// finish runs once every worker has stopped: it gives back the runs
// interrupted by the stop and makes sure the server has every
// acknowledgement sent.
//
// The stopped workers' pull requests stay on the server until they expire
// (pollWait): the worker's unsubscription need not end them (an agent's
// pulls reach JetStream through a service import, whose reply the server
// may still see interest in; the test of a stop saw one run in four miss
// a second's delay that way). A run given back before that could be handed to a
// request nobody reads any more, and wait there for AckWait (30 s by
// default). So the runs are given back after a flush (one connection's
// messages are processed in order) with a delay past the pulls' expiry.
func (c *consumer) finish() {
	nc := c.js.Conn()
	flush := func() {
		if nc != nil && !nc.IsClosed() {
			c.reportIf(nc.FlushTimeout(flushWait), "agent: flushing")
		}
	}
	c.mu.Lock()
	msgs := c.giveBack
	c.giveBack = nil
	c.mu.Unlock()
	if len(msgs) > 0 {
		flush()
		for _, msg := range msgs {
			c.reportIf(msg.NakWithDelay(giveBackDelay), "agent: giving back a run")
		}
	}
	flush()
}

// work pulls and handles runs one at a time until ctx is done or a pull
// fails for good.
func (c *consumer) work(ctx context.Context) error {
	for ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, pollWait)
		batch, err := c.cons.Fetch(1, jetstream.FetchContext(pollCtx))
		if err == nil {
			for msg := range batch.Messages() {
				c.handle(ctx, msg)
			}
			err = batch.Error()
		}
		cancel()
		switch {
		case err == nil, ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, nats.ErrConnectionClosed),
			errors.Is(err, jetstream.ErrConsumerDeleted),
			errors.Is(err, jetstream.ErrConsumerNotFound):
			return fmt.Errorf("agent: pulling runs: %w", err)
		default:
			c.report(fmt.Errorf("agent: pulling runs (retrying): %w", err))
			t := time.NewTimer(errorPause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return nil
}

// handle works on one message to its acknowledgement.
func (c *consumer) handle(ctx context.Context, msg jetstream.Msg) {
	if ctx.Err() != nil {
		// Pulled as Consume stopped.
		c.giveBackLater(msg)
		return
	}
	attempt := 1
	if meta, err := msg.Metadata(); err == nil {
		attempt = int(meta.NumDelivered)
	} else {
		c.report(fmt.Errorf("agent: run metadata: %w", err))
	}
	run, err := decodeRun(msg.Data(), c.agentID)
	if err != nil {
		c.report(fmt.Errorf("agent: terminating message on %s: %w", msg.Subject(), err))
		c.reportIf(msg.TermWithReason(truncate(err.Error(), 256)), "agent: terminating message")
		return
	}

	if attempt > 1 && c.reported(ctx, run.ID) {
		// Done before: the acknowledgement was lost (a crash, a server
		// restart), not the work.
		c.reportIf(msg.DoubleAck(ctx), "agent: acknowledging run %s, already reported", run.ID)
		return
	}
	stop := c.heartbeat(msg)
	res, err := c.fn(context.WithValue(ctx, attemptKey{}, attempt), run)
	if err == nil {
		res = complete(res, run, c.agentID, time.Now())
		if cerr := res.check(); cerr != nil {
			err = fmt.Errorf("agent: invalid result: %w", cerr)
		}
	}
	// Finish the run even while stopping: its outcome is known.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.ackWait)
	defer cancel()
	if err != nil {
		c.retry(ctx, octx, msg, run, attempt, err, stop)
		return
	}
	if err := Report(octx, c.js, res); err != nil {
		c.report(fmt.Errorf("agent: run %s: %w", run.ID, err))
		stop()
		c.reportIf(msg.NakWithDelay(c.backoff(attempt)), "agent: asking for run %s again", run.ID)
		return
	}
	stop()
	if err := msg.DoubleAck(octx); err != nil {
		c.report(fmt.Errorf("agent: acknowledging run %s: %w", run.ID, err))
	}
}

// reported tells whether the stream holds a result for runID. When it
// cannot tell, it says no: the run is then done again (at least once).
//
// It asks JetStream for the last message on the result's subject directly
// (a direct get), which an agent may do for its own results only; reading
// the stream's description, as jetstream.Stream does first, it may not.
func (c *consumer) reported(ctx context.Context, runID string) bool {
	nc := c.js.Conn()
	if nc == nil {
		return false
	}
	// Within the first third of the run's AckWait, before any heartbeat.
	ctx, cancel := context.WithTimeout(ctx, c.o.ackWait/3)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, directGetPrefix+ResultsSubject(c.agentID, runID), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		err = fmt.Errorf("%w (the stream %s allows no direct gets, as triggerd's does)", err, Stream)
	}
	if err != nil {
		c.report(fmt.Errorf("agent: looking for run %s's result: %w", runID, err))
		return false
	}
	switch status := msg.Header.Get("Status"); status {
	case "":
		return true
	case "404":
		return false
	default:
		c.report(fmt.Errorf("agent: looking for run %s's result: status %s %s", runID, status, msg.Header.Get("Description")))
		return false
	}
}

// retry disposes of a run whose attempt failed with cause.
func (c *consumer) retry(ctx, octx context.Context, msg jetstream.Msg, run Run, attempt int, cause error, stop func()) {
	if attempt >= c.o.maxDeliver {
		res := complete(Result{Status: StatusFailed, Error: truncate(cause.Error(), maxErrorBytes)}, run, c.agentID, time.Now())
		if err := Report(octx, c.js, res); err != nil {
			c.report(fmt.Errorf("agent: run %s failed on its last attempt (%v) and the failure cannot be reported: %w", run.ID, cause, err))
		}
		stop()
		c.reportIf(msg.TermWithReason(fmt.Sprintf("failed after %d attempts", attempt)), "agent: terminating run %s", run.ID)
		return
	}
	stop()
	if ctx.Err() != nil {
		// Stopping: give the run back, for another instance to take.
		c.giveBackLater(msg)
		return
	}
	c.reportIf(msg.NakWithDelay(c.backoff(attempt)), "agent: asking for run %s again", run.ID)
}

// heartbeat tells the server every AckWait/3 that msg is in progress,
// until the returned function is called; that function waits for the
// heartbeat goroutine to end and may be called more than once.
func (c *consumer) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.o.ackWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					c.report(fmt.Errorf("agent: telling the server a run is in progress: %w", err))
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}

func (c *consumer) backoff(attempt int) time.Duration {
	return Backoff(attempt, c.o.retryBase, c.o.retryMax, nil)
}

func (c *consumer) report(err error) {
	if err != nil && c.o.onError != nil {
		c.o.onError(err)
	}
}

// reportIf reports err, when not nil, after the message format and args
// make.
func (c *consumer) reportIf(err error, format string, args ...any) {
	if err != nil {
		c.report(fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err))
	}
}

// maxErrorBytes bounds the error text of the failed result Consume
// reports for a run that ran out of attempts.
const maxErrorBytes = 4 << 10

// decodeRun decodes a run message for agentID.
func decodeRun(data []byte, agentID string) (Run, error) {
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return Run{}, fmt.Errorf("invalid run: %w", err)
	}
	// The id names the run's result subject: one that is not a single
	// token could never be reported, and as a wildcard its lookup
	// (reported) would find another run's result.
	if err := checkToken(run.ID); err != nil {
		return Run{}, fmt.Errorf("invalid run: id %v", err)
	}
	if run.Agent != "" && run.Agent != agentID {
		return Run{}, fmt.Errorf("invalid run: for agent %q, not %q", run.Agent, agentID)
	}
	return run, nil
}

// Backoff returns the delay before delivery attempt+1 of a run whose
// attempt-th delivery failed, "full jitter" style, as WithRetryBackoff
// describes: uniform in [0, min(limit, base*2^(attempt-1))], rnd giving
// numbers in [0, 1) (math/rand/v2's Float64 when nil; values outside are
// clamped). It is zero when base or limit is not positive, and it does not
// overflow, however large attempt is. Agents that read their runs their
// own way can pace their redeliveries with it.
func Backoff(attempt int, base, limit time.Duration, rnd func() float64) time.Duration {
	if base <= 0 || limit <= 0 {
		return 0
	}
	if rnd == nil {
		rnd = rand.Float64
	}
	ceiling := base
	for i := 1; i < attempt && ceiling < limit; i++ {
		if ceiling > limit/2 {
			ceiling = limit
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, limit)
	f := min(max(rnd(), 0), 1)
	return time.Duration(f * float64(ceiling))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Report publishes res to ResultsSubject(res.Agent, res.RunID) with the Nats-Msg-Id
// ResultMsgID(res.Agent, res.RunID), so that a result reported twice within the
// stream's duplicate window is stored once. FinishedAt is set to now when
// zero. It fails if res has no RunID, an invalid Agent, a Status other than
// StatusSucceeded or StatusFailed, or an Output that is not JSON.
func Report(ctx context.Context, js jetstream.JetStream, res Result) error {
	if res.FinishedAt.IsZero() {
		res.FinishedAt = time.Now().UTC()
	}
	if err := res.check(); err != nil {
		return err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("agent: encoding result: %w", err)
	}
	if _, err := js.Publish(ctx, ResultsSubject(res.Agent, res.RunID), data, jetstream.WithMsgID(ResultMsgID(res.Agent, res.RunID))); err != nil {
		return fmt.Errorf("agent: publishing result of run %s: %w", res.RunID, err)
	}
	return nil
}
