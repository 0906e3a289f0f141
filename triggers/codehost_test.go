package triggers

import (
	"slices"
	"strings"
	"testing"
)

// sourceExtras are the payload fields that make a delivery fit the
// qualifier of a catalogue source ("create (ref_type tag)"); a qualifier
// missing here fails TestKindSourcesMapped, which has to learn it.
var sourceExtras = map[string]map[string]any{
	"":                        nil,
	"ref_type tag":            {"ref": "v1.0", "ref_type": "tag"},
	"ref_type branch":         {"ref": "topic", "ref_type": "branch"},
	"not draft":               nil, // actionPayload's pull request is no draft
	"Status field":            nil, // nor does its field change miss Status
	"not a ref deletion":      {"ref": "refs/heads/main"},
	"one per distinct commit": {"ref": "refs/heads/main", "commits": []any{map[string]any{"id": "a1", "distinct": true}}},
}

// mentioning are the payload fields that make every written text of a
// delivery mention bob.
var mentioning = func() map[string]any {
	obj := map[string]any{"id": 11, "number": 3, "title": "t", "body": "cc @bob", "user": map[string]any{"login": "alice"}}
	return map[string]any{"issue": obj, "pull_request": obj, "discussion": obj,
		"comment": map[string]any{"id": 12, "body": "cc @bob"}, "review": map[string]any{"id": 13, "body": "cc @bob"}}
}()

// TestKindSourcesMapped holds the kind catalogue (kinds.go, which the API
// and the hook setup read) and the mapper's tables together: every source
// the catalogue names for a kind gives that kind, and every event and
// action the tables map is named by the catalogue.
func TestKindSourcesMapped(t *testing.T) {
	named := map[string]bool{}
	for _, k := range Kinds() {
		for _, src := range k.Sources {
			name, qual, _ := strings.Cut(src, " (")
			named[name] = true
			checkSource(t, k.Kind, src, name, strings.TrimSuffix(qual, ")"))
		}
	}
	for event, ev := range codeHostEvents {
		if event == "ping" {
			continue
		}
		if ev.all != nil && !named[event] {
			t.Errorf("event %q: mapped, but no kind's sources name it", event)
		}
		for action := range ev.actions {
			if !named[event+"."+action] {
				t.Errorf("event %q action %q: mapped, but no kind's sources name it", event, action)
			}
		}
	}
	for typ := range deployTypes {
		if !named[typ] {
			t.Errorf("deployment type %q: mapped, but no kind's sources name it", typ)
		}
	}
}

// checkSource checks that a delivery of the catalogue's source src of kind
// k ("issues.opened", "create (ref_type tag)": name and qualifier qual)
// gives an event of kind k.
func checkSource(t *testing.T, k Kind, src, name, qual string) {
	t.Helper()
	if k.Connector() == Deploy {
		if got := deployTypes[name].kind; got != k {
			t.Errorf("kind %s, source %q: the mapper gives %q", k, src, got)
		}
		return
	}
	extra, ok := sourceExtras[qual]
	if !ok {
		t.Errorf("kind %s, source %q: qualifier %q unknown to this test", k, src, qual)
		return
	}
	if k == NewMention {
		extra = mentioning
	}
	event, action, _ := strings.Cut(name, ".")
	d := Delivery{Connector: CodeHost, ID: "source-delivery", Event: event, ReceivedAt: testReceivedAt, Payload: actionPayload(action, extra)}
	if got := kindsOf(mapChecked(t, d)); !slices.Contains(got, k) {
		t.Errorf("kind %s, source %q: maps to %v", k, src, got)
	}
}
