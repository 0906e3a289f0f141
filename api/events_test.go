package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// newRegistry returns a registry over v's store and accounts that
// registers no webhooks upstream.
func newRegistry(t *testing.T, v *env) *registry.Registry {
	t.Helper()
	reg, err := registry.New(registry.Options{
		Store: v.store, Accounts: v.accounts, Secrets: mustVault(t), PublicURL: "https://triggerd.example.test",
		HookAPI:        func(*http.Client) registry.HookAPI { return nil },
		NewAgentSecret: func() (string, error) { return "whsec_test", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// withRegistry gives v's API a registry and v's store as its records, and
// returns the tenant id of key.
func withRegistry(t *testing.T, v *env, key string) string {
	t.Helper()
	a, err := api.New(api.Options{Accounts: v.accounts, Auth: v.tenants, Tenants: v.tenants, Registry: newRegistry(t, v), Records: v.store, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	v.e = echo.New()
	a.Register(v.e)
	tenant, err := v.tenants.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tenant
}

// An event no trigger of the tenant was a candidate for is told from an
// unknown id: 200 with no outcomes and a sentence saying why, against 404.
func TestEventWithoutCandidatesIsNotUnknown(t *testing.T) {
	v, key := newBoltEnv(t)
	tenant := withRegistry(t, v, key)
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// What the dispatcher records for an event on a tenant's hook that none
	// of the tenant's triggers was a candidate for.
	if err := v.store.PutEvent(context.Background(), store.EventRecord{
		TenantID: tenant, EventID: "evt-quiet", Kind: "new_issue", Subject: "triggers.codehost.new_issue.octocat.hello-world",
		DeliveryID: "d-1", ReceivedAt: at, DispatchedAt: at, Outcomes: []store.Outcome{},
	}); err != nil {
		t.Fatal(err)
	}
	code, body := v.do(http.MethodGet, "/v1/events/evt-quiet", key)
	outcomes, isList := body["outcomes"].([]any)
	note, _ := body["note"].(string)
	if code != http.StatusOK || !isList || len(outcomes) != 0 || !strings.Contains(note, "no trigger of this tenant was a candidate") {
		t.Fatalf("an event without candidates: %d %v; want 200, outcomes [] and a note saying why", code, body)
	}
	code, body = v.do(http.MethodGet, "/v1/events/evt-never", key)
	if c, msg := errorOf(body); code != http.StatusNotFound || c != "not_found" || !strings.Contains(msg, "evt-never") {
		t.Fatalf("an unknown event: %d %v; want 404 naming the id", code, body)
	}
	// Another tenant's event is as unknown as one never received.
	_, otherKey := v.tenant("globex")
	if code, _ := v.do(http.MethodGet, "/v1/events/evt-quiet", otherKey); code != http.StatusNotFound {
		t.Fatalf("another tenant's event: %d, want 404", code)
	}
}

// Two agents of one tenant may not share a name, unless the request says
// it wants that; other tenants' names do not count.
func TestAgentNamesAreDistinctUnlessAsked(t *testing.T) {
	v, key := newBoltEnv(t)
	withRegistry(t, v, key)
	code, first, rec := v.send(http.MethodPost, "/v1/agents", key, `{"name": "Triage"}`)
	if code != http.StatusCreated || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("first agent: %d %v (Cache-Control %q)", code, first, rec.Header().Get("Cache-Control"))
	}
	code, body, _ := v.send(http.MethodPost, "/v1/agents", key, `{"name": "triage"}`)
	c, msg := errorOf(body)
	if code != http.StatusConflict || c != "name_taken" {
		t.Fatalf("a second agent named triage: %d %v; want 409 name_taken", code, body)
	}
	// The message says once what conflicts (the code says it is a name)
	// and how to proceed.
	want := "agent " + first["id"].(string) + ` is already named "Triage": choose another name, or send "allow_duplicate_name": true ` +
		"(triggerctl agents create --allow-duplicate-name) to have two agents of that name"
	if msg != want {
		t.Fatalf("a second agent named triage: message\n%s\nwant\n%s", msg, want)
	}
	if code, body, _ := v.send(http.MethodPost, "/v1/agents", key, `{"name": "triage", "allow_duplicate_name": true}`); code != http.StatusCreated {
		t.Fatalf("asked for a duplicate: %d %v", code, body)
	}
	_, otherKey := v.tenant("globex")
	if code, body, _ := v.send(http.MethodPost, "/v1/agents", otherKey, `{"name": "Triage"}`); code != http.StatusCreated {
		t.Fatalf("another tenant's agent of the same name: %d %v", code, body)
	}
	if _, list := v.do(http.MethodGet, "/v1/agents", key); len(list["agents"].([]any)) != 2 {
		t.Fatalf("agents: %v, want the two", list)
	}
}

// Concurrent creations of one name, racing past the registry's early
// check, are decided by the store: exactly one 201, the others 409
// name_taken naming it, on both backends.
func TestConcurrentAgentNamesOneWins(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			defer st.Close()
			v := newEnv(t, st)
			_, key := v.tenant("acme")
			withRegistry(t, v, key)
			const n = 8
			codes := make([]int, n)
			bodies := make([]map[string]any, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Go(func() {
					<-start
					codes[i], bodies[i], _ = v.send(http.MethodPost, "/v1/agents", key, fmt.Sprintf(`{"name": %q}`, []string{"Triage", "triage"}[i%2]))
				})
			}
			close(start)
			wg.Wait()
			var winner string
			for i, code := range codes {
				if code == http.StatusCreated {
					if winner != "" {
						t.Fatalf("two creations of one name succeeded: %v", codes)
					}
					winner = bodies[i]["id"].(string)
				}
			}
			if winner == "" {
				t.Fatalf("no creation succeeded: %v %v", codes, bodies)
			}
			for i, code := range codes {
				if code == http.StatusCreated {
					continue
				}
				if c, msg := errorOf(bodies[i]); code != http.StatusConflict || c != "name_taken" || !strings.Contains(msg, winner) {
					t.Fatalf("a losing creation: %d %v; want 409 name_taken naming %s", code, bodies[i], winner)
				}
			}
			if _, list := v.do(http.MethodGet, "/v1/agents", key); len(list["agents"].([]any)) != 1 {
				t.Fatalf("agents after the race: %v, want one", list)
			}
		})
	}
}

// noSteps is a dispatcher's step runner for tests that start no run.
type noSteps struct{}

func (noSteps) Run(context.Context, string, string, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("this test runs no step")
}

// An event of the shared endpoints that no trigger was a candidate for
// leaves no record, yet GET /v1/events/{id} finds it in the events stream
// for the tenant that owns those endpoints: 200, no outcomes, and a note
// naming its kind. Other tenants, and unknown ids, get 404.
func TestSharedEventWithoutCandidatesIsFound(t *testing.T) {
	v, key := newBoltEnv(t)
	tenant, err := v.tenants.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := bustest.Start(t)
	d, err := dispatch.New(dispatch.Options{Store: v.store, Queue: b, Steps: noSteps{}, SharedTenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Options{Accounts: v.accounts, Auth: v.tenants, Tenants: v.tenants, Registry: newRegistry(t, v),
		Records: v.store, Replayer: d, Unrecorded: d, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	v.e = echo.New()
	a.Register(v.e)

	body := []byte(`{"id": "uev_quiet", "type": "deployment.created", "createdAt": 1, "payload": {"team": {"id": "team_1"}, "user": {"id": "u1"},
		"project": {"id": "prj_1"}, "deployment": {"id": "dpl_1", "url": "x.vercel.app", "name": "x", "meta": {}}, "target": "production"}}`)
	now := time.Now()
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.Deploy, ReceivedAt: now, Payload: body})
	if err != nil || len(res.Events) == 0 {
		t.Fatalf("map: %v %+v", err, res)
	}
	if _, err := b.Commit(context.Background(), triggers.Capture{Connector: triggers.Deploy, DeliveryID: res.DeliveryID, ReceivedAt: now, Body: body}, res.Events); err != nil {
		t.Fatal(err)
	}
	ev := res.Events[0]
	code, got := v.do(http.MethodGet, "/v1/events/"+ev.ID, key)
	outcomes, isList := got["outcomes"].([]any)
	note, _ := got["note"].(string)
	if code != http.StatusOK || got["event_id"] != ev.ID || got["kind"] != string(ev.Kind) || !isList || len(outcomes) != 0 ||
		!strings.Contains(note, "no trigger of this tenant is of kind "+string(ev.Kind)) || got["dispatched_at"] != nil {
		t.Fatalf("an event of the shared endpoints no trigger wanted: %d %v; want 200, outcomes [] and a note naming its kind", code, got)
	}
	_, otherKey := v.tenant("globex")
	if code, _ := v.do(http.MethodGet, "/v1/events/"+ev.ID, otherKey); code != http.StatusNotFound {
		t.Fatalf("another tenant: %d, want 404 (the shared endpoints are the default tenant's)", code)
	}
	if code, got := v.do(http.MethodGet, "/v1/events/evt-never", key); code != http.StatusNotFound {
		t.Fatalf("an unknown id: %d %v, want 404", code, got)
	}
}
