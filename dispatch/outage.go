package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/triggerd/triggerd/bus"
)

// Pinger is implemented by stores that can say whether they are reachable
// (redisstore). With such a store the dispatcher holds its work through a
// store outage instead of spending the messages' deliveries on it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// How a held job asks the store whether it is back: each ping is bounded
// by pingTimeout, and the pause between pings doubles from holdPollMin to
// holdPollMax.
const (
	pingTimeout = time.Second
	holdPollMin = 100 * time.Millisecond
	holdPollMax = 2 * time.Second
)

// holdKey carries a *hold in the context of a handler run by holding.
type holdKey struct{}

// hold is what holding gives retry: the store to ping, and where retry
// leaves the error of a job it did not settle because the store was
// unreachable.
type hold struct {
	store Pinger
	err   error
}

// holding wraps a job handler so that a store outage costs its jobs no
// delivery. Every failed attempt to reach the store (a run record, an
// agent, an event record) ends in retry, which would hand the message
// back with a delay; JetStream counts each such delivery, and after
// MaxDeliver of them the event is dead-lettered and its agents never
// start. An outage of a minute or so was enough. Instead, when retry finds
// the store unreachable, the job stays in hand: its message is kept with
// heartbeats, the store is pinged until it answers, and the handler then
// runs again from the start (claims and run ids make that safe). While
// every worker holds a job the consumer takes no more messages, so the
// events wait in the stream.
//
// stop is the worker's own context (jobs run under one that is never
// cancelled): when it ends, a held job is left unsettled and comes back
// after AckWait, to this or another process. A store that cannot be
// pinged leaves handle as it is.
func (d *Dispatcher) holding(stop context.Context, handle func(context.Context, *bus.Job)) func(context.Context, *bus.Job) {
	p, ok := d.o.Store.(Pinger)
	if !ok {
		return handle
	}
	return func(ctx context.Context, j *bus.Job) {
		for {
			h := &hold{store: p}
			handle(context.WithValue(ctx, holdKey{}, h), j)
			if h.err == nil || !d.awaitStore(stop, p, j, h.err) {
				return
			}
		}
	}
}

// holdFor reports whether retry should leave j in hand for holding to run
// again once the store answers: the job runs under holding, err is not
// another worker's claim, and the store does not answer a ping.
func (d *Dispatcher) holdFor(ctx context.Context, err error) bool {
	h, ok := ctx.Value(holdKey{}).(*hold)
	if !ok || errors.As(err, new(errBusy)) {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if h.store.Ping(pctx) == nil {
		return false
	}
	h.err = err
	return true
}

// awaitStore keeps j's message with heartbeats until the store answers a
// ping (true) or stop ends (false).
func (d *Dispatcher) awaitStore(stop context.Context, p Pinger, j *bus.Job, cause error) bool {
	beat := bus.Heartbeat(j, d.o.AckWait/3)
	defer beat()
	d.metrics.held.Inc()
	defer d.metrics.held.Dec()
	began := time.Now()
	d.log.Warn().Err(cause).Str("subject", j.Subject()).Int("delivered", j.Delivered()).
		Msg("store unreachable: holding the message until it answers, without spending a delivery")
	wait := holdPollMin
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			d.log.Warn().Str("subject", j.Subject()).Msg("stopping while the store is unreachable: the held message comes back after AckWait")
			return false
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(stop, pingTimeout)
		err := p.Ping(pctx)
		cancel()
		if err == nil {
			d.log.Info().Str("subject", j.Subject()).Dur("held_for", time.Since(began)).Msg("store answers again: running the held message")
			return true
		}
		d.metrics.pingsFailed.Inc()
		wait = min(2*wait, holdPollMax)
		t.Reset(wait)
	}
}
