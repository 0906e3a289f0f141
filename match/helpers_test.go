package match

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/triggerd/triggerd/triggers"
)

// issuePayload is a small issues.opened-like payload.
const issuePayload = `{"action":"opened","issue":{"number":7,"title":"Crash","user":{"login":"octocat","id":583231},"labels":[{"name":"bug"}]},"repository":{"full_name":"octo-org/api"}}`

// event returns an event of kind k on repository full ("" for none).
func event(k triggers.Kind, full string, r triggers.Resource) *triggers.Event {
	e := &triggers.Event{
		ID: "ev-1", Kind: k, Connector: k.Connector(), DeliveryID: "d-1", SourceEvent: "issues", Action: "opened",
		ReceivedAt: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC), Account: "octo-org", Sender: "octocat",
		Resource: r, Payload: json.RawMessage(issuePayload),
	}
	if full != "" {
		owner, name, _ := cut(full)
		e.Repository = &triggers.Repository{Owner: owner, Name: name, FullName: full}
	}
	return e
}

func cut(full string) (string, string, bool) {
	for i := 0; i < len(full); i++ {
		if full[i] == '/' {
			return full[:i], full[i+1:], true
		}
	}
	return full, "", false
}

// issueEvent is a new_issue event on repo with the given labels.
func issueEvent(repo string, labels ...string) *triggers.Event {
	return event(triggers.NewIssue, repo, triggers.Resource{Type: "issue", Number: 7, Title: "Crash", Labels: labels})
}

// trig returns an enabled trigger.
func trig(id string, k triggers.Kind, p Params) Trigger {
	return Trigger{ID: id, TenantID: "ten-1", Kind: k, Account: "acct-1", Agent: "agent-" + id, Enabled: true, Params: p}
}

// mustPut puts every trigger or fails the test.
func mustPut(tb testing.TB, x *Index, ts ...Trigger) {
	tb.Helper()
	for _, t := range ts {
		if err := x.Put(t); err != nil {
			tb.Fatalf("Put(%s): %v", t.ID, err)
		}
	}
}

// results maps trigger ids to "result: reason" for compact comparisons.
func results(os []Outcome) map[string]string {
	m := make(map[string]string, len(os))
	for _, o := range os {
		s := o.Result
		if o.Reason != "" {
			s += ": " + o.Reason
		}
		m[o.TriggerID] = s
	}
	return m
}

// wantResults checks the outcomes, and that they are ordered by id.
func wantResults(tb testing.TB, got []Outcome, want map[string]string) {
	tb.Helper()
	for i := 1; i < len(got); i++ {
		if got[i-1].TriggerID >= got[i].TriggerID {
			tb.Errorf("outcomes not ordered by trigger id: %q before %q", got[i-1].TriggerID, got[i].TriggerID)
		}
	}
	if g := results(got); !reflect.DeepEqual(g, want) {
		tb.Errorf("outcomes:\n got %v\nwant %v", g, want)
	}
}

// sharedIndex returns an empty index whose shared tenant is ten-1, trig's
// tenant: the events of these tests (event) are unscoped, as those of the
// shared endpoints are, and only the shared tenant's triggers see them.
func sharedIndex() *Index { return NewIndex("ten-1") }
