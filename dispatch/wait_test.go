package dispatch_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// waitStep polls until step i of run id has status want, and returns the
// run.
func (h *harness) waitStep(id string, i int, want store.StepStatus) store.Run {
	h.t.Helper()
	var r store.Run
	testenv.Eventually(h.t, 15*time.Second, "step "+string(want), func() bool {
		var err error
		r, err = h.store.GetRun(context.Background(), "t1", id)
		return err == nil && len(r.Steps) > i && r.Steps[i].Status == want
	})
	return r
}

func rateLimited(after time.Duration) error {
	return &connectors.Error{Code: connectors.CodeRateLimited, Status: 403, Message: "API rate limit exceeded for the account", RetryAfter: after, Retryable: true}
}

// A step the provider refuses for a rate limit does not fail its run: the
// run waits, without holding the events consumer, and the step runs again
// with the input it was rendered with, then the rest of the pipeline.
func TestRateLimitedStepWaitsAndRunsAgain(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	// Waits of 2 s, so the run is still waiting when the check below
	// that the event was settled meanwhile runs, on a slow machine too.
	h.steps.refusal = rateLimited(2 * time.Second)
	h.steps.refuse["codehost.create_comment"] = 2
	h.agent("agent-1",
		store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
			Input: json.RawMessage(`{"body": "Triage: {{ .resource.title }}"}`)},
		store.PipelineStep{Name: "label", Step: "codehost.add_labels", Account: "acc1",
			Input: json.RawMessage(`{"after": "{{ .steps.comment.output.id }}"}`)},
	)
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()

	_, events := h.deliverEvents("d-limit", "octo-org/api", 9)
	var ev triggers.Event
	for _, e := range events {
		if e.Kind == triggers.NewIssue {
			ev = e
		}
	}
	// A title that is itself a template: rendering the step's input a
	// second time would turn it into "new_issue".
	ev.Resource.Title = "{{ .kind }} breaks"
	if _, err := h.bus.PublishEvents(context.Background(), []triggers.Event{ev}, ""); err != nil {
		t.Fatal(err)
	}
	runID := dispatch.RunID(ev.ID, "trig-a", "")

	r := h.waitStep(runID, 0, store.StepWaiting)
	s := r.Steps[0]
	if r.Status != store.RunStarted || s.Waits < 1 || s.RetryAt.IsZero() || s.Error == nil || s.Error.Code != "rate_limited" ||
		!strings.Contains(s.Error.Message, "runs again at") || r.Steps[1].Status != store.StepPending {
		t.Fatalf("while waiting: run %s, step %+v, next step %s; want started, step waiting with rate_limited and a retry time, next pending", r.Status, s, r.Steps[1].Status)
	}
	// The event is settled while its run waits: the events consumer has
	// nothing pending and the run has not finished (its two waits take at
	// least 4 s).
	h.waitPending()
	if r, err := h.store.GetRun(context.Background(), "t1", runID); err != nil || r.Status != store.RunStarted {
		t.Fatalf("run once the event was settled: %s, %v; want it still started (waiting)", r.Status, err)
	}

	r = h.waitRun(runID)
	if r.Status != store.RunSucceeded || r.Steps[0].Status != store.StepSucceeded || r.Steps[0].Waits != 2 ||
		r.Steps[0].Error != nil || !r.Steps[0].RetryAt.IsZero() || r.Steps[1].Status != store.StepSucceeded {
		t.Fatalf("run = %+v; want succeeded after two waits, the wait's error cleared", r)
	}
	h.steps.mu.Lock()
	defer h.steps.mu.Unlock()
	if len(h.steps.calls) != 4 {
		t.Fatalf("%d step calls, want 4 (comment refused twice, then comment and label)", len(h.steps.calls))
	}
	for i, c := range h.steps.calls[:3] {
		if c.Step != "codehost.create_comment" || c.Input["body"] != "Triage: {{ .kind }} breaks" {
			t.Errorf("call %d = %s %v; want create_comment with the input rendered once", i+1, c.Step, c.Input)
		}
	}
	if c := h.steps.calls[3]; c.Step != "codehost.add_labels" || c.Input["after"] != float64(3) {
		t.Errorf("last call = %s %v; want add_labels over the successful comment's output", c.Step, c.Input)
	}
}

// A run stops waiting after MaxStepWaits refusals, or at once when the
// provider's time would take it past MaxStepWait, and fails with the
// rate_limited error.
func TestRateLimitedStepGivesUp(t *testing.T) {
	h := newHarness(t, dispatch.Options{MaxStepWaits: 2, MaxStepWait: time.Minute})
	h.steps.refusal = rateLimited(time.Second)
	h.steps.refuse["codehost.create_comment"] = 1000
	h.agent("agent-1",
		store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)},
		store.PipelineStep{Name: "label", Step: "codehost.add_labels", Account: "acc1", Input: json.RawMessage(`{}`)},
	)
	h.agent("agent-2", store.PipelineStep{Name: "deploy", Step: "deploy.create_deployment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.steps.fail["deploy.create_deployment"] = rateLimited(2 * time.Hour)
	h.start()

	ev := h.deliver("d-giveup", "octo-org/api", 3)
	r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", ""))
	s := r.Steps[0]
	if r.Status != store.RunFailed || s.Status != store.StepFailed || s.Waits != 2 || s.Error.Code != "rate_limited" ||
		!strings.Contains(s.Error.Message, "gave up after waiting 2 times") || r.Steps[1].Status != store.StepSkipped {
		t.Fatalf("run = %+v, step %+v; want failed with rate_limited after 2 waits, next step skipped", r, s)
	}
	r = h.waitRun(dispatch.RunID(ev.ID, "trig-b", ""))
	if r.Status != store.RunFailed || r.Steps[0].Waits != 0 || r.Error.Code != "rate_limited" || !strings.Contains(r.Error.Message, "not waited for: the limit lifts more than 1m0s after the run started") {
		t.Fatalf("run = %+v; want failed at once: two hours is past MaxStepWait", r)
	}
	if calls := h.steps.count(); calls != 4 {
		t.Errorf("%d step calls, want 4 (3 comments, 1 deployment)", calls)
	}
}

// A run whose event leaves the events stream while it waits fails with
// event_expired when its time comes, instead of waiting for ever.
func TestWaitingRunWhoseEventIsGoneFails(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.steps.refusal = rateLimited(time.Second)
	h.steps.refuse["codehost.create_comment"] = 1
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()

	ev := h.deliver("d-gone-event", "octo-org/api", 4)
	runID := dispatch.RunID(ev.ID, "trig-a", "")
	h.waitStep(runID, 0, store.StepWaiting)
	rec, err := h.store.GetEvent(context.Background(), "t1", ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.js.Stream(context.Background(), bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(context.Background(), rec.Seq); err != nil {
		t.Fatal(err)
	}
	r := h.waitRun(runID)
	if r.Status != store.RunFailed || r.Error == nil || r.Error.Code != "event_expired" || r.Steps[0].Status != store.StepFailed {
		t.Fatalf("run = %+v; want failed with event_expired", r)
	}
	if n := h.steps.count(); n != 1 {
		t.Errorf("%d step calls, want 1", n)
	}
	// The resumption was settled, not left to be dead-lettered.
	h.waitSettled(bus.PushStream, dispatch.ResumeConsumer)
	if n := h.subjectCount(bus.DeadStream, "dead.resume"); n != 0 {
		t.Errorf("%d resumptions dead-lettered, want 0", n)
	}
}

// A step held back because its provider keeps failing the account
// (unavailable: nothing was sent) waits like a rate-limited one, as often
// as the outage needs: MaxStepWaits does not apply, MaxStepWait does.
func TestHeldBackStepWaitsOutTheOutage(t *testing.T) {
	h := newHarness(t, dispatch.Options{MaxStepWaits: 1, MaxStepWait: time.Minute})
	h.steps.refusal = &connectors.Error{Code: connectors.CodeUnavailable, Message: "the provider failed 5 requests in a row", RetryAfter: 100 * time.Millisecond, Retryable: true}
	h.steps.refuse["codehost.create_comment"] = 3
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.agent("agent-2", store.PipelineStep{Name: "deploy", Step: "deploy.create_deployment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.steps.fail["deploy.create_deployment"] = &connectors.Error{Code: connectors.CodeUnavailable, Message: "held back", RetryAfter: 2 * time.Hour, Retryable: true}
	h.start()

	ev := h.deliver("d-outage", "octo-org/api", 3)
	r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", ""))
	if r.Status != store.RunSucceeded || r.Steps[0].Waits != 3 {
		t.Fatalf("run = %+v; want succeeded after 3 waits, past MaxStepWaits 1", r)
	}
	r = h.waitRun(dispatch.RunID(ev.ID, "trig-b", ""))
	if r.Status != store.RunFailed || r.Error.Code != "unavailable" || !strings.Contains(r.Error.Message, "more than 1m0s after the run started") {
		t.Fatalf("run = %+v; want failed at once with unavailable: two hours is past MaxStepWait", r)
	}
}
