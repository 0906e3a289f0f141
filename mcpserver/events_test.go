package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/triggers"
)

// storeTriggers reads the tenant's agents and triggers from a real store;
// this test changes none.
type storeTriggers struct{ st store.Store }

var errReadOnly = errors.New("this test reads triggers only")

func (s storeTriggers) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	return s.st.ListAgents(ctx, tenantID)
}

func (s storeTriggers) CreateTrigger(context.Context, string, registry.TriggerInput) (store.Trigger, error) {
	return store.Trigger{}, errReadOnly
}

func (s storeTriggers) DraftTrigger(context.Context, string, registry.TriggerInput) (store.Trigger, error) {
	return store.Trigger{}, errReadOnly
}

func (s storeTriggers) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	return s.st.GetTrigger(ctx, tenantID, id)
}

func (s storeTriggers) ListTriggers(ctx context.Context, tenantID string) ([]store.Trigger, error) {
	return s.st.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID})
}

func (s storeTriggers) SetEnabled(context.Context, string, string, bool) (store.Trigger, error) {
	return store.Trigger{}, errReadOnly
}

func (s storeTriggers) DeleteTrigger(context.Context, string, string) error { return errReadOnly }

// TestEventResourceIsTheAPIsAnswer: triggerd://events/{id} answers what
// GET /v1/events/{id} does, through dispatch.LookUpEvent: a recorded
// event with its outcomes, and an event of the shared endpoints that no
// trigger wanted (which leaves no record) found in the events stream,
// with the note saying why nothing started. An unknown id, or another
// tenant's event, is not found.
func TestEventResourceIsTheAPIsAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, _ := bustest.Start(t)
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// t1 owns the shared endpoints; the dispatcher is not run, so the
	// quiet event below leaves no record, as one no trigger wanted.
	disp, err := dispatch.New(dispatch.Options{Store: st, Queue: b, Steps: fakeSteps{}, SharedTenant: "t1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Auth: fakeAuth{"key-1": "t1", "key-2": "t2"}, Accounts: &fakeAccounts{accs: map[string][]store.Account{}}, Steps: fakeSteps{},
		Triggers: storeTriggers{st}, Records: st, DryRunner: disp, Unrecorded: disp, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cs := connect(t, srv.URL, make(chan struct{}, 1))

	// A deployment on the shared endpoint, which no trigger of t1 takes.
	body := []byte(`{"id": "uev_quiet", "type": "deployment.created", "createdAt": 1, "payload": {"team": {"id": "team_1"}, "user": {"id": "u1"},
		"project": {"id": "prj_1"}, "deployment": {"id": "dpl_quiet", "url": "x.vercel.app", "name": "x", "meta": {}}, "target": "production"}}`)
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.Deploy, ReceivedAt: time.Now(), Payload: body})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, triggers.Capture{Connector: triggers.Deploy, DeliveryID: res.DeliveryID, ReceivedAt: time.Now(), Body: body}, res.Events); err != nil {
		t.Fatal(err)
	}
	var quiet triggers.Event
	for _, e := range res.Events {
		if e.Kind == triggers.DeploymentStarted {
			quiet = e
		}
	}
	if quiet.ID == "" {
		t.Fatalf("the delivery gave no deployment_started event: %+v", res.Events)
	}
	// A recorded event with a run started.
	recorded := store.EventRecord{TenantID: "t1", EventID: "evt-recorded", Kind: string(triggers.NewIssue), Subject: "triggers.codehost.new_issue.x",
		DeliveryID: "d-1", ReceivedAt: time.Now().UTC(), DispatchedAt: time.Now().UTC(),
		Outcomes: []store.Outcome{{TriggerID: "trig-1", AgentID: "agent-1", Result: "started", RunID: "run-1"}}}
	if err := st.PutEvent(ctx, recorded); err != nil {
		t.Fatal(err)
	}

	read := func(id string) (map[string]any, string, error) {
		t.Helper()
		r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: EventURI(id)})
		if err != nil {
			return nil, "", err
		}
		text := r.Contents[0].Text
		var v map[string]any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s is not JSON: %v\n%s", EventURI(id), err, text)
		}
		return v, text, nil
	}
	for _, id := range []string{quiet.ID, recorded.EventID} {
		got, text, err := read(id)
		if err != nil {
			t.Fatalf("read %s: %v", EventURI(id), err)
		}
		// The same answer as the API's, which encodes LookUpEvent's view.
		want, err := dispatch.LookUpEvent(ctx, st, disp, "t1", id)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.MarshalIndent(want, "", "  ")
		if text != string(wantJSON) {
			t.Errorf("%s:\n%s\nwant GET /v1/events/{id}'s view:\n%s", EventURI(id), text, wantJSON)
		}
		if got["event_id"] != id {
			t.Errorf("%s: event_id %v", EventURI(id), got["event_id"])
		}
	}
	got, _, _ := read(quiet.ID)
	note, _ := got["note"].(string)
	if !strings.Contains(note, "no trigger of this tenant is of kind deployment_started") || got["kind"] != "deployment_started" ||
		got["dispatched_at"] != nil || fmt.Sprint(got["outcomes"]) != "[]" {
		t.Errorf("the event no trigger wanted: %v; want its kind, no outcomes, no dispatched_at and a note saying why nothing started", got)
	}
	got, _, _ = read(recorded.EventID)
	if _, ok := got["note"]; ok || got["dispatched_at"] == nil || len(got["outcomes"].([]any)) != 1 {
		t.Errorf("the recorded event: %v; want its outcome and dispatched_at, no note", got)
	}
	// Subscribing takes what reading finds.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: EventURI(quiet.ID)}); err != nil {
		t.Errorf("subscribe to %s: %v", EventURI(quiet.ID), err)
	}

	if _, _, err := read("no-such-event"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an unknown event: %v, want not found", err)
	}
}
