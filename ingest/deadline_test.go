package ingest

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Commits that start within a tick share one deadline, never earlier than
// the timeout asks and at most a tick later.
func TestDeadlinesAreShared(t *testing.T) {
	s := deadlines{tick: time.Second}
	now := time.Now()
	a := s.after(now, time.Minute)
	if min, max := now.Add(time.Minute), now.Add(time.Minute+time.Second); a.at.Before(min) || a.at.After(max) {
		t.Fatalf("deadline %s; want within [%s, %s]", a.at, min, max)
	}
	last := a.at.Add(-time.Minute) // the latest start a's deadline serves
	if b := s.after(last, time.Minute); b != a {
		t.Fatalf("a commit starting at the same deadline got another one (%s, %s)", a.at, b.at)
	}
	later := a.at.Add(-time.Minute).Add(time.Millisecond) // its deadline would be past a's
	if c := s.after(later, time.Minute); c == a || c.at.Before(later.Add(time.Minute)) {
		t.Fatalf("a commit starting at %s got deadline %s; want a new one after %s", later, c.at, later.Add(time.Minute))
	}
}

// The commit context ends at its deadline, carries the request's values,
// and outlives the request's cancellation.
func TestCommitContext(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	s := deadlines{tick: 10 * time.Millisecond}
	ctx := s.after(time.Now(), 20*time.Millisecond).context(parent)
	if ctx.Value(key{}) != "v" {
		t.Fatal("the commit context lost the request's values")
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Fatal("the commit context has no deadline")
	}
	cancel()
	if err := ctx.Err(); err != nil {
		t.Fatalf("the request's cancellation ended the commit: %v", err)
	}
	derived, stop := context.WithTimeout(ctx, time.Hour)
	defer stop()
	select {
	case <-derived.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a context derived from the commit context outlived its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(derived.Err(), context.DeadlineExceeded) {
		t.Fatalf("errors %v and %v; want deadline exceeded", ctx.Err(), derived.Err())
	}
}
