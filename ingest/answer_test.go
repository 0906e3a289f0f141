package ingest

import (
	"encoding/json"
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
		enc := appendAnswer(nil, tc.id, tc.events, tc.ignored)
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
