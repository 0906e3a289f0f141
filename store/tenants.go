package store

import (
	"context"
	"time"
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
