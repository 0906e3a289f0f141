package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// This file holds what the dispatcher persists: agents, triggers, the
// webhooks registered for them, runs, the outcome of every event for every
// candidate trigger, and polling cursors. Like accounts, every record that
// can be changed carries a Version that updates compare.

// AgentDelivery says how an agent is started.
type AgentDelivery string

// Agent deliveries.
const (
	// DeliverNATS publishes runs to agents.<agent-id>.runs on JetStream.
	DeliverNATS AgentDelivery = "nats"
	// DeliverHTTP POSTs runs to the agent's URL, signed the Standard
	// Webhooks way.
	DeliverHTTP AgentDelivery = "http"
)

// PipelineStep is one tool step an agent's runs execute, in order.
type PipelineStep struct {
	// Name identifies the step's output for later steps' templates
	// ({{ .steps.<name>.output... }}); unique within the agent.
	Name string `json:"name"`
	// Step is the step id ("codehost.create_comment").
	Step string `json:"step"`
	// Account is the connected account the step runs as.
	Account string `json:"account"`
	// Input is the step's input with string values that may be templates.
	Input json.RawMessage `json:"input,omitempty"`
}

// Agent is something triggers start.
type Agent struct {
	ID       string        `json:"id"`
	TenantID string        `json:"tenant_id"`
	Name     string        `json:"name"`
	Delivery AgentDelivery `json:"delivery"`
	// URL is where DeliverHTTP runs are POSTed.
	URL string `json:"url,omitempty"`
	// SealedSecret is the Standard Webhooks signing secret of an HTTP
	// agent, sealed like tokens.
	SealedSecret []byte `json:"sealed_secret,omitempty"`
	// NATSPasswordHash is the SHA-256 of a NATS agent's password, with
	// which it connects to the embedded NATS as itself; NATSPasswordSetAt
	// is when that password was made. Both are unset for HTTP agents and
	// for NATS agents made before agents had passwords.
	NATSPasswordHash  []byte         `json:"nats_password_hash,omitempty"`
	NATSPasswordSetAt time.Time      `json:"nats_password_set_at,omitzero"`
	Steps             []PipelineStep `json:"steps,omitempty"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
	Version           int64          `json:"version"`
}

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

// HookScope says what a hook is registered on.
type HookScope string

// Hook scopes.
const (
	// HookRepository: a code-hosting repository hook; Target is
	// "owner/repo".
	HookRepository HookScope = "repository"
	// HookOrganization: a code-hosting organisation hook; Target is the
	// organisation login.
	HookOrganization HookScope = "organization"
	// HookAgentEndpoint: a deployment-platform endpoint the user pastes
	// into the project's webhook settings; Target is the agent id and
	// nothing is registered upstream.
	HookAgentEndpoint HookScope = "agent"
)

// HookStatus is the last known state of a hook upstream.
type HookStatus string

// Hook states.
const (
	HookActive HookStatus = "active"
	// HookFailing: the last registration or repair failed; StatusReason
	// says why.
	HookFailing HookStatus = "failing"
)

// Hook is a webhook triggerd registered (or, for deployment endpoints,
// offers) so that events reach it at /webhooks/<connector>/<id>.
type Hook struct {
	// ID is triggerd's id, the last segment of the hook's URL.
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"`
	AccountID string    `json:"account_id,omitempty"`
	Connector string    `json:"connector"`
	Scope     HookScope `json:"scope"`
	Target    string    `json:"target"`
	// ExternalID is the provider's hook id; 0 until registered.
	ExternalID int64 `json:"external_id,omitempty"`
	// Events are the provider events the hook is registered for.
	Events []string `json:"events,omitempty"`
	// SealedSecret is the hook's signing secret, sealed like tokens: one
	// triggerd generated, or, once SecretsSetAt is set, the secrets the
	// provider issued, one per line (a deployment endpoint's: Vercel
	// shows each webhook's secret once and signs with it).
	SealedSecret []byte `json:"sealed_secret,omitempty"`
	// SecretsSetAt is when the user set the provider's secrets; zero while
	// the hook signs with the secret triggerd generated.
	SecretsSetAt time.Time  `json:"secrets_set_at,omitzero"`
	Status       HookStatus `json:"status"`
	StatusReason string     `json:"status_reason,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	// CheckedAt is when a reconcile last compared the hook with upstream.
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// HealedThrough is how far the provider's delivery attempts to the
	// hook have been settled: redelivered successfully, or given up on
	// (registry/heal.go). HealedAt is when they were last read.
	HealedThrough time.Time `json:"healed_through,omitzero"`
	HealedAt      time.Time `json:"healed_at,omitzero"`
	Version       int64     `json:"version"`
}

// HookKey identifies the one hook per tenant, account and target.
type HookKey struct {
	TenantID  string
	AccountID string
	Connector string
	Scope     HookScope
	Target    string
}

// Key returns h's HookKey.
func (h Hook) Key() HookKey {
	return HookKey{TenantID: h.TenantID, AccountID: h.AccountID, Connector: h.Connector, Scope: h.Scope, Target: h.Target}
}

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
// first (by CreatedAt, then id), at most Limit (0: 100).
type RunFilter struct {
	TenantID  string
	TriggerID string
	AgentID   string
	EventID   string
	Status    RunStatus
	Limit     int
}

// Match reports whether f selects r (its Limit aside).
func (f RunFilter) Match(r Run) bool {
	return (f.TenantID == "" || r.TenantID == f.TenantID) &&
		(f.TriggerID == "" || r.TriggerID == f.TriggerID) &&
		(f.AgentID == "" || r.AgentID == f.AgentID) &&
		(f.EventID == "" || r.EventID == f.EventID) &&
		(f.Status == "" || r.Status == f.Status)
}

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
	// Seq is the event's sequence in the events stream, to read it back.
	Seq        uint64    `json:"seq,omitempty"`
	DeliveryID string    `json:"delivery_id"`
	Repository string    `json:"repository,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	// DispatchedAt is when the outcomes were (last) decided.
	DispatchedAt time.Time `json:"dispatched_at"`
	Outcomes     []Outcome `json:"outcomes"`
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

// Cursor is a small piece of state a poller keeps between polls (an ETag,
// the newest item seen).
type Cursor struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Version is 0 for a cursor not stored yet.
	Version int64 `json:"version"`
}

// Agents stores agents.
type Agents interface {
	// CreateAgent stores a new agent with Version 1; ErrConflict if the id
	// exists.
	CreateAgent(ctx context.Context, a Agent) (Agent, error)
	// GetAgent returns the tenant's agent or ErrNotFound (also for another
	// tenant's).
	GetAgent(ctx context.Context, tenantID, id string) (Agent, error)
	// FindAgent returns the agent with id, whatever its tenant, or
	// ErrNotFound: an agent connecting to NATS names only itself.
	FindAgent(ctx context.Context, id string) (Agent, error)
	// ListAgents returns the tenant's agents, oldest first.
	ListAgents(ctx context.Context, tenantID string) ([]Agent, error)
	// UpdateAgent replaces the agent if Versions match (ErrConflict
	// otherwise) and returns it with Version increased.
	UpdateAgent(ctx context.Context, a Agent) (Agent, error)
	// DeleteAgent deletes the agent; ErrNotFound if absent.
	DeleteAgent(ctx context.Context, tenantID, id string) error
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

// Hooks stores registered webhooks.
type Hooks interface {
	// CreateHook stores a new hook with Version 1; ErrConflict if its id
	// or its Key is taken.
	CreateHook(ctx context.Context, h Hook) (Hook, error)
	// GetHook returns a hook by id, whatever its tenant (ingest knows only
	// the id in the URL), or ErrNotFound.
	GetHook(ctx context.Context, id string) (Hook, error)
	// FindHook returns the hook with this key, or ErrNotFound.
	FindHook(ctx context.Context, k HookKey) (Hook, error)
	// ListHooks returns the tenant's hooks ("" for every tenant's), oldest
	// first.
	ListHooks(ctx context.Context, tenantID string) ([]Hook, error)
	// UpdateHook replaces the hook if Versions match (ErrConflict
	// otherwise) and returns it with Version increased. The Key cannot
	// change.
	UpdateHook(ctx context.Context, h Hook) (Hook, error)
	// DeleteHook deletes the hook, and its activity; ErrNotFound if
	// absent.
	DeleteHook(ctx context.Context, id string) error
	// AddHookActivity merges a into the activity of hook id
	// (HookActivity.Add), atomically for concurrent callers (several
	// processes flush theirs). ErrNotFound if the hook is absent, so that
	// nothing outlives it.
	AddHookActivity(ctx context.Context, id string, a HookActivity) error
	// GetHookActivity returns the activity of hook id: a zero HookActivity
	// when none was added (or the hook is absent).
	GetHookActivity(ctx context.Context, id string) (HookActivity, error)
}

// HookActivity is what reached a hook lately, for its owner to read (why
// did nothing start?): when a delivery was last taken, and how many were
// refused since the hook was created, with the last refusal.
type HookActivity struct {
	LastAcceptedAt time.Time    `json:"last_accepted_at,omitzero"`
	Refused        int64        `json:"refused,omitempty"`
	LastRefusal    *HookRefusal `json:"last_refusal,omitempty"`
}

// Add merges b into a as AddHookActivity does: the later LastAcceptedAt
// wins (a zero one is none), Refused adds up, and b's LastRefusal replaces
// a's if a has none or b's At is later (a nil one changes nothing).
func (a *HookActivity) Add(b HookActivity) {
	if b.LastAcceptedAt.After(a.LastAcceptedAt) {
		a.LastAcceptedAt = b.LastAcceptedAt
	}
	a.Refused += b.Refused
	if b.LastRefusal != nil && (a.LastRefusal == nil || b.LastRefusal.At.After(a.LastRefusal.At)) {
		r := *b.LastRefusal
		a.LastRefusal = &r
	}
}

// HookRefusal is one refused delivery: when, and the answer it was given.
type HookRefusal struct {
	At      time.Time `json:"at"`
	Status  int       `json:"status"`
	Code    string    `json:"code"`
	Message string    `json:"message"`
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

// Cursors stores pollers' cursors.
type Cursors interface {
	// GetCursor returns the cursor, or one with Version 0 and no Value
	// when none is stored.
	GetCursor(ctx context.Context, key string) (Cursor, error)
	// PutCursor stores c if the stored Version equals c.Version (0: none
	// stored), ErrConflict otherwise, and returns it with Version
	// increased.
	PutCursor(ctx context.Context, c Cursor) (Cursor, error)
}

// Helpers the backends share.

// DefaultListLimit is what a zero (or negative) list limit means.
const DefaultListLimit = 100

// ListLimit returns limit, or DefaultListLimit when it is not positive.
func ListLimit(limit int) int {
	if limit <= 0 {
		return DefaultListLimit
	}
	return limit
}

// DefaultPruneLimit is how many records a PruneRuns or PruneEvents with a
// zero (or negative) limit deletes at most.
const DefaultPruneLimit = 1000

// PruneLimit returns limit, or DefaultPruneLimit when it is not positive.
func PruneLimit(limit int) int {
	if limit <= 0 {
		return DefaultPruneLimit
	}
	return limit
}

// RequireIDs reports the first of a record's identifiers that is empty;
// names and values alternate.
func RequireIDs(what string, nameValues ...string) error {
	for i := 0; i+1 < len(nameValues); i += 2 {
		if nameValues[i+1] == "" {
			return fmt.Errorf("%s: empty %s", what, nameValues[i])
		}
	}
	return nil
}

// ValidateHook reports the first identifier a hook to be stored lacks. The
// account is optional: agent endpoints have none.
func ValidateHook(what string, h Hook) error {
	return RequireIDs(what, "id", h.ID, "tenant id", h.TenantID, "connector", h.Connector, "scope", string(h.Scope), "target", h.Target)
}

// Stamp fills a zero created with now and a zero updated with created, as
// records are stored on creation.
func Stamp(created, updated *time.Time, now time.Time) {
	if created.IsZero() {
		*created = now
	}
	if updated.IsZero() {
		*updated = *created
	}
}

// SortOldestFirst sorts xs by creation time, then id, exactly (to the
// nanosecond, whatever the zone).
func SortOldestFirst[T any](xs []T, created func(T) time.Time, id func(T) string) {
	slices.SortStableFunc(xs, func(a, b T) int {
		return cmp.Or(created(a).Compare(created(b)), cmp.Compare(id(a), id(b)))
	})
}
