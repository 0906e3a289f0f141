package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Prune deletes finished runs and event records past the retention, and
// keeps a run that is still waiting, whatever its age.
func TestPruneDeletesFinishedRunsAndKeepsWaitingOnes(t *testing.T) {
	// The dispatcher's clock is moved two hours on before Prune is
	// called, so its finished run is then older than the hour kept; the
	// prune loop's own pass, at start, finds nothing old, whenever it
	// runs. The waiting run's retry lies past the move.
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	h := newHarness(t, dispatch.Options{Retention: time.Hour, PruneInterval: time.Hour, Now: now})
	h.steps.fail["deploy.create_deployment"] = rateLimited(10 * time.Hour)
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.agent("agent-2", store.PipelineStep{Name: "deploy", Step: "deploy.create_deployment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()

	ev := h.deliver("d-prune", "octo-org/api", 4)
	done := dispatch.RunID(ev.ID, "trig-a", "")
	waiting := dispatch.RunID(ev.ID, "trig-b", "")
	if r := h.waitRun(done); r.Status != store.RunSucceeded {
		t.Fatalf("run = %+v, want succeeded", r)
	}
	h.waitStep(waiting, 0, store.StepWaiting)
	ctx := context.Background()
	if _, err := h.store.GetEvent(ctx, "t1", ev.ID); err != nil {
		t.Fatalf("event record before pruning: %v", err)
	}

	if p, err := h.d.Prune(ctx); err != nil || p != (dispatch.Pruned{}) {
		t.Fatalf("within the retention: pruned %+v, %v; want nothing", p, err)
	}
	ahead.Store(int64(2 * time.Hour))
	p, err := h.d.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs != 1 || p.Events != 1 {
		t.Fatalf("pruned %+v, want the finished run and the event record", p)
	}
	if _, err := h.store.GetRun(ctx, "t1", done); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finished run after pruning: err = %v, want not found", err)
	}
	if _, err := h.store.GetEvent(ctx, "t1", ev.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event record after pruning: err = %v, want not found", err)
	}
	if r, err := h.store.GetRun(ctx, "t1", waiting); err != nil || r.Status != store.RunStarted {
		t.Fatalf("waiting run after pruning: %+v, %v; want it kept", r, err)
	}
	if p, err := h.d.Prune(ctx); err != nil || p != (dispatch.Pruned{}) {
		t.Fatalf("second pass: %+v, %v; want nothing left to prune", p, err)
	}
}
