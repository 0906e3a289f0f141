// Package store defines what triggerd persists and the errors its backends
// return. Two backends implement it: boltstore (an embedded file under the
// data dir, for a single process) and redisstore (Redis, shared by several
// triggerd processes). The conformance suite in storetest runs against both.
//
// The store never sees a token in clear: accounts hold a sealed blob that
// only the accounts package can open.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors that callers decide on.
var (
	// ErrNotFound is returned for a record that does not exist (or, for a
	// flow state, has expired or was already taken).
	ErrNotFound = errors.New("store: not found")
	// ErrConflict is returned when a create finds the record already there,
	// or a compare-and-set finds another version.
	ErrConflict = errors.New("store: conflict")
	// ErrLastAPIKey is returned by DeleteAPIKey for the tenant's only
	// remaining key, which it keeps.
	ErrLastAPIKey = errors.New("store: the tenant's only API key")
)

// Tenant is an isolated customer of the service. Everything else belongs
// to exactly one tenant.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// APIKey authenticates management API calls for its tenant. Only a hash of
// the key is stored.
type APIKey struct {
	// ID is a short public identifier (shown in listings, never enough to
	// authenticate).
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// Hash is SHA-256 of the whole key; keys are 256-bit random values, so
	// a fast hash is enough.
	Hash      [32]byte  `json:"hash"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// AccountStatus is the state of a connected account.
type AccountStatus string

// Account states.
const (
	StatusActive      AccountStatus = "active"
	StatusNeedsReauth AccountStatus = "needs_reauth"
	StatusRemoved     AccountStatus = "removed"
)

// Account is a connected external account.
type Account struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// Connector is "codehost", "deploy" or "analytics".
	Connector string `json:"connector"`
	// ExternalID identifies the account at the provider (GitHub numeric
	// user id, Vercel user or team id, Google subject); connecting the same
	// external account again updates this record.
	ExternalID string `json:"external_id"`
	// Login is the human name at the provider (login, team slug, e-mail).
	Login  string        `json:"login"`
	Scopes []string      `json:"scopes"`
	Status AccountStatus `json:"status"`
	// StatusReason says why the account is not active.
	StatusReason string `json:"status_reason,omitempty"`
	// Metadata holds provider details (Vercel team_id and configuration
	// id, visible analytics accounts, ...). No secrets.
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	RemovedAt time.Time         `json:"removed_at,omitzero"`
	// SealedToken is the encrypted token set; nil once removed.
	SealedToken []byte `json:"sealed_token,omitempty"`
	// TokenExpiry is the access token's expiry (zero: does not expire), kept
	// in clear so refreshes can be scheduled without opening the seal.
	TokenExpiry time.Time `json:"token_expiry,omitzero"`
	// Version increases with every write; UpdateAccount compares it.
	Version int64 `json:"version"`
}

// Validate reports the first identifier an account to be stored lacks.
func (a Account) Validate() error {
	switch {
	case a.ID == "":
		return errors.New("empty id")
	case a.TenantID == "":
		return errors.New("empty tenant id")
	case a.Connector == "":
		return errors.New("empty connector")
	case a.ExternalID == "":
		return errors.New("empty external id")
	}
	return nil
}

// ForCreate returns a as CreateAccount stores it: Version 1, a zero
// CreatedAt set to now, a zero UpdatedAt set to CreatedAt.
func (a Account) ForCreate(now time.Time) Account {
	Stamp(&a.CreatedAt, &a.UpdatedAt, now)
	a.Version = 1
	return a
}

// FlowState is the server side of one OAuth connect flow, bound to the
// tenant that started it. It is single-use and short-lived.
type FlowState struct {
	// State is the random value sent as the OAuth "state" parameter.
	State     string `json:"state"`
	TenantID  string `json:"tenant_id"`
	Connector string `json:"connector"`
	// SealedVerifier is the PKCE code verifier, sealed like tokens.
	SealedVerifier []byte `json:"sealed_verifier,omitempty"`
	// ReturnTo is where the user goes after the callback, if anywhere.
	ReturnTo  string    `json:"return_to,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Tenants stores tenants and their API keys.
type Tenants interface {
	// CreateTenant stores a new tenant; ErrConflict if the id exists.
	CreateTenant(ctx context.Context, t Tenant) error
	GetTenant(ctx context.Context, id string) (Tenant, error)
	ListTenants(ctx context.Context) ([]Tenant, error)
	// CreateAPIKey stores a key's hash; ErrConflict if the id or hash exists.
	CreateAPIKey(ctx context.Context, k APIKey) error
	// APIKeyByHash finds the key with this hash, or ErrNotFound.
	APIKeyByHash(ctx context.Context, hash [32]byte) (APIKey, error)
	// ListAPIKeys returns the tenant's keys, oldest first (by CreatedAt,
	// then id).
	ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error)
	// DeleteAPIKey deletes the tenant's key with this id, and with it the
	// hash that found it, in one step: the key authenticates nothing once
	// it returns. ErrNotFound for an unknown id or another tenant's key.
	// It refuses to delete the tenant's only remaining key, with
	// ErrLastAPIKey, in the same step as the delete (the key is counted
	// with the others atomically), so that deletes of a tenant's last two
	// keys at once, from any number of processes sharing the store, leave
	// one of them. ErrNotFound wins over ErrLastAPIKey.
	DeleteAPIKey(ctx context.Context, tenantID, id string) error
}

// Accounts stores connected accounts.
type Accounts interface {
	// CreateAccount stores a new account with Version 1; ErrConflict if its
	// id, or its (tenant, connector, external id), is taken.
	CreateAccount(ctx context.Context, a Account) (Account, error)
	// GetAccount returns the tenant's account, or ErrNotFound (also for
	// another tenant's account).
	GetAccount(ctx context.Context, tenantID, id string) (Account, error)
	// FindAccount returns the tenant's account for an external account of a
	// connector, or ErrNotFound.
	FindAccount(ctx context.Context, tenantID, connector, externalID string) (Account, error)
	// ListAccounts returns the tenant's accounts, oldest first.
	ListAccounts(ctx context.Context, tenantID string) ([]Account, error)
	// UpdateAccount replaces the account if its stored Version equals
	// a.Version, and returns it with Version increased; ErrConflict if
	// another write came first, ErrNotFound if it does not exist.
	UpdateAccount(ctx context.Context, a Account) (Account, error)
}

// FlowStates stores OAuth flow states.
type FlowStates interface {
	// PutFlowState stores a state until its ExpiresAt.
	PutFlowState(ctx context.Context, f FlowState) error
	// TakeFlowState returns and deletes the state atomically: a second take
	// of the same state, or a take after it expired, is ErrNotFound.
	TakeFlowState(ctx context.Context, state string) (FlowState, error)
}

// Locker provides short leases shared by every process using the store, so
// that work such as a token refresh happens once.
type Locker interface {
	// TryLock takes the lease named key for ttl. It returns held false,
	// without error, when another holder has it. release gives it back
	// early; it only releases this holder's lease.
	TryLock(ctx context.Context, key string, ttl time.Duration) (release func(), held bool, err error)
}

// RateLimit is a provider's last reported request budget for one key
// (an account and a rate-limit resource).
type RateLimit struct {
	Limit     int       `json:"limit"`
	Remaining int       `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

// RateLimits keeps providers' request budgets so that every process using
// the store sees one budget per account, as the provider counts it.
type RateLimits interface {
	// GetRateLimit returns the budget for key; ok is false when none is
	// known or it has passed its Reset.
	GetRateLimit(ctx context.Context, key string) (rl RateLimit, ok bool, err error)
	// PutRateLimit records a budget. Answers arrive out of order, so of two
	// budgets with the same Reset the lower Remaining is kept; a later
	// Reset replaces an earlier one; an earlier Reset is ignored.
	PutRateLimit(ctx context.Context, key string, rl RateLimit) error
}

// MergeRateLimit applies PutRateLimit's rule: it returns what to keep when
// next arrives while prev (ok: known) is stored.
func MergeRateLimit(prev RateLimit, ok bool, next RateLimit) RateLimit {
	switch {
	case !ok || next.Reset.After(prev.Reset):
		return next
	case next.Reset.Before(prev.Reset):
		return prev
	case next.Remaining < prev.Remaining:
		return next
	}
	return prev
}

// Store is everything a backend provides.
type Store interface {
	Tenants
	Accounts
	FlowStates
	Locker
	RateLimits
	Agents
	Triggers
	Hooks
	Runs
	Events
	Cursors
	// Close releases the backend's resources.
	Close() error
}
