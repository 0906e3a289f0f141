//go:build unix

package dispatch_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/triggers"
)

// A Redis that stalls (SIGSTOP: connections open, nothing answered) while
// an event waits to be dispatched. Before, every store error handed the
// message back with a delay, each a delivery JetStream counts, and after
// MaxDeliver of them the event was dead-lettered: its agent never started.
// Now the worker holds the message, pinging Redis, and dispatches it once
// Redis answers, in the delivery it has.
func TestStoreOutageHoldsTheEventInsteadOfSpendingDeliveries(t *testing.T) {
	rd := testenv.StartRedis(t)
	st, err := redisstore.Open(t.Context(), rd.URL, redisstore.Options{AllowVolatile: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	b, emb := bustest.Start(t)
	// Two deliveries: without holding, the event would be dead-lettered
	// within seconds of the stall.
	h := newHarnessWith(t, dispatch.Options{MaxDeliver: 2, Registerer: reg, Logger: zerolog.New(zerolog.NewTestWriter(t))}, b, emb, st)
	h.agent("a1", store.PipelineStep{Name: "comment", Step: "codehost.create_issue_comment", Account: "acc1"})
	h.trigger("tr1", "a1", triggers.NewIssue, match.Params{}, "")
	h.start()
	// Stall only once the dispatcher has loaded its triggers and consumes.
	testenv.Eventually(t, 10*time.Second, "the events consumer", func() bool {
		return h.consumerInfo(bus.EventsStream, dispatch.EventsConsumer) != nil
	})

	rd.Pause(t)
	ev := h.deliver("d-outage", "octo-org/api", 7)
	metric := func(name string) float64 { return metricValue(t, reg, name) }
	// Several failed pings: long past what two deliveries with their
	// backoff would have lasted.
	testenv.Eventually(t, 30*time.Second, "the dispatcher holding the event through failed pings", func() bool {
		return metric("triggerd_dispatch_held_messages") == 1 && metric("triggerd_dispatch_store_pings_failed_total") >= 4
	})
	rd.Resume(t)

	r := h.waitRun(dispatch.RunID(ev.ID, "tr1", ""))
	if r.Status != store.RunSucceeded {
		t.Fatalf("run = %s (%+v), want succeeded", r.Status, r.Error)
	}
	h.waitPending()
	if n := h.subjectCount(bus.DeadStream, "dead."+dispatch.EventsConsumer); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	// The outage spent no delivery.
	h.deliveredOnce(bus.EventsStream, dispatch.EventsConsumer, "after the outage")
	if got := h.steps.count(); got != 1 {
		t.Errorf("%d steps run, want 1", got)
	}
	if metric("triggerd_dispatch_held_messages") != 0 {
		t.Error("a message is still counted as held")
	}
}
