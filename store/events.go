package store

import (
	"context"
	"slices"
	"time"
)

// Outcome is what became of one candidate trigger for one event.
type Outcome struct {
	TriggerID string `json:"trigger_id"`
	AgentID   string `json:"agent_id"`
	// Result is "started", "filtered_out", "disabled", "inactive",
	// "account_removed" or "failed".
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`
	RunID  string `json:"run_id,omitempty"`
}

// EventRecord is what the dispatcher decided for one event, for one
// tenant: an outcome per candidate trigger of that tenant.
type EventRecord struct {
	TenantID string `json:"tenant_id"`
	EventID  string `json:"event_id"`
	Kind     string `json:"kind"`
	Subject  string `json:"subject"`
	// Summary is the event's summary (triggers.Event.Summary): outside
	// text.
	Summary string `json:"summary,omitempty"`
	// Seq is the event's sequence in the events stream, to read it back.
	Seq        uint64    `json:"seq,omitempty"`
	DeliveryID string    `json:"delivery_id"`
	Repository string    `json:"repository,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// DispatchedAt is when the outcomes were (last) decided.
	DispatchedAt time.Time `json:"dispatched_at"`
	Outcomes     []Outcome `json:"outcomes"`
}

// Validate reports the first identifier a record to be stored lacks.
func (e EventRecord) Validate() error {
	return requireIDs("tenant id", e.TenantID, "event id", e.EventID)
}

// ForPut returns e as PutEvent stores it: a zero DispatchedAt set to now.
func (e EventRecord) ForPut(now time.Time) EventRecord {
	if e.DispatchedAt.IsZero() {
		e.DispatchedAt = now
	}
	return e
}

// HasOutcome reports whether e has an outcome for the trigger.
func (e EventRecord) HasOutcome(triggerID string) bool {
	return slices.ContainsFunc(e.Outcomes, func(o Outcome) bool { return o.TriggerID == triggerID })
}

// TriggerIDs returns the triggers e has an outcome for, each once, in the
// order of their first outcome: the triggers whose lists show e.
func (e EventRecord) TriggerIDs() []string {
	var ids []string
	for _, o := range e.Outcomes {
		if o.TriggerID != "" && !slices.Contains(ids, o.TriggerID) {
			ids = append(ids, o.TriggerID)
		}
	}
	return ids
}

// Events stores the dispatcher's decisions.
type Events interface {
	// PutEvent stores or replaces the tenant's record of an event.
	PutEvent(ctx context.Context, e EventRecord) error
	// GetEvent returns the tenant's record of an event, or ErrNotFound.
	GetEvent(ctx context.Context, tenantID, eventID string) (EventRecord, error)
	// ListTriggerEvents returns the tenant's records that have an outcome
	// for the trigger, newest DispatchedAt first, at most limit (0: 100).
	ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]EventRecord, error)
	// PruneEvents deletes the records of every tenant whose DispatchedAt
	// is before before, with their index entries, oldest DispatchedAt
	// first, at most limit (DefaultPruneLimit if not positive), and
	// returns how many it deleted. A record replaced while it is pruned is
	// left for a later call, which deletes it only if its new
	// DispatchedAt is before that call's before.
	PruneEvents(ctx context.Context, before time.Time, limit int) (int, error)
}
