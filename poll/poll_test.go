package poll_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/poll"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

const (
	tenant = "tenant-1"
	octo   = "acct-octocat"
)

func TestNewGist(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	p := h.poller()

	// A gist created before the trigger, and edited after it, is not new.
	old := h.createGist("octocat", "old")
	h.clock.Advance(time.Minute)
	trg := h.trigger(tenant, octo, triggers.NewGist, "")
	h.clock.Advance(time.Minute)
	h.call("octocat", http.MethodPatch, "/gists/"+old, `{"description":"old, edited"}`)
	h.pollOnce(p)
	h.wantEvents(0, "gists created before the trigger")
	reqs := h.fake.RequestsTo("GET /gists")
	if len(reqs) != 1 || reqs[0].Status != http.StatusOK || reqs[0].Query.Get("since") != trg.CreatedAt.Format(time.RFC3339) {
		t.Fatalf("first poll: %+v", reqs)
	}

	// A new gist emits one event.
	h.clock.Advance(time.Minute)
	id := h.createGist("octocat", "fresh notes")
	h.pollOnce(p)
	evs := h.wantEvents(1, "after a new gist")
	e := evs[0].ev
	scope := &triggers.Scope{Hook: "poll-" + octo, Tenant: tenant, Account: octo}
	if evs[0].subject != "triggers.codehost.new_gist.octocat.~" || e.Kind != triggers.NewGist || e.Connector != triggers.CodeHost ||
		e.DeliveryID != "gist-"+id || e.SourceEvent != poll.SourceGists || e.Action != "created" || e.Account != "octocat" ||
		e.Sender != "octocat" || e.Repository != nil || !e.ReceivedAt.Equal(h.clock.Now()) || *e.Scope != *scope ||
		e.ID != triggers.EventID(triggers.CodeHost, "poll-"+octo+"/gist-"+id, triggers.NewGist, 0) {
		t.Errorf("event %+v on %s", e, evs[0].subject)
	}
	wantRes := triggers.Resource{Type: "gist", ID: id, Title: "fresh notes", URL: "https://gist.github.com/octocat/" + id, Author: "octocat"}
	if fmt.Sprint(e.Resource) != fmt.Sprint(wantRes) {
		t.Errorf("resource %+v, want %+v", e.Resource, wantRes)
	}
	var payload struct {
		ID    string `json:"id"`
		Owner struct {
			Login string `json:"login"`
		} `json:"owner"`
	}
	if err := json.Unmarshal(e.Payload, &payload); err != nil || payload.ID != id || payload.Owner.Login != "octocat" {
		t.Errorf("payload %s: %v", e.Payload, err)
	}
	// The capture is archived under the poll scope, with the marker header.
	capt, err := h.bus.Delivery(t.Context(), triggers.CodeHost, "poll-"+octo+"/gist-"+id)
	if err != nil || capt.DeliveryID != "gist-"+id || capt.Scope == nil || *capt.Scope != *scope ||
		fmt.Sprint(capt.Header[poll.HeaderPoll]) != "[gists]" || string(capt.Body) != string(e.Payload) {
		t.Errorf("archived capture %+v: %v", capt, err)
	}

	// Nothing new: a 304 for the ETag, which costs no budget, and the
	// unchanged cursor is not written.
	h.fake.ResetLog()
	_, before, _ := h.fake.RateLimit(token("octocat"), fakecodehost.ResourceCore)
	cursorBefore, err := h.st.GetCursor(t.Context(), poll.CursorKey(tenant, octo, triggers.NewGist))
	if err != nil || cursorBefore.Version == 0 {
		t.Fatalf("cursor before the quiet poll: %+v, %v", cursorBefore, err)
	}
	h.pollOnce(p)
	if c, err := h.st.GetCursor(t.Context(), poll.CursorKey(tenant, octo, triggers.NewGist)); err != nil || c.Version != cursorBefore.Version {
		t.Errorf("a quiet poll wrote the cursor: version %d → %d (%v)", cursorBefore.Version, c.Version, err)
	}
	_, after, _ := h.fake.RateLimit(token("octocat"), fakecodehost.ResourceCore)
	h.wantEvents(1, "a quiet poll")
	reqs = h.fake.RequestsTo("GET /gists")
	if len(reqs) != 1 || reqs[0].Status != http.StatusNotModified || reqs[0].Header.Get("If-None-Match") == "" {
		t.Errorf("quiet poll requests: %+v", reqs)
	}
	if after != before {
		t.Errorf("a quiet poll cost budget: %d → %d", before, after)
	}
}

func TestGistsSurviveRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	h.trigger(tenant, octo, triggers.NewGist, "")
	h.clock.Advance(time.Minute)
	a := h.createGist("octocat", "a")
	h.pollOnce(h.poller())
	h.wantEvents(1, "first poller")

	// The gist is edited, so the list's ETag changes; a new poller over the
	// same store reads it again and emits nothing.
	h.clock.Advance(time.Minute)
	h.call("octocat", http.MethodPatch, "/gists/"+a, `{"description":"a, edited"}`)
	h.fake.ResetLog()
	h.pollOnce(h.poller())
	h.wantEvents(1, "after a restart")
	if reqs := h.fake.RequestsTo("GET /gists"); len(reqs) != 1 || reqs[0].Status != http.StatusOK {
		t.Errorf("restart poll: %+v", reqs)
	}

	// A crash between Commit and the cursor's update: the archive
	// recognises the gist, and the cursor catches up.
	h.clock.Advance(time.Minute)
	b := h.createGist("octocat", "b")
	crashing := &failingCursors{Store: h.st}
	h.pollOnce(h.poller(func(o *poll.Options) { o.Store = crashing }))
	if crashing.failed.Load() != 1 {
		t.Fatalf("cursor writes failed %d times", crashing.failed.Load())
	}
	h.wantEvents(2, "a crash after Commit")
	h.pollOnce(h.poller())
	evs := h.wantEvents(2, "after the crash")
	if evs[1].ev.DeliveryID != "gist-"+b {
		t.Errorf("second event is %s", evs[1].ev.DeliveryID)
	}
	h.fake.ResetLog()
	h.pollOnce(h.poller())
	if reqs := h.fake.RequestsTo("GET /gists"); len(reqs) != 1 || reqs[0].Status != http.StatusNotModified {
		t.Errorf("the cursor did not catch up: %+v", reqs)
	}
	if !strings.Contains(h.logs.String(), "injected cursor failure") || !strings.Contains(h.logs.String(), `"duplicates":1`) {
		t.Errorf("the failed cursor write or the duplicate was not logged:\n%s", h.logs.String())
	}
}

// failingCursors fails the first PutCursor, as if the process died after
// Commit.
type failingCursors struct {
	poll.Store
	failed atomic.Int64
}

func (f *failingCursors) PutCursor(ctx context.Context, c store.Cursor) (store.Cursor, error) {
	if f.failed.CompareAndSwap(0, 1) {
		return store.Cursor{}, errors.New("injected cursor failure")
	}
	return f.Store.PutCursor(ctx, c)
}

// noLease grants every lease, as if leases expired while held: only the
// cursors' compare-and-set and the archive keep the pollers apart.
type noLease struct{ poll.Store }

func (noLease) TryLock(context.Context, string, time.Duration) (func(), bool, error) {
	return func() {}, true, nil
}

func TestConcurrentPollers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(h *harness) poll.Store
	}{
		{"shared leases", func(h *harness) poll.Store { return h.st }},
		{"no leases", func(h *harness) poll.Store { return noLease{h.st} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.accts.add(tenant, octo, "octocat")
			h.trigger(tenant, octo, triggers.NewGist, "")
			h.clock.Advance(time.Minute)
			want := map[string]bool{}
			for i := range 3 {
				want["gist-"+h.createGist("octocat", fmt.Sprint("g", i))] = true
			}
			var wg sync.WaitGroup
			for range 4 {
				p := h.poller(func(o *poll.Options) { o.Store = tc.store(h) })
				wg.Go(func() {
					for range 3 {
						if err := p.PollOnce(t.Context()); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			evs := h.wantEvents(3, "four pollers")
			for _, e := range evs {
				if !want[e.ev.DeliveryID] {
					t.Errorf("unexpected or repeated event %s", e.ev.DeliveryID)
				}
				delete(want, e.ev.DeliveryID)
			}
		})
	}
}

func TestNewMention(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if _, err := h.fake.AddUser("mentioner", "Men Tioner"); err != nil {
		t.Fatal(err)
	}
	h.accts.add(tenant, octo, "octocat")
	// The same user connected in another tenant, with only a gist trigger.
	h.accts.add("tenant-2", "acct-octocat-2", "octocat")
	h.trigger("tenant-2", "acct-octocat-2", triggers.NewGist, "")

	// A mention before the trigger is not new.
	h.call("mentioner", http.MethodPost, "/repos/octocat/hello-world/issues", `{"title":"Early","body":"@octocat early bird"}`)
	h.clock.Advance(time.Minute)
	h.trigger(tenant, octo, triggers.NewMention, "")
	// Repository mention triggers come by webhook: not polled.
	h.trigger(tenant, "acct-unknown", triggers.NewMention, `{"repositories":["octocat/hello-world"]}`)
	h.clock.Advance(time.Minute)
	issue := h.call("mentioner", http.MethodPost, "/repos/octocat/hello-world/issues", `{"title":"Help wanted","body":"no mention here"}`)
	number := int64(issue["number"].(float64))
	h.clock.Advance(10 * time.Second)
	h.call("mentioner", http.MethodPost, fmt.Sprintf("/repos/octocat/hello-world/issues/%d/comments", number), `{"body":"@octocat could you look?"}`)
	mentionedAt := h.clock.Now()

	p := h.poller()
	h.pollOnce(p)
	evs := h.wantEvents(1, "after a mention")
	e := evs[0].ev
	var thread string
	for _, n := range h.fake.Notifications("octocat") {
		if n.Title == "Help wanted" {
			thread = n.ID
		}
	}
	deliveryID := "notification-" + thread + "-" + mentionedAt.Format(time.RFC3339)
	scope := triggers.Scope{Hook: "poll-" + octo, Tenant: tenant, Account: octo}
	if thread == "" || evs[0].subject != "triggers.codehost.new_mention.octocat.hello-world" || e.Kind != triggers.NewMention ||
		e.DeliveryID != deliveryID || e.SourceEvent != poll.SourceNotifications || e.Action != "mention" ||
		e.Account != "octocat" || e.Sender != "" || e.Scope == nil || *e.Scope != scope ||
		e.Repository == nil || *e.Repository != (triggers.Repository{Owner: "octocat", Name: "hello-world", FullName: "octocat/hello-world"}) ||
		e.ID != triggers.EventID(triggers.CodeHost, "poll-"+octo+"/"+deliveryID, triggers.NewMention, 0) {
		t.Errorf("event %+v on %s (thread %s)", e, evs[0].subject, thread)
	}
	wantRes := triggers.Resource{Type: "mention", ID: thread, Number: number, Title: "Help wanted",
		URL: fmt.Sprintf("%s/repos/octocat/hello-world/issues/%d", h.url, number), Mentioned: "octocat"}
	if fmt.Sprint(e.Resource) != fmt.Sprint(wantRes) {
		t.Errorf("resource %+v, want %+v", e.Resource, wantRes)
	}
	var payload struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(e.Payload, &payload); err != nil || payload.ID != thread || payload.Reason != "mention" {
		t.Errorf("payload %s: %v", e.Payload, err)
	}
	reqs := h.fake.RequestsTo("GET /notifications")
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+token("octocat") || reqs[0].Query.Get("participating") != "true" {
		t.Fatalf("notification requests: %+v", reqs)
	}

	// Within X-Poll-Interval, notifications are not asked for again.
	h.pollOnce(p)
	h.wantEvents(1, "a poll within X-Poll-Interval")
	if n := len(h.fake.RequestsTo("GET /notifications")); n != 1 {
		t.Errorf("%d notification requests within X-Poll-Interval", n)
	}

	// The same thread mentioned again later emits again.
	h.clock.Advance(2 * time.Minute)
	h.call("mentioner", http.MethodPost, fmt.Sprintf("/repos/octocat/hello-world/issues/%d/comments", number), `{"body":"@octocat ping"}`)
	h.pollOnce(p)
	evs = h.wantEvents(2, "a second mention in the thread")
	if e := evs[1].ev; e.Resource.ID != thread || e.DeliveryID != "notification-"+thread+"-"+h.clock.Now().Format(time.RFC3339) || *e.Scope != scope {
		t.Errorf("second mention %+v", e)
	}

	// Nothing new: nothing emitted, by a new poller either.
	h.clock.Advance(2 * time.Minute)
	h.pollOnce(p)
	h.clock.Advance(2 * time.Minute)
	h.pollOnce(h.poller())
	h.wantEvents(2, "quiet polls")
	reqs = h.fake.RequestsTo("GET /notifications")
	if last := reqs[len(reqs)-1]; last.Status != http.StatusNotModified || last.Header.Get("If-Modified-Since") == "" {
		t.Errorf("last quiet poll: %d %v", last.Status, last.Header)
	}
	for _, e := range h.events() {
		if e.ev.Scope.Tenant != tenant {
			t.Errorf("event for tenant %s", e.ev.Scope.Tenant)
		}
	}
}

func TestFailingAccountsAreSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.fail(tenant, "acct-1-broken", &accounts.AccountError{AccountID: "acct-1-broken", Status: store.StatusNeedsReauth, Reason: "reconnect it"})
	h.accts.add(tenant, "acct-2-hubot", "hubot")
	h.accts.add(tenant, "acct-3-octocat", "octocat")
	for _, a := range []string{"acct-1-broken", "acct-2-hubot", "acct-3-octocat"} {
		h.trigger(tenant, a, triggers.NewGist, "")
	}
	h.clock.Advance(time.Minute)
	hubotGist := h.createGist("hubot", "hubot's")
	octoGist := h.createGist("octocat", "octocat's")
	// One account at a time, in order: the API fails for hubot's poll.
	p := h.poller(func(o *poll.Options) { o.Concurrency = 1 })
	if err := h.fake.FailNext("GET /gists", 1, http.StatusBadGateway); err != nil {
		t.Fatal(err)
	}
	h.pollOnce(p)
	evs := h.wantEvents(1, "with a broken account and a failing API")
	if evs[0].ev.DeliveryID != "gist-"+octoGist || evs[0].ev.Scope.Account != "acct-3-octocat" {
		t.Errorf("event %+v", evs[0].ev)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "acct-1-broken") || !strings.Contains(logs, "needs reconnecting") || !strings.Contains(logs, "502") {
		t.Errorf("failures not logged:\n%s", logs)
	}

	// The next pass catches up.
	h.pollOnce(p)
	evs = h.wantEvents(2, "the next pass")
	if evs[1].ev.DeliveryID != "gist-"+hubotGist || evs[1].ev.Account != "hubot" {
		t.Errorf("event %+v", evs[1].ev)
	}
}

func TestInactiveTriggersAreNotPolled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	trg := h.trigger(tenant, octo, triggers.NewGist, "")
	trg.Status, trg.StatusCode = store.TriggerInactive, "account_removed"
	if _, err := h.st.UpdateTrigger(t.Context(), trg); err != nil {
		t.Fatal(err)
	}
	h.trigger(tenant, octo, triggers.NewIssue, `{"repositories":["octocat/hello-world"]}`)
	h.clock.Advance(time.Minute)
	h.createGist("octocat", "x")
	h.pollOnce(h.poller())
	h.wantEvents(0, "inactive triggers")
	if n := h.fake.RequestCount(); n != 1 { // the gist's creation, nothing else
		t.Errorf("%d requests to the fake", n)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	h.trigger(tenant, octo, triggers.NewGist, "")
	h.clock.Advance(time.Minute)
	id := h.createGist("octocat", "run")
	passes := &countingStore{Store: h.st, passes: make(chan struct{}, 100)}
	p := h.poller(func(o *poll.Options) {
		o.Interval = 20 * time.Millisecond
		o.Store = passes
	})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	errGot := errors.New("got it")
	err := h.bus.Tail(wait, "", bus.FromAll, func(_ string, data []byte) error {
		var e triggers.Event
		if json.Unmarshal(data, &e) == nil && e.DeliveryID == "gist-"+id {
			return errGot
		}
		return nil
	})
	if !errors.Is(err, errGot) {
		t.Fatalf("no event from Run: %v", err)
	}
	// Run keeps polling (quietly) until stopped.
	for range 3 {
		select {
		case <-passes.passes:
		case <-wait.Done():
			t.Fatal("Run stopped polling")
		}
	}
	cancel()
	select {
	case <-done:
	case <-wait.Done():
		t.Fatal("Run did not return")
	}
	h.wantEvents(1, "Run")
}

// countingStore signals every pass (every listing of the triggers).
type countingStore struct {
	poll.Store
	passes chan struct{}
}

func (c *countingStore) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	select {
	case c.passes <- struct{}{}:
	default:
	}
	return c.Store.ListTriggers(ctx, f)
}

func TestNotificationURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ api, html string }{
		{"https://api.github.com/repos/octocat/hello-world/issues/7", "https://github.com/octocat/hello-world/issues/7"},
		{"https://api.github.com/repos/octocat/hello-world/pulls/8", "https://github.com/octocat/hello-world/pull/8"},
		{"https://api.github.com/repos/octocat/hello-world/commits/abc123", "https://github.com/octocat/hello-world/commit/abc123"},
		{"https://ghe.example.com/api/v3/repos/o/r/issues/1", "https://ghe.example.com/o/r/issues/1"},
		// Not mappable: kept as they are.
		{"https://api.github.com/repos/octocat/hello-world/releases/1", "https://api.github.com/repos/octocat/hello-world/releases/1"},
		{"http://127.0.0.1:8080/repos/o/r/issues/1", "http://127.0.0.1:8080/repos/o/r/issues/1"},
		{"", ""},
	} {
		if got := poll.HTMLURL(tc.api); got != tc.html {
			t.Errorf("HTMLURL(%q) = %q, want %q", tc.api, got, tc.html)
		}
	}
	for _, tc := range []struct {
		typ, url string
		want     int64
	}{
		{"Issue", "https://api.github.com/repos/o/r/issues/7", 7},
		{"PullRequest", "https://api.github.com/repos/o/r/pulls/8", 8},
		{"Release", "https://api.github.com/repos/o/r/releases/9", 0},
		{"Issue", "", 0},
	} {
		if got := poll.SubjectNumber(tc.typ, tc.url); got != tc.want {
			t.Errorf("SubjectNumber(%s, %q) = %d, want %d", tc.typ, tc.url, got, tc.want)
		}
	}
}

func TestManyGistsMoveSince(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	trg := h.trigger(tenant, octo, triggers.NewGist, "")
	for i := range 60 {
		h.clock.Advance(time.Second)
		h.createGist("octocat", fmt.Sprint("g", i))
	}
	newest := h.clock.Now()
	p := h.poller()
	h.pollOnce(p)
	h.wantEvents(60, "60 new gists")
	// The answer was long: the next poll asks from the newest gist on, and
	// the one after that is a 304 again.
	h.pollOnce(p)
	h.pollOnce(p)
	h.wantEvents(60, "quiet polls")
	reqs := h.fake.RequestsTo("GET /gists")
	if len(reqs) != 3 || reqs[0].Query.Get("since") != trg.CreatedAt.Format(time.RFC3339) ||
		reqs[1].Query.Get("since") != newest.Format(time.RFC3339) || reqs[1].Status != http.StatusOK ||
		reqs[2].Query.Get("since") != newest.Format(time.RFC3339) || reqs[2].Status != http.StatusNotModified {
		for _, r := range reqs {
			t.Logf("since %s: %d", r.Query.Get("since"), r.Status)
		}
		t.Error("unexpected requests")
	}
}
