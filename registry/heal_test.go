package registry_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// switchable answers deliveries with its current status; 0 is no answer
// at all (the connection refused), holdStatus an answer only once held is
// closed.
type switchable struct {
	status atomic.Int32
	held   chan struct{}
}

const holdStatus = -1

func (s *switchable) RoundTrip(req *http.Request) (*http.Response, error) {
	code := s.status.Load()
	if code == holdStatus {
		<-s.held
		code = http.StatusAccepted
	}
	if code == 0 {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	}
	return answer(code).RoundTrip(req)
}

// deliverAs sends one issues event to hello-world's hooks while the
// receiver answers status, and returns its X-GitHub-Delivery.
func (h *harness) deliverAs(rc *switchable, status int, action string) string {
	h.t.Helper()
	h.clock.Advance(time.Minute)
	rc.status.Store(int32(status))
	ids, err := h.gh.Deliver(h.ctx, fakecodehost.SeedOwner, fakecodehost.SeedRepo, "issues", fmt.Appendf(nil, `{"action":%q}`, action))
	if err != nil || len(ids) != 1 {
		h.t.Fatalf("Deliver: %v %v", ids, err)
	}
	h.waitDeliveries()
	return ids[0]
}

// reconcile runs a pass a minute later.
func (h *harness) reconcile() (registry.ReconcileReport, error) {
	h.clock.Advance(time.Minute)
	return h.reg.Reconcile(h.ctx)
}

func (h *harness) waitDeliveries() {
	h.t.Helper()
	if err := h.gh.WaitDeliveries(h.ctx); err != nil {
		h.t.Fatal(err)
	}
}

// attempts returns the statuses of the fake's attempts to deliver guid,
// oldest first, redeliveries marked with an "r".
func (h *harness) attempts(guid string) []string {
	var out []string
	for _, d := range h.gh.Deliveries() {
		if d.ID == guid {
			s := fmt.Sprint(d.StatusCode)
			if d.Redelivery {
				s += "r"
			}
			out = append(out, s)
		}
	}
	return out
}

// newHealHarness returns a harness with a new_issue trigger on
// hello-world whose hook's ping was taken, healing healBatch redeliveries
// a pass (the default if 0), and the receiver GitHub delivers to.
func newHealHarness(t *testing.T, healBatch int) (*harness, *switchable) {
	rc := &switchable{}
	rc.status.Store(http.StatusNoContent)
	h := newHarnessWith(t, harnessOptions{receiver: rc, healBatch: healBatch, clock: testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))})
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.waitDeliveries() // the ping
	return h, rc
}

func TestReconcileRedeliversFailedDeliveries(t *testing.T) {
	h, rc := newHealHarness(t, 0)

	down := h.deliverAs(rc, 0, "opened")                             // triggerd unreachable
	busy := h.deliverAs(rc, http.StatusServiceUnavailable, "edited") // not durable
	refused := h.deliverAs(rc, http.StatusUnauthorized, "closed")    // wrong signature: would fail again
	fine := h.deliverAs(rc, http.StatusAccepted, "reopened")         // taken
	again := h.deliverAs(rc, http.StatusGatewayTimeout, "labeled")   // a proxy gave up
	rc.status.Store(http.StatusAccepted)

	rep, err := h.reconcile()
	if err != nil || rep != (registry.ReconcileReport{Checked: 1, Redelivered: 3, Abandoned: 1}) {
		t.Fatalf("Reconcile = %+v, %v; want 3 redelivered, 1 abandoned", rep, err)
	}
	h.waitDeliveries()
	for guid, want := range map[string][]string{
		down: {"0", "202r"}, busy: {"503", "202r"}, again: {"504", "202r"}, refused: {"401"}, fine: {"202"},
	} {
		if got := h.attempts(guid); !slices.Equal(got, want) {
			t.Errorf("attempts of %s: %v, want %v", guid, got, want)
		}
	}
	rec := h.record(h.octo, store.HookRepository, helloWorld)
	if rec.HealedThrough.IsZero() {
		t.Error("HealedThrough not recorded")
	}

	// Everything is settled: the next pass asks for nothing and does not
	// report the refused delivery again.
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1}) {
		t.Errorf("second Reconcile = %+v, %v", rep, err)
	}

	// A delivery that keeps failing is redelivered DefaultMaxRedeliveries
	// times, then given up.
	stuck := h.deliverAs(rc, http.StatusBadGateway, "assigned")
	for i := range registry.DefaultMaxRedeliveries {
		if rep, err := h.reconcile(); err != nil || rep.Redelivered != 1 {
			t.Fatalf("Reconcile %d while failing = %+v, %v", i+1, rep, err)
		}
		h.waitDeliveries()
	}
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1, Abandoned: 1}) {
		t.Errorf("Reconcile after %d redeliveries = %+v, %v; want it abandoned", registry.DefaultMaxRedeliveries, rep, err)
	}
	if got := h.attempts(stuck); !slices.Equal(got, []string{"502", "502r", "502r", "502r"}) {
		t.Errorf("attempts of the stuck delivery: %v", got)
	}
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1}) {
		t.Errorf("Reconcile after giving up = %+v, %v", rep, err)
	}
}

// TestRedeliveryUnderWayIsNotAskedAgain: GitHub lists a redelivery's
// attempt only once it ends, so a pass soon after the one that asked for
// it (a short --reconcile-interval, a slow receiver) must not ask again.
func TestRedeliveryUnderWayIsNotAskedAgain(t *testing.T) {
	h, rc := newHealHarness(t, 0)
	busy := h.deliverAs(rc, http.StatusServiceUnavailable, "opened")
	rc.held = make(chan struct{})
	release := sync.OnceFunc(func() { close(rc.held) })
	t.Cleanup(release) // before the harness waits for the fake's deliveries
	rc.status.Store(holdStatus)

	if rep, err := h.reconcile(); err != nil || rep.Redelivered != 1 {
		t.Fatalf("first Reconcile = %+v, %v; want 1 redelivered", rep, err)
	}
	// The redelivery is in flight, not listed yet.
	h.clock.Advance(5 * time.Second)
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep.Redelivered != 0 {
		t.Fatalf("Reconcile while the redelivery is under way = %+v, %v; want nothing asked again", rep, err)
	}
	release()
	h.waitDeliveries()
	if got := h.attempts(busy); !slices.Equal(got, []string{"503", "202r"}) {
		t.Errorf("attempts of %s: %v, want one redelivery", busy, got)
	}
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1}) {
		t.Errorf("Reconcile once it was taken = %+v, %v", rep, err)
	}
}

func TestHealingIsBatchedAcrossPasses(t *testing.T) {
	h, rc := newHealHarness(t, 2)
	var guids []string
	for i := range 3 {
		guids = append(guids, h.deliverAs(rc, http.StatusServiceUnavailable, fmt.Sprint("a", i)))
	}
	rc.status.Store(http.StatusAccepted)

	if rep, err := h.reconcile(); err != nil || rep.Redelivered != 2 {
		t.Fatalf("first Reconcile = %+v, %v; want 2 redelivered", rep, err)
	}
	h.waitDeliveries()
	// Oldest first: the third waits for the next pass.
	if a, c := h.attempts(guids[0]), h.attempts(guids[2]); len(a) != 2 || len(c) != 1 {
		t.Errorf("after one pass: %v and %v", a, c)
	}
	if rep, err := h.reconcile(); err != nil || rep.Redelivered != 1 {
		t.Fatalf("second Reconcile = %+v, %v; want the held one", rep, err)
	}
	h.waitDeliveries()
	for _, g := range guids {
		if got := h.attempts(g); !slices.Equal(got, []string{"503", "202r"}) {
			t.Errorf("attempts of %s: %v", g, got)
		}
	}
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1}) {
		t.Errorf("third Reconcile = %+v, %v", rep, err)
	}
}

// TestHeldEventGrownTooOldIsAbandoned: an event held for a later pass
// (here by a batch of one) that grows too old to redeliver before that
// pass is given up on and counted, not dropped unseen.
func TestHeldEventGrownTooOldIsAbandoned(t *testing.T) {
	h, rc := newHealHarness(t, 1)
	first := h.deliverAs(rc, http.StatusServiceUnavailable, "opened")
	held := h.deliverAs(rc, http.StatusServiceUnavailable, "edited")
	rc.status.Store(http.StatusAccepted)
	if rep, err := h.reconcile(); err != nil || rep.Redelivered != 1 {
		t.Fatalf("first Reconcile = %+v, %v; want 1 redelivered", rep, err)
	}
	h.waitDeliveries()

	// The next pass comes when the held event is within GitHub's window
	// but past the margin heal keeps from it.
	h.clock.Advance(71*time.Hour + 30*time.Minute)
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1, Abandoned: 1}) {
		t.Fatalf("Reconcile after 71.5 h = %+v, %v; want the held event abandoned", rep, err)
	}
	if got := h.attempts(held); !slices.Equal(got, []string{"503"}) {
		t.Errorf("attempts of the held event: %v, want none more", got)
	}
	if got := h.attempts(first); !slices.Equal(got, []string{"503", "202r"}) {
		t.Errorf("attempts of the first event: %v", got)
	}
	if rep, err := h.reconcile(); err != nil || rep != (registry.ReconcileReport{Checked: 1}) {
		t.Errorf("Reconcile after giving up = %+v, %v; want nothing more", rep, err)
	}
}
