package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// How often the streams triggerd writes to are checked for a leader: every
// healthEvery while all have one, every healthEveryUnhealthy while one has
// none (so readiness and ingest come back soon after the election), each
// check bounded by healthTimeout.
const (
	healthEvery          = time.Second
	healthEveryUnhealthy = 250 * time.Millisecond
	healthTimeout        = 2 * time.Second
)

// health follows whether the streams triggerd writes to can take writes:
// JetStream answers, and (in a cluster) each stream has a leader. Commit
// reads it on every delivery, so it is one atomic load.
type health struct {
	// reason is why writes cannot be made now; nil or "" when they can.
	reason atomic.Pointer[string]
	// kick asks the watcher to look again now (Commit saw a stream
	// without a leader).
	kick     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// slow counts the rounds in a row in which a stream did not answer in
	// time: a lone busy server may answer slowly, which is not a missing
	// leader, so a timeout counts only on the second round.
	slow int
}

// NotReadyReason says why the Bus cannot make deliveries durable now: NATS
// unreachable, JetStream unavailable, or a stream triggerd writes to
// without a leader (being elected). It is "" when it can. Ready is
// NotReadyReason() == "".
func (b *Bus) NotReadyReason() string {
	if b.down.Load() {
		return "NATS is unreachable"
	}
	return b.currentReason()
}

// writtenStreams are the streams ingest and dispatch write to.
func (b *Bus) writtenStreams() []jetstream.Stream {
	s := []jetstream.Stream{b.events}
	if b.indexStream != nil {
		s = append(s, b.indexStream)
	}
	if b.dedupStream != nil {
		s = append(s, b.dedupStream)
	}
	if !b.shared && b.deliveries != nil {
		s = append(s, b.deliveries)
	}
	return s
}

// watchHealth starts the goroutine that keeps b.health current, until
// Close.
func (b *Bus) watchHealth() {
	h := &b.health
	h.kick = make(chan struct{}, 1)
	h.stop = make(chan struct{})
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		t := time.NewTimer(healthEvery)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
			case <-h.kick:
				t.Stop()
			}
			reason := b.checkHealth()
			if reason == "" {
				h.reason.Store(nil)
				t.Reset(healthEvery)
			} else {
				h.reason.Store(&reason)
				t.Reset(healthEveryUnhealthy)
			}
		}
	}()
}

// stopHealth stops the watcher, if it runs.
func (b *Bus) stopHealth() {
	if b.health.stop != nil {
		b.health.stopOnce.Do(func() { close(b.health.stop) })
		<-b.health.done
	}
}

// checkHealth asks JetStream about each written stream and returns why
// writes cannot be made, or "".
func (b *Bus) checkHealth() string {
	if b.down.Load() {
		return "" // NotReadyReason says so already; the info would only time out
	}
	for _, s := range b.writtenStreams() {
		name := s.CachedInfo().Config.Name
		ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
		info, err := s.Info(ctx)
		cancel()
		switch {
		case err == nil && info.Cluster != nil && info.Cluster.Leader == "":
			return fmt.Sprintf("NATS stream %s has no leader (one is being elected)", name)
		case err == nil:
			continue
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
			return "JetStream is unavailable: " + err.Error()
		case errors.Is(err, context.DeadlineExceeded):
			b.health.slow++
			if b.health.slow < 2 {
				return b.currentReason()
			}
			b.probeConnection()
			return fmt.Sprintf("NATS stream %s did not answer in %s (no leader, or JetStream unavailable)", name, healthTimeout)
		case transientJS(err):
			return fmt.Sprintf("NATS stream %s has no leader (one is being elected): %v", name, err)
		default:
			return fmt.Sprintf("NATS stream %s: %v", name, err)
		}
	}
	b.health.slow = 0
	return ""
}

// probeConnection asks the server for a PONG when streams have not
// answered two rounds in a row. A server that does not answer that either
// is hung (stopped, or behind a network black hole) with the connection
// still open: nats.go would notice only after its pings go unanswered,
// minutes later, and only a write that fills the socket's buffer notices
// sooner. Reconnecting at once lets the Bus reach the server, or another
// member of the cluster, as soon as one answers; meanwhile Commit fails
// fast and ingest spools.
func (b *Bus) probeConnection() {
	if err := b.nc.FlushTimeout(healthTimeout); err == nil || b.nc.IsReconnecting() || b.nc.IsClosed() {
		return
	}
	_ = b.nc.ForceReconnect()
}

// currentReason is the reason the watcher last stored, or "".
func (b *Bus) currentReason() string {
	if r := b.health.reason.Load(); r != nil {
		return *r
	}
	return ""
}

// unansweredError is a request a stream left unanswered (while it elects
// a leader); it counts as jetstream.ErrNoStreamResponse.
type unansweredError struct {
	stream string
	err    error
}

func (e *unansweredError) Error() string   { return e.err.Error() }
func (e *unansweredError) Unwrap() []error { return []error{e.err, jetstream.ErrNoStreamResponse} }

// noteCommitError marks the events stream leaderless at once when a
// commit found no stream to take its events (JetStream answered no
// responders, as a cluster does while electing a stream's leader), or the
// bucket's stream left a read unanswered, so the deliveries that follow
// are spooled at once instead of each trying; the watcher clears it once
// the stream has a leader again.
func (b *Bus) noteCommitError(err error) {
	if !errors.Is(err, jetstream.ErrNoStreamResponse) || b.health.kick == nil {
		return
	}
	if b.health.reason.Load() == nil {
		reason := fmt.Sprintf("NATS stream %s took no message (no leader, being elected)", EventsStream)
		if u := (*unansweredError)(nil); errors.As(err, &u) {
			reason = fmt.Sprintf("NATS stream %s left a request unanswered (no leader, being elected)", u.stream)
		}
		b.health.reason.CompareAndSwap(nil, &reason)
	}
	select {
	case b.health.kick <- struct{}{}:
	default:
	}
}
