package dispatch_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// deliveredOnce fails the test unless consumer of stream has delivered
// exactly one message, once.
func (h *harness) deliveredOnce(stream, consumer, when string) {
	h.t.Helper()
	info := h.consumerInfo(stream, consumer)
	if info == nil {
		h.t.Fatalf("%s: no %s consumer", when, consumer)
	}
	if info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		h.t.Fatalf("%s: the %s consumer delivered its message again while it was being worked on (redelivered %d, deliveries %d): no heartbeat kept it",
			when, consumer, info.NumRedelivered, info.Delivered.Consumer)
	}
}

// holdOut polls until consumer of stream has had its one message
// ack-pending for more than three AckWaits after since, failing as soon as
// the message is delivered a second time.
func (h *harness) holdOut(stream, consumer string, ackWait time.Duration, since time.Time) {
	h.t.Helper()
	testenv.Eventually(h.t, 10*ackWait+15*time.Second, consumer+" message ack-pending for over 3×AckWait", func() bool {
		h.deliveredOnce(stream, consumer, "while the work was blocked")
		info := h.consumerInfo(stream, consumer)
		return info.NumAckPending == 1 && time.Since(since) > 3*ackWait+ackWait/2
	})
}

// unblocker returns block's release: it waits until a call is blocked on
// block (a send succeeds only then: the call was neither cancelled nor
// finished), then closes block for any other call. The test's cleanup
// closes it too, so a failed test does not wait out the blocked call.
func unblocker(t *testing.T, block chan struct{}) (release func()) {
	var once sync.Once
	closeIt := func() { once.Do(func() { close(block) }) }
	t.Cleanup(closeIt) // registered after h.start: runs before the dispatcher stops
	return func() {
		t.Helper()
		testenv.Eventually(t, 5*time.Second, "the blocked call to take the unblock", func() bool {
			select {
			case block <- struct{}{}:
				return true
			default:
				return false
			}
		})
		closeIt()
	}
}

// A tool step slower than AckWait keeps its event (reliability catalogue
// #17): the dispatcher's InProgress heartbeats stop JetStream from handing
// the message to another worker, so it is delivered once, the step runs
// once and the run succeeds.
func TestSlowStepKeepsItsEventWithHeartbeats(t *testing.T) {
	const ackWait = time.Second
	// The step may take far longer than AckWait (StepTimeout bounds it).
	h := newHarness(t, dispatch.Options{AckWait: ackWait, StepTimeout: 30 * time.Second})
	block := make(chan struct{})
	h.steps.block = block
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	release := unblocker(t, block)
	ev := h.deliver("d-slow-step", "octo-org/api", 11)
	runID := dispatch.RunID(ev.ID, "trig-a", "")

	// The step is under way: its run says so just before calling it.
	testenv.Eventually(t, 15*time.Second, "the step to be running", func() bool {
		r, err := h.store.GetRun(context.Background(), "t1", runID)
		return err == nil && len(r.Steps) == 1 && r.Steps[0].Status == store.StepRunning
	})
	h.holdOut(bus.EventsStream, dispatch.EventsConsumer, ackWait, time.Now())
	release()

	r := h.waitRun(runID)
	h.waitPending()
	if r.Status != store.RunSucceeded || r.Attempts != 1 || r.Steps[0].Status != store.StepSucceeded {
		t.Fatalf("run = %+v; want succeeded on its first attempt", r)
	}
	if n := h.steps.count(); n != 1 {
		t.Errorf("the step ran %d times, want 1", n)
	}
	if got := h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")); got != 1 {
		t.Errorf("agent-1 got %d runs, want 1", got)
	}
	h.deliveredOnce(bus.EventsStream, dispatch.EventsConsumer, "after the run")
}

// The same for a replay (continueRun): a slow step keeps the replay
// request.
func TestSlowStepKeepsItsReplayWithHeartbeats(t *testing.T) {
	const ackWait = time.Second
	h := newHarness(t, dispatch.Options{AckWait: ackWait, StepTimeout: 30 * time.Second})
	block := make(chan struct{})
	h.steps.block = block
	h.agent("agent-1") // no steps: the event's own run never reaches block
	h.agent("agent-2", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	release := unblocker(t, block)
	ev := h.deliver("d-slow-replay", "octo-org/api", 14)
	h.waitRun(dispatch.RunID(ev.ID, "trig-a", ""))
	h.waitPending()
	// A trigger created after the event; a replay to it runs agent-2's
	// slow step.
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	plans, err := h.d.Replay(context.Background(), "t1", ev.ID, "trig-b", true)
	if err != nil || len(plans) != 1 || plans[0].Result != "queued" {
		t.Fatalf("replay: %+v, %v", plans, err)
	}
	runID := plans[0].RunID
	testenv.Eventually(t, 15*time.Second, "the replay's step to be running", func() bool {
		r, err := h.store.GetRun(context.Background(), "t1", runID)
		return err == nil && len(r.Steps) == 1 && r.Steps[0].Status == store.StepRunning
	})
	h.holdOut(bus.PushStream, dispatch.ReplayConsumer, ackWait, time.Now())
	release()

	r := h.waitRun(runID)
	h.waitSettled(bus.PushStream, dispatch.ReplayConsumer)
	if r.Status != store.RunSucceeded || r.Attempts != 1 {
		t.Fatalf("replay run = %+v; want succeeded on its first attempt", r)
	}
	if n := h.steps.count(); n != 1 {
		t.Errorf("the step ran %d times, want 1", n)
	}
	if got := h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-2")); got != 1 {
		t.Errorf("agent-2 got %d runs, want 1", got)
	}
	h.deliveredOnce(bus.PushStream, dispatch.ReplayConsumer, "after the replay")
}

// blockingPusher is an HTTP agent's pusher whose pushes wait for block.
type blockingPusher struct {
	block chan struct{}
	calls atomic.Int32
}

func (p *blockingPusher) Push(ctx context.Context, url, secret string, run agent.Run) (dispatch.PushReply, error) {
	p.calls.Add(1)
	select {
	case <-p.block:
		return dispatch.PushReply{}, nil
	case <-ctx.Done():
		return dispatch.PushReply{}, ctx.Err()
	}
}

func (p *blockingPusher) Retry(err error, attempt int) (time.Duration, bool) {
	return 50 * time.Millisecond, true
}

// And for a push to an HTTP agent slower than AckWait: it is POSTed once.
func TestSlowPushKeepsItsRunWithHeartbeats(t *testing.T) {
	const ackWait = time.Second
	p := &blockingPusher{block: make(chan struct{})}
	h := newHarness(t, dispatch.Options{AckWait: ackWait, Pusher: p, Secrets: sealer{}})
	if _, err := h.store.CreateAgent(context.Background(), store.Agent{ID: "hooked", TenantID: "t1", Name: "hooked", Delivery: store.DeliverHTTP,
		URL: "http://agent.invalid/run", SealedSecret: []byte("s3cret"), CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.trigger("trig-a", "hooked", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	release := unblocker(t, p.block)
	ev := h.deliver("d-slow-push", "octo-org/api", 15)
	runID := dispatch.RunID(ev.ID, "trig-a", "")
	testenv.Eventually(t, 15*time.Second, "the push to be under way", func() bool { return p.calls.Load() == 1 })
	h.holdOut(bus.PushStream, dispatch.PushConsumer, ackWait, time.Now())
	release()

	testenv.Eventually(t, 15*time.Second, "the run delivered", func() bool {
		r, err := h.store.GetRun(context.Background(), "t1", runID)
		return err == nil && r.DeliveryStatus == "delivered"
	})
	h.waitSettled(bus.PushStream, dispatch.PushConsumer)
	if n := p.calls.Load(); n != 1 {
		t.Errorf("the run was pushed %d times, want 1", n)
	}
	h.deliveredOnce(bus.PushStream, dispatch.PushConsumer, "after the push")
}

// claimedRun stores trig-a's run runID of new_issue event eventID for
// agent-1 as another worker leaves it after claiming it: claimed by by
// until until, not started.
func (h *harness) claimedRun(runID, eventID, by string, until time.Time) {
	h.t.Helper()
	created := until.Add(-time.Minute)
	if now := time.Now(); now.Before(created) {
		created = now
	}
	if _, err := h.store.CreateRun(context.Background(), store.Run{
		ID: runID, TenantID: "t1", EventID: eventID, TriggerID: "trig-a", AgentID: "agent-1", Kind: string(triggers.NewIssue),
		Status: store.RunClaimed, Attempts: 1, ClaimedBy: by, ClaimedUntil: until, Delivery: store.DeliverNATS,
		CreatedAt: created, UpdatedAt: created,
	}); err != nil {
		h.t.Fatal(err)
	}
}

// A worker that claimed a run and died before starting the agent
// (catalogue #16) leaves a claim that expires: the event's delivery takes
// the run over (a second attempt) and starts the agent once.
func TestExpiredClaimIsTakenOver(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	payload, events := h.deliverEvents("d-dead-claim", "octo-org/api", 12)
	ev := newIssueEvent(t, events)
	runID := dispatch.RunID(ev.ID, "trig-a", "")
	h.claimedRun(runID, ev.ID, "dead-worker", time.Now().Add(-time.Minute))
	h.start()
	h.commitEvents("d-dead-claim", payload, events)

	r := h.waitRun(runID)
	h.waitPending()
	if r.Status != store.RunSucceeded || r.Attempts != 2 || r.ClaimedBy == "dead-worker" {
		t.Fatalf("run = %+v; want succeeded on attempt 2, claimed by a live worker", r)
	}
	if got := h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")); got != 1 {
		t.Errorf("agent-1 got %d runs, want 1", got)
	}
	if n := h.steps.count(); n != 1 {
		t.Errorf("the step ran %d times, want 1", n)
	}
}

// While another worker's claim on a run holds (catalogue #18: a late or
// parallel delivery of the same event), the event is deferred, not run;
// once the claim expires it is taken over and the agent starts once.
func TestHeldClaimDefersTheEvent(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	payload, events := h.deliverEvents("d-held-claim", "octo-org/api", 13)
	ev := newIssueEvent(t, events)
	runID := dispatch.RunID(ev.ID, "trig-a", "")
	claimedUntil := time.Now().Add(3 * time.Second)
	h.claimedRun(runID, ev.ID, "other-worker", claimedUntil)
	h.start()
	h.commitEvents("d-held-claim", payload, events)
	runs := func() uint64 { return h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")) }

	// Until the claim expires nothing starts, although the dispatcher
	// has the event in hand.
	seen := false
	testenv.Eventually(t, 20*time.Second, "the run to finish", func() bool {
		r, err := h.store.GetRun(context.Background(), "t1", runID)
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().Before(claimedUntil) {
			if r.ClaimedBy != "other-worker" || r.Status != store.RunClaimed || runs() != 0 || h.steps.count() != 0 {
				t.Fatalf("run = %+v, %d agent runs, %d steps before %s: started under another worker's claim", r, runs(), h.steps.count(), claimedUntil)
			}
			if info := h.consumerInfo(bus.EventsStream, dispatch.EventsConsumer); info != nil && info.Delivered.Consumer >= 1 {
				seen = true
			}
		}
		return r.Status == store.RunSucceeded || r.Status == store.RunFailed
	})
	if !seen {
		t.Fatal("the event was not delivered before the claim expired: the test proved nothing")
	}
	h.waitPending()
	r := h.waitRun(runID)
	if r.Status != store.RunSucceeded || r.Attempts != 2 || r.ClaimedBy == "other-worker" {
		t.Fatalf("run = %+v; want succeeded on attempt 2, taken over", r)
	}
	if r.StartedAt.Before(claimedUntil) {
		t.Errorf("run started at %s, before the claim expired at %s", r.StartedAt, claimedUntil)
	}
	if got := runs(); got != 1 {
		t.Errorf("agent-1 got %d runs, want 1", got)
	}
	if n := h.steps.count(); n != 1 {
		t.Errorf("the step ran %d times, want 1", n)
	}
	if info := h.consumerInfo(bus.EventsStream, dispatch.EventsConsumer); info == nil || info.Delivered.Consumer < 2 {
		t.Errorf("events consumer = %+v; want the event delivered twice (deferred, then run)", info)
	}
}
