// Package store defines what triggerd persists and the errors its backends
// return. Two backends implement it: boltstore (an embedded file under the
// data dir, for a single process) and redisstore (Redis, shared by several
// triggerd processes). The conformance suite in storetest runs against both.
//
// The store never sees a token in clear: accounts hold a sealed blob that
// only the accounts package can open.
package store

import "errors"

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
	// ErrNameTaken is matched by CreateAgentNamed's *NameTakenError.
	ErrNameTaken = errors.New("store: name taken")
)

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
	Deliveries
	Activity
	// Close releases the backend's resources.
	Close() error
}
