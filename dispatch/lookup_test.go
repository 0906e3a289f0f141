package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// An event of the shared endpoints that no trigger was a candidate for
// leaves no record, yet is found by its id, for the shared tenant only,
// with why nothing started; an unknown id, another tenant, or a hook's
// event are not found.
func TestLookUpUnrecorded(t *testing.T) {
	h := newHarness(t, dispatch.Options{SharedTenant: "t1"})
	ctx := context.Background()
	quiet := h.deployDelivery("uev_quiet", nil)

	u, err := h.d.LookUpUnrecorded(ctx, "t1", quiet.ID)
	if err != nil {
		t.Fatalf("LookUpUnrecorded of an event no trigger wanted: %v", err)
	}
	if u.Record.EventID != quiet.ID || u.Record.Kind != string(triggers.DeploymentStarted) || u.Record.Seq == 0 ||
		u.Record.DeliveryID != quiet.DeliveryID || u.Record.Outcomes == nil || len(u.Record.Outcomes) != 0 ||
		!strings.HasPrefix(u.Record.Subject, "triggers.deploy.deployment_started.") || u.Record.Summary != quiet.Summary() {
		t.Errorf("the record of an unrecorded event: %+v", u.Record)
	}
	if !strings.Contains(u.Reason, "no trigger of this tenant is of kind deployment_started") {
		t.Errorf("reason %q does not say that no trigger is of the event's kind", u.Reason)
	}

	if _, err := h.d.LookUpUnrecorded(ctx, "t2", quiet.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant looked up an event of the shared endpoints: %v, want not found", err)
	}
	if _, err := h.d.LookUpUnrecorded(ctx, "t1", "no-such-event"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown id: %v, want not found", err)
	}
	hooked := h.deployDelivery("uev_hooked", &triggers.Scope{Hook: "ep_1", Tenant: "t1", Agent: "agent-a"})
	if _, err := h.d.LookUpUnrecorded(ctx, "t1", hooked.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an event of a tenant's hook (recorded once dispatched): %v, want not found", err)
	}
	// The search is bounded: the quiet event is older than the newest.
	if _, found, exhausted, err := h.bus.FindEvent(ctx, quiet.ID, 1); err != nil || found || exhausted {
		t.Errorf("FindEvent within the newest event only: found %v, exhausted %v, err %v; want neither", found, exhausted, err)
	}

	// A trigger of its kind made since can have it replayed, record or
	// not (the dispatcher has not run: it made none).
	h.agent("agent-a")
	h.trigger("trig-a", "agent-a", triggers.DeploymentStarted, match.Params{}, "")
	plans, err := h.d.Replay(ctx, "t1", quiet.ID, "trig-a", true)
	if err != nil || len(plans) != 1 || plans[0].Result != "queued" {
		t.Fatalf("Replay of an event without a record: %+v, %v; want trig-a queued", plans, err)
	}
	if _, err := h.d.Replay(ctx, "t2", quiet.ID, "", false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant replayed an event of the shared endpoints: %v, want not found", err)
	}
	// The reason says it is a candidate now.
	h.start()
	u, err = h.d.LookUpUnrecorded(ctx, "t1", quiet.ID)
	if err != nil || !strings.Contains(u.Reason, "1 trigger(s) of this tenant are candidates for it now") {
		t.Errorf("after a trigger of its kind was made: %v, reason %q", err, u.Reason)
	}
}

// LookUpEvent, which GET /v1/events/{id} and the MCP resource
// triggerd://events/{id} answer with: a record as it is (no outcomes: the
// note saying nothing was a candidate), else the event found in the
// stream with why nothing started, else not found; without the stream
// lookup, an unrecorded event is not found.
func TestLookUpEvent(t *testing.T) {
	h := newHarness(t, dispatch.Options{SharedTenant: "t1"})
	ctx := context.Background()
	quiet := h.deployDelivery("uev_quiet", nil)

	v, err := dispatch.LookUpEvent(ctx, h.store, h.d, "t1", quiet.ID)
	if err != nil || v.EventID != quiet.ID || v.DispatchedAt != nil || len(v.Outcomes) != 0 ||
		!strings.HasPrefix(v.Note, "no trigger of this tenant is of kind deployment_started") || !strings.HasSuffix(v.Note, ".") {
		t.Fatalf("an unrecorded event: %+v, %v", v, err)
	}
	if _, err := dispatch.LookUpEvent(ctx, h.store, nil, "t1", quiet.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unrecorded event without the stream lookup: %v, want not found", err)
	}
	if _, err := dispatch.LookUpEvent(ctx, h.store, h.d, "t1", "no-such-event"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown event: %v, want not found", err)
	}
	rec := store.EventRecord{TenantID: "t1", EventID: "evt-none", Kind: "new_issue", Subject: "s", DeliveryID: "d",
		ReceivedAt: time.Now().UTC(), DispatchedAt: time.Now().UTC()}
	if err := h.store.PutEvent(ctx, rec); err != nil {
		t.Fatal(err)
	}
	v, err = dispatch.LookUpEvent(ctx, h.store, h.d, "t1", rec.EventID)
	if err != nil || v.DispatchedAt == nil || v.Outcomes == nil || v.Note != dispatch.NoCandidateNote {
		t.Fatalf("a record without outcomes: %+v, %v; want its dispatched_at and the note", v, err)
	}
}
