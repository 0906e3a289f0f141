package codehost_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// flakyReceiver answers every delivery with its current status.
type flakyReceiver struct {
	url    string
	status atomic.Int32
	guids  chan string
}

// next returns the X-GitHub-Delivery of the next delivery received, failing
// the test if none comes.
func (rc *flakyReceiver) next(t *testing.T) string {
	t.Helper()
	select {
	case g := <-rc.guids:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery reached the receiver")
		return ""
	}
}

func newFlakyReceiver(t *testing.T) *flakyReceiver {
	t.Helper()
	rc := &flakyReceiver{guids: make(chan string, 100)}
	rc.status.Store(http.StatusAccepted)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rc.guids <- r.Header.Get("X-GitHub-Delivery")
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/webhooks/codehost/h1"
	return rc
}

func TestHookDeliveriesAndRedelivery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins, MaxPerPage: 2}, codehost.ToolkitOptions{})
	rc := newFlakyReceiver(t)
	hooks := hooksAs(h, token)
	ctx := t.Context()
	hk, err := hooks.Create(ctx, repoTarget, codehost.HookSpec{URL: rc.url, Secret: "s", Events: []string{"issues"}, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	waitDeliveries(t, h) // the ping, answered 202
	rc.status.Store(http.StatusServiceUnavailable)
	var guids []string
	for i := range 3 {
		ids, err := h.fake.Deliver(ctx, fakecodehost.SeedOwner, fakecodehost.SeedRepo, "issues", fmt.Appendf(nil, `{"action":"opened","n":%d}`, i))
		if err != nil || len(ids) != 1 {
			t.Fatalf("Deliver: %v %v", ids, err)
		}
		guids = append(guids, ids[0])
		waitDeliveries(t, h)
	}
	rc.status.Store(http.StatusAccepted)

	// Newest first, over two pages of 2 followed by their cursor.
	h.fake.ResetLog()
	ds, err := hooks.Deliveries(ctx, repoTarget, hk.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Attempts) != 4 || ds.Truncated {
		t.Fatalf("Deliveries = %+v, want 4 attempts", ds)
	}
	newest, ping := ds.Attempts[0], ds.Attempts[3]
	if newest.GUID != guids[2] || newest.StatusCode != http.StatusServiceUnavailable || newest.Status != "Invalid HTTP Response: 503" ||
		newest.Event != "issues" || newest.Action != "opened" || newest.Redelivery || newest.ID == 0 ||
		!newest.DeliveredAt.Equal(h.clock.Now()) || newest.Delivered() || !newest.Retryable() {
		t.Errorf("newest attempt %+v", newest)
	}
	if ping.Event != "ping" || !ping.Delivered() || ping.Status != "OK" || ping.Action != "" {
		t.Errorf("oldest attempt %+v, want the answered ping", ping)
	}
	reqs := h.fake.RequestsTo("GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries")
	if len(reqs) != 2 || reqs[0].Query.Get("cursor") != "" || !strings.HasPrefix(reqs[1].Query.Get("cursor"), "v1_") {
		t.Errorf("%d requests: %+v", len(reqs), reqs)
	}

	// Reading stops at the first page that reaches back past since.
	h.clock.Advance(time.Hour)
	if _, err := h.fake.Deliver(ctx, fakecodehost.SeedOwner, fakecodehost.SeedRepo, "issues", []byte(`{"action":"closed"}`)); err != nil {
		t.Fatal(err)
	}
	waitDeliveries(t, h)
	h.fake.ResetLog()
	if ds, err := hooks.Deliveries(ctx, repoTarget, hk.ID, h.clock.Now().Add(-time.Minute)); err != nil ||
		len(ds.Attempts) != 2 || ds.Attempts[0].Action != "closed" || !ds.Attempts[0].Delivered() {
		t.Errorf("Deliveries since a minute ago = %+v, %v; want one page", ds, err)
	}
	if n := len(h.fake.RequestsTo("GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries")); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	for range 5 {
		rc.next(t) // the ping, three failures and the closed issue
	}

	// A redelivery is the same event under the same X-GitHub-Delivery.
	oldest := ds.Attempts[2]
	if err := hooks.Redeliver(ctx, repoTarget, hk.ID, oldest.ID); err != nil {
		t.Fatal(err)
	}
	waitDeliveries(t, h)
	if got := rc.next(t); got != guids[0] || oldest.GUID != guids[0] {
		t.Errorf("redelivered %s (attempt of %s), want %s", got, oldest.GUID, guids[0])
	}
	ds, err = hooks.Deliveries(ctx, repoTarget, hk.ID, time.Time{})
	if err != nil || len(ds.Attempts) != 6 || ds.Attempts[0].GUID != guids[0] || !ds.Attempts[0].Redelivery || !ds.Attempts[0].Delivered() {
		t.Errorf("after the redelivery: %+v, %v", ds.Attempts, err)
	}

	// Failures only, through GitHub's status filter (a page of 2 of the
	// 3, and a link to the rest that keeps the filter).
	resp, err := h.env(token).HTTP.Get(fmt.Sprintf("%s/repos/octocat/hello-world/hooks/%d/deliveries?status=failure", h.url, hk.ID))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(body), `"status_code":503`); n != 2 || strings.Contains(string(body), `"status_code":202`) ||
		!strings.Contains(resp.Header.Get("Link"), "status=failure") {
		t.Errorf("status=failure: %s (Link %q)", body, resp.Header.Get("Link"))
	}

	if err := hooks.Redeliver(ctx, repoTarget, hk.ID, 999999); !errors.Is(err, codehost.ErrHookNotFound) {
		t.Errorf("Redeliver of an unknown attempt = %v, want ErrHookNotFound", err)
	}
	// GitHub redelivers the past three days only.
	h.clock.Advance(codehost.RedeliveryWindow)
	var ce *connectors.Error
	if err := hooks.Redeliver(ctx, repoTarget, hk.ID, oldest.ID); !errors.As(err, &ce) || ce.Status != http.StatusUnprocessableEntity {
		t.Errorf("Redeliver of a 3-day-old attempt = %v, want a 422", err)
	}
}
