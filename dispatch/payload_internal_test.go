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

// TestMatchCatchesATriggerAddedAfterTheLook checks matchWith's unread: a
// filter that reads the payload, evaluated on an event carrying it by
// reference that was never read (its trigger came after NeedsPayload
// looked), is reported, so that match reads the payload and matches again
// instead of filtering the event out for good.
func TestMatchCatchesATriggerAddedAfterTheLook(t *testing.T) {
	x := sharedIndex()
	ev := issueEvent("octo-org/api")
	ev.Payload, ev.PayloadRef = nil, "deliveries.codehost.d1"
	if x.NeedsPayload(ev) {
		t.Fatal("NeedsPayload with no trigger")
	}
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
	// match reads it then (here preloaded, as get would) and matches again.
	p := &eventPayload{ref: ev.PayloadRef, data: json.RawMessage(`{"issue":{"title":"It crashes"}}`)}
	x2 := sharedIndex()
	out, ok, err := p.match(context.Background(), x2, ev)
	if !ok || err != nil || len(out) != 0 {
		t.Fatalf("no trigger: %+v %v %v", out, ok, err)
	}
	mustPut(t, x2, tr)
	ev.Payload = nil
	outcomes, unread := x2.matchWith(ev, nil)
	if !unread || outcomes[0].Result != FilteredOut {
		t.Fatalf("before the read: %+v %v", outcomes, unread)
	}
	data, _ := p.get(context.Background())
	ev.Payload = data
	if outcomes, unread := x2.matchWith(ev, nil); unread || outcomes[0].Result != Matched {
		t.Fatalf("after the read: %+v %v; want matched", outcomes, unread)
	}
}
