package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// publishScoped publishes ev again as if it had arrived on hook of tenant
// and account, under a new delivery id.
func (h *harness) publishScoped(ev triggers.Event, hook, tenant, account, deliveryID string) triggers.Event {
	h.t.Helper()
	ev.Scope = &triggers.Scope{Hook: hook, Tenant: tenant, Account: account}
	ev.DeliveryID = deliveryID
	ev.ID = triggers.EventID(triggers.CodeHost, hook+"/"+deliveryID, ev.Kind, 0)
	if _, err := h.bus.PublishEvents(context.Background(), []triggers.Event{ev}, ""); err != nil {
		h.t.Fatal(err)
	}
	return ev
}

func draft(kind triggers.Kind, params match.Params, filter string) store.Trigger {
	p, _ := json.Marshal(params)
	return store.Trigger{TenantID: "t1", Kind: string(kind), AccountID: "acc1", AgentID: "agent-1", Params: p, Filter: filter}
}

// results returns "<delivery id>=<result>" for each event of r, in order.
func results(r dispatch.DryRunReport) string {
	var out []string
	for _, e := range r.Events {
		out = append(out, e.DeliveryID+"="+e.Result)
	}
	return strings.Join(out, " ")
}

func TestDryRun(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	ctx := context.Background()
	h.deliver("d1", "octo-org/api", 1, "bug")
	h.deliver("d2", "octo-org/api", 2, "docs")
	h.deliver("d3", "octo-org/web", 3, "bug")
	base := h.deliver("d4", "octo-org/API", 4, "bug")
	// The same issue on another tenant's hook, and on this tenant's hook
	// of another account: neither is this trigger's to see.
	h.publishScoped(base, "h9", "t2", "acc9", "d5")
	h.publishScoped(base, "h2", "t1", "acc2", "d6")
	// On this tenant's hook of the trigger's account: it is.
	h.publishScoped(base, "h1", "t1", "acc1", "d7")

	bug := draft(triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}, Labels: []string{"bug"}}, "")
	r, err := h.d.DryRun(ctx, bug, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := results(r), "d7=matched d4=matched d2=filtered_out d1=matched"; got != want || r.Matched != 3 || !r.Exhausted || r.Truncated {
		t.Fatalf("dry run: %s (matched %d, exhausted %v, truncated %v), want %s, 3 matched, exhausted", got, r.Matched, r.Exhausted, r.Truncated, want)
	}
	if e := r.Events[2]; e.Reason != "labels [docs] include none of [bug]" || e.Repository != "octo-org/api" || e.Action != "opened" || e.EventID == "" || e.ReceivedAt.IsZero() {
		t.Fatalf("filtered-out event: %+v", e)
	}

	t.Run("the latest events only", func(t *testing.T) {
		r, err := h.d.DryRun(ctx, bug, 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := results(r); got != "d7=matched d4=matched" || r.Exhausted {
			t.Fatalf("dry run of 2: %s (exhausted %v)", got, r.Exhausted)
		}
	})
	t.Run("a filter, any repository", func(t *testing.T) {
		anyRepo := draft(triggers.NewIssue, match.Params{}, "event.resource.number >= 3")
		r, err := h.d.DryRun(ctx, anyRepo, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := results(r), "d7=matched d4=matched d3=matched d2=filtered_out d1=filtered_out"; got != want {
			t.Fatalf("dry run: %s, want %s", got, want)
		}
		if reason := r.Events[4].Reason; reason != "filter: event.resource.number >= 3 is false" {
			t.Fatalf("reason %q", reason)
		}
	})
	t.Run("disabled and inactive triggers are tested as if active", func(t *testing.T) {
		off := bug
		off.Enabled, off.Status, off.StatusCode, off.StatusReason = false, store.TriggerInactive, "account_removed", "gone"
		r, err := h.d.DryRun(ctx, off, 10)
		if err != nil {
			t.Fatal(err)
		}
		if r.Matched != 3 {
			t.Fatalf("dry run of a disabled trigger: %s", results(r))
		}
	})
	t.Run("another kind has no events", func(t *testing.T) {
		r, err := h.d.DryRun(ctx, draft(triggers.NewFork, match.Params{Repositories: []string{"octo-org/api"}}, ""), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Events) != 0 || !r.Exhausted {
			t.Fatalf("dry run of new_fork: %+v", r)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for name, c := range map[string]struct {
			t     store.Trigger
			limit int
		}{
			"filter":      {draft(triggers.NewIssue, match.Params{}, "event.resource.number >"), 10},
			"limit 0":     {bug, 0},
			"limit 101":   {bug, dispatch.MaxDryRunEvents + 1},
			"bad params":  {store.Trigger{TenantID: "t1", Kind: "new_issue", Params: json.RawMessage(`{"labels": 3}`)}, 10},
			"params rule": {draft(triggers.NewIssue, match.Params{Repositories: []string{"not a repo"}}, ""), 10},
		} {
			if _, err := h.d.DryRun(ctx, c.t, c.limit); !errors.Is(err, dispatch.ErrInvalidDryRun) {
				t.Errorf("%s: err = %v, want ErrInvalidDryRun", name, err)
			}
		}
	})
	// Nothing was started or recorded.
	runs, err := h.store.ListRuns(ctx, store.RunFilter{TenantID: "t1", Limit: 10})
	if err != nil || len(runs) != 0 {
		t.Fatalf("runs after dry runs: %v, %v", runs, err)
	}
	if _, err := h.store.GetEvent(ctx, "t1", base.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an outcome was recorded: %v", err)
	}
}

// BenchmarkDryRun tests a trigger against a stream of 5,000 new_issue
// events: dense (every event on the trigger's repository; the newest 20
// answer) and sparse (20 on its repository among the 5,000, spread out;
// ReadBack's windows widen to find them).
func BenchmarkDryRun(b *testing.B) {
	h := newHarness(b, dispatch.Options{})
	const total, sparse = 5000, 20
	for i := range total {
		repo := "octo-org/api"
		if i%(total/sparse) == 0 {
			repo = "octo-org/rare"
		}
		h.deliver("d"+strconv.Itoa(i), repo, i+1, "bug")
	}
	ctx := context.Background()
	for _, c := range []struct {
		name, repo string
	}{{"dense", "octo-org/api"}, {"sparse", "octo-org/rare"}} {
		b.Run(c.name, func(b *testing.B) {
			tr := draft(triggers.NewIssue, match.Params{Repositories: []string{c.repo}}, "event.resource.number % 2 == 0")
			for b.Loop() {
				r, err := h.d.DryRun(ctx, tr, dispatch.DryRunEvents)
				if err != nil || len(r.Events) != dispatch.DryRunEvents {
					b.Fatalf("dry run: %d events, %v", len(r.Events), err)
				}
			}
		})
	}
}
