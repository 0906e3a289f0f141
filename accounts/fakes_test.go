package accounts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
)

// newClock returns the settable clock a test shares between the service,
// the store and the provider.
func newClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// fakeStore is an in-memory store.Accounts, store.FlowStates and
// store.Locker with the contract's semantics: Version compare-and-set,
// single-use flow states that expire, leases that expire.
type fakeStore struct {
	now func() time.Time

	mu          sync.Mutex
	accounts    map[string]store.Account
	flows       map[string]store.FlowState
	leases      map[string]fakeLease
	leaseSeq    int
	failedLocks int
	updates     int
	// failUpdate, when set, is returned by UpdateAccount instead of
	// writing.
	failUpdate error
}

type fakeLease struct {
	owner   int
	expires time.Time
}

func newFakeStore(now func() time.Time) *fakeStore {
	return &fakeStore{
		now:      now,
		accounts: map[string]store.Account{},
		flows:    map[string]store.FlowState{},
		leases:   map[string]fakeLease{},
	}
}

func cloneAccount(a store.Account) store.Account {
	a.Scopes = slices.Clone(a.Scopes)
	a.Metadata = maps.Clone(a.Metadata)
	a.SealedToken = bytes.Clone(a.SealedToken)
	return a
}

func (s *fakeStore) CreateAccount(_ context.Context, a store.Account) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.accounts[a.ID]; ok {
		return store.Account{}, store.ErrConflict
	}
	for _, o := range s.accounts {
		if o.TenantID == a.TenantID && o.Connector == a.Connector && o.ExternalID == a.ExternalID {
			return store.Account{}, store.ErrConflict
		}
	}
	a = cloneAccount(a)
	a.Version = 1
	s.accounts[a.ID] = a
	return cloneAccount(a), nil
}

func (s *fakeStore) GetAccount(_ context.Context, tenantID, id string) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[id]
	if !ok || a.TenantID != tenantID {
		return store.Account{}, store.ErrNotFound
	}
	return cloneAccount(a), nil
}

func (s *fakeStore) FindAccount(_ context.Context, tenantID, connector, externalID string) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.accounts {
		if a.TenantID == tenantID && a.Connector == connector && a.ExternalID == externalID {
			return cloneAccount(a), nil
		}
	}
	return store.Account{}, store.ErrNotFound
}

func (s *fakeStore) ListAccounts(_ context.Context, tenantID string) ([]store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Account
	for _, a := range s.accounts {
		if a.TenantID == tenantID {
			out = append(out, cloneAccount(a))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (s *fakeStore) UpdateAccount(_ context.Context, a store.Account) (store.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failUpdate != nil {
		return store.Account{}, s.failUpdate
	}
	cur, ok := s.accounts[a.ID]
	if !ok || cur.TenantID != a.TenantID {
		return store.Account{}, store.ErrNotFound
	}
	if cur.Version != a.Version {
		return store.Account{}, store.ErrConflict
	}
	a = cloneAccount(a)
	a.Version++
	s.accounts[a.ID] = a
	s.updates++
	return cloneAccount(a), nil
}

func (s *fakeStore) PutFlowState(_ context.Context, f store.FlowState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.SealedVerifier = bytes.Clone(f.SealedVerifier)
	s.flows[f.State] = f
	return nil
}

func (s *fakeStore) TakeFlowState(_ context.Context, state string) (store.FlowState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.flows[state]
	if !ok {
		return store.FlowState{}, store.ErrNotFound
	}
	delete(s.flows, state)
	if !s.now().Before(f.ExpiresAt) {
		return store.FlowState{}, store.ErrNotFound
	}
	return f, nil
}

func (s *fakeStore) TryLock(_ context.Context, key string, ttl time.Duration) (func(), bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if l, ok := s.leases[key]; ok && now.Before(l.expires) {
		s.failedLocks++
		return nil, false, nil
	}
	s.leaseSeq++
	owner := s.leaseSeq
	s.leases[key] = fakeLease{owner: owner, expires: now.Add(ttl)}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l, ok := s.leases[key]; ok && l.owner == owner {
			delete(s.leases, key)
		}
	}, true, nil
}

func (s *fakeStore) failedLockCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failedLocks
}

func (s *fakeStore) account(t *testing.T, id string) store.Account {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.accounts[id]
	if !ok {
		t.Fatalf("account %s not in the store", id)
	}
	return cloneAccount(a)
}

// dump returns every record as a backend would hold it: the JSON of each
// account and flow state, followed by their raw sealed bytes.
func (s *fakeStore) dump(t *testing.T) []byte {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var buf bytes.Buffer
	for _, a := range s.accounts {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.Write(a.SealedToken)
	}
	for _, f := range s.flows {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.Write(f.SealedVerifier)
	}
	return buf.Bytes()
}

// fakeProvider is a scripted OAuth provider. It records calls, issues
// tokens that expire after tokenTTL on the test clock, rotates refresh
// tokens on refresh (the old one stops working), and can be told to fail.
type fakeProvider struct {
	name     string
	pkce     bool
	now      func() time.Time
	tokenTTL time.Duration // 0: tokens never expire
	rotates  bool          // issues refresh tokens and rotates them

	mu         sync.Mutex
	seq        int
	flows      map[string]string              // state → verifier seen by AuthCodeURL
	codes      map[string]connectors.Identity // code → who signs in with it
	access     map[string]string              // live access token → external id
	refresh    map[string]string              // live refresh token → external id
	identities map[string]connectors.Identity // external id → identity
	exchanges  int
	refreshes  int
	revokes    int
	usedRT     []string // refresh tokens presented to Refresh
	refreshErr error    // returned by Refresh (after counting) when set
	revokeErr  error    // returned by Revoke when set
	// refreshEntered receives (without blocking) when Refresh starts;
	// refreshGate, when set, holds Refresh until it is closed.
	refreshEntered chan struct{}
	refreshGate    chan struct{}
	secrets        []string // every code, state, verifier and token seen
}

func newFakeProvider(name string, pkce bool, now func() time.Time, tokenTTL time.Duration, rotates bool) *fakeProvider {
	return &fakeProvider{
		name:           name,
		pkce:           pkce,
		now:            now,
		tokenTTL:       tokenTTL,
		rotates:        rotates,
		flows:          map[string]string{},
		codes:          map[string]connectors.Identity{},
		access:         map[string]string{},
		refresh:        map[string]string{},
		identities:     map[string]connectors.Identity{},
		refreshEntered: make(chan struct{}, 1),
	}
}

func (p *fakeProvider) Connector() string  { return p.name }
func (p *fakeProvider) SupportsPKCE() bool { return p.pkce }

func (p *fakeProvider) AuthCodeURL(state, verifier string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.flows[state] = verifier
	p.secrets = append(p.secrets, state)
	q := url.Values{"state": {state}}
	if verifier != "" {
		p.secrets = append(p.secrets, verifier)
		q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(verifier))
		q.Set("code_challenge_method", "S256")
	}
	return "https://" + p.name + ".auth.test/authorize?" + q.Encode()
}

// grant makes code sign in as who.
func (p *fakeProvider) grant(code string, who connectors.Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.codes[code] = who
	p.secrets = append(p.secrets, code)
}

// issue makes a token for external id ext; p.mu is held.
func (p *fakeProvider) issue(ext string) *oauth2.Token {
	p.seq++
	tok := &oauth2.Token{
		AccessToken: fmt.Sprintf("%s-access-%d-%s", p.name, p.seq, strings.Repeat("x", 8)),
		TokenType:   "Bearer",
	}
	p.access[tok.AccessToken] = ext
	p.secrets = append(p.secrets, tok.AccessToken)
	if p.tokenTTL > 0 {
		tok.Expiry = p.now().Add(p.tokenTTL)
	}
	if p.rotates {
		tok.RefreshToken = fmt.Sprintf("%s-refresh-%d-%s", p.name, p.seq, strings.Repeat("y", 8))
		p.refresh[tok.RefreshToken] = ext
		p.secrets = append(p.secrets, tok.RefreshToken)
	}
	return tok
}

func (p *fakeProvider) Exchange(_ context.Context, q url.Values, verifier string) (*oauth2.Token, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exchanges++
	who, ok := p.codes[q.Get("code")]
	if !ok {
		return nil, fmt.Errorf("fake token endpoint: bad_verification_code: %w", connectors.ErrInvalidGrant)
	}
	delete(p.codes, q.Get("code"))
	if p.pkce && (verifier == "" || p.flows[q.Get("state")] != verifier) {
		return nil, fmt.Errorf("fake token endpoint: PKCE verification failed: %w", connectors.ErrInvalidGrant)
	}
	p.identities[who.ExternalID] = who
	return p.issue(who.ExternalID), nil
}

func (p *fakeProvider) Identify(_ context.Context, tok *oauth2.Token) (connectors.Identity, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ext, ok := p.access[tok.AccessToken]
	if !ok {
		return connectors.Identity{}, fmt.Errorf("fake identify: 401 bad credentials")
	}
	return p.identities[ext], nil
}

func (p *fakeProvider) CanRefresh(tok *oauth2.Token) bool {
	return p.rotates && tok.RefreshToken != ""
}

func (p *fakeProvider) Refresh(ctx context.Context, tok *oauth2.Token) (*oauth2.Token, error) {
	p.mu.Lock()
	p.refreshes++
	p.usedRT = append(p.usedRT, tok.RefreshToken)
	gate := p.refreshGate
	p.mu.Unlock()
	select {
	case p.refreshEntered <- struct{}{}:
	default:
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refreshErr != nil {
		return nil, p.refreshErr
	}
	ext, ok := p.refresh[tok.RefreshToken]
	if !ok {
		return nil, fmt.Errorf("fake token endpoint: refresh token not valid: %w", connectors.ErrInvalidGrant)
	}
	// Rotation: the old refresh and access tokens stop working now.
	delete(p.refresh, tok.RefreshToken)
	delete(p.access, tok.AccessToken)
	return p.issue(ext), nil
}

func (p *fakeProvider) Revoke(_ context.Context, tok *oauth2.Token, _ map[string]string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revokes++
	if p.revokeErr != nil {
		return p.revokeErr
	}
	delete(p.access, tok.AccessToken)
	delete(p.refresh, tok.RefreshToken)
	return nil
}

type providerCounts struct{ exchanges, refreshes, revokes int }

func (p *fakeProvider) counts() providerCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return providerCounts{p.exchanges, p.refreshes, p.revokes}
}

func (p *fakeProvider) allSecrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.secrets)
}

func (p *fakeProvider) refreshTokensUsed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.usedRT)
}

func (p *fakeProvider) set(f func(p *fakeProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}
