package ingest

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/triggerd/triggerd/triggers"
)

// The hand-encoded answer decodes to what encoding/json makes of the same
// answer.
func TestAppendAnswerMatchesEncodingJSON(t *testing.T) {
	type ref struct {
		ID      string `json:"id"`
		Kind    string `json:"kind"`
		Subject string `json:"subject"`
	}
	type answer struct {
		DeliveryID string `json:"delivery_id"`
		Events     []ref  `json:"events"`
		Ignored    string `json:"ignored,omitempty"`
	}
	events := []triggers.Event{
		{ID: "e-1", Kind: triggers.NewIssue, Connector: triggers.CodeHost, ReceivedAt: time.Unix(0, 0),
			Repository: &triggers.Repository{Owner: "Octo", Name: "socket.io", FullName: "Octo/socket.io"}},
		{ID: "e-2", Kind: triggers.UpdatedIssue, Connector: triggers.CodeHost},
	}
	for _, tc := range []struct {
		id, ignored string
		events      []triggers.Event
	}{
		{"d-1", "", events},
		{`odd "id" \ é`, "", events[:1]},
		{"d-2", `no trigger kind for event "watch" with action "deleted"`, nil},
	} {
		want := answer{DeliveryID: tc.id, Events: []ref{}, Ignored: tc.ignored}
		for i := range tc.events {
			e := &tc.events[i]
			want.Events = append(want.Events, ref{e.ID, string(e.Kind), e.Subject()})
		}
		enc := appendAnswer(nil, tc.id, tc.events, tc.ignored, false)
		var got answer
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("answer %s is not JSON: %v", enc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("answer %s decodes to %+v; want %+v", enc, got, want)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal(enc, &raw)
		if string(raw["events"]) == "null" {
			t.Fatalf("answer %s lists events as null; want a list", enc)
		}
	}
}

// Every webhook answer carries the Date of the server's clock, formatted
// once a second, and one answer's header cannot change another's.
func TestAnswersCarryDate(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 100, time.UTC)
	h := newHarness(t, func(o *Options) { o.Now = func() time.Time { return now } })
	body := []byte(`{"action":"opened","issue":{"number":1},"repository":{"name":"r","full_name":"o/r","owner":{"login":"o"}}}`)

	first := h.do(codeHostRequest("issues", "date-1", body))
	if got, want := first.header.Get("Date"), "Sat, 21 Nov 2026 10:00:00 GMT"; got != want {
		t.Fatalf("Date %q; want %q", got, want)
	}
	first.header["Date"] = append(first.header["Date"], "planted")
	first.header["Date"][0] = "changed"

	now = now.Add(time.Second / 2)
	unsigned := codeHostRequest("issues", "date-2", body)
	unsigned.Header.Del("X-Hub-Signature-256")
	if a := h.do(unsigned); a.status != http.StatusUnauthorized || a.header.Get("Date") != "Sat, 21 Nov 2026 10:00:00 GMT" || len(a.header["Date"]) != 1 {
		t.Fatalf("rejected answer %d with Date %q; want 401 with the same second's Date, once", a.status, a.header["Date"])
	}

	now = now.Add(time.Second)
	if got, want := h.do(deployRequest([]byte(`{"id":"dep-1","type":"deployment.created","payload":{}}`))).header.Get("Date"), "Sat, 21 Nov 2026 10:00:01 GMT"; got != want {
		t.Fatalf("Date a second later %q; want %q", got, want)
	}
}

// The media type is read as MIME reads it, beyond the exact
// "application/json" that skips the parse.
func TestContentTypeWithParameters(t *testing.T) {
	h := newHarness(t, nil)
	body := []byte(`{"action":"opened","issue":{"number":1},"repository":{"name":"r","full_name":"o/r","owner":{"login":"o"}}}`)
	req := codeHostRequest("issues", "ct-1", body)
	req.Header.Set("Content-Type", "Application/JSON; charset=utf-8")
	if a := h.do(req); a.status != http.StatusAccepted {
		t.Fatalf("Content-Type with parameters: %d %v; want 202", a.status, a.body)
	}
}
