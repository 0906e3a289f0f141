package triggers

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// roundTrip encodes e, checks that the encoding is valid JSON, decodes it
// back and returns the decoded event and the top-level fields.
func roundTrip(t *testing.T, e Event) (Event, map[string]json.RawMessage) {
	t.Helper()
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatalf("MarshalJSON: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	var got Event
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	var fast Event
	if err := DecodeEvent(b, &fast); err != nil {
		t.Fatalf("DecodeEvent: %v", err)
	}
	if !reflect.DeepEqual(fast, got) {
		t.Errorf("DecodeEvent and encoding/json differ:\n got %+v\nwant %+v", fast, got)
	}
	if n := e.EncodedSizeWithoutPayload(); len(trimJSONSpace(e.Payload)) > 0 && n >= len(b) || n <= 0 {
		t.Errorf("EncodedSizeWithoutPayload %d, full encoding %d", n, len(b))
	}
	return got, fields
}

func TestEventJSONRoundTrip(t *testing.T) {
	for name, d := range allFileDeliveries(t) {
		t.Run(name, func(t *testing.T) {
			res, err := Map(d)
			if err != nil {
				t.Fatal(err)
			}
			// The files end in a newline (the vercel fixtures also start
			// with white space): the encoding carries the JSON value, byte
			// for byte, without the white space around it.
			want := bytes.Trim(d.Payload, " \t\r\n")
			for _, e := range res.Events {
				got, fields := roundTrip(t, e)
				if !bytes.Equal(got.Payload, want) {
					t.Errorf("%s: payload bytes changed", e.Kind)
				}
				if !bytes.Equal(fields["payload"], want) {
					t.Errorf("%s: encoded payload is not the raw delivery", e.Kind)
				}
				got.Payload = e.Payload
				if !got.ReceivedAt.Equal(e.ReceivedAt) {
					t.Errorf("%s: received_at %v, want %v", e.Kind, got.ReceivedAt, e.ReceivedAt)
				}
				got.ReceivedAt = e.ReceivedAt
				if !reflect.DeepEqual(got, e) {
					t.Errorf("%s: round trip\n got %+v\nwant %+v", e.Kind, got, e)
				}
			}
		})
	}
}

func TestDecodeEventRejects(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `{"id":"x","kind":7}`, `{"id":"x","payload":{"a":}}`, `{"id":"x"} trailing`, `{"received_at":"yesterday"}`} {
		var e Event
		if err := DecodeEvent([]byte(in), &e); err == nil {
			t.Errorf("DecodeEvent(%q) accepted it: %+v", in, e)
		}
		if err := json.Unmarshal([]byte(in), &e); err == nil {
			t.Errorf("encoding/json accepts %q; the case is wrong", in)
		}
	}
}

func TestEventJSONNulls(t *testing.T) {
	e := Event{ID: "id", Kind: NewMention, Connector: CodeHost, DeliveryID: "d", SourceEvent: "issues", Action: "opened",
		ReceivedAt: testReceivedAt, Account: "octo", Resource: Resource{Type: "mention", Mentioned: "a<b>&c"}}
	got, fields := roundTrip(t, e)
	if string(fields["repository"]) != "null" {
		t.Errorf(`"repository": %s, want null`, fields["repository"])
	}
	if string(fields["payload"]) != "null" {
		t.Errorf(`"payload": %s, want null`, fields["payload"])
	}
	if _, ok := fields["payload_ref"]; ok {
		t.Errorf("payload_ref present though empty")
	}
	if got.Repository != nil || !reflect.DeepEqual(got.Resource, e.Resource) {
		t.Errorf("round trip %+v", got)
	}
	if string(fields["received_at"]) != `"2024-05-06T07:08:09.123456789Z"` {
		t.Errorf("received_at %s", fields["received_at"])
	}

	e.Payload = json.RawMessage(`{"zen":"Keep it logically awesome."}`)
	e.PayloadRef = "archive/d"
	got, fields = roundTrip(t, e)
	if string(fields["payload"]) != string(e.Payload) || string(fields["payload_ref"]) != `"archive/d"` {
		t.Errorf("payload %s payload_ref %s", fields["payload"], fields["payload_ref"])
	}
	if !bytes.Equal(got.Payload, e.Payload) {
		t.Errorf("payload %s, want %s", got.Payload, e.Payload)
	}

	// White space only is no payload.
	e.Payload = json.RawMessage(" \n")
	if _, fields = roundTrip(t, e); string(fields["payload"]) != "null" {
		t.Errorf(`"payload": %s, want null`, fields["payload"])
	}
}

// TestEventID checks that EventID is the name-based (SHA-1) UUID of the
// connector, delivery id, kind and index, and that each part matters.
func TestEventID(t *testing.T) {
	ns := uuid.MustParse("6f0c3c2e-6a59-4f5b-9a8e-0d5b7c7f1a21")
	want := uuid.NewSHA1(ns, []byte("codehost\x00d1\x00new_issue\x000")).String()
	if got := EventID(CodeHost, "d1", NewIssue, 0); got != want {
		t.Errorf("EventID = %s, want %s", got, want)
	}
	if u, err := uuid.Parse(want); err != nil || u.Version() != 5 {
		t.Errorf("not a version 5 UUID: %s", want)
	}
	ids := map[string]bool{}
	for _, id := range []string{
		EventID(CodeHost, "d1", NewIssue, 0), EventID(CodeHost, "d1", NewIssue, 1),
		EventID(CodeHost, "d2", NewIssue, 0), EventID(CodeHost, "d1", NewMention, 0),
		EventID(Deploy, "d1", NewIssue, 0), EventID(CodeHost, "d1\x00new_issue", "", 0),
	} {
		if ids[id] {
			t.Errorf("duplicate id %s", id)
		}
		ids[id] = true
	}
}

// The event fields but the payload are encoded with goccy/go-json; they
// must come out byte for byte as encoding/json writes them (HTML-safe
// escapes, U+2028, invalid UTF-8, omitted empty fields), for every event the
// corpus and the project's testdata map to, and for awkward text.
func TestHeaderEncodingMatchesEncodingJSON(t *testing.T) {
	var events []Event
	for _, dir := range []string{corpusDir(t), projectDir} {
		for _, sub := range []string{"github", "vercel"} {
			for _, name := range jsonFiles(t, dir, sub) {
				res, err := Map(fileDelivery(t, dir, sub, name))
				if err != nil {
					continue // malformed on purpose
				}
				events = append(events, res.Events...)
			}
		}
	}
	if len(events) < 50 {
		t.Fatalf("only %d events to compare", len(events))
	}
	odd := "<b>&amp;</b> \u2028\u2029 \xff\xfe \x00\x1f \"quoted\" \\ é ☃"
	events = append(events, Event{
		ID: "e", Kind: NewIssue, Connector: CodeHost, DeliveryID: odd, SourceEvent: "issues", Action: odd,
		ReceivedAt: time.Date(2026, 11, 21, 13, 0, 0, 123456789, time.FixedZone("x", 3600)),
		Repository: &Repository{Owner: odd, Name: odd, FullName: odd}, Account: odd, Sender: odd,
		Resource:   Resource{Type: "issue", Title: odd, Labels: []string{odd, ""}, Number: -1},
		PayloadRef: odd, Scope: &Scope{Hook: odd, Tenant: odd},
	})
	for i := range events {
		h := events[i].header()
		want, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fastjson.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %s (%s): goccy/go-json wrote\n%s\nencoding/json writes\n%s", events[i].ID, events[i].Kind, got, want)
		}
	}
}

// TestEventJSONFieldNames checks the envelope's field names against the
// issue: a renamed field would survive a round trip, not an agent.
func TestEventJSONFieldNames(t *testing.T) {
	res, err := Map(Delivery{Connector: CodeHost, ID: "d-fork", Event: "fork", ReceivedAt: testReceivedAt,
		Payload: []byte(`{"forkee":{"id":2,"full_name":"fork/Hello-World","owner":{"login":"fork"}},` + repo + `}`)})
	if err != nil || len(res.Events) != 1 {
		t.Fatalf("Map: %v %+v", err, res)
	}
	_, fields := roundTrip(t, res.Events[0])
	want := []string{"id", "kind", "connector", "delivery_id", "source_event", "action", "received_at",
		"repository", "account", "sender", "resource", "payload"}
	got := slices.Sorted(maps.Keys(fields))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("envelope fields %q, want %q", got, want)
	}
	// An event without an action says so with an empty string.
	if string(fields["action"]) != `""` || string(fields["connector"]) != `"codehost"` || string(fields["delivery_id"]) != `"d-fork"` {
		t.Errorf("action %s connector %s delivery_id %s", fields["action"], fields["connector"], fields["delivery_id"])
	}
	var r map[string]string
	if err := json.Unmarshal(fields["repository"], &r); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(r, map[string]string{"owner": "Octo", "name": "Hello-World", "full_name": "Octo/Hello-World"}) {
		t.Errorf("repository %s", fields["repository"])
	}
	if _, err := time.Parse(time.RFC3339, strings.Trim(string(fields["received_at"]), `"`)); err != nil {
		t.Errorf("received_at %s is not RFC 3339: %v", fields["received_at"], err)
	}
}

func TestEventSummary(t *testing.T) {
	long := strings.Repeat("é", 200)
	for _, tc := range []struct {
		r    Resource
		want string
	}{
		{Resource{Type: "issue", Number: 12, Title: "Crash on\nstart"}, "#12 Crash on start"},
		{Resource{Type: "issue", Number: 12, Title: "<img src=x onerror=alert(1)>"}, "#12 <img src=x onerror=alert(1)>"},
		{Resource{Type: "commit", SHA: "0123456789abcdef", Title: "Fix the build"}, "Fix the build"},
		{Resource{Type: "deployment", ProjectName: "web", Target: "production"}, "web (production)"},
		{Resource{Type: "branch", Ref: "main"}, "main"},
		{Resource{Type: "push", SHA: "0123456789abcdef"}, "0123456789ab"},
		{Resource{Type: "star"}, ""},
		{Resource{Title: long}, strings.Repeat("é", maxSummary-1) + "…"},
	} {
		if got := (Event{Resource: tc.r}).Summary(); got != tc.want {
			t.Errorf("Summary of %+v = %q, want %q", tc.r, got, tc.want)
		}
	}
}
