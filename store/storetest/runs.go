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

func runID(r store.Run) string { return r.ID }

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
	// Pages, each from the cursor of the last run of the one before,
	// give the whole list once, in order, ties included.
	for _, f := range []store.RunFilter{
		{TenantID: "t1", Limit: 7},
		{TenantID: "t1", Status: store.RunFailed, Limit: 4},
		{TriggerID: "tr2", Limit: 9},
		{TenantID: "t4", Limit: 2},
		{Limit: 11},
	} {
		what := fmt.Sprintf("pages of %+v", f)
		var got []store.Run
		for range 100 {
			page, err := s.ListRuns(ctx, f)
			must(t, what, err)
			got = append(got, page...)
			if len(page) < f.Limit {
				break
			}
			c := store.CursorOf(page[len(page)-1])
			parsed, err := store.ParseRunCursor(c.String())
			if err != nil || !parsed.CreatedAt.Equal(c.CreatedAt) || parsed.ID != c.ID {
				t.Fatalf("%s: cursor %v parses as %v, %v", what, c, parsed, err)
			}
			f.Before = parsed
		}
		f.Before, f.Limit = store.RunCursor{}, 1000
		sameOrder(t, what, normRun, runID, got, selectRuns(all, f))
	}
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
