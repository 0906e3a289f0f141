package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// deployDelivery commits a deployment.created delivery, on the shared
// endpoint when scope is nil, and returns its deployment_started event.
func (h *harness) deployDelivery(id string, scope *triggers.Scope) triggers.Event {
	h.t.Helper()
	body := []byte(fmt.Sprintf(`{"id": %q, "type": "deployment.created", "createdAt": 1, "payload": {"team": {"id": "team_1"}, "user": {"id": "u1"},
		"project": {"id": "prj_1"}, "deployment": {"id": "dpl_%s", "url": "x.vercel.app", "name": "x", "meta": {}}, "target": "production"}}`, id, id))
	now := time.Now()
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.Deploy, ReceivedAt: now, Payload: body, Scope: scope})
	if err != nil {
		h.t.Fatal(err)
	}
	c := triggers.Capture{Connector: triggers.Deploy, DeliveryID: res.DeliveryID, ReceivedAt: now, Body: body, Scope: scope}
	if _, err := h.bus.Commit(context.Background(), c, res.Events); err != nil {
		h.t.Fatal(err)
	}
	for _, e := range res.Events {
		if e.Kind == triggers.DeploymentStarted {
			return e
		}
	}
	h.t.Fatalf("delivery %s gave no deployment_started event: %+v", id, res)
	return triggers.Event{}
}

// waitEvent polls until tenant's record of event id exists, then until
// the events consumer has settled.
func (h *harness) waitEvent(tenant, id string) store.EventRecord {
	h.t.Helper()
	var rec store.EventRecord
	testenv.Eventually(h.t, 15*time.Second, "the record of event "+id, func() bool {
		var err error
		rec, err = h.store.GetEvent(context.Background(), tenant, id)
		return err == nil
	})
	h.waitPending()
	return rec
}

// Events of the shared endpoints carry no scope: only the shared tenant's
// triggers are candidates for them, to start, replay or dry-run; a tenant's
// own endpoint reaches only that tenant.
func TestUnscopedEventsAreTheSharedTenants(t *testing.T) {
	h := newHarness(t, dispatch.Options{SharedTenant: "t1"})
	ctx := context.Background()
	h.agent("agent-a")
	h.trigger("trig-a", "agent-a", triggers.DeploymentStarted, match.Params{}, "")
	// Tenant t2's deployment trigger, and its agent's endpoint.
	if _, err := h.store.CreateAgent(ctx, store.Agent{ID: "agent-b", TenantID: "t2", Name: "b", Delivery: store.DeliverNATS, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.CreateTrigger(ctx, store.Trigger{ID: "trig-b", TenantID: "t2", Kind: string(triggers.DeploymentStarted), AgentID: "agent-b",
		Enabled: true, Params: json.RawMessage(`{}`), Status: store.TriggerActive, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.start()
	runs := func(agentID string) uint64 { return h.subjectCount(bus.AgentsStream, agent.RunsSubject(agentID)) }
	hasRun := func(eventID, triggerID string) bool {
		_, err := h.store.GetRun(ctx, "", dispatch.RunID(eventID, triggerID, ""))
		return err == nil
	}

	shared := h.deployDelivery("uev_shared", nil)
	rec := h.waitEvent("t1", shared.ID)
	h.waitRun(dispatch.RunID(shared.ID, "trig-a", ""))
	if hasRun(shared.ID, "trig-b") || runs("agent-b") != 0 {
		t.Errorf("an event of the shared endpoint started tenant t2's trigger")
	}
	if _, err := h.store.GetEvent(ctx, "t2", shared.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tenant t2 got a record of an event of the shared endpoint (err %v)", err)
	}
	if len(rec.Outcomes) != 1 || rec.Outcomes[0].TriggerID != "trig-a" || rec.Outcomes[0].Result != dispatch.ResultStarted {
		t.Errorf("t1's record of the shared event = %+v; want trig-a started", rec)
	}

	scoped := h.deployDelivery("uev_t2", &triggers.Scope{Hook: "ep_b", Tenant: "t2", Agent: "agent-b"})
	h.waitEvent("t2", scoped.ID)
	testenv.Eventually(t, 15*time.Second, "t2's run", func() bool { return hasRun(scoped.ID, "trig-b") })
	if hasRun(scoped.ID, "trig-a") || runs("agent-a") != 1 || runs("agent-b") != 1 {
		t.Errorf("runs of agent-a %d, agent-b %d; want 1 each: t2's endpoint reaches t2's trigger only", runs("agent-a"), runs("agent-b"))
	}
	if _, err := h.store.GetEvent(ctx, "t1", scoped.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tenant t1 got a record of t2's event (err %v)", err)
	}

	// Dry runs see what the dispatcher would give each tenant.
	dry := func(tenant, agentID string) string {
		r, err := h.d.DryRun(ctx, store.Trigger{TenantID: tenant, Kind: string(triggers.DeploymentStarted), AgentID: agentID}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return results(r)
	}
	if got, want := dry("t2", "agent-b"), "uev_t2=matched"; got != want {
		t.Errorf("t2's dry run: %q, want %q (not the shared endpoint's event)", got, want)
	}
	if got, want := dry("t1", "agent-a"), "uev_shared=matched"; got != want {
		t.Errorf("t1's dry run: %q, want %q", got, want)
	}

	// A record another tenant holds of a shared event (written before the
	// shared tenant owned them) does not let it replay the event.
	stale := rec
	stale.TenantID, stale.Outcomes = "t2", []store.Outcome{{TriggerID: "trig-b", AgentID: "agent-b", Result: dispatch.ResultStarted}}
	if err := h.store.PutEvent(ctx, stale); err != nil {
		t.Fatal(err)
	}
	for _, trigger := range []string{"trig-b", ""} {
		if plans, err := h.d.Replay(ctx, "t2", shared.ID, trigger, false); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("t2 replaying the shared event to %q: %+v, %v; want not found", trigger, plans, err)
		}
	}
	if plans, err := h.d.Replay(ctx, "t1", shared.ID, "trig-a", false); err != nil || len(plans) != 1 || plans[0].Result != "queued" {
		t.Errorf("t1 replaying the shared event: %+v, %v; want queued", plans, err)
	}
}
