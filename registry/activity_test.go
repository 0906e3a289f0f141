package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// stallingStore fails every AddHookActivity while err is set, and passes
// the rest to the store underneath.
type stallingStore struct {
	registry.ActivityStore
	err error
}

func (s *stallingStore) AddHookActivity(ctx context.Context, id string, a store.HookActivity) error {
	if s.err != nil {
		return s.err
	}
	return s.ActivityStore.AddHookActivity(ctx, id, a)
}

func TestActivityRecorder(t *testing.T) {
	h := newHarness(t)
	vercel := h.account("vercel-team", "deploy")
	tr := h.mustCreate(triggers.DeploymentStarted, vercel, "")
	ep, _, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	st := &stallingStore{ActivityStore: h.st}
	reg := prometheus.NewRegistry()
	rec, err := registry.NewActivityRecorder(st, registry.ActivityOptions{MaxHooks: 2, Logger: zerolog.Nop(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	activity := func() store.HookActivity {
		t.Helper()
		a, err := h.reg.HookActivity(h.ctx, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	// A delivery taken, then three refused: one write, the latest
	// refusal kept, its message bounded.
	rec.Accepted(triggers.Deploy, ep.ID, t0)
	long := strings.Repeat("é", 800) // 1,600 bytes
	rec.Refused(triggers.Deploy, ep.ID, t0.Add(2*time.Second), 401, "invalid_signature", long)
	rec.Refused(triggers.Deploy, ep.ID, t0.Add(3*time.Second), 401, "missing_signature", "header x-vercel-signature is missing")
	rec.Refused(triggers.Deploy, ep.ID, t0.Add(time.Second), 400, "malformed_payload", "older")
	if got := activity(); got != (store.HookActivity{}) {
		t.Fatalf("activity stored before any flush: %+v", got)
	}
	if err := rec.Flush(h.ctx); err != nil {
		t.Fatal(err)
	}
	got := activity()
	if !got.LastAcceptedAt.Equal(t0) || got.Refused != 3 || got.LastRefusal == nil ||
		got.LastRefusal.Code != "missing_signature" || got.LastRefusal.Status != 401 || !got.LastRefusal.At.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after a flush: %+v (last refusal %+v); want accepted at t0, 3 refused, the latest refusal", got, got.LastRefusal)
	}

	// The store stalls: nothing is lost, the next flush adds it.
	st.err = errors.New("redis: i/o timeout")
	rec.Refused(triggers.Deploy, ep.ID, t0.Add(4*time.Second), 401, "invalid_signature", long)
	if err := rec.Flush(h.ctx); err == nil {
		t.Fatal("a flush into a stalled store reported no error")
	}
	rec.Accepted(triggers.Deploy, ep.ID, t0.Add(5*time.Second))
	st.err = nil
	if err := rec.Flush(h.ctx); err != nil {
		t.Fatal(err)
	}
	got = activity()
	if !got.LastAcceptedAt.Equal(t0.Add(5*time.Second)) || got.Refused != 4 || got.LastRefusal.Code != "invalid_signature" {
		t.Fatalf("after the stall: %+v (last refusal %+v); want the held refusal and the later acceptance", got, got.LastRefusal)
	}
	if n := len(got.LastRefusal.Message); n > 1000+len("…") || !strings.HasSuffix(got.LastRefusal.Message, "…") || !strings.HasPrefix(got.LastRefusal.Message, "é") {
		t.Errorf("a 1,600-byte message stored as %d bytes; want it cut at 1,000 on a character boundary, marked", n)
	}

	// Made-up hook ids cost memory only up to MaxHooks, and are forgotten
	// when the flush finds them absent.
	for _, id := range []string{"h_made_up_1", "h_made_up_2", "h_made_up_3"} {
		rec.Refused(triggers.CodeHost, id, t0, 400, "missing_header", "x")
	}
	if n := dropped(t, reg); n != 1 {
		t.Errorf("dropped = %v, want the third made-up hook's", n)
	}
	if err := rec.Flush(h.ctx); err != nil {
		t.Errorf("flushing activity of absent hooks: %v, want them dropped quietly", err)
	}
	rec.Accepted(triggers.Deploy, ep.ID, t0.Add(6*time.Second))
	if err := rec.Flush(h.ctx); err != nil {
		t.Fatal(err)
	}
	if got := activity(); !got.LastAcceptedAt.Equal(t0.Add(6 * time.Second)) {
		t.Errorf("after absent hooks were flushed the endpoint's activity is %+v; want it recorded again", got)
	}

	// The activity goes with its hook.
	h.mustDelete(tr)
	if got := activity(); got != (store.HookActivity{}) {
		t.Errorf("a deleted endpoint still has activity %+v", got)
	}
}

// dropped reads triggerd_hook_activity_dropped_total from reg.
func dropped(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "triggerd_hook_activity_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
