package store

import (
	"context"
	"errors"
	"time"
)

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
