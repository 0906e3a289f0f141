package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normEvent(x store.EventRecord) store.EventRecord {
	x.ReceivedAt = normTime(x.ReceivedAt)
	x.DispatchedAt = normTime(x.DispatchedAt)
	return x
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

func eventID(e store.EventRecord) string { return e.TenantID + "/" + e.EventID }

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
