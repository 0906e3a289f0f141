package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// oldShapeStatusEvent commits a projects_v2_item edited delivery in the
// older payload shape (the field's node id only) and returns its event.
func (h *harness) oldShapeStatusEvent(deliveryID, fieldID string) triggers.Event {
	h.t.Helper()
	payload := fmt.Sprintf(`{"action":"edited","projects_v2_item":{"id":7,"node_id":"PVTI_x","project_node_id":"PVT_x","content_type":"Issue"},
		"changes":{"field_value":{"field_node_id":%q,"field_type":"single_select"}},"organization":{"login":"octo-org"},"sender":{"login":"octocat"}}`, fieldID)
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.CodeHost, ID: deliveryID, Event: "projects_v2_item", ReceivedAt: time.Now(), Payload: []byte(payload)})
	if err != nil || len(res.Events) != 1 || res.Events[0].Resource.FieldID != fieldID {
		h.t.Fatalf("map: %v %+v", err, res)
	}
	h.commitEvents(deliveryID, []byte(payload), res.Events)
	return res.Events[0]
}

// outcome waits for the dispatcher's record of ev and returns the outcome
// of trigger id as "result: reason".
func (h *harness) outcome(ev triggers.Event, id string) string {
	h.t.Helper()
	var got string
	testenv.Eventually(h.t, 15*time.Second, "outcome of "+id, func() bool {
		rec, err := h.store.GetEvent(context.Background(), "t1", ev.ID)
		if err != nil {
			return false
		}
		for _, o := range rec.Outcomes {
			if o.TriggerID == id {
				got = o.Result + ": " + o.Reason
				return true
			}
		}
		return false
	})
	return got
}

// A Status change in the older projects_v2_item payload shape names only
// the field's node id: the dispatcher reads the field's name as the
// trigger's account before starting anything, so an edit of another
// single-select field (Priority) starts no agent, and a field the account
// cannot read fails the outcome saying why. A rate-limited read tries the
// event again later; a field's name is read once.
func TestOldShapeProjectFieldIsNamedBeforeStarting(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1")
	h.trigger("trig-status", "agent-1", triggers.ProjectItemStatusChanged, match.Params{Organization: "octo-org"}, "")
	h.steps.out[dispatch.ProjectFieldStep] = `{"id":"PVTSSF_status","name":"Status","data_type":"SINGLE_SELECT","options":[]}`
	h.steps.refuse[dispatch.ProjectFieldStep] = 1
	h.steps.refusal = rateLimited(time.Second)
	h.start()

	status := h.oldShapeStatusEvent("d-status", "PVTSSF_status")
	if got := h.outcome(status, "trig-status"); got != "started: " {
		t.Fatalf("Status field: outcome %q, want started (after one rate-limited read)", got)
	}
	h.waitRun(dispatch.RunID(status.ID, "trig-status", ""))
	calls := h.steps.count()
	if calls != 2 {
		t.Errorf("%d step calls, want 2 (one refused, one read)", calls)
	}
	if c := h.steps.calls[1]; c.Step != dispatch.ProjectFieldStep || c.Account != "acc1" || c.Input["field_id"] != "PVTSSF_status" {
		t.Errorf("read %+v, want %s as acc1 with field_id PVTSSF_status", c, dispatch.ProjectFieldStep)
	}

	// The same field again: its name is remembered.
	again := h.oldShapeStatusEvent("d-status-2", "PVTSSF_status")
	if got := h.outcome(again, "trig-status"); got != "started: " {
		t.Fatalf("Status field again: outcome %q", got)
	}
	if n := h.steps.count(); n != calls {
		t.Errorf("%d step calls, want %d: the name was read again", n, calls)
	}

	h.steps.mu.Lock()
	h.steps.out[dispatch.ProjectFieldStep] = `{"id":"PVTSSF_priority","name":"Priority","data_type":"SINGLE_SELECT","options":[]}`
	h.steps.mu.Unlock()
	priority := h.oldShapeStatusEvent("d-priority", "PVTSSF_priority")
	if got := h.outcome(priority, "trig-status"); got != `filtered_out: project field "Priority" (PVTSSF_priority) is not Status` {
		t.Errorf("Priority field: outcome %q", got)
	}

	h.steps.mu.Lock()
	h.steps.fail[dispatch.ProjectFieldStep] = &connectors.Error{Code: connectors.CodePermissionDenied, Message: "GitHub GraphQL: Resource not accessible by integration"}
	h.steps.mu.Unlock()
	hidden := h.oldShapeStatusEvent("d-hidden", "PVTSSF_hidden")
	got := h.outcome(hidden, "trig-status")
	if !strings.HasPrefix(got, "failed: cannot tell whether project field PVTSSF_hidden is Status: GitHub GraphQL: Resource not accessible by integration (permission_denied)") ||
		!strings.Contains(got, "read:project") {
		t.Errorf("unreadable field: outcome %q", got)
	}
	h.waitPending()
	runs, err := h.store.ListRuns(context.Background(), store.RunFilter{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Errorf("%d runs, want 2 (the two Status changes)", len(runs))
	}

	// A dry run decides as the dispatcher did.
	r, err := h.d.DryRun(context.Background(), draft(triggers.ProjectItemStatusChanged, match.Params{Organization: "octo-org"}, ""), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := results(r), "d-hidden=failed d-priority=filtered_out d-status-2=matched d-status=matched"; got != want {
		t.Errorf("dry run: %s, want %s", got, want)
	}
}
