package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Bounds of a dry run.
const (
	// DryRunEvents is how many events a dry run reports by default, and
	// MaxDryRunEvents how many it may be asked for.
	DryRunEvents    = 20
	MaxDryRunEvents = 100
	// dryRunMaxRead bounds the events of the trigger's kind a dry run
	// reads, most of them perhaps other tenants' or other accounts'.
	dryRunMaxRead = 10_000
	// maxDryRuns is how many dry runs a process runs at once; more wait
	// for a slot (as long as their context allows): each may read tens of
	// megabytes of events.
	maxDryRuns = 2
	// dryRunPayloadReads bounds the payloads a dry run reads from the
	// archive, for a filter over the payload of events that carry it by
	// reference; past it, such events are reported as filtered out, saying
	// their payload was not read.
	dryRunPayloadReads = 10
)

// ErrInvalidDryRun wraps what is wrong with a dry run's trigger (its
// parameters or filter) or limit.
var ErrInvalidDryRun = errors.New("invalid dry run")

// DryRunEvent is what a trigger would have done with one past event.
type DryRunEvent struct {
	EventID    string    `json:"event_id"`
	DeliveryID string    `json:"delivery_id"`
	ReceivedAt time.Time `json:"received_at"`
	Action     string    `json:"action,omitempty"`
	Repository string    `json:"repository,omitempty"`
	// Result is Matched or FilteredOut; Reason says, for FilteredOut,
	// which parameter or the filter rejected the event. It is ResultFailed
	// for a project_item_status_changed event of the older payload shape
	// whose field could not be named (nameProjectField), Reason saying why.
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
}

// DryRunReport is the answer of a dry run.
type DryRunReport struct {
	// Events are the latest events the trigger would have been a
	// candidate for, newest first.
	Events  []DryRunEvent `json:"events"`
	Matched int           `json:"matched"`
	// Exhausted is true when the events stream holds no older event the
	// trigger would have been a candidate for: Events is all there is.
	Exhausted bool `json:"exhausted"`
	// Truncated is true when the dry run stopped after reading its
	// maximum of events of the kind without finding as many as asked for.
	Truncated bool `json:"truncated"`
}

// DryRun tells what trigger t would have done with the latest events of its
// kind that the events stream still holds: of at most limit events it would
// have been a candidate for (those of its repositories, or of any, and of
// its tenant's hooks only, or of the shared endpoints for
// Options.SharedTenant, as the dispatcher decides), newest first, which
// ones its parameters and filter match and why the others do not. It treats
// t as enabled and active, and starts nothing: it answers "would this
// trigger (or this filter) have fired?" before the trigger is created or
// changed.
func (d *Dispatcher) DryRun(ctx context.Context, t store.Trigger, limit int) (DryRunReport, error) {
	if limit < 1 || limit > MaxDryRunEvents {
		return DryRunReport{}, fmt.Errorf("%w: limit %d is not between 1 and %d", ErrInvalidDryRun, limit, MaxDryRunEvents)
	}
	dt, err := match.FromStore(t)
	if err != nil {
		return DryRunReport{}, fmt.Errorf("%w: %w", ErrInvalidDryRun, err)
	}
	dt.Enabled, dt.Inactive, dt.InactiveCode = true, "", ""
	if dt.ID == "" {
		dt.ID = "dry-run"
	}
	index := match.NewIndex(d.o.SharedTenant)
	if err := index.Put(dt); err != nil {
		return DryRunReport{}, fmt.Errorf("%w: %w", ErrInvalidDryRun, err)
	}
	select {
	case d.dryRuns <- struct{}{}:
		defer func() { <-d.dryRuns }()
	case <-ctx.Done():
		return DryRunReport{}, fmt.Errorf("dry run of a %s trigger: waiting for another to finish: %w", dt.Kind, ctx.Err())
	}

	report := DryRunReport{Events: []DryRunEvent{}}
	// The current window's candidates, oldest first: only its newest
	// limit can be reported, so only those are matched (a filter decodes
	// the whole event), and older ones are dropped as the window fills.
	var window []triggers.Event
	left := false // a candidate was left out for the limit
	visit := func(data []byte) {
		var ev triggers.Event
		if triggers.DecodeEvent(data, &ev) != nil || !index.Considers(&ev) {
			return // another tenant's, account's or source's; or unreadable
		}
		if len(window) == 2*limit {
			window, left = append(window[:0], window[limit:]...), true
		}
		window = append(window, ev)
	}
	payloadReads := 0
	done := func() bool {
		for i := len(window) - 1; i >= 0; i-- {
			if len(report.Events) == limit {
				left = true
				break
			}
			ev := &window[i]
			var payloadErr error
			if p := d.eventPayload(ev, true, false); p != nil && payloadReads < dryRunPayloadReads && index.NeedsPayload(ev) {
				payloadReads++
				if data, err := p.get(ctx); err == nil {
					ev.Payload = data
				} else {
					payloadErr = err
				}
			}
			outcomes, _ := index.MatchWith(ev, payloadErr)
			if err := d.nameProjectField(ctx, ev, outcomes); err != nil {
				outcomes[0].Result, outcomes[0].Reason = ResultFailed, err.Error()+" (a passing failure: try the dry run again later)"
			}
			report.Events = append(report.Events, dryRunEvent(ev, outcomes[0]))
			ev.Payload = nil // drop a payload read from the archive
		}
		window = window[:0]
		return len(report.Events) < limit
	}
	read, exhausted, err := d.o.Queue.ReadBack(ctx, dryRunFilters(dt), dryRunMaxRead, visit, done)
	if err != nil {
		return DryRunReport{}, fmt.Errorf("dry run of a %s trigger: %w", dt.Kind, err)
	}
	report.Exhausted = exhausted && !left
	report.Truncated = !exhausted && len(report.Events) < limit && read >= dryRunMaxRead
	for _, e := range report.Events {
		if e.Result == match.Matched {
			report.Matched++
		}
	}
	return report, nil
}

func dryRunEvent(ev *triggers.Event, o match.Outcome) DryRunEvent {
	e := DryRunEvent{
		EventID: ev.ID, DeliveryID: ev.DeliveryID, ReceivedAt: ev.ReceivedAt, Action: ev.Action,
		Result: o.Result, Reason: o.Reason,
	}
	if ev.Repository != nil {
		e.Repository = ev.Repository.FullName
	}
	return e
}

// dryRunFilters returns the subjects of the events t can be a candidate
// for: its repositories' (deduplicated: filters must not overlap), or its
// kind's.
func dryRunFilters(t match.Trigger) []string {
	if len(t.Params.Repositories) == 0 {
		return []string{triggers.KindFilter(t.Kind)}
	}
	var out []string
	for _, r := range t.Params.Repositories {
		owner, name, _ := strings.Cut(r, "/")
		if s := triggers.RepositorySubject(t.Kind, owner, name); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
