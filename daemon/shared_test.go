package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
)

// The shared webhook endpoints belong to the oldest tenant named default;
// without one, to no tenant.
func TestSharedTenantIsTheDefaultOne(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if id, err := sharedTenant(ctx, st, zerolog.Nop()); err != nil || id != "" {
		t.Fatalf("no tenant: %q, %v; want none", id, err)
	}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tn := range []store.Tenant{
		{ID: "a-acme", Name: "acme", CreatedAt: t0},
		{ID: "b-default-later", Name: "default", CreatedAt: t0.Add(2 * time.Hour)},
		{ID: "c-default", Name: "default", CreatedAt: t0.Add(time.Hour)},
	} {
		if err := st.CreateTenant(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	if id, err := sharedTenant(ctx, st, zerolog.Nop()); err != nil || id != "c-default" {
		t.Fatalf("sharedTenant = %q, %v; want c-default, the oldest tenant named default", id, err)
	}
}

// An agent URL refused as private says which flag lets it through.
func TestPrivateAgentURLNamesTheFlag(t *testing.T) {
	err := checkAgentURL("http://127.0.0.1:9000/runs", false)
	if err == nil || !strings.Contains(err.Error(), "--allow-private-agent-urls") {
		t.Fatalf("err = %v, want it to name --allow-private-agent-urls", err)
	}
	if err := checkAgentURL("http://127.0.0.1:9000/runs", true); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	if err := checkAgentURL("ftp://agent.example.com", false); err == nil || strings.Contains(err.Error(), "--allow-private") {
		t.Fatalf("a bad scheme: %v, want an error that is not about private addresses", err)
	}
}
