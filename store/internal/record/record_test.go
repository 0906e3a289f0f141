package record

import (
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// TestReach checks the three reach rules on the cases that tell them
// apart: another tenant, any tenant (""), and an id that a key collision
// brought in.
func TestReach(t *testing.T) {
	stored := Fields{TenantID: "t1", ID: "x"}
	cases := []struct {
		tenantID, id          string
		inTenant, orAny, any_ bool
	}{
		{"t1", "x", true, true, true},
		{"t2", "x", false, false, true},
		{"", "x", false, true, true},
		{"t1", "y", false, false, false},
		{"", "y", false, false, false},
	}
	for _, c := range cases {
		if got := InTenant(stored, c.tenantID, c.id); got != c.inTenant {
			t.Errorf("InTenant(%q, %q) = %v, want %v", c.tenantID, c.id, got, c.inTenant)
		}
		if got := InTenantOrAny(stored, c.tenantID, c.id); got != c.orAny {
			t.Errorf("InTenantOrAny(%q, %q) = %v, want %v", c.tenantID, c.id, got, c.orAny)
		}
		if got := AnyTenant(stored, c.tenantID, c.id); got != c.any_ {
			t.Errorf("AnyTenant(%q, %q) = %v, want %v", c.tenantID, c.id, got, c.any_)
		}
	}
}

// TestFieldsPointIntoTheRecord checks that each accessor reads the
// record's fields and that Version points into the record, so that an
// update's increase lands in what it stores.
func TestFieldsPointIntoTheRecord(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	ac := store.Account{TenantID: "t", ID: "a", CreatedAt: at, Version: 1}
	ag := store.Agent{TenantID: "t", ID: "a", CreatedAt: at, Version: 1}
	tr := store.Trigger{TenantID: "t", ID: "a", CreatedAt: at, Version: 1}
	h := store.Hook{TenantID: "t", ID: "a", CreatedAt: at, Version: 1}
	r := store.Run{TenantID: "t", ID: "a", CreatedAt: at, Version: 1}
	for name, c := range map[string]struct {
		f       Fields
		version func() int64
	}{
		"account": {OfAccount(&ac), func() int64 { return ac.Version }},
		"agent":   {OfAgent(&ag), func() int64 { return ag.Version }},
		"trigger": {OfTrigger(&tr), func() int64 { return tr.Version }},
		"hook":    {OfHook(&h), func() int64 { return h.Version }},
		"run":     {OfRun(&r), func() int64 { return r.Version }},
	} {
		if c.f.TenantID != "t" || c.f.ID != "a" || !c.f.Created.Equal(at) {
			t.Errorf("%s: fields %+v", name, c.f)
		}
		*c.f.Version++
		if got := c.version(); got != 2 {
			t.Errorf("%s: Version after an increase through Fields = %d, want 2", name, got)
		}
	}
}
