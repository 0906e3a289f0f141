package store

import (
	"context"
	"time"
)

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

// Validate reports the first identifier a hook to be stored lacks. The
// account is optional: agent endpoints have none.
func (h Hook) Validate() error {
	return requireIDs("id", h.ID, "tenant id", h.TenantID, "connector", h.Connector, "scope", string(h.Scope), "target", h.Target)
}

// ForCreate returns h as CreateHook stores it: Version 1, a zero
// CreatedAt set to now, a zero UpdatedAt set to CreatedAt.
func (h Hook) ForCreate(now time.Time) Hook {
	Stamp(&h.CreatedAt, &h.UpdatedAt, now)
	h.Version = 1
	return h
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
