package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normFlow(x store.FlowState) store.FlowState {
	x.CreatedAt = normTime(x.CreatedAt)
	x.ExpiresAt = normTime(x.ExpiresAt)
	return x
}

func flowState(state string, expires time.Time) store.FlowState {
	return store.FlowState{
		State:          state,
		TenantID:       "t1",
		Connector:      "codehost",
		SealedVerifier: []byte{0, 1, 2, 0xfe, 0xff, 'v'},
		ReturnTo:       "https://app.example.com/settings?tab=integrations&x=ü",
		CreatedAt:      time.Now().Truncate(time.Second).Add(123456789),
		ExpiresAt:      expires,
	}
}

func testFlowTakeOnce(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := flowState("state-1", time.Now().Add(longTTL))
	must(t, "PutFlowState", s.PutFlowState(ctx, f))
	must(t, "PutFlowState other", s.PutFlowState(ctx, flowState("state-2", time.Now().Add(longTTL))))
	got, err := s.TakeFlowState(ctx, "state-1")
	must(t, "TakeFlowState", err)
	same(t, "TakeFlowState", normFlow, got, f)
	_, err = s.TakeFlowState(ctx, "state-1")
	wantErr(t, "second TakeFlowState", err, store.ErrNotFound)
	_, err = s.TakeFlowState(ctx, "unknown")
	wantErr(t, "TakeFlowState unknown", err, store.ErrNotFound)
	_, err = s.TakeFlowState(ctx, "state-2")
	must(t, "TakeFlowState other", err)
}

func testFlowConcurrentTakes(t *testing.T, s store.Store) {
	ctx := t.Context()
	must(t, "PutFlowState", s.PutFlowState(ctx, flowState("state-1", time.Now().Add(longTTL))))
	const n = 10
	wins := runConcurrently(t, n, store.ErrNotFound, func(int) error {
		_, err := s.TakeFlowState(ctx, "state-1")
		return err
	})
	if wins != 1 {
		t.Fatalf("%d of %d concurrent takes succeeded, want exactly 1", wins, n)
	}
}

// testFlowExpiry puts several states that expire soon, then takes one
// after another, with growing pauses, until one is gone. Each state is
// taken at most once, so a state that is gone has expired.
func testFlowExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 24
	states := make([]store.FlowState, n)
	for i := range states {
		states[i] = flowState(fmt.Sprintf("expiring-%d", i), time.Now().Add(shortTTL))
		must(t, "PutFlowState", s.PutFlowState(ctx, states[i]))
	}
	// Taken before it expires, it is there.
	if time.Until(states[0].ExpiresAt) > shortTTL/3 {
		got, err := s.TakeFlowState(ctx, states[0].State)
		must(t, "TakeFlowState before expiry", err)
		same(t, "TakeFlowState before expiry", normFlow, got, states[0])
	}
	deadline := time.Now().Add(waitTimeout)
	pause := 10 * time.Millisecond
	for i := 1; ; i++ {
		if i == n || time.Now().After(deadline) {
			t.Fatalf("flow states with ExpiresAt %v could still be taken at %v", states[0].ExpiresAt, time.Now())
		}
		time.Sleep(pause)
		pause = min(2*pause, 200*time.Millisecond)
		_, err := s.TakeFlowState(ctx, states[i].State)
		if errors.Is(err, store.ErrNotFound) {
			// Redis counts whole milliseconds: allow a little.
			if now := time.Now(); now.Before(states[i].ExpiresAt.Add(-10 * time.Millisecond)) {
				t.Fatalf("flow state gone at %v, before its ExpiresAt %v", now, states[i].ExpiresAt)
			}
			break
		}
		must(t, "TakeFlowState while waiting for expiry", err)
	}
	// An expired state stays gone, and does not block a new one.
	for i := range states {
		before := time.Now()
		if _, err := s.TakeFlowState(ctx, states[i].State); err == nil && before.After(states[i].ExpiresAt.Add(10*time.Millisecond)) {
			t.Fatalf("expired flow state %s could be taken", states[i].State)
		}
	}
	fresh := flowState(states[1].State, time.Now().Add(longTTL))
	must(t, "PutFlowState reusing an expired state", s.PutFlowState(ctx, fresh))
	got, err := s.TakeFlowState(ctx, fresh.State)
	must(t, "TakeFlowState fresh", err)
	same(t, "TakeFlowState fresh", normFlow, got, fresh)

	// A state put already expired is not there.
	must(t, "PutFlowState expired", s.PutFlowState(ctx, flowState("past", time.Now().Add(-time.Second))))
	_, err = s.TakeFlowState(ctx, "past")
	wantErr(t, "TakeFlowState of a state put expired", err, store.ErrNotFound)
}
