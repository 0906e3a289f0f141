package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RunStatus is where a run is.
type RunStatus string

// Run states. A run goes claimed → started → succeeded or failed; a
// claim whose ClaimedUntil has passed may be taken over.
const (
	RunClaimed   RunStatus = "claimed"
	RunStarted   RunStatus = "started"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
)

// StepStatus is where one pipeline step of a run is.
type StepStatus string

// Step states.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepSucceeded StepStatus = "succeeded"
	StepFailed    StepStatus = "failed"
	// StepInterrupted: the worker stopped while the step ran; it may or
	// may not have taken effect upstream and is not run again.
	StepInterrupted StepStatus = "interrupted"
	// StepSkipped: an earlier step failed.
	StepSkipped StepStatus = "skipped"
	// StepWaiting: the provider refused the step for a rate limit or
	// quota, so nothing took effect; it runs again at RetryAt.
	StepWaiting StepStatus = "waiting"
)

// RunError is a typed failure of a run or step.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StepRun is one pipeline step of a run.
type StepRun struct {
	Name       string          `json:"name"`
	Step       string          `json:"step"`
	Account    string          `json:"account"`
	Status     StepStatus      `json:"status"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      *RunError       `json:"error,omitempty"`
	StartedAt  time.Time       `json:"started_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	// Waits counts the times a rate limit deferred the step; RetryAt is
	// when a waiting step runs again.
	Waits   int       `json:"waits,omitempty"`
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// Run is one start of an agent for one event and trigger. Its ID is
// derived from the event id and the trigger id, so the same pair never
// makes two runs.
type Run struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenant_id"`
	EventID   string `json:"event_id"`
	TriggerID string `json:"trigger_id"`
	AgentID   string `json:"agent_id"`
	Kind      string `json:"kind"`
	// Summary is the event's summary (triggers.Event.Summary): outside
	// text, for lists.
	Summary string `json:"summary,omitempty"`
	// Replay is set for runs started by an operator's replay.
	Replay bool      `json:"replay,omitempty"`
	Status RunStatus `json:"status"`
	// Attempts counts the workers that claimed the run.
	Attempts     int       `json:"attempts"`
	ClaimedBy    string    `json:"claimed_by,omitempty"`
	ClaimedUntil time.Time `json:"claimed_until,omitzero"`
	// Delivery is how the agent is started; DeliveryStatus says how far
	// that got ("published", "delivered", "dead_lettered").
	Delivery       AgentDelivery `json:"delivery"`
	DeliveryStatus string        `json:"delivery_status,omitempty"`
	// DeliveryError is why the last attempt to reach an HTTP agent failed.
	DeliveryError string          `json:"delivery_error,omitempty"`
	Steps         []StepRun       `json:"steps,omitempty"`
	Error         *RunError       `json:"error,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	StartedAt     time.Time       `json:"started_at,omitzero"`
	FinishedAt    time.Time       `json:"finished_at,omitzero"`
	UpdatedAt     time.Time       `json:"updated_at"`
	Version       int64           `json:"version"`
}

// Validate reports the first identifier a run to be stored lacks.
func (r Run) Validate() error {
	return requireIDs("id", r.ID, "tenant id", r.TenantID)
}

// ForCreate returns r as CreateRun stores it: Version 1, a zero
// CreatedAt set to now, a zero UpdatedAt set to CreatedAt.
func (r Run) ForCreate(now time.Time) Run {
	Stamp(&r.CreatedAt, &r.UpdatedAt, now)
	r.Version = 1
	return r
}

// FinishedBefore reports whether r was created and finished before t: its
// Status is RunSucceeded or RunFailed, and its FinishedAt (its UpdatedAt
// when FinishedAt is zero) and CreatedAt are before t. These are the runs
// PruneRuns(t) deletes.
func (r Run) FinishedBefore(t time.Time) bool {
	if r.Status != RunSucceeded && r.Status != RunFailed {
		return false
	}
	finished := r.FinishedAt
	if finished.IsZero() {
		finished = r.UpdatedAt
	}
	return finished.Before(t) && r.CreatedAt.Before(t)
}

// RunFilter narrows ListRuns; empty fields do not narrow. Runs come newest
// first (by CreatedAt, then id), at most Limit (0: 100), and only those
// after Before in that order when it is set (the cursor of the last run
// of the page before).
type RunFilter struct {
	TenantID  string
	TriggerID string
	AgentID   string
	EventID   string
	Status    RunStatus
	Before    RunCursor
	Limit     int
}

// Match reports whether f selects r (its Limit aside).
func (f RunFilter) Match(r Run) bool {
	return (f.TenantID == "" || r.TenantID == f.TenantID) &&
		(f.TriggerID == "" || r.TriggerID == f.TriggerID) &&
		(f.AgentID == "" || r.AgentID == f.AgentID) &&
		(f.EventID == "" || r.EventID == f.EventID) &&
		(f.Status == "" || r.Status == f.Status) &&
		(f.Before.IsZero() || f.Before.Precedes(r))
}

// RunCursor marks a place in the newest-first order of runs: a run's
// CreatedAt and id.
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}

// CursorOf returns the cursor just at r: a page that ends with r goes on
// with the runs after CursorOf(r).
func CursorOf(r Run) RunCursor { return RunCursor{CreatedAt: r.CreatedAt, ID: r.ID} }

// IsZero reports whether c marks no place (the start).
func (c RunCursor) IsZero() bool { return c.ID == "" && c.CreatedAt.IsZero() }

// Precedes reports whether r comes after c, newest first: created
// before c, or at the same time with a lesser id.
func (c RunCursor) Precedes(r Run) bool {
	switch r.CreatedAt.Compare(c.CreatedAt) {
	case -1:
		return true
	case 0:
		return r.ID < c.ID
	}
	return false
}

// String returns the cursor as a page's link carries it: the Unix
// nanoseconds, "_", the id.
func (c RunCursor) String() string {
	if c.IsZero() {
		return ""
	}
	return strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "_" + c.ID
}

// ParseRunCursor parses what RunCursor.String returns ("" is the zero
// cursor).
func ParseRunCursor(s string) (RunCursor, error) {
	if s == "" {
		return RunCursor{}, nil
	}
	ns, id, ok := strings.Cut(s, "_")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return RunCursor{}, fmt.Errorf("run cursor %q: want the Unix nanoseconds, '_' and a run id, as a page's Older link gives it", s)
	}
	return RunCursor{CreatedAt: time.Unix(0, n), ID: id}, nil
}

// Runs stores runs.
type Runs interface {
	// CreateRun stores a new run with Version 1; ErrConflict if the id
	// exists (the run was already claimed by someone).
	CreateRun(ctx context.Context, r Run) (Run, error)
	// GetRun returns the tenant's run ("" for any tenant's) or ErrNotFound.
	GetRun(ctx context.Context, tenantID, id string) (Run, error)
	// UpdateRun replaces the run if Versions match (ErrConflict otherwise)
	// and returns it with Version increased.
	UpdateRun(ctx context.Context, r Run) (Run, error)
	// ListRuns returns the runs f selects, newest first.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// PruneRuns deletes the runs of every tenant that finished before
	// before (see Run.FinishedBefore), with their index entries, oldest
	// CreatedAt first, at most limit (DefaultPruneLimit if not positive),
	// and returns how many it deleted. Runs that have not finished are
	// never deleted; a run updated while it is pruned is left for a later
	// call.
	PruneRuns(ctx context.Context, before time.Time, limit int) (int, error)
}
