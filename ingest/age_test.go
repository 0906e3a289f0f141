package ingest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// deployAt is a deployment delivery with id and createdAt.
func deployAt(id string, created time.Time) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"deployment.created","createdAt":%d,"payload":{"team":{"id":"team_1"},"project":{"id":"prj_1"},"deployment":{"id":"dpl_1","url":"x.vercel.app","name":"x","meta":{}},"target":"production"}}`,
		id, created.UnixMilli())
}

// A correctly signed deployment delivery older than the archive remembers
// (reliability case 5) is refused before anything is published or
// spooled, with an answer saying why and what to do instead; a fresh one
// is taken, and so is one whose clock is a little ahead. One stamped far
// ahead is not accepted either (503: the sender retries).
func TestDeployDeliveryAgeIsChecked(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	const maxAge = 72*time.Hour - ClockSkew
	for _, ready := range []bool{true, false} {
		h := newSpoolHarness(t, 0, func(o *Options) {
			o.MaxDeliveryAge = maxAge
			o.Now = func() time.Time { return now }
		})
		h.ready.Store(ready) // unready, a delivery goes straight to the spool
		stale := h.do(deployRequest(deployAt("uev_old", now.Add(-maxAge-time.Minute))))
		msg, _ := stale.body["error"].(map[string]any)["message"].(string)
		if stale.status != http.StatusBadRequest || errorCode(stale) != "stale_delivery" ||
			!strings.Contains(msg, "uev_old") || !strings.Contains(msg, "2026-11-29T03:14:00Z") || !strings.Contains(msg, "replay") {
			t.Fatalf("ready=%v: a delivery created %s ago: %d %v; want 400 stale_delivery saying when it was created and what to do", ready, maxAge+time.Minute, stale.status, stale.body)
		}
		future := h.do(deployRequest(deployAt("uev_future", now.Add(ClockSkew+time.Minute))))
		if future.status != http.StatusServiceUnavailable || errorCode(future) != "clock_skew" || future.header.Get("Retry-After") == "" {
			t.Fatalf("ready=%v: a delivery created %s ahead: %d %v; want 503 clock_skew with Retry-After", ready, ClockSkew+time.Minute, future.status, future.body)
		}
		if h.fc.count() != 0 || h.disk.Len() != 0 {
			t.Fatalf("ready=%v: refused deliveries reached the committer (%d) or the spool (%d)", ready, h.fc.count(), h.disk.Len())
		}
		for _, d := range []struct {
			id      string
			created time.Time
		}{{"uev_fresh", now.Add(-time.Minute)}, {"uev_edge", now.Add(-maxAge)}, {"uev_ahead", now.Add(ClockSkew)}} {
			a := h.do(deployRequest(deployAt(d.id, d.created)))
			if a.status != http.StatusAccepted || a.body["delivery_id"] != d.id {
				t.Fatalf("ready=%v: %s created at %s: %d %v, want 202", ready, d.id, d.created, a.status, a.body)
			}
		}
		if got := h.fc.count() + h.disk.Len(); got != 3 {
			t.Fatalf("ready=%v: %d deliveries taken, want 3", ready, got)
		}
		if got := h.deliveries("deploy", "unverified", "stale_delivery"); got != 1 {
			t.Fatalf("ready=%v: stale deliveries counted %v, want 1", ready, got)
		}
	}
	// Without a limit, and for deliveries that carry no createdAt, age is
	// not checked.
	h := newHarness(t, func(o *Options) { o.Now = func() time.Time { return now } })
	if a := h.do(deployRequest(deployAt("uev_any", time.UnixMilli(1)))); a.status != http.StatusAccepted {
		t.Fatalf("no MaxDeliveryAge: %d %v, want 202", a.status, a.body)
	}
	h = newHarness(t, func(o *Options) { o.MaxDeliveryAge = maxAge; o.Now = func() time.Time { return now } })
	if a := h.do(deployRequest([]byte(`{"id":"uev_undated","type":"deployment.created","payload":{"project":{"id":"prj_1"}}}`))); a.status != http.StatusAccepted {
		t.Fatalf("no createdAt: %d %v, want 202", a.status, a.body)
	}
}
