package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// The conformance tests of the dispatcher's records have a file per
// record (agents, triggers, hooks, runs, events, cursors); this one holds
// what they share, the tests of them all (default times, validation) and
// what the persistence test writes of them.

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

// everyByte returns the 256 byte values, NUL and invalid UTF-8 included.
func everyByte() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(255 - i)
	}
	return b
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
