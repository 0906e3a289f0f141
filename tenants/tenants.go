// Package tenants creates tenants and their API keys and authenticates
// management API calls. Keys are 256-bit random values shown once; only
// their SHA-256 is stored. A tenant lists, adds and revokes its own keys,
// so that a leaked key can be replaced and stops working.
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

// Errors that callers decide on.
var (
	// ErrInvalidKey is returned for a key that is malformed or unknown.
	ErrInvalidKey = errors.New("tenants: invalid API key")
	// ErrInvalidName is wrapped by the error for a tenant or key name that
	// is empty or too long.
	ErrInvalidName = errors.New("tenants: invalid name")
	// ErrKeyNotFound is returned for a key id that is not one of the
	// tenant's keys.
	ErrKeyNotFound = errors.New("tenants: no such API key")
	// ErrLastKey is returned by Revoke for the tenant's only key.
	ErrLastKey = errors.New("tenants: this is the tenant's only API key; revoking it would lock the tenant out: create a new key first, switch to it, then revoke this one")
)

// maxNameLen bounds tenant and key names.
const maxNameLen = 100

// Key is what may be shown of an API key after its creation: neither the
// key nor its hash.
type Key struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

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
	if name == "" || len(name) > maxNameLen {
		return store.Tenant{}, "", fmt.Errorf("%w: a tenant needs a name of 1 to %d characters", ErrInvalidName, maxNameLen)
	}
	t := store.Tenant{ID: "ten_" + uuid.NewString(), Name: name, CreatedAt: s.now().UTC()}
	if err := s.store.CreateTenant(ctx, t); err != nil {
		return store.Tenant{}, "", fmt.Errorf("tenants: create %q: %w", name, err)
	}
	_, key, err := s.CreateKey(ctx, t.ID, "initial")
	if err != nil {
		return store.Tenant{}, "", err
	}
	return t, key, nil
}

// CreateKey adds an API key named name (1 to 100 characters, to tell it
// from the tenant's others) to a tenant, and returns what may be shown of
// it later and the key itself, which is never shown again.
func (s *Service) CreateKey(ctx context.Context, tenantID, name string) (Key, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxNameLen {
		return Key{}, "", fmt.Errorf("%w: a key needs a name of 1 to %d characters, to tell it from the tenant's other keys", ErrInvalidName, maxNameLen)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, "", err
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
		return Key{}, "", fmt.Errorf("tenants: store key: %w", err)
	}
	return keyOf(k), key, nil
}

// keyOf is what may be shown of k.
func keyOf(k store.APIKey) Key {
	return Key{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt}
}

// Keys returns the tenant's keys, oldest first, as they may be shown.
func (s *Service) Keys(ctx context.Context, tenantID string) ([]Key, error) {
	ks, err := s.store.ListAPIKeys(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("tenants: list keys: %w", err)
	}
	out := make([]Key, len(ks))
	for i, k := range ks {
		out[i] = keyOf(k)
	}
	return out, nil
}

// Revoke deletes one of the tenant's keys: from its return on, the key
// authenticates nothing. ErrKeyNotFound if keyID is not the tenant's.
//
// The tenant's only key is refused with ErrLastKey: without a key the
// tenant is locked out for good, since only a key of its own can make it
// a new one (the admin key makes tenants, not keys of existing ones). A
// rotation creates the new key first, moves clients to it, then revokes
// the old one. The store counts the tenant's keys in the same step as the
// delete (store.ErrLastAPIKey), so revokes of a tenant's last two keys at
// once leave one of them, whether they run in one process or in several
// sharing the store.
func (s *Service) Revoke(ctx context.Context, tenantID, keyID string) error {
	err := s.store.DeleteAPIKey(ctx, tenantID, keyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrKeyNotFound
	case errors.Is(err, store.ErrLastAPIKey):
		return ErrLastKey
	case err != nil:
		return fmt.Errorf("tenants: revoke key %s: %w", keyID, err)
	}
	return nil
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
//
// On a store that provides leases (store.Locker: both of triggerd's), it
// looks and creates under the lease setupLease: processes started together
// on one shared store, each with a data dir of its own (the members of a
// cluster), would otherwise each find no tenant and each create a default
// one. The others wait until the tenant exists, and write no key file.
func (s *Service) EnsureDefault(ctx context.Context, dataDir string) (string, bool, error) {
	path := filepath.Join(dataDir, DefaultKeyFile)
	if l, ok := s.store.(store.Locker); ok {
		release, err := s.setupLease(ctx, l)
		if err != nil {
			return "", false, err
		}
		defer release()
	}
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

// setupLeaseKey names the lease EnsureDefault holds while it looks for
// tenants and creates the default one; setupLeaseTTL is its lease, long
// past the few store writes it covers, and how long another process waits
// for a holder that died.
const (
	setupLeaseKey = "tenants:default-setup"
	setupLeaseTTL = 30 * time.Second
	setupPoll     = 100 * time.Millisecond
)

// setupLease takes the setup lease, or returns once a tenant exists
// (another process made it; release is then a no-op). It gives up after
// twice setupLeaseTTL.
func (s *Service) setupLease(ctx context.Context, l store.Locker) (release func(), err error) {
	deadline := time.Now().Add(2 * setupLeaseTTL)
	for {
		release, held, err := l.TryLock(ctx, setupLeaseKey, setupLeaseTTL)
		if err != nil {
			return nil, fmt.Errorf("tenants: take the lease for the default tenant's creation: %w", err)
		}
		if held {
			return release, nil
		}
		ts, err := s.store.ListTenants(ctx)
		if err != nil {
			return nil, fmt.Errorf("tenants: list: %w", err)
		}
		if len(ts) > 0 {
			return func() {}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("tenants: another process has held the lease %q for creating the default tenant for %s and no tenant appeared: see that process's log for why it could not create it", setupLeaseKey, 2*setupLeaseTTL)
		}
		t := time.NewTimer(setupPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("tenants: waiting for another process to create the default tenant: %w", ctx.Err())
		case <-t.C:
		}
	}
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
