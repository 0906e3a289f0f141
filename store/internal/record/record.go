// Package record holds what the two store backends share about the
// versioned records (accounts, agents, triggers, hooks, runs): the common
// fields their generic create, get, list, update and delete work on, and
// the rules for which stored record a request reaches, so that both
// backends answer a get, an update or a delete alike.
package record

import (
	"time"

	"github.com/triggerd/triggerd/store"
)

// Versioned is what a versioned record type provides itself (package
// store defines both methods): the identifiers it must name, and how it
// is stamped on creation.
type Versioned[T any] interface {
	Validate() error
	ForCreate(now time.Time) T
}

// Fields are a versioned record's common fields; Version points into the
// record, for an update to compare and increase it.
type Fields struct {
	TenantID, ID string
	Created      time.Time
	Version      *int64
}

// The Fields of each versioned record type.

func OfAccount(a *store.Account) Fields { return Fields{a.TenantID, a.ID, a.CreatedAt, &a.Version} }
func OfAgent(a *store.Agent) Fields     { return Fields{a.TenantID, a.ID, a.CreatedAt, &a.Version} }
func OfTrigger(t *store.Trigger) Fields { return Fields{t.TenantID, t.ID, t.CreatedAt, &t.Version} }
func OfHook(h *store.Hook) Fields       { return Fields{h.TenantID, h.ID, h.CreatedAt, &h.Version} }
func OfRun(r *store.Run) Fields         { return Fields{r.TenantID, r.ID, r.CreatedAt, &r.Version} }

// A Reach reports whether stored, found at the key of the record a request
// names by tenantID and id, is that record. Ids that contain a backend's
// key separators can make two keys one, so the id is always checked.
type Reach func(stored Fields, tenantID, id string) bool

// InTenant reaches the record only in its tenant (accounts, agents,
// triggers).
func InTenant(f Fields, tenantID, id string) bool { return f.TenantID == tenantID && f.ID == id }

// InTenantOrAny reaches the record in its tenant, or in any tenant for ""
// (runs: the dispatcher reads them by id).
func InTenantOrAny(f Fields, tenantID, id string) bool {
	return f.ID == id && (tenantID == "" || f.TenantID == tenantID)
}

// AnyTenant reaches the record whatever its tenant (hooks: ingest knows
// only the id in the URL; FindAgent: an agent names only itself).
func AnyTenant(f Fields, _, id string) bool { return f.ID == id }
