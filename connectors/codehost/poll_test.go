package codehost_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

func TestListGists(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	ctx := t.Context()
	hooks := hooksAs(h, token)
	h.clock.Sleep(ctx, time.Hour)
	secret := h.mustRun(t, "create_gist", `{"description":"notes","files":{"a.md":{"content":"# hi"}}}`)

	gists, etag, notModified, err := hooks.ListGists(ctx, time.Time{}, "")
	if err != nil || notModified || etag == "" || len(gists) != 2 {
		t.Fatalf("first read: %d gists, etag %q, %v, %v", len(gists), etag, notModified, err)
	}
	g := gists[0]
	if g.ID != secret["id"] || g.Description != "notes" || g.Public || g.Owner != "octocat" || g.HTMLURL == "" ||
		!g.UpdatedAt.Equal(h.clock.Now()) || !g.CreatedAt.Equal(h.clock.Now()) || !json.Valid(g.Raw) {
		t.Errorf("newest gist: %+v", g)
	}
	if gists[1].ID != fakecodehost.SeedGistID || gists[1].Description != "Hello World Examples" || !gists[1].Public {
		t.Errorf("seeded gist: %+v", gists[1])
	}

	// Unchanged: 304, free.
	h.fake.ResetLog()
	_, before, _ := h.fake.RateLimit(token, fakecodehost.ResourceCore)
	again, etag2, notModified, err := hooks.ListGists(ctx, time.Time{}, etag)
	_, after, _ := h.fake.RateLimit(token, fakecodehost.ResourceCore)
	if err != nil || !notModified || etag2 != etag || again != nil || after != before {
		t.Errorf("second read: %v %q %v %v, budget %d → %d", notModified, etag2, again, err, before, after)
	}
	if reqs := h.fake.RequestsTo("GET /gists"); len(reqs) != 1 || reqs[0].Status != 304 || reqs[0].Header.Get("If-None-Match") != etag ||
		reqs[0].Query.Get("per_page") != "100" || reqs[0].Query.Get("since") != "" {
		t.Errorf("requests: %+v", reqs)
	}

	// since keeps the gists updated at or after it.
	h.clock.Sleep(ctx, time.Minute)
	since := h.clock.Now()
	h.mustRun(t, "update_gist", fmt.Sprintf(`{"gist_id":%q,"description":"edited"}`, fakecodehost.SeedGistID))
	gists, etag3, notModified, err := hooks.ListGists(ctx, since, etag)
	if err != nil || notModified || etag3 == etag || len(gists) != 1 || gists[0].ID != fakecodehost.SeedGistID || gists[0].Description != "edited" {
		t.Errorf("since: %+v %q %v %v", gists, etag3, notModified, err)
	}
	if reqs := h.fake.RequestsTo("GET /gists"); reqs[len(reqs)-1].Query.Get("since") != since.Format(time.RFC3339) {
		t.Errorf("since sent as %q", reqs[len(reqs)-1].Query.Get("since"))
	}
}

func TestNotificationsPoll(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	ctx := t.Context()
	hubot := hooksAs(h, "hubot")

	threads, lm, interval, notModified, err := hubot.Notifications(ctx, "", time.Time{})
	if err != nil || notModified || len(threads) != 0 || lm == "" || interval != 60*time.Second {
		t.Fatalf("first poll: %v %q %v %v %v", threads, lm, interval, notModified, err)
	}
	_, before, _ := h.fake.RateLimit("hubot", fakecodehost.ResourceCore)
	if threads, lm2, interval, notModified, err := hubot.Notifications(ctx, lm, time.Time{}); err != nil || !notModified || threads != nil || lm2 != lm || interval != 60*time.Second {
		t.Errorf("unchanged: %v %q %v %v %v", threads, lm2, interval, notModified, err)
	}
	if _, after, _ := h.fake.RateLimit("hubot", fakecodehost.ResourceCore); after != before {
		t.Errorf("a 304 cost budget: %d → %d", before, after)
	}

	// octocat mentions hubot in an issue.
	h.clock.Sleep(ctx, time.Minute)
	out := h.mustRun(t, "create_issue", `{"owner":"octocat","repo":"hello-world","title":"Review please","body":"cc @hubot"}`)
	threads, lm3, _, notModified, err := hubot.Notifications(ctx, lm, time.Time{})
	if err != nil || notModified || len(threads) != 1 || lm3 == lm || lm3 != h.clock.Now().Format(http.TimeFormat) {
		t.Fatalf("after a mention: %v %q %v %v", threads, lm3, notModified, err)
	}
	n := threads[0]
	issueURL := fmt.Sprintf("%s/repos/octocat/hello-world/issues/%v", h.url, out["number"])
	if n.ID == "" || n.Reason != "mention" || !n.Unread || n.Repository != "octocat/hello-world" || !n.UpdatedAt.Equal(h.clock.Now()) ||
		n.Subject != (codehost.NotificationSubject{Title: "Review please", URL: issueURL, LatestCommentURL: issueURL, Type: "Issue"}) || !json.Valid(n.Raw) {
		t.Errorf("thread %+v", n)
	}
	reqs := h.fake.RequestsTo("GET /notifications")
	last := reqs[len(reqs)-1]
	if last.Query.Get("participating") != "true" || last.Query.Get("all") != "" || last.Header.Get("If-Modified-Since") != lm {
		t.Errorf("request %v %v", last.Query, last.Header)
	}

	// Threads the user does not take part in are left out; since leaves
	// out older ones and asks for read ones too. (Last-Modified has whole seconds: the clock moves on.)
	h.clock.Sleep(ctx, time.Minute)
	if _, err := h.fake.AddNotification(fakecodehost.Notification{Login: "hubot", Owner: "octocat", Repo: "hello-world", Title: "watching"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.fake.AddNotification(fakecodehost.Notification{Login: "hubot", Owner: "octocat", Repo: "hello-world", Title: "read", Reason: "author", Read: true}); err != nil {
		t.Fatal(err)
	}
	threads, _, _, _, err = hubot.Notifications(ctx, lm3, h.clock.Now().Add(-time.Second))
	if err != nil || len(threads) != 1 || threads[0].Subject.Title != "read" || threads[0].Unread || threads[0].Reason != "author" {
		t.Errorf("since: %d threads, %v", len(threads), err)
	}
	reqs = h.fake.RequestsTo("GET /notifications")
	if q := reqs[len(reqs)-1].Query; q.Get("all") != "true" || q.Get("since") != h.clock.Now().Add(-time.Second).Format(time.RFC3339) {
		t.Errorf("query with since: %v", q)
	}
}
