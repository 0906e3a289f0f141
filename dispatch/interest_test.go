package dispatch_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

func TestInterest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds []triggers.Kind
		want  []string
	}{
		{"no trigger", nil, []string{dispatch.NoEvents}},
		{"unknown kinds count for nothing", []triggers.Kind{"no_such_kind"}, []string{dispatch.NoEvents}},
		{"a kind alone on its webhook event", []triggers.Kind{triggers.NewStar}, []string{"triggers.codehost.new_star.>"}},
		{"the other kinds of its webhook event", []triggers.Kind{triggers.NewIssueLabel}, []string{
			"triggers.codehost.new_issue.>", "triggers.codehost.new_issue_label.>",
			"triggers.codehost.new_mention.>", "triggers.codehost.updated_issue.>",
		}},
		{"a polled kind", []triggers.Kind{triggers.NewGist}, []string{"triggers.codehost.new_gist.>"}},
		{"push and create", []triggers.Kind{triggers.NewCommit, triggers.NewTag}, []string{
			"triggers.codehost.new_branch.>", "triggers.codehost.new_commit.>",
			"triggers.codehost.new_push.>", "triggers.codehost.new_tag.>",
		}},
		{"any deployment kind takes them all", []triggers.Kind{triggers.DeploymentFailed}, []string{"triggers.deploy.>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dispatch.Interest(tc.kinds); !slices.Equal(got, tc.want) {
				t.Errorf("Interest(%v) =\n %v\nwant\n %v", tc.kinds, got, tc.want)
			}
		})
	}

	var every []triggers.Kind
	for _, k := range triggers.Kinds() {
		if k.Connector == triggers.CodeHost {
			every = append(every, k.Kind)
		}
	}
	if got := dispatch.Interest(every); !slices.Equal(got, []string{"triggers.codehost.>"}) {
		t.Errorf("Interest(every code-hosting kind) = %v; want the one connector filter", got)
	}
}

// TestInterestTakesEveryEventAHookCanBring checks Interest against the
// mapper itself: for every delivery of the corpus and of testdata, and every
// trigger kind whose hook subscribes to that delivery's webhook event, each
// event the delivery maps to passes exactly one of Interest's filters.
// Otherwise a tenant's hook could bring an event the dispatcher never sees,
// and the tenant would have no record of it.
func TestInterestTakesEveryEventAHookCanBring(t *testing.T) {
	checked := 0
	for _, d := range sampleDeliveries(t) {
		res, err := triggers.Map(d.Delivery)
		if err != nil || len(res.Events) == 0 {
			continue
		}
		for _, k := range triggers.Kinds() {
			if k.Connector != d.Connector || (d.Connector == triggers.CodeHost && !slices.Contains(k.Kind.HookEvents(), d.Event)) {
				continue
			}
			filters := dispatch.Interest([]triggers.Kind{k.Kind})
			for _, ev := range res.Events {
				n := 0
				for _, filter := range filters {
					if server.SubjectMatchesFilter(ev.Subject(), filter) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: a %s trigger's hook brings %s on %s, which %d of %v match; want 1", d.file, k.Kind, ev.Kind, ev.Subject(), n, filters)
				}
				checked++
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d events; are the corpus and testdata where they should be?", checked)
	}
	t.Logf("checked %d (trigger kind, event) pairs", checked)
}

// sampleDelivery is a delivery read from the corpus or testdata.
type sampleDelivery struct {
	triggers.Delivery
	file string
}

// sampleDeliveries reads every delivery of the shared corpus and of the
// project's testdata. The folder says which service sent it, as in the
// mapper's own corpus test; the file name's first segment is its event.
func sampleDeliveries(t *testing.T) []sampleDelivery {
	t.Helper()
	connectorOf := map[string]triggers.Connector{"github": triggers.CodeHost, "vercel": triggers.Deploy}
	var out []sampleDelivery
	for _, root := range []string{testenv.Corpus(t), filepath.Join("..", "testdata", "webhooks")} {
		for sub, c := range connectorOf {
			files, _ := filepath.Glob(filepath.Join(root, sub, "*.json"))
			for _, f := range files {
				body, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, sampleDelivery{file: filepath.Base(f), Delivery: triggers.Delivery{
					Connector: c, ID: "d-1", Event: strings.Split(filepath.Base(f), ".")[0], ReceivedAt: time.Now(), Payload: body,
				}})
			}
		}
	}
	return out
}

func TestDispatcherTakesOnlyTheKindsItsTriggersNeed(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, dispatch.Options{Registerer: reg})
	h.start()
	ctx := context.Background()
	filters := func() []string {
		t.Helper()
		c, err := h.js.Consumer(ctx, bus.EventsStream, dispatch.EventsConsumer)
		if err != nil {
			return nil
		}
		cfg := c.CachedInfo().Config
		if cfg.FilterSubject != "" {
			return []string{cfg.FilterSubject}
		}
		return cfg.FilterSubjects
	}
	testenv.Eventually(t, 10*time.Second, "the events consumer to exist", func() bool { return filters() != nil })
	if got := filters(); !slices.Equal(got, []string{dispatch.NoEvents}) {
		t.Fatalf("filters without triggers = %v; want %v", got, []string{dispatch.NoEvents})
	}

	// No trigger of its kind: an issue is not delivered, and once the
	// consumer has passed over it (delivering a later star to a star
	// trigger), it is not delivered when an issue trigger comes either.
	early := h.deliver("d-1", "octo-org/api", 1)
	h.agent("agent-1")
	h.trigger("trig-star", "agent-1", triggers.NewStar, match.Params{}, "")
	h.d.HandleChange(ctx, []byte(`{"tenant_id":"t1","trigger_id":"trig-star"}`))
	if got := filters(); !slices.Equal(got, []string{"triggers.codehost.new_star.>"}) {
		t.Fatalf("filters with a star trigger = %v; want new_star's only", got)
	}
	star := triggers.Event{
		ID: "star-1", Kind: triggers.NewStar, Connector: triggers.CodeHost, DeliveryID: "d-star", SourceEvent: "star", Action: "created",
		ReceivedAt: time.Now(), Repository: &triggers.Repository{Owner: "octo-org", Name: "api", FullName: "octo-org/api"},
		Resource: triggers.Resource{Type: "repository"}, Payload: []byte(`{"action":"created"}`),
	}
	if _, err := h.bus.PublishEvents(ctx, []triggers.Event{star}, ""); err != nil {
		t.Fatal(err)
	}
	h.waitRun(dispatch.RunID(star.ID, "trig-star", ""))

	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{}, "")
	h.d.HandleChange(ctx, []byte(`{"tenant_id":"t1","trigger_id":"trig-a"}`))
	if got := filters(); !slices.Contains(got, "triggers.codehost.new_issue.>") || slices.Contains(got, "triggers.codehost.new_push.>") {
		t.Fatalf("filters with a new_issue trigger = %v; want new_issue's and its webhook event's kinds only", got)
	}
	ev := h.deliver("d-2", "octo-org/api", 2)
	if r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", "")); r.Status != store.RunSucceeded {
		t.Errorf("run = %+v; want succeeded", r)
	}
	h.waitPending()
	if _, err := h.store.GetRun(ctx, "t1", dispatch.RunID(early.ID, "trig-a", "")); err == nil {
		t.Error("the issue the consumer had passed over started the new trigger")
	}
	c, err := h.js.Consumer(ctx, bus.EventsStream, dispatch.EventsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Delivered.Consumer; got != 2 {
		t.Errorf("the dispatcher was delivered %d events; want 2 (the star, and the issue after its trigger)", got)
	}
	if got := skippedCount(t, reg); got != 0 {
		t.Errorf("the dispatcher skipped %v events itself; want none (the server passes over them)", got)
	}

	// Another process with a stale index narrowed the consumer: the next
	// resync puts back what this index needs.
	if _, err := h.bus.SetWorkFilters(ctx, bus.EventsStream, dispatch.EventsConsumer, []string{dispatch.NoEvents}); err != nil {
		t.Fatal(err)
	}
	if err := h.d.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := filters(); !slices.Contains(got, "triggers.codehost.new_issue.>") || !slices.Contains(got, "triggers.codehost.new_star.>") {
		t.Errorf("filters after a resync = %v; want new_issue's and new_star's back", got)
	}

	// The last triggers deleted: narrowed to nothing again.
	for _, id := range []string{"trig-a", "trig-star"} {
		if err := h.store.DeleteTrigger(ctx, "t1", id); err != nil {
			t.Fatal(err)
		}
		h.d.HandleChange(ctx, []byte(`{"tenant_id":"t1","trigger_id":"`+id+`"}`))
	}
	if got := filters(); !slices.Equal(got, []string{dispatch.NoEvents}) {
		t.Errorf("filters after the last trigger went = %v; want %v", got, []string{dispatch.NoEvents})
	}
}
