package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/triggerd/triggerd/triggers"
)

func TestFilterReadsPayload(t *testing.T) {
	for expr, want := range map[string]bool{
		"event.payload.issue.user.login == 'octocat'":     true,
		"has(event.payload.issue)":                        true,
		"event['payload'] != null":                        true,
		"event['resource'].number > 1":                    true, // event used whole: may reach it
		"size(event) > 3":                                 true,
		"event.exists(k, k == 'x')":                       true,
		"event.resource.number > 3":                       false,
		"event . resource.labels.exists(l, l == 'a')":     false,
		"event.kind == 'new_issue' && event.sender != ''": false,
	} {
		if got := filterReadsPayload(expr); got != want {
			t.Errorf("filterReadsPayload(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestInputReadsPayload(t *testing.T) {
	for input, want := range map[string]bool{
		`{"a": "{{ .payload.issue.title }}"}`:                                         true,
		`{"a": ["x", {"b": "#{{ .resource.number }}: {{ .payload.issue.title }}."}]}`: true,
		`{"a": "{{ json . }}"}`:                                                       true,
		`{"a": "{{ $.payload }}"}`:                                                    true,
		`{"a": "{{ index . \"payload\" }}"}`:                                          true,
		`{"a": "{{ if .payload }}x{{ end }}"}`:                                        true,
		`{"a": "{{ range .resource.labels }}{{ . }}{{ end }}"}`:                       true, // may over-report
		`{"a": "{{ .resource.number }}", "b": "payload, literally."}`:                 false,
		`{"a": "#{{ .resource.number }}: {{ .steps.find.output.id }}."}`:              false,
		`{"a": "{{ default \"x\" .resource.title }}"}`:                                false,
		`{"a": "no template"}`:                                                        false,
		``:                                                                            false,
	} {
		if got := inputReadsPayload(json.RawMessage(input)); got != want {
			t.Errorf("inputReadsPayload(%s) = %v, want %v", input, got, want)
		}
	}
}

// TestMatchReadsThePayloadAFilterNeeds checks matchWith's unread: a
// filter that reads the payload, evaluated on an event carrying it by
// reference that was not read, is reported, and match then reads the
// payload and matches again instead of filtering the event out for good.
func TestMatchReadsThePayloadAFilterNeeds(t *testing.T) {
	x := sharedIndex()
	ev := issueEvent("octo-org/api")
	ev.Payload, ev.PayloadRef = nil, "deliveries.codehost.d1"
	tr := trig("t1", triggers.NewIssue, Params{})
	tr.Filter = "event.payload.issue.title == 'It crashes'"
	mustPut(t, x, tr)
	out, unread := x.matchWith(ev, nil)
	if !unread || len(out) != 1 || out[0].Result != FilteredOut {
		t.Fatalf("without the payload: %+v, unread %v; want filtered out and unread", out, unread)
	}
	if _, unread := x.matchWith(ev, errors.New("not in the archive")); unread {
		t.Error("a payload known unreadable is reported unread")
	}
	// match reads it (here preloaded, as get would) and matches again.
	p := &eventPayload{ref: ev.PayloadRef, data: json.RawMessage(`{"issue":{"title":"It crashes"}}`)}
	out, ok, err := p.match(context.Background(), x, ev)
	if !ok || err != nil || len(out) != 1 || out[0].Result != Matched {
		t.Fatalf("match: %+v %v %v; want matched with the payload read", out, ok, err)
	}
	// An event no payload-reading filter looks at is not read.
	other := issueEvent("octo-org/other")
	other.Payload, other.PayloadRef = nil, "deliveries.codehost.d2"
	unreadable := &eventPayload{ref: other.PayloadRef, err: errors.New("must not be read")}
	if _, ok, err := unreadable.match(context.Background(), sharedIndex(), other); !ok || err != nil {
		t.Errorf("match with no candidate read the payload: %v %v", ok, err)
	}
}
