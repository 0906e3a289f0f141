package store

import (
	"context"
	"encoding/json"
	"time"
)

// TriggerStatus says whether a trigger can fire, independent of whether
// its owner enabled it.
type TriggerStatus string

// Trigger states.
const (
	TriggerActive TriggerStatus = "active"
	// TriggerInactive: the platform stopped the trigger (its account was
	// removed); StatusReason says why.
	TriggerInactive TriggerStatus = "inactive"
)

// Trigger subscribes an agent to one kind of event.
type Trigger struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenant_id"`
	Kind      string `json:"kind"`
	AccountID string `json:"account_id"`
	AgentID   string `json:"agent_id"`
	// Enabled is the owner's switch.
	Enabled bool `json:"enabled"`
	// Params are the per-kind parameters, as the dispatch package defines
	// them.
	Params json.RawMessage `json:"params,omitempty"`
	Filter string          `json:"filter,omitempty"`
	Status TriggerStatus   `json:"status"`
	// StatusCode classifies an inactive trigger ("account_removed");
	// StatusReason says it in words. A webhook that cannot be registered
	// or repaired shows on its Hook (HookFailing, with the reason), not
	// here: the trigger stays active, takes the events of its other hooks,
	// and those of this one once the reconciler repairs it.
	StatusCode   string    `json:"status_code,omitempty"`
	StatusReason string    `json:"status_reason,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	Version      int64     `json:"version"`
}

// Validate reports the first identifier a trigger to be stored lacks.
func (t Trigger) Validate() error {
	return requireIDs("id", t.ID, "tenant id", t.TenantID)
}

// ForCreate returns t as CreateTrigger stores it: Version 1, a zero
// CreatedAt set to now, a zero UpdatedAt set to CreatedAt.
func (t Trigger) ForCreate(now time.Time) Trigger {
	Stamp(&t.CreatedAt, &t.UpdatedAt, now)
	t.Version = 1
	return t
}

// TriggerFilter narrows ListTriggers; empty fields do not narrow.
type TriggerFilter struct {
	// TenantID "" lists every tenant's triggers (the dispatcher's index).
	TenantID  string
	AccountID string
	AgentID   string
}

// Match reports whether f selects t.
func (f TriggerFilter) Match(t Trigger) bool {
	return (f.TenantID == "" || t.TenantID == f.TenantID) &&
		(f.AccountID == "" || t.AccountID == f.AccountID) &&
		(f.AgentID == "" || t.AgentID == f.AgentID)
}

// Triggers stores triggers.
type Triggers interface {
	// CreateTrigger stores a new trigger with Version 1; ErrConflict if
	// the id exists.
	CreateTrigger(ctx context.Context, t Trigger) (Trigger, error)
	// GetTrigger returns the tenant's trigger or ErrNotFound.
	GetTrigger(ctx context.Context, tenantID, id string) (Trigger, error)
	// ListTriggers returns the triggers f selects, oldest first.
	ListTriggers(ctx context.Context, f TriggerFilter) ([]Trigger, error)
	// UpdateTrigger replaces the trigger if Versions match (ErrConflict
	// otherwise) and returns it with Version increased.
	UpdateTrigger(ctx context.Context, t Trigger) (Trigger, error)
	// DeleteTrigger deletes the trigger; ErrNotFound if absent.
	DeleteTrigger(ctx context.Context, tenantID, id string) error
}
