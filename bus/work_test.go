package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// workJobs runs a Work consumer and hands each job to the test, which
// settles it; the consumer stops when the test ends.
func workJobs(t *testing.T, b *Bus, spec WorkSpec) <-chan *Job {
	t.Helper()
	jobs := make(chan *Job)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Work(ctx, spec, func(ctx context.Context, j *Job) {
			select {
			case jobs <- j:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Work: %v", err)
		}
	})
	return jobs
}

func nextJob(t *testing.T, jobs <-chan *Job) *Job {
	t.Helper()
	select {
	case j := <-jobs:
		return j
	case <-time.After(10 * time.Second):
		t.Fatal("no job within 10s")
		return nil
	}
}

func TestEventsCarryRoutingHeadersAndDeadLetterCleanly(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		c, events := testDelivery("d-1", 2, []byte(`{"action":"created"}`))
		events[1].Repository = nil
		events[1].Scope = &triggers.Scope{Hook: "h-1", Tenant: "t-1", Account: "a-1"}
		if commit(t, b, c, events) {
			t.Fatal("a fresh delivery was reported as a duplicate")
		}
		jobs := workJobs(t, b, WorkSpec{
			Stream: EventsStream, Durable: "test", Filter: EventsFilter,
			AckWait: 5 * time.Second, MaxDeliver: 3, Concurrency: 2,
		})
		ctx := context.Background()

		// Both jobs are in hand at once, in either order.
		byID := map[string]*Job{}
		for range 2 {
			j := nextJob(t, jobs)
			var ev triggers.Event
			if err := json.Unmarshal(j.Data(), &ev); err != nil {
				t.Fatalf("job data: %v", err)
			}
			byID[ev.ID] = j
		}

		// The first event: the lower-cased, token-encoded full name, no scope.
		j := byID[events[0].ID]
		if j == nil {
			t.Fatalf("no job for event %s", events[0].ID)
		}
		if got := j.Header().Get(HeaderRepository); got != "octo-org%2Fsocket%2Eio" {
			t.Errorf("%s = %q; want the lower-cased, token-encoded full name", HeaderRepository, got)
		}
		if j.Header().Get(HeaderScope) != "" {
			t.Errorf("an unscoped event carries %s", HeaderScope)
		}
		if err := j.AckNoWait(); err != nil {
			t.Fatal(err)
		}

		// The second: no repository, a scope. Dead-lettered, its copy keeps
		// the data and drops the Nats-* headers it was published with (the
		// shared layout's expected-subject condition made the copy fail).
		j = byID[events[1].ID]
		if j == nil {
			t.Fatalf("no job for event %s", events[1].ID)
		}
		if got := j.Header().Get(HeaderRepository); got != triggers.MissingToken {
			t.Errorf("%s = %q; want %q for an event without a repository", HeaderRepository, got, triggers.MissingToken)
		}
		var scope triggers.Scope
		if err := json.Unmarshal([]byte(j.Header().Get(HeaderScope)), &scope); err != nil || scope != *events[1].Scope {
			t.Errorf("%s = %q (%v); want %+v", HeaderScope, j.Header().Get(HeaderScope), err, *events[1].Scope)
		}
		if err := j.Dead(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		dead, err := b.ListDead(ctx, "test", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || !bytes.Equal(dead[0].Data, j.Data()) || dead[0].Header.Get(HeaderScope) == "" {
			t.Fatalf("dead letters = %d; want one holding the event's data and headers", len(dead))
		}
		for k, v := range dead[0].Header {
			// Its own id (one copy per stream sequence) is the only one.
			if strings.HasPrefix(strings.ToLower(k), "nats-") && (k != "Nats-Msg-Id" || v[0] == events[1].ID) {
				t.Errorf("dead letter kept %s: %v", k, v)
			}
		}

		// Listed with where it came from and why; requeued, it reaches the
		// consumer again, data and routing headers intact, and is no
		// longer dead.
		ds, err := b.ListDead(ctx, "", 0, 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("ListDead = %d, %v; want 1", len(ds), err)
		}
		d := ds[0]
		if d.Source != "test" || d.Subject != j.Subject() || d.Stream != EventsStream || d.StreamSeq != j.Sequence() ||
			d.Reason != "test" || d.Deliveries != 1 || d.At.IsZero() {
			t.Errorf("ListDead = %+v", d)
		}
		if _, err := b.Requeue(ctx, d.Seq); err != nil {
			t.Fatalf("Requeue: %v", err)
		}
		again := nextJob(t, jobs)
		if !bytes.Equal(again.Data(), j.Data()) || again.Subject() != j.Subject() || again.Header().Get(HeaderScope) != j.Header().Get(HeaderScope) ||
			again.Header().Get(HeaderDeadReason) != "" || again.Sequence() == j.Sequence() {
			t.Errorf("requeued job: subject %s, seq %d, headers %v", again.Subject(), again.Sequence(), again.Header())
		}
		if err := again.AckNoWait(); err != nil {
			t.Fatal(err)
		}
		if ds, err := b.ListDead(ctx, "", 0, 10); err != nil || len(ds) != 0 {
			t.Errorf("after requeue ListDead = %d, %v; want none", len(ds), err)
		}
		if _, err := b.Requeue(ctx, d.Seq); !errors.Is(err, ErrNotDead) {
			t.Errorf("Requeue of a requeued letter: %v, want ErrNotDead", err)
		}
	})
}

// A worker whose client stopped pulling while messages wait (as nats.go
// sometimes does under load) notices, reports it and pulls afresh.
func TestWorkPullsAfreshWhenItStoppedPulling(t *testing.T) {
	ts := startServer(t, 0)
	stalls := make(chan string, 4)
	b := ts.connect(Options{OnWorkStall: func(durable string, pending uint64) { stalls <- durable }})
	started := make(chan jetstream.ConsumeContext, 4)
	b.consumed = func(cc jetstream.ConsumeContext) { started <- cc }
	jobs := workJobs(t, b, WorkSpec{Stream: EventsStream, Durable: "stall", Filter: EventsFilter, AckWait: time.Minute, Concurrency: 2})
	// The first consumption stops pulling. Publish once the server has let
	// go of its pull request, as in the stall seen under load (a request
	// still held would take the messages to the stopped consumption).
	(<-started).Stop()
	cons, err := b.js.Consumer(context.Background(), EventsStream, "stall")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the server to hold no pull request", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumWaiting == 0
	})
	_, events := testDelivery("d-stall", 3, []byte(`{}`))
	if _, err := b.PublishEvents(context.Background(), events, ""); err != nil {
		t.Fatal(err)
	}
	for range events {
		if err := nextJob(t, jobs).Ack(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case d := <-stalls:
		if d != "stall" {
			t.Fatalf("stall reported for %q", d)
		}
	default:
		t.Fatal("the stall was not reported")
	}
}

func TestConsumerPending(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	ctx := context.Background()
	if _, found, err := b.ConsumerPending(ctx, EventsStream, "absent"); err != nil || found {
		t.Fatalf("ConsumerPending(absent) = found %v, %v; want not found", found, err)
	}
	if _, err := b.js.CreateOrUpdateConsumer(ctx, EventsStream, jetstream.ConsumerConfig{Durable: "backlog", FilterSubject: EventsFilter}); err != nil {
		t.Fatal(err)
	}
	_, events := testDelivery("d-backlog", 3, []byte(`{}`))
	if _, err := b.PublishEvents(ctx, events, ""); err != nil {
		t.Fatal(err)
	}
	// The server counts a consumer's pending messages as it takes in the
	// stream's: read until it has all three, within a deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, found, err := b.ConsumerPending(ctx, EventsStream, "backlog")
		if err == nil && found && n == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ConsumerPending(backlog) = %d, %v, %v; want 3 pending", n, found, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Work holds at most Concurrency jobs at once, and when its context ends it
// returns only once the jobs in hand are finished.
func TestWorkBoundsJobsAndWaitsForThoseInHand(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	_, events := testDelivery("d-bound", 6, []byte(`{}`))
	if _, err := b.PublishEvents(context.Background(), events, ""); err != nil {
		t.Fatal(err)
	}
	const concurrency = 3
	var inHand, most, finished atomic.Int64
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Work(ctx, WorkSpec{Stream: EventsStream, Durable: "bound", Filter: EventsFilter, AckWait: time.Minute, Concurrency: concurrency},
			func(ctx context.Context, j *Job) {
				n := inHand.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
				_ = j.Ack(ctx)
				inHand.Add(-1)
				finished.Add(1)
			})
	}()
	testenv.Eventually(t, 10*time.Second, "the workers to hold their jobs", func() bool { return inHand.Load() == concurrency })
	// Stop while every worker holds a job: Work must wait for them. (A
	// Work that does not would return within the window; the window can
	// only let a wrong Work pass, never fail a right one.)
	cancel()
	select {
	case err := <-done:
		t.Fatalf("Work returned (%v) with %d jobs in hand", err, inHand.Load())
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := inHand.Load(); n != 0 {
		t.Fatalf("Work returned with %d jobs still running", n)
	}
	if m := most.Load(); m != concurrency {
		t.Fatalf("at most %d jobs in hand at once; want %d", m, concurrency)
	}
	if finished.Load() < concurrency {
		t.Fatalf("%d jobs finished; want the %d in hand", finished.Load(), concurrency)
	}
}

func TestSetWorkFiltersChangesALiveConsumerAndKeepsItsPosition(t *testing.T) {
	b := startServer(t, 0).connect(Options{})
	ctx := context.Background()
	const (
		star = "triggers.codehost.new_star.o.r"
		push = "triggers.codehost.new_push.o.r"
	)
	spec := WorkSpec{Stream: EventsStream, Durable: "narrow", Filters: []string{"triggers.codehost.new_star.>"}, AckWait: time.Minute, Concurrency: 2}
	if changed, err := b.SetWorkFilters(ctx, EventsStream, spec.Durable, spec.Filters); err != nil || changed {
		t.Fatalf("SetWorkFilters on a consumer Work has not created = %v, %v; want false, nil", changed, err)
	}
	if _, err := b.SetWorkFilters(ctx, EventsStream, spec.Durable, nil); err == nil {
		t.Error("SetWorkFilters without filters succeeded; it would open the consumer to every message")
	}
	created := make(chan struct{})
	spec.Created = func() { close(created) }
	jobs := workJobs(t, b, spec)
	pub := func(subject, id string) {
		t.Helper()
		if err := b.Publish(ctx, subject, id, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	take := func(want string) {
		t.Helper()
		j := nextJob(t, jobs)
		if j.Subject() != want {
			t.Fatalf("job on %s; want %s", j.Subject(), want)
		}
		if err := j.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The push comes first; the star after it is delivered, so the
	// consumer has passed over the push.
	pub(push, "p-1")
	pub(star, "s-1")
	take(star)
	select {
	case <-created:
	default:
		t.Error("Work delivered a job without calling Created first")
	}

	changed, err := b.SetWorkFilters(ctx, EventsStream, spec.Durable, []string{"triggers.codehost.new_push.>", "triggers.codehost.new_star.>"})
	if err != nil || !changed {
		t.Fatalf("widening = %v, %v; want true, nil", changed, err)
	}
	if changed, err := b.SetWorkFilters(ctx, EventsStream, spec.Durable, []string{"triggers.codehost.new_star.>", "triggers.codehost.new_push.>"}); err != nil || changed {
		t.Errorf("the same filters in another order = %v, %v; want no change", changed, err)
	}
	// The running Work takes pushes from now on, and only the new one.
	pub(push, "p-2")
	j := nextJob(t, jobs)
	if j.Subject() != push || j.Sequence() != 3 {
		t.Fatalf("job on %s at sequence %d; want the second push, at 3", j.Subject(), j.Sequence())
	}
	if err := j.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	// Narrowed again, pushes are passed over.
	if changed, err := b.SetWorkFilters(ctx, EventsStream, spec.Durable, []string{"triggers.codehost.new_star.>"}); err != nil || !changed {
		t.Fatalf("narrowing = %v, %v; want true, nil", changed, err)
	}
	pub(push, "p-3")
	pub(star, "s-2")
	take(star)
	info, err := b.js.Consumer(ctx, EventsStream, spec.Durable)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo(); got.Delivered.Consumer != 3 || got.NumPending != 0 {
		t.Errorf("consumer delivered %d, %d pending; want 3 delivered (two stars, one push) and none pending", got.Delivered.Consumer, got.NumPending)
	}
}
