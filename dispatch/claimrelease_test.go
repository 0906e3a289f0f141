package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// leaderlessRuns is the real bus, except that the first publish of a run
// to an agent's stream fails, as it does while that stream elects a
// leader after a NATS node is killed.
type leaderlessRuns struct {
	*bus.Bus
	failed atomic.Int32
}

func (q *leaderlessRuns) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	if strings.HasPrefix(subject, "agents.") && q.failed.Add(1) == 1 {
		return errors.New("nats: no responders available for request")
	}
	return q.Bus.Publish(ctx, subject, msgID, data)
}

// A run whose agent could not be started gives its claim up, so the
// event's next delivery starts it an AckWait later, not after the whole
// lease (StepTimeout+AckWait: a minute here, longer than waitRun waits).
// Seen in the leader-kill test: 49 of 960 runs stayed claimed for minutes.
func TestRunNotPublishedIsRetriedWithoutWaitingOutItsLease(t *testing.T) {
	b, emb := bustest.Start(t)
	q := &leaderlessRuns{Bus: b}
	h := newHarnessOn(t, dispatch.Options{Queue: q, StepTimeout: time.Minute}, b, emb)
	h.agent("a1")
	h.trigger("tr1", "a1", triggers.NewIssue, match.Params{}, "")
	h.start()
	ev := h.deliver("d-leaderless", "octo-org/api", 7)

	r := h.waitRun(dispatch.RunID(ev.ID, "tr1", ""))
	if r.Status != store.RunSucceeded {
		t.Fatalf("run = %s (%+v), want succeeded", r.Status, r.Error)
	}
	if q.failed.Load() < 2 {
		t.Fatalf("%d publishes to the agent, want the failed one and a retry", q.failed.Load())
	}
	if r.Attempts != 2 {
		t.Errorf("run attempts = %d, want 2 (the claim taken over once)", r.Attempts)
	}
	if n := h.subjectCount(bus.AgentsStream, "agents.a1.runs"); n != 1 {
		t.Errorf("the agent's stream holds %d runs, want 1", n)
	}
}
