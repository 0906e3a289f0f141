package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// setTrigger changes a stored trigger, before the dispatcher starts.
func (h *harness) setTrigger(id string, change func(*store.Trigger)) {
	h.t.Helper()
	ctx := context.Background()
	st, err := h.store.GetTrigger(ctx, "t1", id)
	if err != nil {
		h.t.Fatal(err)
	}
	change(&st)
	if _, err := h.store.UpdateTrigger(ctx, st); err != nil {
		h.t.Fatal(err)
	}
}

// A replay that bypasses the filter still starts nothing for a disabled
// or inactive trigger, and says why; the replay consumer checks again.
func TestReplayBypassKeepsTheTriggersState(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	ctx := context.Background()
	for _, id := range []string{"on", "off", "gone"} {
		h.agent("agent-" + id)
		// A labels parameter the event does not match: only a replay that
		// bypasses it starts anything.
		h.trigger("trig-"+id, "agent-"+id, triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}, Labels: []string{"bug"}}, "")
	}
	h.setTrigger("trig-off", func(st *store.Trigger) { st.Enabled = false })
	h.setTrigger("trig-gone", func(st *store.Trigger) {
		st.Status, st.StatusCode, st.StatusReason = store.TriggerInactive, "account_removed", "the account acc1 was removed"
	})
	h.start()
	ev := h.deliver("d-replay", "octo-org/api", 8, "question")
	rec := h.waitEvent("t1", ev.ID)
	runs := func(agentID string) uint64 { return h.subjectCount(bus.AgentsStream, agent.RunsSubject(agentID)) }

	for _, c := range []struct{ trigger, result, reason string }{
		{"trig-off", match.Disabled, "trigger is disabled"},
		{"trig-gone", "account_removed", "the account acc1 was removed"},
	} {
		for _, bypass := range []bool{true, false} {
			plans, err := h.d.Replay(ctx, "t1", ev.ID, c.trigger, bypass)
			if err != nil {
				t.Fatalf("replay to %s (bypass %v): %v", c.trigger, bypass, err)
			}
			if len(plans) != 1 || plans[0].TriggerID != c.trigger || plans[0].Result != c.result || plans[0].Reason != c.reason || plans[0].RunID != "" {
				t.Errorf("replay to %s (bypass %v) = %+v; want %s (%s), nothing queued", c.trigger, bypass, plans, c.result, c.reason)
			}
		}
	}
	// Bypassing the parameters still works for an enabled, active trigger.
	plans, err := h.d.Replay(ctx, "t1", ev.ID, "trig-on", true)
	if err != nil || len(plans) != 1 || plans[0].Result != "queued" {
		t.Fatalf("replay to trig-on = %+v, %v; want queued", plans, err)
	}
	if r := h.waitRun(plans[0].RunID); r.Status != store.RunSucceeded || !r.Replay {
		t.Fatalf("replay run = %+v; want succeeded", r)
	}

	// Requests already queued (before the trigger changed, or by a version
	// that did not check) are checked again by the replay consumer: the
	// run is recorded as not started, with the trigger's outcome.
	queue := func(triggerID, agentID, replayID string) string {
		req := dispatch.ReplayRequest{
			TenantID: "t1", EventID: ev.ID, Seq: rec.Seq, TriggerID: triggerID, AgentID: agentID,
			BypassFilter: true, ReplayID: replayID, RunID: dispatch.RunID(ev.ID, triggerID, replayID),
		}
		body, _ := json.Marshal(req)
		if err := h.bus.Publish(ctx, "push.replay.t1", "replay:"+req.RunID, body); err != nil {
			t.Fatal(err)
		}
		return req.RunID
	}
	for _, c := range []struct{ trigger, code, message string }{
		{"trig-off", match.Disabled, "replay not started: trigger is disabled"},
		{"trig-gone", "account_removed", "replay not started: the account acc1 was removed"},
		{"trig-deleted", "trigger_not_found", "replay not started: trigger trig-deleted no longer exists"},
	} {
		r := h.waitRun(queue(c.trigger, "agent-off", "r1"))
		if r.Status != store.RunFailed || r.Error == nil || r.Error.Code != c.code || r.Error.Message != c.message || !r.Replay {
			t.Errorf("queued replay to %s: run %+v, error %+v; want failed with %s: %s", c.trigger, r, r.Error, c.code, c.message)
		}
	}
	h.waitSettled(bus.PushStream, dispatch.ReplayConsumer)
	if got := [...]uint64{runs("agent-on"), runs("agent-off"), runs("agent-gone")}; got != [...]uint64{1, 0, 0} {
		t.Errorf("runs published for agents on, off, gone: %v; want [1 0 0]", got)
	}
	if dead, err := h.bus.ListDead(ctx, dispatch.ReplayConsumer, 0, 10); err != nil || len(dead) != 0 {
		t.Errorf("replays dead-lettered: %d (%v)", len(dead), err)
	}
}
