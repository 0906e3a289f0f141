package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// activity reads the tenant's counters of the last hour per minute and
// of the last day per hour, as the Overview reads them.
func activity(t *testing.T, s store.Store, tenantID string, now time.Time) (minutes, hours []store.ActivityCounts) {
	t.Helper()
	got, err := s.ReadActivity(t.Context(), tenantID, []store.ActivitySpan{
		{Step: store.ActivityMinute, From: now.Add(-59 * time.Minute), N: 60},
		{Step: store.ActivityHour, From: now.Add(-23 * time.Hour), N: 24},
	})
	if err != nil {
		t.Fatalf("ReadActivity: %v", err)
	}
	if len(got) != 2 || len(got[0]) != 60 || len(got[1]) != 24 {
		t.Fatalf("ReadActivity: got %d spans, want 2 of 60 and 24 buckets", len(got))
	}
	return got[0], got[1]
}

func sumCounts(cs []store.ActivityCounts, name string) int64 {
	var n int64
	for _, c := range cs {
		n += c[name]
	}
	return n
}

func testActivityDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	recent, earlier := now.Add(-time.Minute), now.Add(-2*time.Hour)
	err := s.PutDeliveries(ctx, []store.DeliveryRecord{
		delivery("t1", recent, store.AnswerAccepted, "issues"),
		delivery("t1", recent.Add(time.Millisecond), store.AnswerAccepted, "issues"),
		delivery("t1", recent.Add(2*time.Millisecond), store.AnswerRefused, "issues"),
		delivery("t1", earlier, store.AnswerDuplicate, "push"),
		delivery("t2", recent, store.AnswerIgnored, "ping"),
		// Older than the hour counters keep: not counted.
		delivery("t1", now.Add(-100*time.Hour), store.AnswerAccepted, "push"),
	})
	if err != nil {
		t.Fatal(err)
	}
	minutes, hours := activity(t, s, "t1", now)
	if c := minutes[58]; c[store.AnswerAccepted] != 2 || c[store.AnswerRefused] != 1 || c[store.AnswerIgnored] != 0 {
		t.Errorf("t1's minute a minute ago: %v, want 2 accepted, 1 refused", c)
	}
	if n := sumCounts(minutes, store.AnswerDuplicate); n != 0 {
		t.Errorf("duplicates in the last hour's minutes: %d, want 0 (it came 2 hours ago)", n)
	}
	if n := sumCounts(hours, store.AnswerAccepted); n != 2 {
		t.Errorf("accepted in the last day's hours: %d, want 2", n)
	}
	if c := hours[21]; c[store.AnswerDuplicate] != 1 {
		t.Errorf("t1's hour two hours ago: %v, want 1 duplicate", c)
	}
	minutes, _ = activity(t, s, "t2", now)
	if c := minutes[58]; c[store.AnswerIgnored] != 1 || c[store.AnswerAccepted] != 0 {
		t.Errorf("t2's minute a minute ago: %v, want its 1 ignored alone", c)
	}
	if _, err := s.ReadActivity(ctx, "t1", []store.ActivitySpan{{Step: 5 * time.Minute, From: now, N: 1}}); err == nil {
		t.Error("ReadActivity per 5 minutes: no error, want one (minutes and hours are kept)")
	}
}

func testActivityRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	created := now.Add(-3 * time.Minute)
	r1, err := s.CreateRun(ctx, run("t1", "r1", "e1", "tr1", "ag1", store.RunClaimed, created))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRun(ctx, run("t1", "r1", "e1", "tr1", "ag1", store.RunClaimed, created)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateRun again: %v, want ErrConflict", err)
	}
	r2, err := s.CreateRun(ctx, run("t1", "r2", "e2", "tr1", "ag1", store.RunClaimed, created))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateRun(ctx, run("t1", "r3", "e3", "tr1", "ag1", store.RunClaimed, created))
	if err != nil {
		t.Fatal(err)
	}
	step := func(r store.Run, status store.RunStatus) store.Run {
		t.Helper()
		r.Status = status
		out, err := s.UpdateRun(ctx, r)
		if err != nil {
			t.Fatalf("UpdateRun %s to %s: %v", r.ID, status, err)
		}
		return out
	}
	r1 = step(r1, store.RunStarted)
	stale := r1
	r1 = step(r1, store.RunSucceeded)
	step(r1, store.RunSucceeded) // no change of status: not counted again
	stale.Status = store.RunFailed
	if _, err := s.UpdateRun(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("UpdateRun of a stale version: %v, want ErrConflict", err)
	}
	step(r2, store.RunFailed)
	// Created failed: counted created and failed at once.
	if _, err := s.CreateRun(ctx, run("t1", "r4", "e4", "tr1", "ag1", store.RunFailed, created)); err != nil {
		t.Fatal(err)
	}
	minutes, hours := activity(t, s, "t1", now)
	want := store.ActivityCounts{store.CountRunsCreated: 4, store.CountRunsSucceeded: 1, store.CountRunsFailed: 2}
	for name, n := range want {
		if got := minutes[56][name]; got != n {
			t.Errorf("minute of creation, %s: %d, want %d (all: %v)", name, got, n, minutes[56])
		}
		if got := sumCounts(hours, name); got != n {
			t.Errorf("last day's hours, %s: %d, want %d", name, got, n)
		}
	}
}
