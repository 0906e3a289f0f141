package dispatch

import (
	"context"
	"slices"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/triggers"
)

// NoEvents is the events consumer's filter while no trigger exists: a
// subject no event is ever published on (no connector is named "~").
const NoEvents = triggers.SubjectPrefix + "." + triggers.MissingToken + ".>"

// Interest returns the subject filters of the events the dispatcher must
// see when triggers of the given kinds exist, so that JetStream passes over
// every other event without delivering it (see Dispatcher.applyInterest).
//
// An event is needed when it may have a candidate trigger (its kind is one
// of kinds) or when it arrives on a tenant's hook, which always leaves a
// record. Hooks exist only for triggers, and a code-hosting hook is
// subscribed to its triggers' webhook events, which map onto the kinds
// sharing one of those events with a trigger's kind (a new_issue trigger's
// hook gets "issues" deliveries, which also give updated_issue,
// new_issue_label and new_mention): those kinds are included. A
// deployment endpoint takes whatever the project sends, so any deployment
// trigger includes every deployment kind.
//
// The filters do not overlap; a connector whose every kind is needed is
// one filter. Without kinds the one filter is NoEvents.
func Interest(kinds []triggers.Kind) []string {
	all := triggers.Kinds()
	need := map[triggers.Kind]bool{}
	for _, k := range kinds {
		if !k.Valid() {
			continue
		}
		need[k] = true
		events := k.HookEvents()
		for _, o := range all {
			switch {
			case o.Connector != k.Connector():
			case k.Connector() == triggers.Deploy:
				need[o.Kind] = true
			case slices.ContainsFunc(o.Kind.HookEvents(), func(e string) bool { return slices.Contains(events, e) }):
				need[o.Kind] = true
			}
		}
	}
	if len(need) == 0 {
		return []string{NoEvents}
	}
	var filters []string
	for _, c := range []triggers.Connector{triggers.CodeHost, triggers.Deploy} {
		var of []string
		every := true
		for _, o := range all {
			if o.Connector != c {
				continue
			}
			if need[o.Kind] {
				of = append(of, triggers.KindFilter(o.Kind))
			} else {
				every = false
			}
		}
		if every {
			of = []string{triggers.ConnectorFilter(c)}
		}
		filters = append(filters, of...)
	}
	slices.Sort(filters)
	return filters
}

// applyInterest narrows or widens the events consumer to the events the
// current index needs (Interest), so events no trigger could take are
// never delivered: under load most deliveries are of kinds nobody
// subscribed to, and reading them costs the dispatcher (and the server)
// tens of microseconds each.
//
// It is called after every change to the index. Each process applies its
// own index; when two disagree for a moment (one has not seen a change
// broadcast yet), the last to apply wins until the other catches up and
// applies again, and the periodic resync re-applies in any case. Skipping
// an event on the server is what the dispatcher would have done with it
// in its own hands at the same moment (no candidate, no record), so a
// brief difference costs nothing that a late broadcast did not already.
//
// It returns the filters of the current index, applied or not.
func (d *Dispatcher) applyInterest(ctx context.Context) []string {
	d.interestMu.Lock()
	defer d.interestMu.Unlock()
	filters := Interest(d.index.Load().Kinds())
	changed, err := d.o.Queue.SetWorkFilters(ctx, bus.EventsStream, EventsConsumer, filters)
	if err != nil {
		d.log.Warn().Err(err).Msg("narrowing the events consumer to the kinds with triggers failed; the next resync tries again")
	} else if changed {
		d.log.Info().Strs("filters", filters).Msg("events consumer filters changed with the triggers")
	}
	return filters
}
