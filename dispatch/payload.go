package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/pipeline"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// An event whose encoding would be too large (over NATS's max payload, or
// past its delivery's inline budget) carries payload null and payload_ref,
// the archive subject of its delivery (bus.ArchiveSubject). Filters and
// step templates that read the payload get it from the archive: read only
// for such events, only when a candidate's filter or a step's template may
// read it, at most once per event handled, within MaxPayloadBytes and
// PayloadTimeout. Events that carry their payload inline are not affected.

// Archive reads archived deliveries: (*bus.Bus).Delivery. key is the
// delivery's key (triggers.DeliveryKey); a delivery the archive does not
// hold is bus.ErrNotArchived.
type Archive interface {
	Delivery(ctx context.Context, c triggers.Connector, key string) (triggers.Capture, error)
}

// Defaults for Options.
const (
	// DefaultMaxPayloadBytes bounds a payload read from the archive for
	// filters and templates: decoding one takes several times its size in
	// memory, per event in hand.
	DefaultMaxPayloadBytes = 8 << 20
	// DefaultPayloadTimeout bounds reading one.
	DefaultPayloadTimeout = 10 * time.Second
)

// payloadError is why the payload of an event that carries it by
// reference could not be read; permanent when reading again cannot help
// (the archive no longer holds the delivery, it is over the limit).
type payloadError struct {
	err       error
	permanent bool
}

func (e *payloadError) Error() string { return e.err.Error() }
func (e *payloadError) Unwrap() error { return e.err }

// isPermanent reports whether err, from readPayload, is permanent.
func isPermanent(err error) bool {
	var pe *payloadError
	return errors.As(err, &pe) && pe.permanent
}

// readPayload reads the payload an event left out: the webhook JSON of the
// archived delivery ref names (for a form-encoded delivery, its "payload"
// field), as the event would have carried it. Its errors are
// *payloadError.
func (d *Dispatcher) readPayload(ctx context.Context, ref string) (json.RawMessage, error) {
	fail := func(permanent bool, format string, args ...any) (json.RawMessage, error) {
		return nil, &payloadError{fmt.Errorf(format, args...), permanent}
	}
	if d.o.Archive == nil {
		return fail(true, "no delivery archive is configured to read it from")
	}
	c, key, ok := bus.ParseArchiveSubject(ref)
	if !ok {
		return fail(true, "%q is not an archive subject", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, d.o.PayloadTimeout)
	defer cancel()
	capture, err := d.o.Archive.Delivery(ctx, c, key)
	switch {
	case errors.Is(err, bus.ErrNotArchived):
		return fail(true, "%w", err)
	case err != nil:
		return fail(false, "%w", err)
	}
	payload, err := capture.Payload()
	switch {
	case err != nil:
		return fail(true, "%w", err)
	case len(payload) > d.o.MaxPayloadBytes:
		return fail(true, "it is %d bytes, over the %d-byte limit for filters and templates", len(payload), d.o.MaxPayloadBytes)
	}
	return payload, nil
}

// codePayloadUnavailable is the error code of a step whose template needs
// a payload that could not be read.
const codePayloadUnavailable = "payload_unavailable"

// eventPayload is the payload of one event that carries it by reference,
// read at most once (a transient failure is tried again). nil for an event
// that carries its payload.
type eventPayload struct {
	d   *Dispatcher
	ref string
	// final is set when the job will not come back: every failure is
	// permanent. fresh is set for an event just published: Commit archives
	// a delivery after publishing its events, so a delivery not archived
	// yet may be soon.
	final, fresh bool
	data         json.RawMessage
	err          error // permanent
	// doc is data decoded for templates, which only read it.
	doc any
}

func (d *Dispatcher) eventPayload(ev *triggers.Event, final, fresh bool) *eventPayload {
	if ref := ev.PayloadByReference(); ref != "" {
		return &eventPayload{d: d, ref: ref, final: final, fresh: fresh}
	}
	return nil
}

// get returns the payload, reading it on first use.
func (p *eventPayload) get(ctx context.Context) (json.RawMessage, error) {
	if p.data != nil || p.err != nil {
		return p.data, p.err
	}
	data, err := p.d.readPayload(ctx, p.ref)
	if err != nil {
		switch {
		case p.final && !isPermanent(err):
			err = &payloadError{err, true}
		case p.fresh && !p.final && errors.Is(err, bus.ErrNotArchived):
			err = &payloadError{err, false}
		}
		err = fmt.Errorf("payload_ref %s: %w", p.ref, err)
		if isPermanent(err) {
			p.err = err
		}
		return nil, err
	}
	p.data = data
	return data, nil
}

// decoded returns the payload decoded for templates (which only read it:
// the runs of the event share it).
func (p *eventPayload) decoded(ctx context.Context) (any, error) {
	if p.doc != nil {
		return p.doc, nil
	}
	data, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	if err := decodeNumbers(data, &p.doc); err != nil {
		p.doc = nil
		return nil, &payloadError{fmt.Errorf("payload_ref %s: %w", p.ref, err), true}
	}
	return p.doc, nil
}

// match matches ev in x as handleEvent and replays do. When a filter that
// may read the payload was evaluated without it (the event carries it by
// reference), the payload is read and ev matched again with it, so only
// events whose candidates pass their parameters are read. ok false means
// the payload could not be read yet (err says why): the caller retries the
// event.
func (p *eventPayload) match(ctx context.Context, x *match.Index, ev *triggers.Event) (outcomes []match.Outcome, ok bool, err error) {
	outcomes, unread := x.MatchWith(ev, nil)
	if !unread || p == nil {
		return outcomes, true, nil
	}
	data, err := p.get(ctx)
	switch {
	case err == nil:
		ev.Payload = data
	case !isPermanent(err):
		return nil, false, err
	}
	outcomes, _ = x.MatchWith(ev, err)
	return outcomes, true, nil
}

// templatesNeedPayload reports whether a step of the agent of a matched
// outcome has a template that may read the payload. Each agent is read
// once, however many of its triggers matched.
func (d *Dispatcher) templatesNeedPayload(ctx context.Context, outcomes []match.Outcome) (bool, error) {
	seen := map[[2]string]bool{}
	for _, o := range outcomes {
		key := [2]string{o.TenantID, o.Agent}
		if o.Result != match.Matched || seen[key] {
			continue
		}
		seen[key] = true
		ag, err := d.o.Store.GetAgent(ctx, o.TenantID, o.Agent)
		if errors.Is(err, store.ErrNotFound) {
			continue // its run fails without reading anything
		}
		if err != nil {
			return false, fmt.Errorf("load agent %s: %w", o.Agent, err)
		}
		for _, s := range ag.Steps {
			if pipeline.InputReadsPayload(s.Input) {
				return true, nil
			}
		}
	}
	return false, nil
}
