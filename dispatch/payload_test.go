package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Events too large to carry their payload (payload null, payload_ref the
// archive subject of their delivery) get it from the archive for the
// filters and templates that read it.
func TestPayloadByReference(t *testing.T) {
	// A server whose max payload a 200 KB issue exceeds: its events carry
	// the payload by reference, and the archive keeps the body as an
	// object.
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(), MaxPayload: 128 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx := context.Background()
	b, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{Embedded: emb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// MaxDeliver 2: a payload_ref the archive does not hold (yet) is
	// waited for once.
	archive := &countingArchive{Archive: b}
	h := newHarnessOn(t, dispatch.Options{Archive: archive, MaxDeliver: 2}, b, emb)

	h.agent("agent-payload", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
		Input: json.RawMessage(`{"title": "{{ .payload.issue.title }}", "login": "{{ .payload.issue.user.login }}", "n": "{{ .resource.number }}"}`)})
	h.agent("agent-plain", store.PipelineStep{Name: "label", Step: "codehost.add_labels", Account: "acc1",
		Input: json.RawMessage(`{"n": "{{ .resource.number }}"}`)})
	repo := match.Params{Repositories: []string{"octo-org/api"}}
	h.trigger("trig-a", "agent-payload", triggers.NewIssue, repo, "event.payload.issue.user.login == 'octocat'")
	h.trigger("trig-b", "agent-payload", triggers.NewIssue, repo, "event.payload.issue.user.login == 'nobody'")
	h.trigger("trig-c", "agent-payload", triggers.NewIssue, repo, "")
	h.trigger("trig-d", "agent-plain", triggers.NewIssue, repo, "event.resource.number > 0")
	h.start()

	outcomes := func(t *testing.T, ev triggers.Event) map[string]string {
		t.Helper()
		rec := h.waitEvent("t1", ev.ID)
		got := map[string]string{}
		for _, o := range rec.Outcomes {
			got[o.TriggerID] = o.Result + ": " + o.Reason
		}
		return got
	}
	stepInput := func(t *testing.T, runID string) map[string]any {
		t.Helper()
		r := h.waitRun(runID)
		if r.Status != store.RunSucceeded {
			t.Fatalf("run %s: %+v, error %+v; want succeeded", r.TriggerID, r, r.Error)
		}
		var in map[string]any
		if err := json.Unmarshal(r.Steps[0].Input, &in); err != nil {
			t.Fatal(err)
		}
		return in
	}

	// An event that carries its payload reads nothing from the archive.
	small := h.deliver("d-small", "octo-org/api", 10)
	stepInput(t, dispatch.RunID(small.ID, "trig-a", ""))
	if n := archive.reads.Load(); n != 0 {
		t.Fatalf("an event that carries its payload read the archive %d times", n)
	}

	// The harness's helpers fail the test itself: no subtests.
	for _, form := range []bool{false, true} {
		id := fmt.Sprintf("d-big-%v", form)
		ev := h.deliverBig(id, 11, form)
		if ev.Payload != nil || ev.PayloadRef != bus.ArchiveSubject(triggers.CodeHost, id) {
			t.Fatalf("the event carries %d payload bytes, ref %q; the test needs it by reference", len(ev.Payload), ev.PayloadRef)
		}
		got := outcomes(t, ev)
		if got["trig-a"] != "started: " || got["trig-b"] != "filtered_out: filter: event.payload.issue.user.login == 'nobody' is false" ||
			got["trig-c"] != "started: " || got["trig-d"] != "started: " {
			t.Fatalf("outcomes %v; want a, c, d started, b filtered out by its filter over the payload", got)
		}
		for _, trig := range []string{"trig-a", "trig-c"} {
			if in := stepInput(t, dispatch.RunID(ev.ID, trig, "")); in["title"] != "Big crash" || in["login"] != "octocat" || in["n"] != float64(11) {
				t.Errorf("%s's step input %v; want the payload's title and login", trig, in)
			}
		}
		stepInput(t, dispatch.RunID(ev.ID, "trig-d", ""))
	}
	// Once per event, for its filters and its runs' templates alike.
	if n := archive.reads.Load(); n != 2 {
		t.Errorf("2 events read the archive %d times, want 2", n)
	}

	{ // An event whose payload_ref names a delivery the archive does
		// not hold (not yet: waited for once; then its retention passed):
		// the filters and templates that read the payload fail, saying
		// why; the others do not.
		_, events := h.deliverEvents("d-gone", "octo-org/api", 12)
		ev := events[0]
		ev.Payload, ev.PayloadRef = nil, bus.ArchiveSubject(triggers.CodeHost, "d-gone")
		if _, err := h.bus.PublishEvents(ctx, []triggers.Event{ev}, ""); err != nil {
			t.Fatal(err)
		}
		got := outcomes(t, ev)
		why := "the event carries its payload by reference, and it could not be read: payload_ref " + ev.PayloadRef + ": codehost delivery d-gone: delivery not in the archive"
		if want := "filtered_out: filter error: no such key: issue (" + why + ")"; got["trig-a"] != want {
			t.Errorf("trig-a: %q\nwant %q", got["trig-a"], want)
		}
		if got["trig-c"] != "started: " || got["trig-d"] != "started: " {
			t.Errorf("outcomes %v; want c and d started", got)
		}
		r := h.waitRun(dispatch.RunID(ev.ID, "trig-c", ""))
		if r.Status != store.RunFailed || r.Error == nil || r.Error.Code != "payload_unavailable" || r.Steps[0].Error == nil ||
			r.Steps[0].Error.Message != why || r.Steps[0].Status != store.StepFailed {
			t.Errorf("trig-c's run: %+v, error %+v; want failed with payload_unavailable: %s", r, r.Error, why)
		}
		// A template that does not read the payload does not need it.
		stepInput(t, dispatch.RunID(ev.ID, "trig-d", ""))
	}

	{ // Replays and dry runs read the payload for filters as well.
		ev := h.deliverBig("d-big-replay", 13, false)
		h.waitEvent("t1", ev.ID)
		plans, err := h.d.Replay(ctx, "t1", ev.ID, "", false)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range plans {
			got[p.TriggerID] = p.Result
		}
		if got["trig-a"] != "queued" || got["trig-b"] != match.FilteredOut {
			t.Errorf("replay plans %+v; want trig-a queued, trig-b filtered out", plans)
		}
		for _, p := range plans {
			if p.TriggerID == "trig-a" && p.RunID != "" {
				if in := stepInput(t, p.RunID); in["title"] != "Big crash" {
					t.Errorf("replayed run's step input %v", in)
				}
			}
		}
		r, err := h.d.DryRun(ctx, draft(triggers.NewIssue, repo, "event.payload.issue.title == 'Big crash'"), 10)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := results(r), "d-big-replay=matched d-gone=filtered_out d-big-true=matched d-big-false=matched d-small=filtered_out"; got != want {
			t.Errorf("dry run: %s, want %s", got, want)
		}
	}
}

// countingArchive counts the deliveries read (those found: a delivery
// whose events are consumed before Commit archived it is read again).
type countingArchive struct {
	dispatch.Archive
	reads atomic.Int64
}

func (a *countingArchive) Delivery(ctx context.Context, c triggers.Connector, key string) (triggers.Capture, error) {
	capture, err := a.Archive.Delivery(ctx, c, key)
	if err == nil {
		a.reads.Add(1)
	}
	return capture, err
}

// deliverBig commits an issues.opened delivery whose 200 KB issue body is
// too large for its event to carry, as JSON or form-encoded, and returns
// its new_issue event.
func (h *harness) deliverBig(id string, number int, form bool) triggers.Event {
	h.t.Helper()
	payload := fmt.Sprintf(`{"action": "opened", "issue": {"number": %d, "title": "Big crash", "body": %q, "user": {"login": "octocat"}, "labels": []},
		"repository": {"id": 1, "name": "api", "full_name": "octo-org/api", "owner": {"login": "octo-org"}, "private": false}, "sender": {"login": "octocat"}}`,
		number, strings.Repeat("stack frame\n", 200<<10/12))
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.CodeHost, ID: id, Event: "issues", ReceivedAt: time.Now(), Payload: []byte(payload)})
	if err != nil {
		h.t.Fatal(err)
	}
	c := triggers.Capture{Connector: triggers.CodeHost, DeliveryID: id, ReceivedAt: time.Now(), Body: []byte(payload),
		Header: map[string][]string{"Content-Type": {"application/json"}, "X-Github-Event": {"issues"}}}
	if form {
		c.Body = []byte("payload=" + url.QueryEscape(payload))
		c.Header["Content-Type"] = []string{"application/x-www-form-urlencoded"}
	}
	if _, err := h.bus.Commit(context.Background(), c, res.Events); err != nil {
		h.t.Fatal(err)
	}
	for _, e := range res.Events {
		if e.Kind == triggers.NewIssue {
			return e
		}
	}
	h.t.Fatal("no new_issue event")
	return triggers.Event{}
}
