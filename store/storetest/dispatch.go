package storetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// This file holds the conformance tests of the dispatcher's records:
// agents, triggers, hooks, runs, event records and cursors.

// pdt is a second zone for times that must round-trip.
var pdt = time.FixedZone("PDT", -7*3600)

// tieTime is 2^61 unix nanoseconds, where float64 values are 512 apart:
// times a few nanoseconds after it are equal as float64 unix nanoseconds
// (as in Redis sorted-set scores), yet must be listed in their order.
var tieTime = time.Unix(0, 1<<61)

// normJSON returns raw as a canonical encoding of the same JSON value: a
// backend that stores records as JSON may compact a json.RawMessage or
// escape HTML characters in it, and turn a nil one into null. Invalid JSON
// is returned as is.
func normJSON(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	if v == nil {
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

func normAgent(x store.Agent) store.Agent {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.NATSPasswordSetAt = normTime(x.NATSPasswordSetAt)
	x.Steps = slices.Clone(x.Steps)
	for i := range x.Steps {
		x.Steps[i].Input = normJSON(x.Steps[i].Input)
	}
	return x
}

func normTrigger(x store.Trigger) store.Trigger {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.Params = normJSON(x.Params)
	return x
}

func normHook(x store.Hook) store.Hook {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.CheckedAt = normTime(x.CheckedAt)
	x.SecretsSetAt = normTime(x.SecretsSetAt)
	return x
}

func normHookActivity(x store.HookActivity) store.HookActivity {
	x.LastAcceptedAt = normTime(x.LastAcceptedAt)
	if x.LastRefusal != nil {
		r := *x.LastRefusal
		r.At = normTime(r.At)
		x.LastRefusal = &r
	}
	return x
}

func normRun(x store.Run) store.Run {
	x.ClaimedUntil = normTime(x.ClaimedUntil)
	x.CreatedAt = normTime(x.CreatedAt)
	x.StartedAt = normTime(x.StartedAt)
	x.FinishedAt = normTime(x.FinishedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.Result = normJSON(x.Result)
	x.Steps = slices.Clone(x.Steps)
	for i := range x.Steps {
		st := &x.Steps[i]
		st.Input = normJSON(st.Input)
		st.Output = normJSON(st.Output)
		st.StartedAt = normTime(st.StartedAt)
		st.FinishedAt = normTime(st.FinishedAt)
	}
	return x
}

func normEvent(x store.EventRecord) store.EventRecord {
	x.ReceivedAt = normTime(x.ReceivedAt)
	x.DispatchedAt = normTime(x.DispatchedAt)
	return x
}

func normCursor(x store.Cursor) store.Cursor {
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.Value = normJSON(x.Value)
	return x
}

// everyByte returns the 256 byte values, NUL and invalid UTF-8 included.
func everyByte() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(255 - i)
	}
	return b
}

// agent returns a minimal agent.
func agent(tenantID, id string, created time.Time) store.Agent {
	return store.Agent{ID: id, TenantID: tenantID, Name: "agent " + id, Delivery: store.DeliverNATS, CreatedAt: created, UpdatedAt: created}
}

// fullAgent returns an agent with every field set.
func fullAgent(tenantID, id string) store.Agent {
	return store.Agent{
		ID:                id,
		TenantID:          tenantID,
		Name:              "Zoë's <agent> \"one\"\n",
		Delivery:          store.DeliverHTTP,
		URL:               "https://agent.example.com/runs?x=1&y=ü",
		SealedSecret:      everyByte(),
		NATSPasswordHash:  everyByte(),
		NATSPasswordSetAt: base.Add(time.Second),
		Steps: []store.PipelineStep{
			{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
				Input: json.RawMessage(`{"body": "Hello {{ .event.subject }} <b>&</b>", "n": [1, 2.5, null, true], "nested": {"k": ""}}`)},
			{Name: "redeploy", Step: "deploy.redeploy", Account: "acc2"},
		},
		CreatedAt: base,
		UpdatedAt: base.Add(time.Hour + time.Nanosecond).In(pdt),
	}
}

// trigger returns a minimal enabled trigger.
func trigger(tenantID, id, accountID, agentID string, created time.Time) store.Trigger {
	return store.Trigger{
		ID: id, TenantID: tenantID, Kind: "codehost.push", AccountID: accountID, AgentID: agentID,
		Enabled: true, Status: store.TriggerActive, CreatedAt: created, UpdatedAt: created,
	}
}

// fullTrigger returns a trigger with every field set.
func fullTrigger(tenantID, id string) store.Trigger {
	return store.Trigger{
		ID:           id,
		TenantID:     tenantID,
		Kind:         "codehost.pull_request.opened",
		AccountID:    "acc1",
		AgentID:      "ag1",
		Enabled:      false,
		Params:       json.RawMessage(`{ "repository": "octo/hello", "branches": ["main", "release/*"], "html": "<b>&</b>" }`),
		Filter:       `event.ref == "refs/heads/main" && !("skip ci" in event.message)`,
		Status:       store.TriggerInactive,
		StatusReason: "account removed\t\"acc1\"\n",
		CreatedAt:    base,
		UpdatedAt:    base.Add(time.Minute + 3).In(pdt),
	}
}

// hook returns a minimal repository hook.
func hook(tenantID, id, accountID, target string, created time.Time) store.Hook {
	return store.Hook{
		ID: id, TenantID: tenantID, AccountID: accountID, Connector: "codehost", Scope: store.HookRepository,
		Target: target, Status: store.HookActive, CreatedAt: created, UpdatedAt: created,
	}
}

// fullHook returns a hook with every field set.
func fullHook(tenantID, id string) store.Hook {
	return store.Hook{
		ID:           id,
		TenantID:     tenantID,
		AccountID:    "acc1",
		Connector:    "codehost",
		Scope:        store.HookOrganization,
		Target:       "octo-org",
		ExternalID:   1<<40 + 7,
		Events:       []string{"push", "pull_request", "issue_comment"},
		SealedSecret: everyByte(),
		SecretsSetAt: base.Add(90*time.Minute + 5).In(pdt),
		Status:       store.HookFailing,
		StatusReason: "422 \"Hook already exists\"\n",
		CreatedAt:    base,
		UpdatedAt:    base.Add(time.Second + 1),
		CheckedAt:    base.Add(2*time.Hour + 999999999).In(pdt),
	}
}

// run returns a minimal run.
func run(tenantID, id, eventID, triggerID, agentID string, status store.RunStatus, created time.Time) store.Run {
	return store.Run{
		ID: id, TenantID: tenantID, EventID: eventID, TriggerID: triggerID, AgentID: agentID,
		Kind: "codehost.push", Status: status, Attempts: 1, Delivery: store.DeliverNATS,
		CreatedAt: created, UpdatedAt: created,
	}
}

// fullRun returns a run with every field set.
func fullRun(tenantID, id string) store.Run {
	return store.Run{
		ID:             id,
		TenantID:       tenantID,
		EventID:        "ev1",
		TriggerID:      "tr1",
		AgentID:        "ag1",
		Kind:           "codehost.push",
		Replay:         true,
		Status:         store.RunFailed,
		Attempts:       3,
		ClaimedBy:      "worker-7",
		ClaimedUntil:   base.Add(time.Minute + 1),
		Delivery:       store.DeliverHTTP,
		DeliveryStatus: "dead_lettered",
		Steps: []store.StepRun{
			{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Status: store.StepSucceeded,
				Input:     json.RawMessage(`{"body": "hi <b>&</b>"}`),
				Output:    json.RawMessage(`{"id": 12345678901, "url": "https://example.com/c?a=1&b=2"}`),
				StartedAt: base.Add(time.Second), FinishedAt: base.Add(2*time.Second + 1)},
			{Name: "redeploy", Step: "deploy.redeploy", Account: "acc2", Status: store.StepFailed,
				Error:     &store.RunError{Code: "upstream_error", Message: "502 \"Bad Gateway\"\n"},
				StartedAt: base.Add(2 * time.Second).In(pdt)},
			{Name: "notify", Step: "codehost.create_comment", Account: "acc1", Status: store.StepSkipped},
		},
		Error:      &store.RunError{Code: "step_failed", Message: "redeploy failed"},
		Result:     json.RawMessage(`{"ok": false, "steps": [1, 2, 3]}`),
		CreatedAt:  base,
		StartedAt:  base.Add(time.Second),
		FinishedAt: base.Add(3 * time.Second).In(pdt),
		UpdatedAt:  base.Add(3*time.Second + 5),
	}
}

// event returns an event record with a started outcome for each trigger.
func event(tenantID, id string, dispatched time.Time, triggerIDs ...string) store.EventRecord {
	e := store.EventRecord{
		TenantID: tenantID, EventID: id, Kind: "codehost.push", Subject: "octo/hello@main",
		DeliveryID: "delivery-" + id, Repository: "octo/hello",
		ReceivedAt: dispatched.Add(-time.Second - 1).In(pdt), DispatchedAt: dispatched,
	}
	for _, tr := range triggerIDs {
		e.Outcomes = append(e.Outcomes, store.Outcome{TriggerID: tr, AgentID: "agent-of-" + tr, Result: "started", RunID: id + "/" + tr})
	}
	return e
}

// upTo returns what a list with this limit keeps of xs: the first limit,
// or the first 100 when limit is not positive.
func upTo[T any](xs []T, limit int) []T {
	if limit <= 0 {
		limit = 100
	}
	return xs[:min(limit, len(xs))]
}

// ids returns the ids of xs, for short failure messages about order.
func ids[T any](xs []T, id func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

// sameOrder fails the test unless got and want hold the same ids in the
// same order, then compares the records.
func sameOrder[T any](t *testing.T, what string, norm func(T) T, id func(T) string, got, want []T) {
	t.Helper()
	if g, w := ids(got, id), ids(want, id); !slices.Equal(g, w) {
		t.Fatalf("%s: got ids %q, want %q", what, g, w)
	}
	sameList(t, what, norm, got, want)
}

func agentID(a store.Agent) string       { return a.ID }
func triggerID(tr store.Trigger) string  { return tr.ID }
func hookID(h store.Hook) string         { return h.ID }
func runID(r store.Run) string           { return r.ID }
func eventID(e store.EventRecord) string { return e.TenantID + "/" + e.EventID }

// Agents.

func testAgentCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := fullAgent("t1", "ag1")
	a.Version = 42 // ignored: a new agent is version 1
	created, err := s.CreateAgent(ctx, a)
	must(t, "CreateAgent", err)
	want := a
	want.Version = 1
	same(t, "CreateAgent result", normAgent, created, want)

	got, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent", err)
	same(t, "GetAgent", normAgent, got, want)
	// The caller owns what it gets: changing it changes nothing stored.
	got.Steps[0].Name = "changed"
	got.Steps[0].Input[0] = ' '
	got.SealedSecret[0] = 'x'
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent again", err)
	same(t, "GetAgent after changing the result of the first", normAgent, got, want)

	_, err = s.GetAgent(ctx, "t2", "ag1")
	wantErr(t, "GetAgent with another tenant id", err, store.ErrNotFound)
	_, err = s.GetAgent(ctx, "t1", "nope")
	wantErr(t, "GetAgent unknown", err, store.ErrNotFound)
	// An agent connecting to NATS names only itself.
	got, err = s.FindAgent(ctx, "ag1")
	must(t, "FindAgent", err)
	same(t, "FindAgent", normAgent, got, want)
	_, err = s.FindAgent(ctx, "nope")
	wantErr(t, "FindAgent unknown", err, store.ErrNotFound)

	_, err = s.CreateAgent(ctx, agent("t1", "ag1", base))
	wantErr(t, "CreateAgent with a taken id", err, store.ErrConflict)
	// Agent ids are global: runs are published to agents.<agent-id>.runs.
	_, err = s.CreateAgent(ctx, agent("t2", "ag1", base))
	wantErr(t, "CreateAgent with another tenant's agent id", err, store.ErrConflict)
	_, err = s.GetAgent(ctx, "t2", "ag1")
	wantErr(t, "GetAgent of the refused agent", err, store.ErrNotFound)
	list, err := s.ListAgents(ctx, "t2")
	must(t, "ListAgents t2", err)
	if len(list) != 0 {
		t.Fatalf("ListAgents t2 after a refused create = %+v", list)
	}
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after conflicts", err)
	same(t, "GetAgent after conflicts", normAgent, got, want)
}

func testAgentList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if as, err := s.ListAgents(ctx, "t1"); err != nil || len(as) != 0 {
		t.Fatalf("ListAgents on an empty store = %v, %v; want none", as, err)
	}
	var want []store.Agent
	// Created out of order; listed by CreatedAt (nanoseconds apart), then id.
	for _, c := range []struct {
		id  string
		off time.Duration
	}{{"c", 2}, {"a", 0}, {"e", time.Hour}, {"b", 1}, {"d", 2}} {
		a, err := s.CreateAgent(ctx, agent("t1", c.id, base.Add(c.off)))
		must(t, "CreateAgent", err)
		want = append(want, a)
	}
	// Tenant ids that extend t1 with the backends' key separators.
	for i, tenant := range []string{"t", "t1/x", "t1:x", "t1x", "t1\x00x", "t2"} {
		_, err := s.CreateAgent(ctx, agent(tenant, fmt.Sprintf("other-%d", i), base.Add(-time.Hour)))
		must(t, "CreateAgent "+tenant, err)
	}
	want = []store.Agent{want[1], want[3], want[0], want[4], want[2]}
	got, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents t1 (oldest first)", normAgent, agentID, got, want)

	got, err = s.ListAgents(ctx, "t3")
	must(t, "ListAgents t3", err)
	if len(got) != 0 {
		t.Fatalf("ListAgents of a tenant without agents = %+v", got)
	}
}

func testAgentUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateAgent(ctx, agent("t1", "ag1", base))
	must(t, "CreateAgent", err)

	a.Name = "renamed"
	a.Delivery = store.DeliverHTTP
	a.URL = "https://agent.example.com"
	a.SealedSecret = []byte("sealed")
	a.Steps = []store.PipelineStep{{Name: "s", Step: "codehost.create_comment", Account: "acc1"}}
	a.UpdatedAt = base.Add(time.Minute)
	up, err := s.UpdateAgent(ctx, a)
	must(t, "UpdateAgent", err)
	want := a
	want.Version = 2
	same(t, "UpdateAgent result", normAgent, up, want)
	got, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent", err)
	same(t, "GetAgent after update", normAgent, got, want)

	// a still has Version 1: stale.
	a.Name = "stale"
	_, err = s.UpdateAgent(ctx, a)
	wantErr(t, "UpdateAgent with a stale version", err, store.ErrConflict)
	future := up
	future.Version = 7
	_, err = s.UpdateAgent(ctx, future)
	wantErr(t, "UpdateAgent with a future version", err, store.ErrConflict)
	other := up
	other.TenantID = "t2"
	_, err = s.UpdateAgent(ctx, other)
	wantErr(t, "UpdateAgent with another tenant id", err, store.ErrNotFound)
	missing := agent("t1", "nope", base)
	missing.Version = 1
	_, err = s.UpdateAgent(ctx, missing)
	wantErr(t, "UpdateAgent unknown", err, store.ErrNotFound)
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after refused updates", err)
	same(t, "GetAgent after refused updates", normAgent, got, want)

	winner := OneWins(t, "UpdateAgent", 10, func(i int) (store.Agent, error) {
		b := up
		b.Name = fmt.Sprintf("writer-%d", i)
		return s.UpdateAgent(ctx, b)
	})
	got, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after concurrent updates", err)
	same(t, "GetAgent after concurrent updates", normAgent, got, winner)
	if got.Version != 3 {
		t.Fatalf("Version = %d after one more update, want 3", got.Version)
	}
	list, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents after updates", normAgent, agentID, list, []store.Agent{winner})
}

func testAgentDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.CreateAgent(ctx, agent("t1", "ag1", base))
	must(t, "CreateAgent", err)
	b, err := s.CreateAgent(ctx, agent("t1", "ag2", base.Add(time.Second)))
	must(t, "CreateAgent", err)

	wantErr(t, "DeleteAgent with another tenant id", s.DeleteAgent(ctx, "t2", "ag1"), store.ErrNotFound)
	_, err = s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after a refused delete", err)

	must(t, "DeleteAgent", s.DeleteAgent(ctx, "t1", "ag1"))
	_, err = s.GetAgent(ctx, "t1", "ag1")
	wantErr(t, "GetAgent of a deleted agent", err, store.ErrNotFound)
	list, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents", err)
	sameOrder(t, "ListAgents after delete", normAgent, agentID, list, []store.Agent{b})
	wantErr(t, "second DeleteAgent", s.DeleteAgent(ctx, "t1", "ag1"), store.ErrNotFound)
	wantErr(t, "DeleteAgent unknown", s.DeleteAgent(ctx, "t1", "nope"), store.ErrNotFound)
	stale := agent("t1", "ag1", base)
	stale.Version = 1
	_, err = s.UpdateAgent(ctx, stale)
	wantErr(t, "UpdateAgent of a deleted agent", err, store.ErrNotFound)

	// The id is free again, in any tenant.
	again, err := s.CreateAgent(ctx, agent("t2", "ag1", base))
	must(t, "CreateAgent with a deleted agent's id", err)
	if again.Version != 1 {
		t.Fatalf("CreateAgent again: Version = %d, want 1", again.Version)
	}
	list, err = s.ListAgents(ctx, "t2")
	must(t, "ListAgents t2", err)
	sameOrder(t, "ListAgents t2", normAgent, agentID, list, []store.Agent{again})
}

// Triggers.

// selectTriggers is what ListTriggers(f) must return of all.
func selectTriggers(all []store.Trigger, f store.TriggerFilter) []store.Trigger {
	out := []store.Trigger{}
	for _, tr := range all {
		if (f.TenantID == "" || tr.TenantID == f.TenantID) && (f.AccountID == "" || tr.AccountID == f.AccountID) &&
			(f.AgentID == "" || tr.AgentID == f.AgentID) {
			out = append(out, tr)
		}
	}
	slices.SortFunc(out, func(a, b store.Trigger) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// checkTriggerLists compares ListTriggers with selectTriggers for filters.
func checkTriggerLists(t *testing.T, s store.Store, all []store.Trigger, filters []store.TriggerFilter) {
	t.Helper()
	for _, f := range filters {
		got, err := s.ListTriggers(t.Context(), f)
		must(t, fmt.Sprintf("ListTriggers %+v", f), err)
		sameOrder(t, fmt.Sprintf("ListTriggers %+v", f), normTrigger, triggerID, got, selectTriggers(all, f))
	}
}

func testTriggerCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	tr := fullTrigger("t1", "tr1")
	tr.Version = 42
	created, err := s.CreateTrigger(ctx, tr)
	must(t, "CreateTrigger", err)
	want := tr
	want.Version = 1
	same(t, "CreateTrigger result", normTrigger, created, want)

	got, err := s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger", err)
	same(t, "GetTrigger", normTrigger, got, want)
	got.Params[0] = ' '
	got, err = s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger again", err)
	same(t, "GetTrigger after changing the result of the first", normTrigger, got, want)

	_, err = s.GetTrigger(ctx, "t2", "tr1")
	wantErr(t, "GetTrigger with another tenant id", err, store.ErrNotFound)
	_, err = s.GetTrigger(ctx, "t1", "nope")
	wantErr(t, "GetTrigger unknown", err, store.ErrNotFound)

	_, err = s.CreateTrigger(ctx, trigger("t1", "tr1", "acc2", "ag2", base))
	wantErr(t, "CreateTrigger with a taken id", err, store.ErrConflict)
	// Trigger ids are global: run ids are derived from them.
	_, err = s.CreateTrigger(ctx, trigger("t2", "tr1", "acc2", "ag2", base))
	wantErr(t, "CreateTrigger with another tenant's trigger id", err, store.ErrConflict)
	checkTriggerLists(t, s, []store.Trigger{want}, []store.TriggerFilter{{}, {TenantID: "t2"}, {AccountID: "acc2"}})
	got, err = s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger after conflicts", err)
	same(t, "GetTrigger after conflicts", normTrigger, got, want)
}

func testTriggerList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if ts, err := s.ListTriggers(ctx, store.TriggerFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("ListTriggers on an empty store = %v, %v; want none", ts, err)
	}
	var all []store.Trigger
	// 24 triggers over three tenants, two accounts and three agents,
	// created out of time order, some at the same time.
	for i := range 24 {
		j := i * 7 % 24
		tenant := []string{"t1", "t1", "t2", "t1:x"}[j%4]
		tr := trigger(tenant, fmt.Sprintf("tr%02d", (j*5)%24), []string{"acc1", "acc2"}[j%2], []string{"ag1", "ag2", "ag3"}[j%3],
			base.Add(time.Duration(j/2)))
		created, err := s.CreateTrigger(ctx, tr)
		must(t, "CreateTrigger", err)
		all = append(all, created)
	}
	checkTriggerLists(t, s, all, []store.TriggerFilter{
		{TenantID: "t1"},
		{TenantID: "t2"},
		{TenantID: "t1:x"},
		{},
		{TenantID: "t1", AccountID: "acc1"},
		{TenantID: "t1", AgentID: "ag2"},
		{TenantID: "t1", AccountID: "acc2", AgentID: "ag3"},
		{AccountID: "acc1"},
		{AgentID: "ag3"},
		{AccountID: "acc2", AgentID: "ag1"},
		{TenantID: "t3"},
		{TenantID: "t1", AccountID: "acc9"},
	})
}

func testTriggerUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	tr, err := s.CreateTrigger(ctx, trigger("t1", "tr1", "acc1", "ag1", base))
	must(t, "CreateTrigger", err)
	other, err := s.CreateTrigger(ctx, trigger("t1", "tr2", "acc1", "ag1", base.Add(time.Second)))
	must(t, "CreateTrigger", err)

	tr.Enabled = false
	tr.Status = store.TriggerInactive
	tr.StatusReason = "hook could not be registered"
	tr.AccountID = "acc2"
	tr.AgentID = "ag2"
	tr.Params = json.RawMessage(`{"repository":"octo/other"}`)
	tr.UpdatedAt = base.Add(time.Minute)
	up, err := s.UpdateTrigger(ctx, tr)
	must(t, "UpdateTrigger", err)
	want := tr
	want.Version = 2
	same(t, "UpdateTrigger result", normTrigger, up, want)
	got, err := s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger", err)
	same(t, "GetTrigger after update", normTrigger, got, want)
	// The filters see the new account and agent.
	checkTriggerLists(t, s, []store.Trigger{up, other}, []store.TriggerFilter{
		{TenantID: "t1", AccountID: "acc1"}, {TenantID: "t1", AccountID: "acc2"}, {AgentID: "ag1"}, {AgentID: "ag2"}, {},
	})

	_, err = s.UpdateTrigger(ctx, tr) // Version 1: stale
	wantErr(t, "UpdateTrigger with a stale version", err, store.ErrConflict)
	foreign := up
	foreign.TenantID = "t2"
	_, err = s.UpdateTrigger(ctx, foreign)
	wantErr(t, "UpdateTrigger with another tenant id", err, store.ErrNotFound)
	missing := trigger("t1", "nope", "acc1", "ag1", base)
	missing.Version = 1
	_, err = s.UpdateTrigger(ctx, missing)
	wantErr(t, "UpdateTrigger unknown", err, store.ErrNotFound)

	winner := OneWins(t, "UpdateTrigger", 10, func(i int) (store.Trigger, error) {
		b := up
		b.Filter = fmt.Sprintf("writer == %d", i)
		return s.UpdateTrigger(ctx, b)
	})
	got, err = s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger after concurrent updates", err)
	same(t, "GetTrigger after concurrent updates", normTrigger, got, winner)
	if got.Version != 3 {
		t.Fatalf("Version = %d after one more update, want 3", got.Version)
	}
}

func testTriggerDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.CreateTrigger(ctx, trigger("t1", "tr1", "acc1", "ag1", base))
	must(t, "CreateTrigger", err)
	b, err := s.CreateTrigger(ctx, trigger("t1", "tr2", "acc1", "ag1", base.Add(time.Second)))
	must(t, "CreateTrigger", err)

	wantErr(t, "DeleteTrigger with another tenant id", s.DeleteTrigger(ctx, "t2", "tr1"), store.ErrNotFound)
	_, err = s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger after a refused delete", err)

	must(t, "DeleteTrigger", s.DeleteTrigger(ctx, "t1", "tr1"))
	_, err = s.GetTrigger(ctx, "t1", "tr1")
	wantErr(t, "GetTrigger of a deleted trigger", err, store.ErrNotFound)
	checkTriggerLists(t, s, []store.Trigger{b}, []store.TriggerFilter{{}, {TenantID: "t1"}, {AccountID: "acc1"}})
	wantErr(t, "second DeleteTrigger", s.DeleteTrigger(ctx, "t1", "tr1"), store.ErrNotFound)
	stale := trigger("t1", "tr1", "acc1", "ag1", base)
	stale.Version = 1
	_, err = s.UpdateTrigger(ctx, stale)
	wantErr(t, "UpdateTrigger of a deleted trigger", err, store.ErrNotFound)

	again, err := s.CreateTrigger(ctx, trigger("t2", "tr1", "acc3", "ag3", base))
	must(t, "CreateTrigger with a deleted trigger's id", err)
	checkTriggerLists(t, s, []store.Trigger{b, again}, []store.TriggerFilter{{}, {TenantID: "t1"}, {TenantID: "t2"}})
}

// Hooks.

func testHookCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	h := fullHook("t1", "h1")
	h.Version = 42
	created, err := s.CreateHook(ctx, h)
	must(t, "CreateHook", err)
	want := h
	want.Version = 1
	same(t, "CreateHook result", normHook, created, want)

	// GetHook needs only the id (ingest knows only the id in the URL).
	got, err := s.GetHook(ctx, "h1")
	must(t, "GetHook", err)
	same(t, "GetHook", normHook, got, want)
	got.Events[0] = "changed"
	got.SealedSecret[0] = 'x'
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook again", err)
	same(t, "GetHook after changing the result of the first", normHook, got, want)
	_, err = s.GetHook(ctx, "nope")
	wantErr(t, "GetHook unknown", err, store.ErrNotFound)

	got, err = s.FindHook(ctx, want.Key())
	must(t, "FindHook", err)
	same(t, "FindHook", normHook, got, want)

	dup := hook("t1", "h1", "acc9", "octo/other", base)
	_, err = s.CreateHook(ctx, dup)
	wantErr(t, "CreateHook with a taken id", err, store.ErrConflict)
	dup.TenantID = "t2"
	_, err = s.CreateHook(ctx, dup)
	wantErr(t, "CreateHook with another tenant's hook id", err, store.ErrConflict)
	// The refused hooks did not claim their keys.
	_, err = s.FindHook(ctx, dup.Key())
	wantErr(t, "FindHook of a refused hook", err, store.ErrNotFound)
	dup.TenantID = "t1"
	_, err = s.FindHook(ctx, dup.Key())
	wantErr(t, "FindHook of a refused hook", err, store.ErrNotFound)
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook after conflicts", err)
	same(t, "GetHook after conflicts", normHook, got, want)
}

func testHookKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := hook("t1", "h1", "acc1", "octo/hello", base)
	endpoint := store.Hook{ID: "h2", TenantID: "t1", Connector: "deploy", Scope: store.HookAgentEndpoint, Target: "ag1", Status: store.HookActive}
	// Each differs from first in one part of the key, so none conflicts.
	variants := []store.Hook{first, endpoint}
	for i, change := range []func(*store.Hook){
		func(h *store.Hook) { h.TenantID = "t2" },
		func(h *store.Hook) { h.AccountID = "acc2" },
		func(h *store.Hook) { h.AccountID = "" },
		func(h *store.Hook) { h.Connector = "deploy" },
		func(h *store.Hook) { h.Scope = store.HookOrganization },
		func(h *store.Hook) { h.Target = "octo/world" },
		func(h *store.Hook) { h.Target = "octo/hello:x" },
		func(h *store.Hook) { h.AccountID, h.Connector = "acc1:codehost", "x" },
	} {
		h := first
		h.ID = fmt.Sprintf("v%d", i)
		change(&h)
		variants = append(variants, h)
	}
	for i, h := range variants {
		created, err := s.CreateHook(ctx, h)
		must(t, "CreateHook "+h.ID, err)
		variants[i] = created
	}
	for _, h := range variants {
		got, err := s.FindHook(ctx, h.Key())
		must(t, "FindHook of "+h.ID, err)
		same(t, "FindHook of "+h.ID, normHook, got, h)

		dup := h
		dup.ID = "dup-" + h.ID
		_, err = s.CreateHook(ctx, dup)
		wantErr(t, "CreateHook with the key of "+h.ID, err, store.ErrConflict)
		_, err = s.GetHook(ctx, dup.ID)
		wantErr(t, "GetHook of the refused "+dup.ID, err, store.ErrNotFound)
	}
	unknown := first.Key()
	unknown.Target = "octo/nope"
	_, err := s.FindHook(ctx, unknown)
	wantErr(t, "FindHook unknown", err, store.ErrNotFound)

	// Of many creates with one key, one wins.
	k := hook("t3", "", "acc1", "octo/race", base)
	winner := OneWins(t, "CreateHook of one key", 10, func(i int) (store.Hook, error) {
		h := k
		h.ID = fmt.Sprintf("race-%d", i)
		return s.CreateHook(ctx, h)
	})
	got, err := s.FindHook(ctx, k.Key())
	must(t, "FindHook after concurrent creates", err)
	same(t, "FindHook after concurrent creates", normHook, got, winner)
	list, err := s.ListHooks(ctx, "t3")
	must(t, "ListHooks t3", err)
	sameOrder(t, "ListHooks after concurrent creates", normHook, hookID, list, []store.Hook{winner})
}

func testHookList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if hs, err := s.ListHooks(ctx, ""); err != nil || len(hs) != 0 {
		t.Fatalf("ListHooks on an empty store = %v, %v; want none", hs, err)
	}
	byTenant := map[string][]store.Hook{}
	var all []store.Hook
	for i := range 12 {
		j := i * 5 % 12
		tenant := []string{"t1", "t2", "t1:x"}[j%3]
		h, err := s.CreateHook(ctx, hook(tenant, fmt.Sprintf("h%02d", (j*7)%12), "acc1", fmt.Sprintf("octo/r%d", j), base.Add(time.Duration(j/2))))
		must(t, "CreateHook", err)
		byTenant[tenant] = append(byTenant[tenant], h)
		all = append(all, h)
	}
	oldest := func(hs []store.Hook) []store.Hook {
		hs = slices.Clone(hs)
		slices.SortFunc(hs, func(a, b store.Hook) int { return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID)) })
		return hs
	}
	for _, tenant := range []string{"t1", "t2", "t1:x"} {
		got, err := s.ListHooks(ctx, tenant)
		must(t, "ListHooks "+tenant, err)
		sameOrder(t, "ListHooks "+tenant, normHook, hookID, got, oldest(byTenant[tenant]))
	}
	got, err := s.ListHooks(ctx, "")
	must(t, "ListHooks of every tenant", err)
	sameOrder(t, "ListHooks of every tenant", normHook, hookID, got, oldest(all))
	got, err = s.ListHooks(ctx, "t3")
	must(t, "ListHooks t3", err)
	if len(got) != 0 {
		t.Fatalf("ListHooks of a tenant without hooks = %+v", got)
	}
}

func testHookUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	h, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)

	h.ExternalID = 77
	h.Events = []string{"push"}
	h.SealedSecret = []byte("secret")
	h.Status = store.HookFailing
	h.StatusReason = "404"
	h.CheckedAt = base.Add(time.Hour)
	h.SecretsSetAt = base.Add(time.Hour + 7).In(pdt)
	h.UpdatedAt = base.Add(time.Hour)
	up, err := s.UpdateHook(ctx, h)
	must(t, "UpdateHook", err)
	want := h
	want.Version = 2
	same(t, "UpdateHook result", normHook, up, want)
	got, err := s.GetHook(ctx, "h1")
	must(t, "GetHook", err)
	same(t, "GetHook after update", normHook, got, want)

	_, err = s.UpdateHook(ctx, h) // Version 1: stale
	wantErr(t, "UpdateHook with a stale version", err, store.ErrConflict)
	future := up
	future.Version = 9
	_, err = s.UpdateHook(ctx, future)
	wantErr(t, "UpdateHook with a future version", err, store.ErrConflict)

	// The key cannot change, whichever part.
	for name, change := range map[string]func(*store.Hook){
		"tenant":    func(h *store.Hook) { h.TenantID = "t2" },
		"account":   func(h *store.Hook) { h.AccountID = "acc2" },
		"connector": func(h *store.Hook) { h.Connector = "deploy" },
		"scope":     func(h *store.Hook) { h.Scope = store.HookOrganization },
		"target":    func(h *store.Hook) { h.Target = "octo/moved" },
	} {
		moved := up
		change(&moved)
		_, err = s.UpdateHook(ctx, moved)
		wantErr(t, "UpdateHook changing the "+name, err, store.ErrConflict)
		_, err = s.FindHook(ctx, moved.Key())
		wantErr(t, "FindHook of the refused key ("+name+")", err, store.ErrNotFound)
	}
	got, err = s.FindHook(ctx, up.Key())
	must(t, "FindHook after refused updates", err)
	same(t, "FindHook after refused updates", normHook, got, want)

	missing := hook("t1", "nope", "acc1", "octo/nope", base)
	missing.Version = 1
	_, err = s.UpdateHook(ctx, missing)
	wantErr(t, "UpdateHook unknown", err, store.ErrNotFound)

	winner := OneWins(t, "UpdateHook", 10, func(i int) (store.Hook, error) {
		b := up
		b.ExternalID = int64(100 + i)
		return s.UpdateHook(ctx, b)
	})
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook after concurrent updates", err)
	same(t, "GetHook after concurrent updates", normHook, got, winner)
	if got.Version != 3 {
		t.Fatalf("Version = %d after one more update, want 3", got.Version)
	}
}

func testHookDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)
	b, err := s.CreateHook(ctx, hook("t1", "h2", "acc1", "octo/world", base.Add(time.Second)))
	must(t, "CreateHook", err)

	must(t, "DeleteHook", s.DeleteHook(ctx, "h1"))
	_, err = s.GetHook(ctx, "h1")
	wantErr(t, "GetHook of a deleted hook", err, store.ErrNotFound)
	_, err = s.FindHook(ctx, a.Key())
	wantErr(t, "FindHook of a deleted hook", err, store.ErrNotFound)
	for _, tenant := range []string{"t1", ""} {
		list, err := s.ListHooks(ctx, tenant)
		must(t, "ListHooks", err)
		sameOrder(t, "ListHooks after delete", normHook, hookID, list, []store.Hook{b})
	}
	wantErr(t, "second DeleteHook", s.DeleteHook(ctx, "h1"), store.ErrNotFound)
	wantErr(t, "DeleteHook unknown", s.DeleteHook(ctx, "nope"), store.ErrNotFound)
	_, err = s.UpdateHook(ctx, a)
	wantErr(t, "UpdateHook of a deleted hook", err, store.ErrNotFound)

	// The key is free again, and so is the id.
	c := a
	c.ID = "h3"
	c, err = s.CreateHook(ctx, c)
	must(t, "CreateHook with a deleted hook's key", err)
	got, err := s.FindHook(ctx, a.Key())
	must(t, "FindHook of the new hook", err)
	same(t, "FindHook of the new hook", normHook, got, c)
	d, err := s.CreateHook(ctx, hook("t2", "h1", "acc2", "octo/hello", base))
	must(t, "CreateHook with a deleted hook's id", err)
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook of the new h1", err)
	same(t, "GetHook of the new h1", normHook, got, d)
	// Deleting it again leaves the other hook with the old key alone.
	must(t, "DeleteHook new h1", s.DeleteHook(ctx, "h1"))
	got, err = s.FindHook(ctx, a.Key())
	must(t, "FindHook h3 after deleting the new h1", err)
	same(t, "FindHook h3 after deleting the new h1", normHook, got, c)
}

// wantHookActivity fails the test unless the activity of hook id is want.
func wantHookActivity(t *testing.T, s store.Store, what, id string, want store.HookActivity) {
	t.Helper()
	got, err := s.GetHookActivity(t.Context(), id)
	must(t, what+": GetHookActivity "+id, err)
	same(t, what+": GetHookActivity "+id, normHookActivity, got, want)
}

func testHookActivity(t *testing.T, s store.Store) {
	ctx := t.Context()
	none := store.HookActivity{}
	wantHookActivity(t, s, "before the hook exists", "h1", none)
	wantErr(t, "AddHookActivity to an absent hook",
		s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: base, Refused: 1}), store.ErrNotFound)
	wantHookActivity(t, s, "after a refused add", "h1", none)

	h, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)
	wantHookActivity(t, s, "a new hook", "h1", none)
	must(t, "AddHookActivity of nothing", s.AddHookActivity(ctx, "h1", none))
	wantHookActivity(t, s, "after adding nothing", "h1", none)

	// The later LastAcceptedAt wins, to the nanosecond and whatever the
	// zone; a zero one is none.
	accepted := base.Add(time.Minute)
	must(t, "AddHookActivity accepted", s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted}))
	want := store.HookActivity{LastAcceptedAt: accepted}
	wantHookActivity(t, s, "after an accept", "h1", want)
	must(t, "AddHookActivity earlier accepted",
		s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted.Add(-time.Nanosecond).In(pdt)}))
	wantHookActivity(t, s, "after an earlier accept", "h1", want)
	accepted = accepted.Add(time.Nanosecond).In(pdt)
	must(t, "AddHookActivity later accepted", s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted}))
	want.LastAcceptedAt = accepted
	wantHookActivity(t, s, "after a later accept", "h1", want)

	// Refused adds up; the LastRefusal with the later At wins, all its
	// fields together; a nil one changes nothing.
	first := &store.HookRefusal{At: base.Add(time.Hour), Status: 401, Code: "bad_signature", Message: "signature \"v1,…\" does not match\n"}
	must(t, "AddHookActivity refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1, LastRefusal: first}))
	want.Refused, want.LastRefusal = 1, first
	wantHookActivity(t, s, "after a refusal", "h1", want)
	for _, at := range []time.Time{first.At.Add(-time.Nanosecond), first.At.In(pdt)} {
		older := &store.HookRefusal{At: at, Status: 400, Code: "older", Message: "older"}
		must(t, "AddHookActivity earlier refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 2, LastRefusal: older}))
		want.Refused += 2
		wantHookActivity(t, s, "after a refusal that is not later", "h1", want)
	}
	later := &store.HookRefusal{At: first.At.Add(time.Nanosecond).In(pdt), Status: 429}
	must(t, "AddHookActivity later refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{LastRefusal: later}))
	want.LastRefusal = later
	wantHookActivity(t, s, "after a later refusal", "h1", want)
	must(t, "AddHookActivity refused only", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 10}))
	want.Refused += 10
	wantHookActivity(t, s, "after refused only", "h1", want)

	// Updating the hook leaves its activity alone.
	h.Status = store.HookFailing
	_, err = s.UpdateHook(ctx, h)
	must(t, "UpdateHook", err)
	wantHookActivity(t, s, "after UpdateHook", "h1", want)

	// Concurrent adds (of several processes) all count, and the latest
	// times win whatever the order they arrive in: a read-modify-write
	// that is not atomic loses some.
	_, err = s.CreateHook(ctx, hook("t1", "h2", "acc1", "octo/world", base))
	must(t, "CreateHook h2", err)
	const writers, adds = 8, 25
	at := func(i, j int) time.Time { return base.Add(3*time.Hour + time.Duration(i*adds+j)) }
	wins := runConcurrently(t, writers, nil, func(i int) error {
		for j := range adds {
			a := store.HookActivity{
				LastAcceptedAt: at(i, j),
				Refused:        1,
				LastRefusal:    &store.HookRefusal{At: at(i, j), Status: 400 + i, Code: fmt.Sprintf("c%d-%d", i, j)},
			}
			if err := s.AddHookActivity(ctx, "h2", a); err != nil {
				return err
			}
		}
		return nil
	})
	if wins != writers {
		t.Fatalf("%d of %d concurrent writers succeeded", wins, writers)
	}
	last := at(writers-1, adds-1)
	wantHookActivity(t, s, "after concurrent adds", "h2", store.HookActivity{
		LastAcceptedAt: last,
		Refused:        writers * adds,
		LastRefusal:    &store.HookRefusal{At: last, Status: 400 + writers - 1, Code: fmt.Sprintf("c%d-%d", writers-1, adds-1)},
	})
	wantHookActivity(t, s, "h1 after adds to h2", "h1", want)

	// DeleteHook deletes the activity: nothing outlives the hook, and a
	// hook created again with the same id and key starts with none.
	must(t, "DeleteHook", s.DeleteHook(ctx, "h1"))
	wantHookActivity(t, s, "after DeleteHook", "h1", none)
	wantErr(t, "AddHookActivity to a deleted hook",
		s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1}), store.ErrNotFound)
	_, err = s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook again", err)
	wantHookActivity(t, s, "the hook created again", "h1", none)
	must(t, "AddHookActivity to the hook created again", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1}))
	wantHookActivity(t, s, "the hook created again, after an add", "h1", store.HookActivity{Refused: 1})
	wantHookActivity(t, s, "h2 after deleting h1", "h2", store.HookActivity{
		LastAcceptedAt: last,
		Refused:        writers * adds,
		LastRefusal:    &store.HookRefusal{At: last, Status: 400 + writers - 1, Code: fmt.Sprintf("c%d-%d", writers-1, adds-1)},
	})
}

// Runs.

// selectRuns is what ListRuns(f) must return of all.
func selectRuns(all []store.Run, f store.RunFilter) []store.Run {
	out := []store.Run{}
	for _, r := range all {
		if (f.TenantID == "" || r.TenantID == f.TenantID) && (f.TriggerID == "" || r.TriggerID == f.TriggerID) &&
			(f.AgentID == "" || r.AgentID == f.AgentID) && (f.EventID == "" || r.EventID == f.EventID) &&
			(f.Status == "" || r.Status == f.Status) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return upTo(out, f.Limit)
}

// checkRunLists compares ListRuns with selectRuns for filters.
func checkRunLists(t *testing.T, s store.Store, all []store.Run, filters []store.RunFilter) {
	t.Helper()
	for _, f := range filters {
		got, err := s.ListRuns(t.Context(), f)
		must(t, fmt.Sprintf("ListRuns %+v", f), err)
		sameOrder(t, fmt.Sprintf("ListRuns %+v", f), normRun, runID, got, selectRuns(all, f))
	}
}

func testRunCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := fullRun("t1", "r1")
	r.Version = 42
	created, err := s.CreateRun(ctx, r)
	must(t, "CreateRun", err)
	want := r
	want.Version = 1
	same(t, "CreateRun result", normRun, created, want)

	for _, tenant := range []string{"t1", ""} {
		got, err := s.GetRun(ctx, tenant, "r1")
		must(t, fmt.Sprintf("GetRun(%q)", tenant), err)
		same(t, fmt.Sprintf("GetRun(%q)", tenant), normRun, got, want)
	}
	got, err := s.GetRun(ctx, "t1", "r1")
	must(t, "GetRun", err)
	got.Steps[0].Output[0] = ' '
	got.Steps[1].Error.Code = "changed"
	got.Error.Message = "changed"
	got, err = s.GetRun(ctx, "t1", "r1")
	must(t, "GetRun again", err)
	same(t, "GetRun after changing the result of the first", normRun, got, want)

	_, err = s.GetRun(ctx, "t2", "r1")
	wantErr(t, "GetRun with another tenant id", err, store.ErrNotFound)
	_, err = s.GetRun(ctx, "", "nope")
	wantErr(t, "GetRun unknown", err, store.ErrNotFound)

	// The id is the idempotency point: a run is created once, whoever
	// asks.
	_, err = s.CreateRun(ctx, run("t1", "r1", "ev2", "tr2", "ag2", store.RunClaimed, base))
	wantErr(t, "CreateRun with a taken id", err, store.ErrConflict)
	_, err = s.CreateRun(ctx, run("t2", "r1", "ev2", "tr2", "ag2", store.RunClaimed, base))
	wantErr(t, "CreateRun with another tenant's run id", err, store.ErrConflict)
	got, err = s.GetRun(ctx, "", "r1")
	must(t, "GetRun after conflicts", err)
	same(t, "GetRun after conflicts", normRun, got, want)
	checkRunLists(t, s, []store.Run{want}, []store.RunFilter{{}, {TenantID: "t2"}, {TriggerID: "tr2"}, {AgentID: "ag2"}, {TenantID: "t1", EventID: "ev2"}})
}

func testRunConcurrentCreates(t *testing.T, s store.Store) {
	ctx := t.Context()
	winner := OneWins(t, "CreateRun of one id", 20, func(i int) (store.Run, error) {
		r := run("t1", "r1", "ev1", "tr1", "ag1", store.RunClaimed, base)
		r.ClaimedBy = fmt.Sprintf("worker-%d", i)
		return s.CreateRun(ctx, r)
	})
	got, err := s.GetRun(ctx, "t1", "r1")
	must(t, "GetRun", err)
	same(t, "GetRun after concurrent creates", normRun, got, winner)
	checkRunLists(t, s, []store.Run{winner}, []store.RunFilter{{TenantID: "t1"}, {TriggerID: "tr1"}, {TenantID: "t1", EventID: "ev1"}})
}

func testRunUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	r, err := s.CreateRun(ctx, run("t1", "r1", "ev1", "tr1", "ag1", store.RunClaimed, base))
	must(t, "CreateRun", err)

	r.Status = store.RunStarted
	r.StartedAt = base.Add(time.Second)
	r.Steps = []store.StepRun{{Name: "s", Step: "codehost.create_comment", Account: "acc1", Status: store.StepRunning, StartedAt: base.Add(time.Second)}}
	r.DeliveryStatus = "published"
	r.UpdatedAt = base.Add(time.Second)
	up, err := s.UpdateRun(ctx, r)
	must(t, "UpdateRun", err)
	want := r
	want.Version = 2
	same(t, "UpdateRun result", normRun, up, want)
	got, err := s.GetRun(ctx, "", "r1")
	must(t, "GetRun", err)
	same(t, "GetRun after update", normRun, got, want)

	_, err = s.UpdateRun(ctx, r) // Version 1: stale
	wantErr(t, "UpdateRun with a stale version", err, store.ErrConflict)
	future := up
	future.Version = 5
	_, err = s.UpdateRun(ctx, future)
	wantErr(t, "UpdateRun with a future version", err, store.ErrConflict)
	foreign := up
	foreign.TenantID = "t2"
	_, err = s.UpdateRun(ctx, foreign)
	wantErr(t, "UpdateRun with another tenant id", err, store.ErrNotFound)
	missing := run("t1", "nope", "ev1", "tr1", "ag1", store.RunClaimed, base)
	missing.Version = 1
	_, err = s.UpdateRun(ctx, missing)
	wantErr(t, "UpdateRun unknown", err, store.ErrNotFound)
	got, err = s.GetRun(ctx, "t1", "r1")
	must(t, "GetRun after refused updates", err)
	same(t, "GetRun after refused updates", normRun, got, want)
}

// testRunConcurrentUpdates has workers race to update a run from the
// version they all read, round after round: each round, exactly one wins.
func testRunConcurrentUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	cur, err := s.CreateRun(ctx, run("t1", "r1", "ev1", "tr1", "ag1", store.RunClaimed, base))
	must(t, "CreateRun", err)
	for round := range 4 {
		from := cur
		cur = OneWins(t, fmt.Sprintf("UpdateRun round %d", round), 10, func(i int) (store.Run, error) {
			r := from
			r.ClaimedBy = fmt.Sprintf("worker-%d-%d", round, i)
			r.Attempts++
			return s.UpdateRun(ctx, r)
		})
		got, err := s.GetRun(ctx, "t1", "r1")
		must(t, "GetRun", err)
		same(t, fmt.Sprintf("GetRun after round %d", round), normRun, got, cur)
		if want := int64(round + 2); got.Version != want {
			t.Fatalf("Version = %d after round %d, want %d", got.Version, round, want)
		}
	}
}

// testRunList lists 130 runs of two tenants, three triggers, three agents
// and seven events, created out of order, some at the same time and most
// closer together than a float64 holds unix nanoseconds, through every
// kind of filter.
func testRunList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if rs, err := s.ListRuns(ctx, store.RunFilter{}); err != nil || len(rs) != 0 {
		t.Fatalf("ListRuns on an empty store = %v, %v; want none", rs, err)
	}
	statuses := []store.RunStatus{store.RunClaimed, store.RunStarted, store.RunSucceeded, store.RunFailed}
	const n = 130
	var all []store.Run
	for i := range n {
		j := i * 37 % n // the time order
		tenant, trigger := "t1", []string{"tr1", "tr2"}[j%2]
		if j%10 == 9 {
			tenant, trigger = "t2", "tr3"
		}
		r := run(tenant, fmt.Sprintf("r%03d", j*11%n), fmt.Sprintf("ev%d", j%7), trigger, []string{"ag1", "ag2", "ag3"}[j%3],
			statuses[j%4], base.Add(time.Duration(j/3)*100))
		created, err := s.CreateRun(ctx, r)
		must(t, "CreateRun", err)
		all = append(all, created)
	}
	// Runs nanoseconds apart at a time where float64 unix nanoseconds are
	// 512 apart, so all tie as float64, with ids in the opposite order.
	for k := range 5 {
		r := run("t4", fmt.Sprintf("tie%d", 5-k), "ev1", "tr4", "ag4", statuses[k%2], tieTime.Add(time.Duration(k)))
		created, err := s.CreateRun(ctx, r)
		must(t, "CreateRun", err)
		all = append(all, created)
	}
	checkRunLists(t, s, all, []store.RunFilter{
		{TenantID: "t4", Limit: 2},
		{TenantID: "t4", Status: store.RunStarted, Limit: 1},
		{TriggerID: "tr4", Limit: 3},
		{TenantID: "t4"},
		{TenantID: "t1"}, // 117 runs: the default limit, 100
		{TenantID: "t1", Limit: 5},
		{TenantID: "t1", Limit: 1000},
		{TenantID: "t1", TriggerID: "tr1"},
		{TenantID: "t1", AgentID: "ag2"},
		{TenantID: "t1", EventID: "ev3"},
		{TenantID: "t1", Status: store.RunFailed},
		{TenantID: "t1", Status: store.RunSucceeded, Limit: 4},
		{TenantID: "t1", TriggerID: "tr2", AgentID: "ag1", Status: store.RunStarted, Limit: 3},
		{TenantID: "t1", EventID: "ev3", TriggerID: "tr1"},
		{TenantID: "t1", TriggerID: "tr3"}, // t2's trigger
		{TenantID: "t2"},
		{TenantID: "t2", EventID: "ev3"},
		{TenantID: "t2", Status: store.RunClaimed},
		{},
		{Limit: 7},
		{TriggerID: "tr3"},
		{AgentID: "ag3", Limit: 10},
		{EventID: "ev1"},
		{Status: store.RunFailed, Limit: 200},
		{TenantID: "t3"},
	})
}

// testRunListAfterUpdates checks that the lists follow what updates
// change: the status, and even the trigger, agent, event and CreatedAt.
func testRunListAfterUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 40
	all := make([]store.Run, n)
	for i := range all {
		r, err := s.CreateRun(ctx, run("t1", fmt.Sprintf("r%02d", i), fmt.Sprintf("ev%d", i%4), "tr1", "ag1", store.RunClaimed, base.Add(time.Duration(i)*time.Millisecond)))
		must(t, "CreateRun", err)
		all[i] = r
	}
	update := func(i int, change func(*store.Run)) {
		t.Helper()
		r := all[i]
		change(&r)
		up, err := s.UpdateRun(ctx, r)
		must(t, "UpdateRun", err)
		all[i] = up
	}
	for i := range all {
		if i%3 == 0 {
			update(i, func(r *store.Run) { r.Status = store.RunStarted })
		}
		if i%5 == 0 {
			update(i, func(r *store.Run) { r.Status = store.RunSucceeded })
		}
	}
	update(7, func(r *store.Run) { r.TriggerID, r.AgentID, r.EventID = "tr2", "ag2", "ev9" })
	update(8, func(r *store.Run) { r.CreatedAt = base.Add(time.Hour) })
	update(9, func(r *store.Run) { r.CreatedAt = base.Add(-time.Hour) })
	checkRunLists(t, s, all, []store.RunFilter{
		{TenantID: "t1"},
		{TenantID: "t1", Status: store.RunClaimed},
		{TenantID: "t1", Status: store.RunStarted},
		{TenantID: "t1", Status: store.RunSucceeded},
		{TenantID: "t1", TriggerID: "tr1", Status: store.RunClaimed, Limit: 5},
		{TriggerID: "tr1"},
		{TriggerID: "tr2"},
		{AgentID: "ag1", Limit: 3},
		{AgentID: "ag2"},
		{TenantID: "t1", EventID: "ev3"},
		{TenantID: "t1", EventID: "ev9"},
		{},
	})
}

// prunedRuns is what PruneRuns(before, limit) must delete of all: the
// runs that succeeded or failed, created and finished (or, without a
// FinishedAt, last updated) before before, oldest CreatedAt first (then
// id), at most limit (1000 if not positive).
func prunedRuns(all []store.Run, before time.Time, limit int) []store.Run {
	var out []store.Run
	for _, r := range all {
		finished := r.FinishedAt
		if finished.IsZero() {
			finished = r.UpdatedAt
		}
		if (r.Status == store.RunSucceeded || r.Status == store.RunFailed) && finished.Before(before) && r.CreatedAt.Before(before) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	return out[:min(limit, len(out))]
}

// pruneRuns calls PruneRuns and checks that it deleted exactly the runs
// prunedRuns names, that GetRun no longer finds them and that ListRuns,
// through every kind of filter, lists exactly the others. It returns the
// runs left.
func pruneRuns(t *testing.T, s store.Store, all []store.Run, before time.Time, limit int) []store.Run {
	t.Helper()
	ctx := t.Context()
	what := fmt.Sprintf("PruneRuns(%v, %d)", before, limit)
	want := prunedRuns(all, before, limit)
	n, err := s.PruneRuns(ctx, before, limit)
	must(t, what, err)
	if n != len(want) {
		t.Fatalf("%s deleted %d runs, want %d (%q)", what, n, len(want), ids(want, runID))
	}
	left := slices.DeleteFunc(slices.Clone(all), func(r store.Run) bool {
		return slices.ContainsFunc(want, func(p store.Run) bool { return p.ID == r.ID })
	})
	for _, r := range want {
		_, err := s.GetRun(ctx, "", r.ID)
		wantErr(t, fmt.Sprintf("GetRun %s after %s", r.ID, what), err, store.ErrNotFound)
	}
	for _, r := range left {
		got, err := s.GetRun(ctx, r.TenantID, r.ID)
		must(t, fmt.Sprintf("GetRun %s after %s", r.ID, what), err)
		same(t, fmt.Sprintf("GetRun %s after %s", r.ID, what), normRun, got, r)
	}
	checkRunLists(t, s, left, []store.RunFilter{
		{},
		{Limit: 1000},
		{TenantID: "t1"},
		{TenantID: "t2", Limit: 3},
		{TenantID: "t1:x"},
		{TenantID: "t4"},
		{TriggerID: "tr1"},
		{TriggerID: "tr2"},
		{TriggerID: "tr4", Limit: 2},
		{AgentID: "ag1"},
		{AgentID: "ag3"},
		{TenantID: "t1", EventID: "ev1"},
		{TenantID: "t2", EventID: "ev2"},
		{TenantID: "t1:x", EventID: "ev0"},
		{TenantID: "t4", EventID: "ev1"},
		{Status: store.RunSucceeded},
		{Status: store.RunFailed},
		{Status: store.RunClaimed},
		{Status: store.RunStarted},
		{TenantID: "t1", TriggerID: "tr2", Status: store.RunFailed},
	})
	return left
}

// testRunPrune prunes runs of several tenants, step by step: each step
// deletes exactly the oldest runs that finished before its cut-off, up to
// its limit, and every list follows. Runs that have not finished, and
// runs that finished at or after the cut-off, stay.
func testRunPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	// After the runs at tieTime, which tie as float64 unix nanoseconds.
	before := tieTime.Add(time.Hour)
	if n, err := s.PruneRuns(ctx, before, 0); err != nil || n != 0 {
		t.Fatalf("PruneRuns on an empty store = %d, %v; want 0", n, err)
	}
	var all []store.Run
	create := func(r store.Run) store.Run {
		t.Helper()
		created, err := s.CreateRun(ctx, r)
		must(t, "CreateRun "+r.ID, err)
		all = append(all, created)
		return created
	}
	tenants := []string{"t1", "t2", "t1:x"}
	// Finished long ago: created out of order, an hour apart, finished a
	// minute after creation.
	for i := range 12 {
		j := i * 5 % 12
		r := run(tenants[j%3], fmt.Sprintf("old%02d", j*7%12), fmt.Sprintf("ev%d", j%4), []string{"tr1", "tr2"}[j%2],
			[]string{"ag1", "ag2", "ag3"}[j%3], []store.RunStatus{store.RunSucceeded, store.RunFailed}[j%2], base.Add(time.Duration(j)*time.Hour))
		r.StartedAt = r.CreatedAt.Add(time.Second)
		r.FinishedAt = r.CreatedAt.Add(time.Minute).In(pdt)
		create(r)
	}
	// Without a FinishedAt, the UpdatedAt counts: long ago, and at the
	// cut-off.
	noFinish := run("t1", "no-finish-old", "ev1", "tr1", "ag1", store.RunSucceeded, base.Add(-time.Hour))
	noFinish.UpdatedAt = base.Add(-30 * time.Minute)
	create(noFinish)
	noFinish = run("t2", "no-finish-recent", "ev2", "tr2", "ag2", store.RunFailed, base.Add(-time.Hour+1))
	noFinish.UpdatedAt = before
	create(noFinish)
	// Finished a nanosecond before the cut-off, and at the cut-off.
	edge := run("t1", "edge-before", "ev1", "tr2", "ag3", store.RunFailed, base.Add(90*time.Minute))
	edge.FinishedAt = before.Add(-1).In(pdt)
	create(edge)
	edge = run("t1:x", "edge-at", "ev0", "tr1", "ag1", store.RunSucceeded, base.Add(90*time.Minute+1))
	edge.FinishedAt = before
	create(edge)
	// Not finished, however old (one started has a FinishedAt: the status
	// decides).
	create(run("t1", "claimed-old", "ev1", "tr1", "ag1", store.RunClaimed, base.Add(-3*time.Hour)))
	startedOld := run("t2", "started-old", "ev2", "tr2", "ag2", store.RunStarted, base.Add(-2*time.Hour))
	startedOld.FinishedAt = base.Add(-2 * time.Hour).Add(time.Minute)
	startedOld = create(startedOld)
	// Nanoseconds apart where float64 unix nanoseconds are 512 apart, ids
	// in the opposite order.
	for k := range 5 {
		r := run("t4", fmt.Sprintf("tie%d", 5-k), "ev1", "tr4", "ag4", store.RunSucceeded, tieTime.Add(time.Duration(k)))
		r.FinishedAt = r.CreatedAt.Add(time.Minute)
		create(r)
	}
	// Created after the cut-off.
	for k := range 3 {
		r := run(tenants[k], fmt.Sprintf("recent%d", k), "ev1", "tr1", "ag1", store.RunSucceeded, before.Add(time.Duration(k)))
		r.FinishedAt = r.CreatedAt.Add(time.Second)
		create(r)
	}
	create(run("t1", "recent-claimed", "ev1", "tr2", "ag2", store.RunClaimed, before.Add(time.Hour)))

	// An earlier cut-off first: only what finished before it goes.
	all = pruneRuns(t, s, all, base.Add(150*time.Minute), 0)
	// A run that finishes becomes prunable.
	startedOld.Status = store.RunSucceeded
	startedOld, err := s.UpdateRun(ctx, startedOld)
	must(t, "UpdateRun started-old", err)
	all[slices.IndexFunc(all, func(r store.Run) bool { return r.ID == "started-old" })] = startedOld
	// Small steps; one ends among the runs that tie as float64.
	for _, limit := range []int{3, 4, 6, 0} {
		all = pruneRuns(t, s, all, before, limit)
	}
	if got := prunedRuns(all, before, 0); len(got) != 0 {
		t.Fatalf("runs left to prune before the cut-off: %q", ids(got, runID))
	}
	all = pruneRuns(t, s, all, before, 0) // nothing left: 0
	// A later cut-off takes the recent ones; the unfinished runs stay.
	all = pruneRuns(t, s, all, before.Add(24*time.Hour), 0)
	if got, want := ids(all, runID), []string{"claimed-old", "recent-claimed"}; !slices.Equal(got, want) {
		t.Fatalf("runs left after pruning everything finished: %q, want %q", got, want)
	}
}

// testRunCreateAfterPrune creates pruned runs again, earlier and with
// another tenant, trigger, agent and event: they are created anew, listed
// once and where they now belong (no index entry of the pruned runs is
// left), and pruned again once finished.
func testRunCreateAfterPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	cutoff := base.Add(24 * time.Hour)
	var all []store.Run
	for i, id := range []string{"r1", "r2"} {
		r := run("t1", id, "ev1", "tr1", "ag1", []store.RunStatus{store.RunSucceeded, store.RunFailed}[i], base.Add(time.Duration(2+i)*time.Hour))
		r.FinishedAt = r.CreatedAt.Add(time.Minute)
		created, err := s.CreateRun(ctx, r)
		must(t, "CreateRun "+id, err)
		all = append(all, created)
	}
	keeper, err := s.CreateRun(ctx, run("t1", "keeper", "ev1", "tr1", "ag1", store.RunStarted, base.Add(time.Hour)))
	must(t, "CreateRun keeper", err)
	all = append(all, keeper)
	all = pruneRuns(t, s, all, cutoff, 0)

	r1, err := s.CreateRun(ctx, run("t2", "r1", "ev2", "tr2", "ag2", store.RunClaimed, base))
	must(t, "CreateRun r1 after it was pruned", err)
	r2, err := s.CreateRun(ctx, run("t1", "r2", "ev1", "tr1", "ag1", store.RunClaimed, base.Add(30*time.Minute)))
	must(t, "CreateRun r2 after it was pruned", err)
	if r1.Version != 1 || r2.Version != 1 {
		t.Fatalf("runs created again: versions %d and %d, want 1", r1.Version, r2.Version)
	}
	all = append(all, r1, r2)
	all = pruneRuns(t, s, all, cutoff, 0) // none finished: 0
	_, err = s.CreateRun(ctx, run("t1", "r1", "ev1", "tr1", "ag1", store.RunClaimed, base))
	wantErr(t, "CreateRun of a run created again", err, store.ErrConflict)

	r1.Status, r1.FinishedAt = store.RunSucceeded, base.Add(time.Minute)
	r1, err = s.UpdateRun(ctx, r1)
	must(t, "UpdateRun r1", err)
	all[slices.IndexFunc(all, func(r store.Run) bool { return r.ID == "r1" })] = r1
	all = pruneRuns(t, s, all, cutoff, 0)
	if got, want := ids(all, runID), []string{"keeper", "r2"}; !slices.Equal(got, want) {
		t.Fatalf("runs left: %q, want %q", got, want)
	}
}

// Events.

func testEventPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	e := event("t1", "e1", base, "tr1", "tr2")
	e.Outcomes[1] = store.Outcome{TriggerID: "tr2", AgentID: "ag2", Result: "filtered_out", Reason: "filter \"x\" was false\n"}
	must(t, "PutEvent", s.PutEvent(ctx, e))
	got, err := s.GetEvent(ctx, "t1", "e1")
	must(t, "GetEvent", err)
	same(t, "GetEvent", normEvent, got, e)
	got.Outcomes[0].Result = "changed"
	got, err = s.GetEvent(ctx, "t1", "e1")
	must(t, "GetEvent again", err)
	same(t, "GetEvent after changing the result of the first", normEvent, got, e)

	_, err = s.GetEvent(ctx, "t2", "e1")
	wantErr(t, "GetEvent with another tenant id", err, store.ErrNotFound)
	_, err = s.GetEvent(ctx, "t1", "nope")
	wantErr(t, "GetEvent unknown", err, store.ErrNotFound)

	// Records are per tenant: another tenant's record of the same event
	// is another record.
	other := event("t2", "e1", base.Add(time.Second), "tr9")
	must(t, "PutEvent t2", s.PutEvent(ctx, other))
	got, err = s.GetEvent(ctx, "t2", "e1")
	must(t, "GetEvent t2", err)
	same(t, "GetEvent t2", normEvent, got, other)

	// A put replaces.
	e2 := event("t1", "e1", base.Add(time.Minute), "tr3")
	e2.Kind = "codehost.pull_request.opened"
	must(t, "PutEvent again", s.PutEvent(ctx, e2))
	got, err = s.GetEvent(ctx, "t1", "e1")
	must(t, "GetEvent after replace", err)
	same(t, "GetEvent after replace", normEvent, got, e2)
	got, err = s.GetEvent(ctx, "t2", "e1")
	must(t, "GetEvent t2 after replacing t1's", err)
	same(t, "GetEvent t2 after replacing t1's", normEvent, got, other)
}

// eventModel holds the records a test put, to compute what
// ListTriggerEvents must return.
type eventModel map[string]store.EventRecord

// put stores e and records it.
func (m eventModel) put(t *testing.T, s store.Store, e store.EventRecord) {
	t.Helper()
	must(t, "PutEvent "+e.EventID, s.PutEvent(t.Context(), e))
	m[e.TenantID+"\x00"+e.EventID] = e
}

// check compares ListTriggerEvents with the model.
func (m eventModel) check(t *testing.T, s store.Store, tenantID, triggerID string, limit int) {
	t.Helper()
	want := []store.EventRecord{}
	for _, e := range m {
		if e.TenantID == tenantID && slices.ContainsFunc(e.Outcomes, func(o store.Outcome) bool { return o.TriggerID == triggerID }) {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, func(a, b store.EventRecord) int {
		return cmp.Or(b.DispatchedAt.Compare(a.DispatchedAt), cmp.Compare(b.EventID, a.EventID))
	})
	want = upTo(want, limit)
	what := fmt.Sprintf("ListTriggerEvents(%s, %s, %d)", tenantID, triggerID, limit)
	got, err := s.ListTriggerEvents(t.Context(), tenantID, triggerID, limit)
	must(t, what, err)
	sameOrder(t, what, normEvent, eventID, got, want)
}

// testEventList lists the records of 110 events, put out of order, some
// dispatched at the same time and most closer together than a float64
// holds unix nanoseconds.
func testEventList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if es, err := s.ListTriggerEvents(ctx, "t1", "trA", 0); err != nil || len(es) != 0 {
		t.Fatalf("ListTriggerEvents on an empty store = %v, %v; want none", es, err)
	}
	m := eventModel{}
	const n = 110
	for i := range n {
		j := i * 37 % n
		triggers := []string{"trA"}
		if j%2 == 0 {
			triggers = append(triggers, "trB")
		}
		if j%5 == 0 {
			triggers = append(triggers, "trA") // two outcomes for one trigger
		}
		m.put(t, s, event("t1", fmt.Sprintf("e%03d", j*13%n), base.Add(time.Duration(j/2)*100), triggers...))
	}
	for i := range 5 {
		m.put(t, s, event("t2", fmt.Sprintf("e%03d", i), base.Add(time.Duration(i)*time.Hour), "trA"))
		m.put(t, s, event("t1:x", fmt.Sprintf("x%03d", i), base, "trA"))
		// Ties as float64, with ids in the opposite order (see tieTime).
		m.put(t, s, event("t4", fmt.Sprintf("tie%d", 5-i), tieTime.Add(time.Duration(i)), "trA"))
	}
	m.check(t, s, "t4", "trA", 2)
	m.check(t, s, "t4", "trA", 0)
	m.check(t, s, "t1", "trA", 0)
	m.check(t, s, "t1", "trA", 5)
	m.check(t, s, "t1", "trA", 1000)
	m.check(t, s, "t1", "trB", 0)
	m.check(t, s, "t1", "trB", 7)
	m.check(t, s, "t2", "trA", 0)
	m.check(t, s, "t2", "trA", 2)
	m.check(t, s, "t1:x", "trA", 0)
	m.check(t, s, "t1", "trC", 0)
	m.check(t, s, "t3", "trA", 0)
}

// testEventReplace checks that a replaced record moves between the
// triggers' lists.
func testEventReplace(t *testing.T, s store.Store) {
	m := eventModel{}
	m.put(t, s, event("t1", "e1", base, "trA", "trB"))
	m.put(t, s, event("t1", "e2", base.Add(time.Second), "trA"))
	m.put(t, s, event("t2", "e1", base, "trA", "trB"))
	check := func() {
		t.Helper()
		for _, tenant := range []string{"t1", "t2"} {
			for _, tr := range []string{"trA", "trB", "trC"} {
				m.check(t, s, tenant, tr, 0)
			}
		}
	}
	check()
	// Dispatched again, later: e1 drops trB, gains trC and comes first.
	m.put(t, s, event("t1", "e1", base.Add(time.Minute), "trA", "trC"))
	check()
	// Dispatched again, earlier (DispatchedAt decides, not the put).
	m.put(t, s, event("t1", "e1", base.Add(-time.Minute), "trC", "trA"))
	check()
	// No outcomes left.
	m.put(t, s, event("t1", "e1", base.Add(2*time.Minute)))
	check()
	got, err := s.GetEvent(t.Context(), "t1", "e1")
	must(t, "GetEvent", err)
	same(t, "GetEvent after the last replace", normEvent, got, m["t1\x00e1"])
}

// testEventConcurrentPuts replaces one record from many goroutines at
// once, each with other outcomes: one record stays, and the triggers'
// lists agree with it.
func testEventConcurrentPuts(t *testing.T, s store.Store) {
	const n = 10
	wins := runConcurrently(t, n, nil, func(i int) error {
		return s.PutEvent(t.Context(), event("t1", "e1", base.Add(time.Duration(i)), "common", fmt.Sprintf("tr%d", i)))
	})
	if wins != n {
		t.Fatalf("%d of %d concurrent puts succeeded, want all", wins, n)
	}
	got, err := s.GetEvent(t.Context(), "t1", "e1")
	must(t, "GetEvent", err)
	m := eventModel{"t1\x00e1": got}
	m.check(t, s, "t1", "common", 0)
	for i := range n {
		m.check(t, s, "t1", fmt.Sprintf("tr%d", i), 0)
	}
}

// pruned is what PruneEvents(before, limit) must delete of the model:
// the records dispatched before before, oldest first (then by tenant and
// event id), at most limit (1000 if not positive).
func (m eventModel) pruned(before time.Time, limit int) []store.EventRecord {
	var out []store.EventRecord
	for _, e := range m {
		if e.DispatchedAt.Before(before) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b store.EventRecord) int {
		return cmp.Or(a.DispatchedAt.Compare(b.DispatchedAt), cmp.Compare(a.TenantID+"\x00"+a.EventID, b.TenantID+"\x00"+b.EventID))
	})
	if limit <= 0 {
		limit = store.DefaultPruneLimit
	}
	return out[:min(limit, len(out))]
}

// prune calls PruneEvents and checks that it deleted exactly the records
// pruned names, that GetEvent no longer finds them, and that GetEvent and
// ListTriggerEvents find exactly the others; it removes them from the
// model.
func (m eventModel) prune(t *testing.T, s store.Store, before time.Time, limit int, tenants, triggers []string) {
	t.Helper()
	ctx := t.Context()
	what := fmt.Sprintf("PruneEvents(%v, %d)", before, limit)
	want := m.pruned(before, limit)
	n, err := s.PruneEvents(ctx, before, limit)
	must(t, what, err)
	if n != len(want) {
		t.Fatalf("%s deleted %d records, want %d (%q)", what, n, len(want), ids(want, eventID))
	}
	for _, e := range want {
		delete(m, e.TenantID+"\x00"+e.EventID)
		_, err := s.GetEvent(ctx, e.TenantID, e.EventID)
		wantErr(t, fmt.Sprintf("GetEvent %s after %s", eventID(e), what), err, store.ErrNotFound)
	}
	for _, e := range m {
		got, err := s.GetEvent(ctx, e.TenantID, e.EventID)
		must(t, fmt.Sprintf("GetEvent %s after %s", eventID(e), what), err)
		same(t, fmt.Sprintf("GetEvent %s after %s", eventID(e), what), normEvent, got, e)
	}
	for _, tenant := range tenants {
		for _, tr := range triggers {
			m.check(t, s, tenant, tr, 0)
		}
	}
	m.check(t, s, "t1", "trA", 2)
}

// testEventPrune prunes the records of several tenants, step by step:
// each step deletes exactly the oldest records dispatched before its
// cut-off, up to its limit, and the triggers' lists follow. A record
// dispatched again since stays if that was at or after the cut-off.
func testEventPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	// After the records at tieTime, which tie as float64 unix nanoseconds.
	before := tieTime.Add(time.Hour)
	if n, err := s.PruneEvents(ctx, before, 0); err != nil || n != 0 {
		t.Fatalf("PruneEvents on an empty store = %d, %v; want 0", n, err)
	}
	m := eventModel{}
	tenants := []string{"t1", "t2", "t1:x", "t4"}
	triggers := []string{"trA", "trB", "trC", "tr4"}
	// Dispatched long ago, out of order, a minute apart.
	for i := range 15 {
		j := i * 4 % 15
		trs := []string{[]string{"trA", "trB", "trC"}[j%3]}
		if j%2 == 0 {
			trs = append(trs, "trA") // two outcomes for one trigger, or another trigger
		}
		m.put(t, s, event(tenants[j%3], fmt.Sprintf("e%02d", j*7%15), base.Add(time.Duration(j)*time.Minute).In(pdt), trs...))
	}
	// Dispatched long ago, then again after the cut-off: it stays.
	m.put(t, s, event("t1", "again-late", base.Add(-time.Hour), "trA", "trB"))
	m.put(t, s, event("t1", "again-late", before.Add(time.Minute), "trC"))
	// Dispatched after the cut-off, then again (earlier) long ago.
	m.put(t, s, event("t2", "again-early", before.Add(2*time.Minute), "trA"))
	m.put(t, s, event("t2", "again-early", base.Add(-2*time.Hour), "trB"))
	// A nanosecond before the cut-off, and at it.
	m.put(t, s, event("t1", "edge-before", before.Add(-1).In(pdt), "trA"))
	m.put(t, s, event("t1:x", "edge-at", before, "trA"))
	// Nanoseconds apart where float64 unix nanoseconds are 512 apart, ids
	// in the opposite order.
	for k := range 5 {
		m.put(t, s, event("t4", fmt.Sprintf("tie%d", 5-k), tieTime.Add(time.Duration(k)), "tr4"))
	}
	// Dispatched after the cut-off.
	for k := range 3 {
		m.put(t, s, event(tenants[k], fmt.Sprintf("recent%d", k), before.Add(time.Duration(k)), "trA", "trB"))
	}

	// An earlier cut-off first.
	m.prune(t, s, base.Add(5*time.Minute+1), 0, tenants, triggers)
	// Small steps; one ends among the records that tie as float64.
	for _, limit := range []int{3, 4, 6, 0} {
		m.prune(t, s, before, limit, tenants, triggers)
	}
	if got := m.pruned(before, 0); len(got) != 0 {
		t.Fatalf("records left to prune before the cut-off: %q", ids(got, eventID))
	}
	m.prune(t, s, before, 0, tenants, triggers) // nothing left: 0
	if _, ok := m["t1\x00again-late"]; !ok {
		t.Fatal("the record dispatched again after the cut-off was pruned")
	}
	m.prune(t, s, before.Add(24*time.Hour), 0, tenants, triggers)
	if len(m) != 0 {
		t.Fatalf("%d records left after pruning everything", len(m))
	}
}

// testEventPutAfterPrune puts pruned records again, earlier and with
// other outcomes: only the new outcomes' triggers list them, and they are
// pruned again by their new DispatchedAt.
func testEventPutAfterPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	tenants, triggers := []string{"t1", "t2"}, []string{"trA", "trB", "trC"}
	m := eventModel{}
	m.put(t, s, event("t1", "e1", base, "trA", "trB"))
	m.put(t, s, event("t1", "e2", base.Add(time.Second), "trA"))
	m.put(t, s, event("t2", "e1", base.Add(time.Hour), "trA"))
	m.prune(t, s, base.Add(time.Minute), 0, tenants, triggers)

	m.put(t, s, event("t1", "e1", base.Add(-time.Hour), "trC"))
	m.put(t, s, event("t1", "e2", base.Add(2*time.Hour), "trB"))
	for _, tenant := range tenants {
		for _, tr := range triggers {
			m.check(t, s, tenant, tr, 0)
		}
	}
	got, err := s.GetEvent(ctx, "t1", "e1")
	must(t, "GetEvent e1 put again", err)
	same(t, "GetEvent e1 put again", normEvent, got, m["t1\x00e1"])
	m.prune(t, s, base.Add(-2*time.Hour), 0, tenants, triggers) // nothing that old: 0
	m.prune(t, s, base, 0, tenants, triggers)
	m.prune(t, s, base.Add(3*time.Hour), 1, tenants, triggers)
	m.prune(t, s, base.Add(3*time.Hour), 1, tenants, triggers)
	if len(m) != 0 {
		t.Fatalf("%d records left after pruning everything", len(m))
	}
}

// Cursors.

func testCursorPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.GetCursor(ctx, "poll:acc1:octo/hello")
	must(t, "GetCursor unknown", err)
	same(t, "GetCursor unknown", normCursor, got, store.Cursor{Key: "poll:acc1:octo/hello"})
	if got.Value != nil || got.Version != 0 || !got.UpdatedAt.IsZero() {
		t.Fatalf("GetCursor unknown = %+v, want only the key", got)
	}

	c := store.Cursor{Key: "poll:acc1:octo/hello", Value: json.RawMessage(`{"etag": "W/\"abc\"", "newest": 12, "html": "<&>"}`), UpdatedAt: base}
	put, err := s.PutCursor(ctx, c)
	must(t, "PutCursor from version 0", err)
	want := c
	want.Version = 1
	same(t, "PutCursor result", normCursor, put, want)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor", err)
	same(t, "GetCursor", normCursor, got, want)
	got.Value[0] = ' '
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor again", err)
	same(t, "GetCursor after changing the result of the first", normCursor, got, want)

	_, err = s.PutCursor(ctx, c) // Version 0, but one is stored
	wantErr(t, "PutCursor from version 0 of a stored cursor", err, store.ErrConflict)

	next := put
	next.Value = json.RawMessage(`{"etag":"W/\"def\"","newest":13}`)
	next.UpdatedAt = base.Add(time.Minute)
	put2, err := s.PutCursor(ctx, next)
	must(t, "PutCursor from version 1", err)
	want = next
	want.Version = 2
	same(t, "PutCursor from version 1", normCursor, put2, want)

	_, err = s.PutCursor(ctx, next) // Version 1: stale
	wantErr(t, "PutCursor with a stale version", err, store.ErrConflict)
	future := put2
	future.Version = 5
	_, err = s.PutCursor(ctx, future)
	wantErr(t, "PutCursor with a future version", err, store.ErrConflict)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor after refused puts", err)
	same(t, "GetCursor after refused puts", normCursor, got, want)

	// Keys are independent.
	other := store.Cursor{Key: "poll:acc1:octo/world", Value: json.RawMessage(`"x"`), UpdatedAt: base}
	_, err = s.PutCursor(ctx, other)
	must(t, "PutCursor other key", err)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor after putting another key", err)
	same(t, "GetCursor after putting another key", normCursor, got, want)
	absent := store.Cursor{Key: "poll:acc1:octo/nope", Value: json.RawMessage(`1`), UpdatedAt: base, Version: 1}
	_, err = s.PutCursor(ctx, absent)
	wantErr(t, "PutCursor from version 1 of an unknown cursor", err, store.ErrConflict)
	got, err = s.GetCursor(ctx, absent.Key)
	must(t, "GetCursor of the refused cursor", err)
	if got.Version != 0 {
		t.Fatalf("GetCursor of a refused cursor = %+v, want version 0", got)
	}
}

func testCursorConcurrentPuts(t *testing.T, s store.Store) {
	ctx := t.Context()
	for version := range int64(3) {
		winner := OneWins(t, fmt.Sprintf("PutCursor from version %d", version), 10, func(i int) (store.Cursor, error) {
			return s.PutCursor(ctx, store.Cursor{Key: "k", Value: json.RawMessage(fmt.Sprint(i)), UpdatedAt: base, Version: version})
		})
		got, err := s.GetCursor(ctx, "k")
		must(t, "GetCursor", err)
		same(t, "GetCursor after concurrent puts", normCursor, got, winner)
		if got.Version != version+1 {
			t.Fatalf("Version = %d after puts from %d, want %d", got.Version, version, version+1)
		}
	}
}

// Dispatcher records in general.

// testDispatchDefaultTimes checks the times a store fills: CreatedAt (and
// an UpdatedAt equal to it) on creation, DispatchedAt and a cursor's
// UpdatedAt on every write.
func testDispatchDefaultTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := time.Now().Add(-time.Minute)
	fresh := func(what string, created, updated time.Time) {
		t.Helper()
		if created.Before(before) || !updated.Equal(created) {
			t.Fatalf("%s with zero times: CreatedAt %v, UpdatedAt %v; want now, and UpdatedAt = CreatedAt", what, created, updated)
		}
	}
	a, err := s.CreateAgent(ctx, store.Agent{ID: "ag1", TenantID: "t1"})
	must(t, "CreateAgent", err)
	fresh("CreateAgent", a.CreatedAt, a.UpdatedAt)
	gotA, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent", err)
	same(t, "GetAgent", normAgent, gotA, a)

	tr, err := s.CreateTrigger(ctx, store.Trigger{ID: "tr1", TenantID: "t1"})
	must(t, "CreateTrigger", err)
	fresh("CreateTrigger", tr.CreatedAt, tr.UpdatedAt)
	gotT, err := s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger", err)
	same(t, "GetTrigger", normTrigger, gotT, tr)

	h, err := s.CreateHook(ctx, store.Hook{ID: "h1", TenantID: "t1", Connector: "deploy", Scope: store.HookAgentEndpoint, Target: "ag1"})
	must(t, "CreateHook", err)
	fresh("CreateHook", h.CreatedAt, h.UpdatedAt)
	gotH, err := s.GetHook(ctx, "h1")
	must(t, "GetHook", err)
	same(t, "GetHook", normHook, gotH, h)

	r, err := s.CreateRun(ctx, store.Run{ID: "r1", TenantID: "t1"})
	must(t, "CreateRun", err)
	fresh("CreateRun", r.CreatedAt, r.UpdatedAt)
	gotR, err := s.GetRun(ctx, "t1", "r1")
	must(t, "GetRun", err)
	same(t, "GetRun", normRun, gotR, r)

	must(t, "PutEvent", s.PutEvent(ctx, store.EventRecord{TenantID: "t1", EventID: "e1", Outcomes: []store.Outcome{{TriggerID: "tr1"}}}))
	gotE, err := s.GetEvent(ctx, "t1", "e1")
	must(t, "GetEvent", err)
	if gotE.DispatchedAt.Before(before) {
		t.Fatalf("PutEvent with a zero DispatchedAt: stored %v, want now", gotE.DispatchedAt)
	}
	list, err := s.ListTriggerEvents(ctx, "t1", "tr1", 0)
	must(t, "ListTriggerEvents", err)
	sameOrder(t, "ListTriggerEvents", normEvent, eventID, list, []store.EventRecord{gotE})

	c, err := s.PutCursor(ctx, store.Cursor{Key: "k", Value: json.RawMessage(`1`)})
	must(t, "PutCursor", err)
	if c.UpdatedAt.Before(before) {
		t.Fatalf("PutCursor with a zero UpdatedAt: %v, want now", c.UpdatedAt)
	}
	gotC, err := s.GetCursor(ctx, "k")
	must(t, "GetCursor", err)
	same(t, "GetCursor", normCursor, gotC, c)
}

// testDispatchValidation checks that records without their identifiers
// are refused, and not stored.
func testDispatchValidation(t *testing.T, s store.Store) {
	ctx := t.Context()
	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
	}
	_, err := s.CreateAgent(ctx, store.Agent{TenantID: "t1"})
	refused("CreateAgent without id", err)
	_, err = s.CreateAgent(ctx, store.Agent{ID: "ag1"})
	refused("CreateAgent without tenant", err)
	_, err = s.CreateTrigger(ctx, store.Trigger{TenantID: "t1"})
	refused("CreateTrigger without id", err)
	_, err = s.CreateTrigger(ctx, store.Trigger{ID: "tr1"})
	refused("CreateTrigger without tenant", err)
	_, err = s.CreateHook(ctx, store.Hook{ID: "h1", TenantID: "t1", Connector: "codehost", Scope: store.HookRepository})
	refused("CreateHook without target", err)
	_, err = s.CreateHook(ctx, store.Hook{TenantID: "t1", Connector: "codehost", Scope: store.HookRepository, Target: "o/r"})
	refused("CreateHook without id", err)
	_, err = s.CreateRun(ctx, store.Run{ID: "r1"})
	refused("CreateRun without tenant", err)
	_, err = s.CreateRun(ctx, store.Run{TenantID: "t1"})
	refused("CreateRun without id", err)
	refused("PutEvent without event id", s.PutEvent(ctx, store.EventRecord{TenantID: "t1"}))
	refused("PutEvent without tenant", s.PutEvent(ctx, store.EventRecord{EventID: "e1"}))
	_, err = s.PutCursor(ctx, store.Cursor{Value: json.RawMessage(`1`)})
	refused("PutCursor without key", err)

	if as, err := s.ListAgents(ctx, "t1"); err != nil || len(as) != 0 {
		t.Fatalf("ListAgents after refused creates = %v, %v", as, err)
	}
	if ts, err := s.ListTriggers(ctx, store.TriggerFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("ListTriggers after refused creates = %v, %v", ts, err)
	}
	if hs, err := s.ListHooks(ctx, ""); err != nil || len(hs) != 0 {
		t.Fatalf("ListHooks after refused creates = %v, %v", hs, err)
	}
	if rs, err := s.ListRuns(ctx, store.RunFilter{}); err != nil || len(rs) != 0 {
		t.Fatalf("ListRuns after refused creates = %v, %v", rs, err)
	}
	if c, err := s.GetCursor(ctx, ""); err != nil || c.Version != 0 {
		t.Fatalf("GetCursor of the empty key after a refused put = %+v, %v", c, err)
	}
}

// Persistence.

// dispatchRecords are the dispatcher's records that the persistence test
// writes before the store is reopened.
type dispatchRecords struct {
	agent   store.Agent
	trigger store.Trigger
	hook    store.Hook
	run     store.Run
	event   store.EventRecord
	cursor  store.Cursor
}

// putDispatchRecords writes one record of each kind, some updated.
func putDispatchRecords(t *testing.T, s store.Store) dispatchRecords {
	t.Helper()
	ctx := t.Context()
	var d dispatchRecords
	var err error
	d.agent, err = s.CreateAgent(ctx, fullAgent("t1", "ag1"))
	must(t, "CreateAgent", err)
	d.agent.Name = "updated"
	d.agent, err = s.UpdateAgent(ctx, d.agent)
	must(t, "UpdateAgent", err)
	d.trigger, err = s.CreateTrigger(ctx, fullTrigger("t1", "tr1"))
	must(t, "CreateTrigger", err)
	d.hook, err = s.CreateHook(ctx, fullHook("t1", "h1"))
	must(t, "CreateHook", err)
	d.run, err = s.CreateRun(ctx, fullRun("t1", "r1"))
	must(t, "CreateRun", err)
	d.run.Status = store.RunSucceeded
	d.run, err = s.UpdateRun(ctx, d.run)
	must(t, "UpdateRun", err)
	d.event = event("t1", "ev1", base, "tr1")
	must(t, "PutEvent", s.PutEvent(ctx, d.event))
	d.cursor, err = s.PutCursor(ctx, store.Cursor{Key: "poll:acc1", Value: json.RawMessage(`{"etag":"x"}`), UpdatedAt: base})
	must(t, "PutCursor", err)
	d.cursor.Value = json.RawMessage(`{"etag":"y"}`)
	d.cursor, err = s.PutCursor(ctx, d.cursor)
	must(t, "PutCursor", err)
	return d
}

// checkDispatchRecords checks, after the reopen, that the records of
// putDispatchRecords, their indexes and their versions survived.
func checkDispatchRecords(t *testing.T, s store.Store, d dispatchRecords) {
	t.Helper()
	ctx := t.Context()

	gotA, err := s.GetAgent(ctx, "t1", "ag1")
	must(t, "GetAgent after reopen", err)
	same(t, "GetAgent after reopen", normAgent, gotA, d.agent)
	agents, err := s.ListAgents(ctx, "t1")
	must(t, "ListAgents after reopen", err)
	sameOrder(t, "ListAgents after reopen", normAgent, agentID, agents, []store.Agent{d.agent})
	_, err = s.CreateAgent(ctx, agent("t2", "ag1", base))
	wantErr(t, "CreateAgent with a taken id after reopen", err, store.ErrConflict)
	stale := d.agent
	stale.Version = 1
	_, err = s.UpdateAgent(ctx, stale)
	wantErr(t, "UpdateAgent with a stale version after reopen", err, store.ErrConflict)
	if up, err := s.UpdateAgent(ctx, d.agent); err != nil || up.Version != 3 {
		t.Fatalf("UpdateAgent after reopen: version %d, %v; want 3", up.Version, err)
	}

	gotT, err := s.GetTrigger(ctx, "t1", "tr1")
	must(t, "GetTrigger after reopen", err)
	same(t, "GetTrigger after reopen", normTrigger, gotT, d.trigger)
	for _, f := range []store.TriggerFilter{{}, {TenantID: "t1"}, {AgentID: d.trigger.AgentID}} {
		triggers, err := s.ListTriggers(ctx, f)
		must(t, "ListTriggers after reopen", err)
		sameOrder(t, fmt.Sprintf("ListTriggers %+v after reopen", f), normTrigger, triggerID, triggers, []store.Trigger{d.trigger})
	}

	gotH, err := s.GetHook(ctx, "h1")
	must(t, "GetHook after reopen", err)
	same(t, "GetHook after reopen", normHook, gotH, d.hook)
	gotH, err = s.FindHook(ctx, d.hook.Key())
	must(t, "FindHook after reopen", err)
	same(t, "FindHook after reopen", normHook, gotH, d.hook)
	hooks, err := s.ListHooks(ctx, "")
	must(t, "ListHooks after reopen", err)
	sameOrder(t, "ListHooks after reopen", normHook, hookID, hooks, []store.Hook{d.hook})
	dup := d.hook
	dup.ID = "h2"
	_, err = s.CreateHook(ctx, dup)
	wantErr(t, "CreateHook with a taken key after reopen", err, store.ErrConflict)

	gotR, err := s.GetRun(ctx, "", "r1")
	must(t, "GetRun after reopen", err)
	same(t, "GetRun after reopen", normRun, gotR, d.run)
	for _, f := range []store.RunFilter{{TenantID: "t1"}, {TriggerID: d.run.TriggerID}, {TenantID: "t1", EventID: d.run.EventID, Status: d.run.Status}} {
		runs, err := s.ListRuns(ctx, f)
		must(t, "ListRuns after reopen", err)
		sameOrder(t, fmt.Sprintf("ListRuns %+v after reopen", f), normRun, runID, runs, []store.Run{d.run})
	}
	_, err = s.CreateRun(ctx, run("t1", "r1", "ev1", "tr1", "ag1", store.RunClaimed, base))
	wantErr(t, "CreateRun with a taken id after reopen", err, store.ErrConflict)
	staleRun := d.run
	staleRun.Version = 1
	_, err = s.UpdateRun(ctx, staleRun)
	wantErr(t, "UpdateRun with a stale version after reopen", err, store.ErrConflict)

	gotE, err := s.GetEvent(ctx, "t1", "ev1")
	must(t, "GetEvent after reopen", err)
	same(t, "GetEvent after reopen", normEvent, gotE, d.event)
	events, err := s.ListTriggerEvents(ctx, "t1", "tr1", 0)
	must(t, "ListTriggerEvents after reopen", err)
	sameOrder(t, "ListTriggerEvents after reopen", normEvent, eventID, events, []store.EventRecord{d.event})

	gotC, err := s.GetCursor(ctx, "poll:acc1")
	must(t, "GetCursor after reopen", err)
	same(t, "GetCursor after reopen", normCursor, gotC, d.cursor)
	staleC := d.cursor
	staleC.Version = 1
	_, err = s.PutCursor(ctx, staleC)
	wantErr(t, "PutCursor with a stale version after reopen", err, store.ErrConflict)
	if c, err := s.PutCursor(ctx, d.cursor); err != nil || c.Version != 3 {
		t.Fatalf("PutCursor after reopen: version %d, %v; want 3", c.Version, err)
	}
}
