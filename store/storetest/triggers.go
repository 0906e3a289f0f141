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

func normTrigger(x store.Trigger) store.Trigger {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.Params = normJSON(x.Params)
	return x
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

func triggerID(tr store.Trigger) string { return tr.ID }

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
