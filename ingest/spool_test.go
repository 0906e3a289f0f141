package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store/spool"
	"github.com/triggerd/triggerd/triggers"
)

// spoolHarness is a Server whose Committer fails until told otherwise,
// with a Spooler on a real spool in a temporary directory.
type spoolHarness struct {
	*harness
	disk  *spool.Spool
	sp    *Spooler
	ready atomic.Bool
	reg   *prometheus.Registry
}

// forwarded returns triggerd_spool_forwarded_total for one outcome.
func (h *spoolHarness) forwarded(outcome string) float64 {
	h.t.Helper()
	return findMetric(h.t, h.reg, "triggerd_spool_forwarded_total", map[string]string{"outcome": outcome}).GetCounter().GetValue()
}

func newSpoolHarness(t *testing.T, maxBytes int64, mutate func(*Options)) *spoolHarness {
	t.Helper()
	disk, err := spool.Open(filepath.Join(t.TempDir(), "spool"), spool.Options{MaxBytes: maxBytes})
	if err != nil {
		t.Fatal(err)
	}
	sh := &spoolHarness{disk: disk}
	sh.ready.Store(true)
	sh.harness = newHarness(t, func(o *Options) {
		if mutate != nil {
			mutate(o)
		}
		// One registry for both, as triggerd has: they share a counter.
		sh.reg = o.Registerer.(*prometheus.Registry)
		sp, err := NewSpooler(SpoolerOptions{
			Disk: disk, Committer: o.Committer, Ready: sh.ready.Load,
			RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 40 * time.Millisecond,
			Concurrency: 1, // the tests check the spool's order
			Logger:      zerolog.Nop(), Registerer: sh.reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		sh.sp = sp
		o.Spool = sp
		o.Ready = sh.ready.Load
	})
	return sh
}

func (f *fakeCommitter) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func TestSpoolTakesWhatTheCommitterCannot(t *testing.T) {
	h := newSpoolHarness(t, 0, nil)
	h.fc.setErr(errors.New("nats: timeout"))
	a := h.do(codeHostRequest("issues", "d-spool", []byte(issueOpened)))
	if a.status != http.StatusAccepted || a.body["spooled"] != true {
		t.Fatalf("got %d %v, want 202 spooled", a.status, a.body)
	}
	events := a.body["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["kind"] != "new_issue" {
		t.Fatalf("the answer must list the events to come: %v", a.body)
	}
	if h.disk.Len() != 1 || h.fc.count() != 0 {
		t.Fatalf("spool holds %d, committer took %d; want 1 and 0", h.disk.Len(), h.fc.count())
	}
	if got := h.deliveries("codehost", "issues", "spooled"); got != 1 {
		t.Fatalf("spooled counter = %v", got)
	}
	if got := h.published("new_issue"); got != 0 {
		t.Fatalf("events published = %v before the spool was forwarded, want 0", got)
	}
	// The record holds the body once: as itself, not again in the event.
	names, _ := h.disk.List()
	data, err := h.disk.Read(names[0])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"html_url":"https://example.test/i/7"`)) {
		t.Fatalf("the spooled event carries the body a second time: %s", data)
	}

	// While NATS is still failing, a pass forwards nothing and keeps it.
	if err := h.sp.Flush(context.Background()); err == nil || h.disk.Len() != 1 {
		t.Fatalf("Flush with the committer failing: err %v, spool %d; want an error and the record kept", err, h.disk.Len())
	}

	h.fc.setErr(nil)
	if err := h.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.disk.Len() != 0 || h.fc.count() != 1 {
		t.Fatalf("after Flush spool holds %d, committer took %d; want 0 and 1", h.disk.Len(), h.fc.count())
	}
	c, evs := h.fc.commits[0], h.fc.events[0]
	if c.DeliveryID != "d-spool" || c.Connector != triggers.CodeHost || string(c.Body) != issueOpened ||
		http.Header(c.Header).Get("X-Github-Event") != "issues" || c.ReceivedAt.IsZero() {
		t.Fatalf("forwarded capture %+v", c)
	}
	if len(evs) != 1 || evs[0].ID != events[0].(map[string]any)["id"] || evs[0].Kind != triggers.NewIssue ||
		string(evs[0].Payload) != issueOpened || evs[0].Repository == nil || evs[0].Repository.FullName != "octo-org/api" {
		t.Fatalf("forwarded events %+v, want the answered event with its payload", evs)
	}
	if got := h.forwarded("accepted"); got != 1 {
		t.Fatalf("forwarded accepted = %v", got)
	}
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("events published = %v once forwarded, want 1", got)
	}

	// A redelivery now reaches the committer, which knows it.
	if a := h.do(codeHostRequest("issues", "d-spool", []byte(issueOpened))); a.status != http.StatusOK || a.body["duplicate"] != true {
		t.Fatalf("redelivery after forwarding: %d %v, want 200 duplicate", a.status, a.body)
	}
}

// TestSpoolKeepsAFormDeliveryPayloadAsSent: the events of a form-encoded
// delivery carry the payload field, not the body; forwarded from the
// spool they carry it byte for byte, not re-encoded.
func TestSpoolKeepsAFormDeliveryPayloadAsSent(t *testing.T) {
	h := newSpoolHarness(t, 0, nil)
	h.fc.setErr(errors.New("nats: timeout"))
	payload := strings.Replace(issueOpened, `"body":"hi"`, `"body": "a <b> & c"`, 1)
	form := []byte("payload=" + url.QueryEscape(payload))
	req := codeHostRequest("issues", "d-spool-form", form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if a := h.do(req); a.status != http.StatusAccepted || a.body["spooled"] != true {
		t.Fatalf("got %d %v, want 202 spooled", a.status, a.body)
	}
	h.fc.setErr(nil)
	if err := h.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.fc.count() != 1 || !bytes.Equal(h.fc.commits[0].Body, form) || string(h.fc.events[0][0].Payload) != payload {
		t.Fatalf("forwarded body %q, payload %s; want the form body and the payload field as sent", h.fc.commits[0].Body, h.fc.events[0][0].Payload)
	}
}

func TestSpoolWhileUnreadySkipsTheCommitter(t *testing.T) {
	calls := atomic.Int32{}
	h := newSpoolHarness(t, 0, func(o *Options) {
		o.CommitTimeout = time.Minute
		o.Committer = committerFunc(func(ctx context.Context, _ triggers.Capture, _ []triggers.Event) (bool, error) {
			calls.Add(1)
			<-ctx.Done()
			return false, ctx.Err()
		})
	})
	h.ready.Store(false)
	start := time.Now()
	a := h.do(deployRequest([]byte(`{"id":"uev_spool","type":"deployment.created","createdAt":1,"payload":{"team":{"id":"team_1"},"project":{"id":"prj_1"},"deployment":{"id":"dpl_1","url":"x.vercel.app","name":"x","meta":{}},"target":"production"}}`)))
	if a.status != http.StatusAccepted || a.body["spooled"] != true {
		t.Fatalf("got %d %v, want 202 spooled", a.status, a.body)
	}
	if calls.Load() != 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("the committer was tried %d times and the answer took %s; while NATS is unreachable the spool takes the delivery at once", calls.Load(), time.Since(start))
	}
	if h.disk.Len() != 1 {
		t.Fatalf("spool holds %d, want 1", h.disk.Len())
	}
	// Not ready: Flush leaves it.
	if err := h.sp.Flush(context.Background()); err == nil || h.disk.Len() != 1 {
		t.Fatalf("Flush while unready: %v, spool %d", err, h.disk.Len())
	}
}

// A commit that hangs (NATS stopped, a blackholed connection) is given up
// at the commit timeout and the delivery spooled.
func TestHungCommitIsSpooledAtItsDeadline(t *testing.T) {
	h := newSpoolHarness(t, 0, func(o *Options) {
		o.CommitTimeout = 50 * time.Millisecond
		o.Committer = blockingCommitter{}
	})
	start := time.Now()
	a := h.do(codeHostRequest("issues", "d-hung", []byte(issueOpened)))
	if a.status != http.StatusAccepted || a.body["spooled"] != true {
		t.Fatalf("got %d %v, want 202 spooled", a.status, a.body)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("answer took %s; the commit timeout is 50ms", d)
	}
	if h.disk.Len() != 1 {
		t.Fatalf("spool holds %d, want 1", h.disk.Len())
	}
}

func TestFullSpoolIs503(t *testing.T) {
	h := newSpoolHarness(t, 64, nil) // smaller than any record
	h.fc.setErr(errors.New("nats: no responders"))
	a := h.do(codeHostRequest("issues", "d-full", []byte(issueOpened)))
	if a.status != http.StatusServiceUnavailable || errorCode(a) != "unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %v, want 503 unavailable with Retry-After", a.status, a.body)
	}
	if msg := a.body["error"].(map[string]any)["message"].(string); strings.Contains(msg, "spool:") || strings.Contains(msg, "nats") {
		t.Fatalf("the answer leaks internal error text: %q", msg)
	}
	if h.disk.Len() != 0 {
		t.Fatalf("spool holds %d, want 0", h.disk.Len())
	}
}

func TestSpoolForwardsADeliveryNATSAlreadyHasAsDuplicate(t *testing.T) {
	h := newSpoolHarness(t, 0, nil)
	h.fc.setErr(errors.New("nats: timeout"))
	h.do(codeHostRequest("issues", "d-twice", []byte(issueOpened)))
	h.fc.setErr(nil)
	// The sender's redelivery reached NATS before the spool was forwarded.
	if a := h.do(codeHostRequest("issues", "d-twice", []byte(issueOpened))); a.status != http.StatusAccepted || a.body["spooled"] == true {
		t.Fatalf("redelivery: %d %v, want 202 through the committer", a.status, a.body)
	}
	if err := h.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.disk.Len() != 0 || h.fc.count() != 1 {
		t.Fatalf("spool %d, commits %d; want 0 and 1", h.disk.Len(), h.fc.count())
	}
	if got := h.forwarded("duplicate"); got != 1 {
		t.Fatalf("forwarded duplicate = %v", got)
	}
	// NATS took the event once, through the redelivery.
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("events published = %v, want 1", got)
	}
}

func TestSpoolSetsAsideWhatItCannotRead(t *testing.T) {
	h := newSpoolHarness(t, 0, nil)
	h.fc.setErr(errors.New("nats: timeout"))
	if _, err := h.disk.Append([]byte(`{"version":99}`)); err != nil {
		t.Fatal(err)
	}
	h.do(codeHostRequest("issues", "d-after-bad", []byte(issueOpened)))
	// A record of an unknown version is set aside; the next is forwarded.
	names, _ := h.disk.List()
	if len(names) != 2 {
		t.Fatalf("spool lists %v", names)
	}
	h.fc.setErr(nil)
	if err := h.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.disk.Len() != 0 || h.fc.count() != 1 || h.fc.commits[0].DeliveryID != "d-after-bad" {
		t.Fatalf("spool %d, commits %d; want the unreadable record set aside and the next forwarded", h.disk.Len(), h.fc.count())
	}
	kept, err := os.ReadDir(filepath.Join(h.disk.Dir(), "corrupt"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("corrupt/ holds %v (%v), want the one record", kept, err)
	}
	if got := h.forwarded("quarantined"); got != 1 {
		t.Fatalf("forwarded quarantined = %v", got)
	}

	// A record damaged on disk is set aside too.
	h.fc.setErr(errors.New("nats: timeout"))
	h.do(codeHostRequest("issues", "d-damaged", []byte(issueOpened)))
	names, _ = h.disk.List()
	path := filepath.Join(h.disk.Dir(), names[0])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-2] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	h.fc.setErr(nil)
	if err := h.sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.disk.Len() != 0 || h.fc.count() != 1 {
		t.Fatalf("spool %d, commits %d; want the damaged record set aside, not forwarded", h.disk.Len(), h.fc.count())
	}
}

func TestSpoolRunForwardsOnceNATSTakesThem(t *testing.T) {
	var attempts atomic.Int32
	var h *spoolHarness
	h = newSpoolHarness(t, 0, func(o *Options) {
		o.Committer = committerFunc(func(ctx context.Context, c triggers.Capture, events []triggers.Event) (bool, error) {
			attempts.Add(1)
			return h.fc.Commit(ctx, c, events)
		})
	})
	h.fc.setErr(errors.New("nats: timeout"))
	ids := []string{"d-run-1", "d-run-2", "d-run-3"}
	for _, id := range ids {
		if a := h.do(codeHostRequest("issues", id, []byte(issueOpened))); a.body["spooled"] != true {
			t.Fatalf("%s: %d %v", id, a.status, a.body)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.sp.Run(ctx); close(done) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}()
	// Run retries while the committer fails; it forwards once it takes them.
	testenv.Eventually(t, 10*time.Second, "Run to retry past the first failed pass", func() bool { return attempts.Load() >= 3+2 })
	if h.disk.Len() != 3 {
		t.Fatalf("spool holds %d while NATS fails, want 3", h.disk.Len())
	}
	h.fc.setErr(nil)
	testenv.Eventually(t, 10*time.Second, "Run to empty the spool", func() bool { return h.disk.Len() == 0 })
	h.fc.mu.Lock()
	defer h.fc.mu.Unlock()
	if len(h.fc.commits) != len(ids) {
		t.Fatalf("the committer took %d deliveries, want %d", len(h.fc.commits), len(ids))
	}
	for i, c := range h.fc.commits {
		if c.DeliveryID != ids[i] {
			t.Fatalf("forwarded %s as number %d; want the spool's order %v", c.DeliveryID, i, ids)
		}
	}
}

func TestSpoolForwardsSeveralAtOnce(t *testing.T) {
	h := newSpoolHarness(t, 0, nil)
	h.fc.setErr(errors.New("nats: timeout"))
	const n = 30
	for i := range n {
		if a := h.do(codeHostRequest("issues", fmt.Sprintf("d-many-%d", i), []byte(issueOpened))); a.body["spooled"] != true {
			t.Fatalf("%d: %d %v", i, a.status, a.body)
		}
	}
	// The first 8 forwards wait for each other: Flush must run 8 at once
	// (else they time out), and never more.
	var inFlight, most, calls atomic.Int32
	eight := make(chan struct{})
	sp, err := NewSpooler(SpoolerOptions{
		Disk: h.disk, Concurrency: 8, Logger: zerolog.Nop(),
		Committer: committerFunc(func(ctx context.Context, c triggers.Capture, events []triggers.Event) (bool, error) {
			now := inFlight.Add(1)
			defer inFlight.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			switch call := calls.Add(1); {
			case call == 8:
				close(eight)
			case call < 8:
				select {
				case <-eight:
				case <-ctx.Done():
					return false, fmt.Errorf("forward %d waited for 8 at once: %w", call, ctx.Err())
				}
			}
			return h.fc.Commit(ctx, c, events)
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.fc.setErr(nil)
	if err := sp.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.disk.Len() != 0 || h.fc.count() != n {
		t.Fatalf("spool %d, commits %d; want 0 and %d", h.disk.Len(), h.fc.count(), n)
	}
	if m := most.Load(); m > 8 {
		t.Fatalf("%d forwards ran at once; the limit is 8", m)
	}
}

// One delivery NATS keeps refusing does not hold up the others; a NATS
// that refuses everything ends the pass after Concurrency refusals.
func TestSpoolPassGoesOnPastARefusal(t *testing.T) {
	var h *spoolHarness
	var refuseAll atomic.Bool
	var calls atomic.Int32
	commit := committerFunc(func(ctx context.Context, c triggers.Capture, events []triggers.Event) (bool, error) {
		calls.Add(1)
		if refuseAll.Load() || c.DeliveryID == "d-poison" {
			return false, errors.New("nats: maximum messages exceeded")
		}
		return h.fc.Commit(ctx, c, events)
	})
	h = newSpoolHarness(t, 0, func(o *Options) { o.Committer = commit })
	refuseAll.Store(true)
	for _, id := range []string{"d-first", "d-poison", "d-3", "d-4", "d-5"} {
		if a := h.do(codeHostRequest("issues", id, []byte(issueOpened))); a.body["spooled"] != true {
			t.Fatalf("%s: %d %v", id, a.status, a.body)
		}
	}
	// Everything refused: the pass stops after Concurrency (1) refusals.
	calls.Store(0)
	if err := h.sp.Flush(context.Background()); err == nil || calls.Load() != 1 || h.disk.Len() != 5 {
		t.Fatalf("Flush with NATS refusing all: err %v after %d commits, spool %d; want an error after 1 commit and all 5 kept", err, calls.Load(), h.disk.Len())
	}
	refuseAll.Store(false)
	sp, err := NewSpooler(SpoolerOptions{Disk: h.disk, Committer: commit, Concurrency: 2, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Flush(context.Background()); err == nil || !strings.Contains(err.Error(), "d-poison") {
		t.Fatalf("Flush: %v, want the poison delivery's refusal", err)
	}
	if h.disk.Len() != 1 || h.fc.count() != 4 {
		t.Fatalf("spool %d, commits %d; want the poison delivery kept and the 4 others forwarded", h.disk.Len(), h.fc.count())
	}
}

type committerFunc func(context.Context, triggers.Capture, []triggers.Event) (bool, error)

func (f committerFunc) Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (bool, error) {
	return f(ctx, c, events)
}
