package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// EventView is an event as GET /v1/events/{id} and the MCP resource
// triggerd://events/{id} show it: its record, or, for an event of the
// shared endpoints that left none, what the events stream holds of it;
// with a note, when nothing started, saying why.
type EventView struct {
	store.EventRecord
	// DispatchedAt hides the record's: absent for an event found in the
	// stream, which no dispatcher decided on.
	DispatchedAt *time.Time `json:"dispatched_at,omitempty"`
	// Note says, when Outcomes is empty, why no trigger of the tenant
	// started.
	Note string `json:"note,omitempty"`
}

// NoCandidateNote is EventView.Note for a recorded event without outcomes.
const NoCandidateNote = "triggerd received this event, but no trigger of this tenant was a candidate for it " +
	"(none of its kind on this repository or scope, or none enabled then): nothing started. " +
	"POST /v1/triggers/test tells what a trigger would do with the latest events of its kind."

// ErrEventSearch is matched by LookUpEvent's error when an event has no
// record and the events stream could not be searched for it: a passing
// failure, not an answer about the event.
var ErrEventSearch = errors.New("the events stream could not be searched")

// EventRecords reads events' records (store.Store).
type EventRecords interface {
	GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error)
}

// UnrecordedFinder finds events that left no record (Dispatcher).
type UnrecordedFinder interface {
	LookUpUnrecorded(ctx context.Context, tenantID, eventID string) (Unrecorded, error)
}

// LookUpEvent returns event eventID as tenantID sees it: its record, else,
// when unrecorded is not nil, the event LookUpUnrecorded finds in the
// stream with why nothing started. The API and the MCP server answer with
// it, so that both say the same of an event.
//
// store.ErrNotFound: no such event of the tenant. ErrEventSearch: no
// record, and the stream could not be searched (retry). Any other error
// is the records' own.
func LookUpEvent(ctx context.Context, records EventRecords, unrecorded UnrecordedFinder, tenantID, eventID string) (EventView, error) {
	rec, err := records.GetEvent(ctx, tenantID, eventID)
	if errors.Is(err, store.ErrNotFound) && unrecorded != nil {
		// No record: an event of the shared endpoints no trigger was a
		// candidate for leaves none, and is looked for in the stream.
		u, uerr := unrecorded.LookUpUnrecorded(ctx, tenantID, eventID)
		switch {
		case uerr == nil:
			return EventView{EventRecord: u.Record, Note: u.Reason + "."}, nil
		case !errors.Is(uerr, store.ErrNotFound):
			return EventView{}, fmt.Errorf("event %s has no record, and %w: %w", eventID, ErrEventSearch, uerr)
		}
	}
	if err != nil {
		return EventView{}, err
	}
	v := EventView{EventRecord: rec, DispatchedAt: &rec.DispatchedAt}
	if len(v.Outcomes) == 0 {
		v.Outcomes = []store.Outcome{}
		v.Note = NoCandidateNote
	}
	return v, nil
}

// UnrecordedSearch is how many of the newest events LookUpUnrecorded reads
// (their headers only) at most.
const UnrecordedSearch = 200_000

// Unrecorded is an event received but never recorded for a tenant, with
// why nothing started.
type Unrecorded struct {
	// Record is the event as its record would show it, with no outcomes.
	Record store.EventRecord
	// Reason says why no trigger of the tenant was a candidate for it.
	Reason string
}

// LookUpUnrecorded finds event eventID of the shared endpoints, which left
// no record because no trigger of tenantID (the shared tenant, which owns
// those endpoints) was a candidate for it: the dispatcher passes over the
// events of kinds no trigger takes without reading them (Interest), and
// records the others only for the tenants with candidates. It reads the
// events stream for it, the newest UnrecordedSearch events at most, and
// says why nothing started.
//
// store.ErrNotFound: no such event among those read, or not the tenant's
// (an event of a tenant's hook always leaves a record once dispatched; one
// of the shared endpoints is the shared tenant's alone).
func (d *Dispatcher) LookUpUnrecorded(ctx context.Context, tenantID, eventID string) (Unrecorded, error) {
	if tenantID == "" || tenantID != d.o.SharedTenant {
		return Unrecorded{}, fmt.Errorf("event %s: %w", eventID, store.ErrNotFound)
	}
	// One search at a time, with the dry runs: each reads the stream.
	select {
	case d.dryRuns <- struct{}{}:
		defer func() { <-d.dryRuns }()
	case <-ctx.Done():
		return Unrecorded{}, fmt.Errorf("event %s: waiting for another search to finish: %w", eventID, ctx.Err())
	}
	seq, found, exhausted, err := d.o.Queue.FindEvent(ctx, eventID, UnrecordedSearch)
	if err != nil {
		return Unrecorded{}, err
	}
	if !found {
		why := "not in the events stream"
		if !exhausted {
			why = fmt.Sprintf("not among the newest %d events", UnrecordedSearch)
		}
		return Unrecorded{}, fmt.Errorf("event %s: %s: %w", eventID, why, store.ErrNotFound)
	}
	subject, data, err := d.o.Queue.EventAt(ctx, seq)
	if err != nil {
		return Unrecorded{}, fmt.Errorf("event %s: %w", eventID, err)
	}
	var ev triggers.Event
	if err := triggers.DecodeEvent(data, &ev); err != nil || ev.ID != eventID {
		return Unrecorded{}, fmt.Errorf("event %s: the stream holds something else at sequence %d", eventID, seq)
	}
	if ev.Scope != nil {
		// A hook's: its tenant's record is made when it is dispatched.
		return Unrecorded{}, fmt.Errorf("event %s came on a tenant's hook: %w", eventID, store.ErrNotFound)
	}
	rec := store.EventRecord{
		TenantID: tenantID, EventID: ev.ID, Kind: string(ev.Kind), Summary: ev.Summary(), Subject: subject, Seq: seq,
		DeliveryID: ev.DeliveryID, ReceivedAt: ev.ReceivedAt, Outcomes: []store.Outcome{},
	}
	if ev.Repository != nil {
		rec.Repository = ev.Repository.FullName
	}
	reason, err := d.noCandidateReason(ctx, tenantID, &ev)
	if err != nil {
		return Unrecorded{}, fmt.Errorf("event %s: %w", eventID, err)
	}
	return Unrecorded{Record: rec, Reason: reason}, nil
}

// noCandidateReason says why no trigger of tenantID took ev, as the
// triggers are now.
func (d *Dispatcher) noCandidateReason(ctx context.Context, tenantID string, ev *triggers.Event) (string, error) {
	if now := d.index.Load().Match(ev); len(now) > 0 {
		return fmt.Sprintf("%d trigger(s) of this tenant are candidates for it now, but were not when it was dispatched, "+
			"or the dispatcher has not reached it yet: ask again in a moment", len(now)), nil
	}
	ts, err := d.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID})
	if err != nil {
		return "", fmt.Errorf("list the tenant's triggers: %w", err)
	}
	ofKind := 0
	for _, t := range ts {
		if t.Kind == string(ev.Kind) {
			ofKind++
		}
	}
	where := ""
	if ev.Repository != nil {
		where = " of " + ev.Repository.FullName
	}
	if ofKind == 0 {
		return fmt.Sprintf("no trigger of this tenant is of kind %s, so nothing was a candidate for this %s event%s; "+
			"POST /v1/triggers creates one", ev.Kind, ev.Kind, where), nil
	}
	return fmt.Sprintf("none of this tenant's %d trigger(s) of kind %s is a candidate for an event%s "+
		"(they watch other repositories or projects): nothing started", ofKind, ev.Kind, where), nil
}
