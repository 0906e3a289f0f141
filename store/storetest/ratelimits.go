package storetest

import (
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// testRateLimits checks the merge rule every process relies on: answers
// arrive out of order, so the same reset keeps the lower remaining, a later
// reset replaces, an earlier one is ignored; keys are independent.
func testRateLimits(t *testing.T, s store.Store) {
	ctx := t.Context()
	reset := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if _, ok, err := s.GetRateLimit(ctx, "acc_1:core"); err != nil || ok {
		t.Fatalf("unknown budget: ok=%v err=%v", ok, err)
	}
	put := func(key string, remaining int, reset time.Time) {
		t.Helper()
		if err := s.PutRateLimit(ctx, key, store.RateLimit{Limit: 5000, Remaining: remaining, Reset: reset}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) store.RateLimit {
		t.Helper()
		rl, ok, err := s.GetRateLimit(ctx, key)
		if err != nil || !ok {
			t.Fatalf("GetRateLimit(%s): ok=%v err=%v", key, ok, err)
		}
		return rl
	}
	put("acc_1:core", 4990, reset)
	put("acc_1:core", 4995, reset) // an older answer arriving late
	if rl := get("acc_1:core"); rl.Remaining != 4990 || rl.Limit != 5000 || !rl.Reset.Equal(reset) {
		t.Fatalf("same reset: %+v, want remaining 4990 kept", rl)
	}
	put("acc_1:core", 3, reset.Add(-time.Hour+time.Minute)) // an earlier window
	if rl := get("acc_1:core"); rl.Remaining != 4990 {
		t.Fatalf("an earlier reset replaced the budget: %+v", rl)
	}
	put("acc_1:core", 5000, reset.Add(time.Hour)) // the next window
	if rl := get("acc_1:core"); rl.Remaining != 5000 || !rl.Reset.Equal(reset.Add(time.Hour)) {
		t.Fatalf("a later reset did not replace the budget: %+v", rl)
	}
	put("acc_1:search", 7, reset)
	if get("acc_1:core").Remaining != 5000 || get("acc_1:search").Remaining != 7 {
		t.Fatal("budgets of different keys interfere")
	}
	put("acc_2:core", 1, time.Now().Add(-time.Second)) // already past its reset
	if _, ok, err := s.GetRateLimit(ctx, "acc_2:core"); err != nil || ok {
		t.Fatalf("a budget past its reset: ok=%v err=%v, want not reported", ok, err)
	}
}
