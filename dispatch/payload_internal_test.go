package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/triggers"
)

// TestMatchReadsThePayloadAFilterNeeds checks matchWith's unread: a
// filter that reads the payload, evaluated on an event carrying it by
// reference that was not read, is reported, and match then reads the
// payload and matches again instead of filtering the event out for good.
func TestMatchReadsThePayloadAFilterNeeds(t *testing.T) {
	x := match.NewIndex("ten-1")
	ev := issueEvent("octo-org/api")
	ev.Payload, ev.PayloadRef = nil, "deliveries.codehost.d1"
	tr := match.Trigger{ID: "t1", TenantID: "ten-1", Kind: triggers.NewIssue, Account: "acct-1", Agent: "agent-t1", Enabled: true}
	tr.Filter = "event.payload.issue.title == 'It crashes'"
	if err := x.Put(tr); err != nil {
		t.Fatal(err)
	}
	out, unread := x.MatchWith(ev, nil)
	if !unread || len(out) != 1 || out[0].Result != match.FilteredOut {
		t.Fatalf("without the payload: %+v, unread %v; want filtered out and unread", out, unread)
	}
	if _, unread := x.MatchWith(ev, errors.New("not in the archive")); unread {
		t.Error("a payload known unreadable is reported unread")
	}
	// match reads it (here preloaded, as get would) and matches again.
	p := &eventPayload{ref: ev.PayloadRef, data: json.RawMessage(`{"issue":{"title":"It crashes"}}`)}
	out, ok, err := p.match(context.Background(), x, ev)
	if !ok || err != nil || len(out) != 1 || out[0].Result != match.Matched {
		t.Fatalf("match: %+v %v %v; want matched with the payload read", out, ok, err)
	}
	// An event no payload-reading filter looks at is not read.
	other := issueEvent("octo-org/other")
	other.Payload, other.PayloadRef = nil, "deliveries.codehost.d2"
	unreadable := &eventPayload{ref: other.PayloadRef, err: errors.New("must not be read")}
	if _, ok, err := unreadable.match(context.Background(), match.NewIndex("ten-1"), other); !ok || err != nil {
		t.Errorf("match with no candidate read the payload: %v %v", ok, err)
	}
}

// issueEvent is an unscoped new_issue event on repo, as the shared
// endpoints publish them.
func issueEvent(repo string) *triggers.Event {
	owner, name, _ := strings.Cut(repo, "/")
	return &triggers.Event{
		ID: "ev-1", Kind: triggers.NewIssue, Connector: triggers.NewIssue.Connector(), DeliveryID: "d-1",
		SourceEvent: "issues", Action: "opened", Account: "octo-org", Sender: "octocat",
		Resource:   triggers.Resource{Type: "issue", Number: 7, Title: "Crash"},
		Repository: &triggers.Repository{Owner: owner, Name: name, FullName: repo},
	}
}
