// Package tenants creates tenants and their API keys and authenticates
// management API calls. Keys are 256-bit random values shown once; only
// their SHA-256 is stored.
package tenants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/triggerd/triggerd/store"
)

// KeyPrefix starts every API key, so a leaked key is recognisable.
const KeyPrefix = "tdk_"

// ErrInvalidKey is returned for a key that is malformed or unknown.
var ErrInvalidKey = errors.New("tenants: invalid API key")

// Service manages tenants and keys.
type Service struct {
	store store.Tenants
	now   func() time.Time
}

// New returns a Service over s; now defaults to time.Now.
func New(s store.Tenants, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: s, now: now}
}

// Create makes a tenant named name and its first API key, which is returned
// once and never stored in clear.
func (s *Service) Create(ctx context.Context, name string) (store.Tenant, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return store.Tenant{}, "", errors.New("tenants: a tenant needs a name of 1 to 100 characters")
	}
	t := store.Tenant{ID: "ten_" + uuid.NewString(), Name: name, CreatedAt: s.now().UTC()}
	if err := s.store.CreateTenant(ctx, t); err != nil {
		return store.Tenant{}, "", fmt.Errorf("tenants: create %q: %w", name, err)
	}
	key, err := s.NewKey(ctx, t.ID, "initial")
	if err != nil {
		return store.Tenant{}, "", err
	}
	return t, key, nil
}

// NewKey adds an API key to a tenant and returns it.
func (s *Service) NewKey(ctx context.Context, tenantID, name string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	key := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	k := store.APIKey{
		ID:        "key_" + uuid.NewString()[:8],
		TenantID:  tenantID,
		Hash:      sha256.Sum256([]byte(key)),
		Name:      name,
		CreatedAt: s.now().UTC(),
	}
	if err := s.store.CreateAPIKey(ctx, k); err != nil {
		return "", fmt.Errorf("tenants: store key: %w", err)
	}
	return key, nil
}

// Authenticate returns the tenant a key belongs to, or ErrInvalidKey.
func (s *Service) Authenticate(ctx context.Context, key string) (string, error) {
	if !strings.HasPrefix(key, KeyPrefix) || len(key) != len(KeyPrefix)+43 {
		return "", ErrInvalidKey
	}
	k, err := s.store.APIKeyByHash(ctx, sha256.Sum256([]byte(key)))
	if errors.Is(err, store.ErrNotFound) {
		return "", ErrInvalidKey
	}
	if err != nil {
		return "", fmt.Errorf("tenants: look up key: %w", err)
	}
	return k.TenantID, nil
}

// DefaultKeyFile is where EnsureDefault writes the default tenant's key.
const DefaultKeyFile = "default_tenant_key"

// DefaultName names the tenant EnsureDefault creates on a fresh
// installation. triggerd gives it the shared webhook endpoints, and the
// sandbox's accounts.
const DefaultName = "default"

// Default returns the id of the oldest tenant named DefaultName, or ""
// when there is none.
func (s *Service) Default(ctx context.Context) (string, error) {
	ts, err := s.store.ListTenants(ctx)
	if err != nil {
		return "", fmt.Errorf("tenants: list: %w", err)
	}
	var found *store.Tenant
	for i := range ts {
		t := &ts[i]
		if t.Name == DefaultName && (found == nil || t.CreatedAt.Before(found.CreatedAt)) {
			found = t
		}
	}
	if found == nil {
		return "", nil
	}
	return found.ID, nil
}

// EnsureDefault creates, on a fresh store, a tenant named DefaultName and
// writes its API key to dataDir/default_tenant_key (mode 0600), so that a
// new installation works without set-up. It does nothing when any tenant
// exists. It returns the key file's path and whether it created the tenant.
func (s *Service) EnsureDefault(ctx context.Context, dataDir string) (string, bool, error) {
	path := filepath.Join(dataDir, DefaultKeyFile)
	existing, err := s.store.ListTenants(ctx)
	if err != nil {
		return "", false, fmt.Errorf("tenants: list: %w", err)
	}
	if len(existing) > 0 {
		return path, false, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", false, err
	}
	// Claim the file first, so two processes starting at once do not both
	// create a default tenant.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		stale, serr := s.staleKeyFile(ctx, path)
		if serr != nil || !stale {
			return path, false, serr
		}
		// A key of a store since replaced (a new Redis, a deleted
		// triggerd.db): without a tenant the installation would refuse
		// every key. The old file is kept beside, not deleted.
		if err := os.Rename(path, path+".stale-"+s.now().UTC().Format("20060102T150405Z")); err != nil {
			return "", false, fmt.Errorf("tenants: set aside the stale %s: %w", path, err)
		}
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if errors.Is(err, fs.ErrExist) {
		return path, false, nil // another process claimed it meanwhile
	}
	if err != nil {
		return "", false, fmt.Errorf("tenants: write %s: %w", path, err)
	}
	defer f.Close()
	_, key, err := s.Create(ctx, DefaultName)
	if err != nil {
		os.Remove(path)
		return "", false, err
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", false, fmt.Errorf("tenants: write %s: %w", path, err)
	}
	return path, true, nil
}

// claimGrace is how long an empty key file is taken for another process's
// claim, between its creating the file and writing the key.
const claimGrace = time.Minute

// staleKeyFile reports whether the key file at path, on a store without
// tenants, holds a key the store does not know (or nothing, for longer
// than claimGrace: a process that died between claim and write).
func (s *Service) staleKeyFile(ctx context.Context, path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("tenants: read %s: %w", path, err)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		st, err := os.Stat(path)
		return err == nil && s.now().Sub(st.ModTime()) > claimGrace, nil
	}
	_, err = s.Authenticate(ctx, key)
	switch {
	case errors.Is(err, ErrInvalidKey):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, nil
}
