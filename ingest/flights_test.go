package ingest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// racingCommitter answers as the bus can for two attempts at one delivery
// that overlap: each decides whether the delivery is a duplicate when it
// starts, so both can find it new. Each commit waits for release; fail
// makes the first one fail.
type racingCommitter struct {
	release chan struct{}
	fail    bool

	mu    sync.Mutex
	seen  map[string]bool
	calls int
}

func (r *racingCommitter) Commit(ctx context.Context, c triggers.Capture, _ []triggers.Event) (bool, error) {
	r.mu.Lock()
	r.calls++
	first := r.calls == 1
	duplicate := r.seen[c.Key()]
	r.mu.Unlock()
	select {
	case <-r.release:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if first && r.fail {
		return false, errors.New("nats: timeout")
	}
	r.mu.Lock()
	r.seen[c.Key()] = true
	r.mu.Unlock()
	return duplicate, nil
}

func (r *racingCommitter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// postTwiceAtOnce posts the same delivery twice, the second while the
// first is in the committer, and returns both answers once the second is
// waiting for the first (or, without commitOnce, in the committer too).
func postTwiceAtOnce(t *testing.T, h *harness, rc *racingCommitter) (first, second answer) {
	t.Helper()
	answers := make(chan answer, 2)
	post := func() { answers <- h.do(codeHostRequest("issues", "d-twice", []byte(issueOpened))) }
	go post()
	testenv.Eventually(t, 5*time.Second, "the first attempt to reach the committer", func() bool { return rc.count() == 1 })
	go post()
	key := flightKey{triggers.CodeHost, "d-twice"}
	testenv.Eventually(t, 5*time.Second, "the second attempt to wait for the first, or reach the committer", func() bool {
		h.s.flights.mu.Lock()
		defer h.s.flights.mu.Unlock()
		f := h.s.flights.m[key]
		return rc.count() == 2 || f != nil && f.waiters == 1
	})
	close(rc.release)
	first, second = <-answers, <-answers
	if first.status > second.status {
		first, second = second, first
	}
	return first, second
}

// TestConcurrentAttemptsAtOneDeliveryAnswerOnce: the same delivery posted
// twice at once is committed once, answered 202 once and duplicate once,
// and its events counted once.
func TestConcurrentAttemptsAtOneDeliveryAnswerOnce(t *testing.T) {
	rc := &racingCommitter{release: make(chan struct{}), seen: map[string]bool{}}
	h := newHarness(t, func(o *Options) { o.Committer = rc })
	ok, dup := postTwiceAtOnce(t, h, rc)
	if ok.status != http.StatusOK || ok.body["duplicate"] != true || dup.status != http.StatusAccepted {
		t.Fatalf("answers %d %v and %d %v; want one 200 duplicate and one 202", ok.status, ok.body, dup.status, dup.body)
	}
	if rc.count() != 1 {
		t.Fatalf("%d commits, want 1: the second attempt waits for the first", rc.count())
	}
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("events published = %v, want 1", got)
	}
	if got := h.deliveries("codehost", "issues", "duplicate"); got != 1 {
		t.Fatalf("duplicate deliveries = %v, want 1", got)
	}
	if n := len(h.s.flights.m); n != 0 {
		t.Fatalf("%d flights left behind", n)
	}
}

// TestAWaitingAttemptCommitsWhenTheFirstFails: the attempt that waited
// commits the delivery itself when the one it waited for failed.
func TestAWaitingAttemptCommitsWhenTheFirstFails(t *testing.T) {
	rc := &racingCommitter{release: make(chan struct{}), seen: map[string]bool{}, fail: true}
	h := newHarness(t, func(o *Options) { o.Committer = rc })
	accepted, failed := postTwiceAtOnce(t, h, rc)
	if accepted.status != http.StatusAccepted || failed.status != http.StatusServiceUnavailable {
		t.Fatalf("answers %d %v and %d %v; want 202 and 503", accepted.status, accepted.body, failed.status, failed.body)
	}
	if rc.count() != 2 {
		t.Fatalf("%d commits, want 2", rc.count())
	}
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("events published = %v, want 1", got)
	}
}
