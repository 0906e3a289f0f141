// Package accounts keeps connected accounts: the OAuth connect flow (state
// bound to the tenant, PKCE where the provider supports it), the tokens
// sealed at rest with AES-256-GCM, refreshing them exactly once per account
// at a time across every process sharing the store, and removing an account
// (revoke at the provider, then delete the credentials).
//
// Tool steps and the dispatcher get a token or an authorized *http.Client
// through Service.Token and Service.Client; nothing else opens a token.
// Tokens, codes, states and verifiers are never logged and never appear in
// returned errors.
package accounts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

const (
	defaultFlowTTL     = 10 * time.Minute
	defaultRefreshSkew = 2 * time.Minute
	defaultLockTTL     = 30 * time.Second
	// revokeTimeout bounds the provider's revocation call in Remove.
	revokeTimeout = 10 * time.Second
	// deleteTimeout bounds deleting credentials after the caller left.
	deleteTimeout = 10 * time.Second
	// pollInterval is how often a process that did not get the refresh
	// lease re-reads the account.
	pollInterval = 50 * time.Millisecond
	// writeAttempts bounds compare-and-set retries.
	writeAttempts = 5
	stateBytes    = 32

	accountIDPrefix = "acc_"

	reasonRemoved = "removed by the user; reconnect it to use it again"
	reasonReauth  = "the provider refused the account's grant; reconnect it"
	reasonExpired = "the access token expired and the provider issued no refresh token; reconnect it"
	reasonRefused = "the provider refused the account's token (revoked, or the app's access removed) and there is no refresh token; reconnect it"
)

// storeAPI is what the service needs from a store backend.
type storeAPI interface {
	store.Accounts
	store.FlowStates
	store.Locker
}

// Options configures a Service.
type Options struct {
	// Store persists accounts and flow states and provides the leases
	// that make a refresh happen once across processes. Required.
	Store interface {
		store.Accounts
		store.FlowStates
		store.Locker
	}
	// Vault seals tokens and PKCE verifiers. Required.
	Vault *Vault
	// Providers maps a connector name to its OAuth provider. Required, at
	// least one; each key must equal its provider's Connector().
	Providers map[string]connectors.Provider
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Logger receives the service's logs; the zero value discards them.
	Logger zerolog.Logger
	// FlowTTL is how long a started connect flow stays valid (default
	// 10m).
	FlowTTL time.Duration
	// RefreshSkew is how long before its expiry a token is refreshed
	// (default 2m).
	RefreshSkew time.Duration
	// LockTTL is the refresh lease's lifetime, which also bounds one
	// refresh and the wait for another process's refresh (default 30s).
	LockTTL time.Duration
	// Transport is the base transport of the clients Client returns; nil
	// means the oauth2.HTTPClient of Client's context, if any, else
	// http.DefaultTransport. triggerd passes one that refuses loopback,
	// private and link-local addresses (netguard.Transport).
	Transport http.RoundTripper
}

// Service manages connected accounts. It is safe for concurrent use.
type Service struct {
	store     storeAPI
	vault     *Vault
	providers map[string]connectors.Provider
	known     string
	now       func() time.Time
	log       zerolog.Logger
	flowTTL   time.Duration
	skew      time.Duration
	lockTTL   time.Duration
	transport http.RoundTripper
	flights   flightGroup
}

// New returns a Service for o, after checking it.
func New(o Options) (*Service, error) {
	if o.Store == nil {
		return nil, errors.New("accounts: new service: no store")
	}
	if o.Vault == nil {
		return nil, errors.New("accounts: new service: no vault")
	}
	// No providers is allowed: a fresh installation runs without OAuth
	// client settings, and connecting then says how to configure them.
	providers := make(map[string]connectors.Provider, len(o.Providers))
	names := make([]string, 0, len(o.Providers))
	for name, p := range o.Providers {
		if p == nil {
			return nil, fmt.Errorf("accounts: new service: provider %q is nil", name)
		}
		if got := p.Connector(); got != name {
			return nil, fmt.Errorf("accounts: new service: provider registered as %q says it is %q", name, got)
		}
		providers[name] = p
		names = append(names, name)
	}
	slices.Sort(names)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"flow TTL", o.FlowTTL}, {"refresh skew", o.RefreshSkew}, {"lock TTL", o.LockTTL}} {
		if d.v < 0 {
			return nil, fmt.Errorf("accounts: new service: negative %s %s", d.name, d.v)
		}
	}
	s := &Service{
		store:     o.Store,
		vault:     o.Vault,
		providers: providers,
		known:     strings.Join(names, ", "),
		now:       o.Now,
		log:       o.Logger,
		flowTTL:   o.FlowTTL,
		skew:      o.RefreshSkew,
		lockTTL:   o.LockTTL,
		transport: o.Transport,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.flowTTL == 0 {
		s.flowTTL = defaultFlowTTL
	}
	if s.skew == 0 {
		s.skew = defaultRefreshSkew
	}
	if s.lockTTL == 0 {
		s.lockTTL = defaultLockTTL
	}
	return s, nil
}

func (s *Service) provider(connector string) (connectors.Provider, error) {
	if p, ok := s.providers[connector]; ok {
		return p, nil
	}
	if all := connectors.Names(); !slices.Contains(all, connector) {
		return nil, &ConnectorError{connector, "does not exist: the connectors are " + strings.Join(all, ", ")}
	}
	reason := fmt.Sprintf("has no OAuth client settings on this server: its operator sets --%s-client-id and TRIGGERD_%s_CLIENT_SECRET", connector, strings.ToUpper(connector))
	if s.known != "" {
		reason += " (configured: " + s.known + ")"
	}
	return nil, &ConnectorError{connector, reason}
}

// Start begins connecting an account of connector for tenantID. It stores
// a single-use flow state (random state, sealed PKCE verifier when the
// provider supports PKCE, returnTo) valid for FlowTTL and returns the
// provider's sign-in URL to send the user to. returnTo is kept as given;
// the HTTP layer must only accept its own addresses there.
func (s *Service) Start(ctx context.Context, tenantID, connector, returnTo string) (authURL string, err error) {
	p, err := s.provider(connector)
	if err != nil {
		return "", err
	}
	if tenantID == "" {
		return "", errors.New("accounts: start flow: empty tenant id")
	}
	state, err := randomState()
	if err != nil {
		return "", err
	}
	var verifier string
	var sealedVerifier []byte
	if p.SupportsPKCE() {
		verifier = oauth2.GenerateVerifier()
		sealedVerifier, err = s.vault.Seal([]byte(verifier), verifierAAD(state))
		if err != nil {
			return "", fmt.Errorf("accounts: start %s flow: seal verifier: %w", connector, err)
		}
	}
	now := s.now()
	f := store.FlowState{
		State:          state,
		TenantID:       tenantID,
		Connector:      connector,
		SealedVerifier: sealedVerifier,
		ReturnTo:       returnTo,
		CreatedAt:      now,
		ExpiresAt:      now.Add(s.flowTTL),
	}
	if err := s.store.PutFlowState(ctx, f); err != nil {
		return "", fmt.Errorf("accounts: start %s flow: store flow state: %w", connector, err)
	}
	s.log.Debug().Str("tenant_id", tenantID).Str("connector", connector).Bool("pkce", verifier != "").Msg("connect flow started")
	return p.AuthCodeURL(state, verifier), nil
}

func randomState() (string, error) {
	b := make([]byte, stateBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("accounts: generate state: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func verifierAAD(state string) string  { return "flow:" + state }
func tokenAAD(accountID string) string { return "account:" + accountID }

// Callback completes a connect flow for connector with the query of the
// provider's redirect. It takes the flow state (single use) and checks that
// it was started for this connector and has not expired before any token
// exchange; then it exchanges the code, identifies the external account
// and creates the tenant's account, or updates it when the same external
// account was connected before (a removed account comes back with the same
// id). It returns the account and the flow's returnTo.
//
// A refused callback is a *CallbackError (the HTTP layer answers 400 with
// its Reason); other errors are the service's own failures.
func (s *Service) Callback(ctx context.Context, connector string, query url.Values) (store.Account, string, error) {
	p, err := s.provider(connector)
	if err != nil {
		return store.Account{}, "", err
	}
	state := query.Get("state")
	if code := query.Get("error"); code != "" {
		// The flow is over either way: burn its state.
		if state != "" {
			if _, err := s.store.TakeFlowState(ctx, state); err != nil && !errors.Is(err, store.ErrNotFound) {
				s.log.Warn().Err(err).Str("connector", connector).Msg("discard flow state after a denied sign-in")
			}
		}
		s.log.Info().Str("connector", connector).Str("provider_error", safeErrorCode(code)).Msg("sign-in not completed at the provider")
		return store.Account{}, "", &CallbackError{Reason: fmt.Sprintf("the sign-in was not completed at the provider (%s); start the connection again", safeErrorCode(code))}
	}
	if state == "" {
		return store.Account{}, "", &CallbackError{Reason: "the callback has no state parameter; start the connection again"}
	}
	f, err := s.store.TakeFlowState(ctx, state)
	if errors.Is(err, store.ErrNotFound) {
		s.log.Warn().Str("connector", connector).Msg("callback with an unknown, expired or used state")
		return store.Account{}, "", &CallbackError{Reason: "unknown, expired or already used state; start the connection again"}
	}
	if err != nil {
		return store.Account{}, "", fmt.Errorf("accounts: %s callback: take flow state: %w", connector, err)
	}
	log := s.log.With().Str("tenant_id", f.TenantID).Str("connector", connector).Logger()
	if f.Connector != connector {
		log.Warn().Str("flow_connector", f.Connector).Msg("callback for a flow started for another connector")
		return store.Account{}, "", &CallbackError{Reason: "this sign-in was started for another connector; start the connection again"}
	}
	if s.now().After(f.ExpiresAt) {
		log.Info().Msg("callback for an expired flow")
		return store.Account{}, "", &CallbackError{Reason: "the sign-in took too long and expired; start the connection again"}
	}
	code := query.Get("code")
	if code == "" {
		return store.Account{}, "", &CallbackError{Reason: "the callback has no authorization code; start the connection again"}
	}
	var verifier string
	if f.SealedVerifier != nil {
		v, err := s.vault.Open(f.SealedVerifier, verifierAAD(state))
		if err != nil {
			return store.Account{}, "", fmt.Errorf("accounts: %s callback: open verifier: %w", connector, err)
		}
		verifier = string(v)
	}
	secrets := []string{code, state, verifier}
	tok, err := p.Exchange(ctx, query, verifier)
	if errors.Is(err, connectors.ErrInvalidGrant) {
		log.Warn().Msg("the provider refused the authorization code")
		return store.Account{}, "", &CallbackError{Reason: "the provider refused the authorization code; start the connection again"}
	}
	if err != nil {
		err = redact(err, secrets...)
		log.Error().Err(err).Msg("code exchange failed")
		return store.Account{}, "", fmt.Errorf("accounts: %s callback: exchange code: %w", connector, err)
	}
	if tok == nil || tok.AccessToken == "" {
		return store.Account{}, "", fmt.Errorf("accounts: %s callback: exchange code: the provider returned no access token", connector)
	}
	secrets = append(secrets, tok.AccessToken, tok.RefreshToken)
	who, err := p.Identify(ctx, tok)
	if err != nil {
		err = redact(err, secrets...)
		log.Error().Err(err).Msg("identify the connected account failed")
		return store.Account{}, "", fmt.Errorf("accounts: %s callback: identify account: %w", connector, err)
	}
	if who.ExternalID == "" {
		return store.Account{}, "", fmt.Errorf("accounts: %s callback: identify account: the provider returned no account id", connector)
	}
	acc, reconnected, err := s.upsert(ctx, f, who, tok)
	if err != nil {
		return store.Account{}, "", err
	}
	log.Info().Str("account_id", acc.ID).Bool("reconnected", reconnected).Msg("account connected")
	return public(acc), f.ReturnTo, nil
}

// safeErrorCode returns an OAuth error code fit to echo, or "unknown".
func safeErrorCode(code string) string {
	if len(code) > 64 {
		return "unknown"
	}
	for _, r := range code {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' && r != '-' && r != '.' {
			return "unknown"
		}
	}
	return code
}

// upsert stores the connected account: an update of the tenant's record for
// the same external account, or a new one.
func (s *Service) upsert(ctx context.Context, f store.FlowState, who connectors.Identity, tok *oauth2.Token) (acc store.Account, reconnected bool, err error) {
	for range writeAttempts {
		now := s.now()
		existing, err := s.store.FindAccount(ctx, f.TenantID, f.Connector, who.ExternalID)
		switch {
		case err == nil:
			t := tok
			if t.RefreshToken == "" && existing.Status == store.StatusActive && existing.SealedToken != nil {
				// Some providers (Google) issue a refresh token only on the
				// first consent; keep the one we have.
				if old, err := s.openToken(existing); err == nil && old.RefreshToken != "" {
					cp := *tok
					cp.RefreshToken = old.RefreshToken
					t = &cp
				}
			}
			sealed, err := s.sealToken(existing.ID, t)
			if err != nil {
				return store.Account{}, false, err
			}
			a := existing
			a.Login = who.Login
			a.Scopes = who.Scopes
			a.Metadata = who.Metadata
			a.Status = store.StatusActive
			a.StatusReason = ""
			a.RemovedAt = time.Time{}
			a.SealedToken = sealed
			a.TokenExpiry = t.Expiry
			a.UpdatedAt = now
			saved, err := s.store.UpdateAccount(ctx, a)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return store.Account{}, false, fmt.Errorf("accounts: %s callback: update account %s: %w", f.Connector, existing.ID, err)
			}
			return saved, true, nil
		case errors.Is(err, store.ErrNotFound):
			id := accountIDPrefix + uuid.NewString()
			sealed, err := s.sealToken(id, tok)
			if err != nil {
				return store.Account{}, false, err
			}
			a := store.Account{
				ID:          id,
				TenantID:    f.TenantID,
				Connector:   f.Connector,
				ExternalID:  who.ExternalID,
				Login:       who.Login,
				Scopes:      who.Scopes,
				Status:      store.StatusActive,
				Metadata:    who.Metadata,
				CreatedAt:   now,
				UpdatedAt:   now,
				SealedToken: sealed,
				TokenExpiry: tok.Expiry,
			}
			saved, err := s.store.CreateAccount(ctx, a)
			if errors.Is(err, store.ErrConflict) {
				continue // created concurrently: update it on the next round
			}
			if err != nil {
				return store.Account{}, false, fmt.Errorf("accounts: %s callback: create account: %w", f.Connector, err)
			}
			return saved, false, nil
		default:
			return store.Account{}, false, fmt.Errorf("accounts: %s callback: find account: %w", f.Connector, err)
		}
	}
	return store.Account{}, false, fmt.Errorf("accounts: %s callback: store account: %d conflicting writes in a row: %w", f.Connector, writeAttempts, store.ErrConflict)
}

// Adopt stores an account whose token was obtained outside a connect flow
// (the sandbox's accounts, or a token an operator brings), exactly as a
// completed connect flow would: the tenant's record for the same external
// account is updated, or a new one is made. The connector must be
// configured, since refreshing and revoking go through its provider.
func (s *Service) Adopt(ctx context.Context, tenantID, connector string, who connectors.Identity, tok *oauth2.Token) (store.Account, error) {
	if _, err := s.provider(connector); err != nil {
		return store.Account{}, err
	}
	if tenantID == "" || who.ExternalID == "" || tok == nil || tok.AccessToken == "" {
		return store.Account{}, errors.New("accounts: adopt: tenant, external id and an access token are required")
	}
	acc, _, err := s.upsert(ctx, store.FlowState{TenantID: tenantID, Connector: connector}, who, tok)
	if err != nil {
		return store.Account{}, fmt.Errorf("accounts: adopt: %w", err)
	}
	return public(acc), nil
}

// List returns the tenant's accounts, oldest first, without their sealed
// tokens.
func (s *Service) List(ctx context.Context, tenantID string) ([]store.Account, error) {
	all, err := s.store.ListAccounts(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("accounts: list accounts: %w", err)
	}
	for i := range all {
		all[i] = public(all[i])
	}
	return all, nil
}

// Get returns the tenant's account without its sealed token; an
// *AccountError matching ErrAccountNotFound if there is none.
func (s *Service) Get(ctx context.Context, tenantID, id string) (store.Account, error) {
	acc, err := s.readAccount(ctx, tenantID, id)
	if err != nil {
		return store.Account{}, err
	}
	return public(acc), nil
}

// readAccount reads an account, mapping ErrNotFound to an *AccountError.
func (s *Service) readAccount(ctx context.Context, tenantID, id string) (store.Account, error) {
	acc, err := s.store.GetAccount(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, &AccountError{AccountID: id}
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("accounts: read account %s: %w", id, err)
	}
	return acc, nil
}

// public returns acc as handed out: without the sealed token.
func public(acc store.Account) store.Account {
	acc.SealedToken = nil
	return acc
}

// statusError returns the *AccountError for an account that cannot be
// used, or nil for an active one.
func statusError(acc store.Account) error {
	switch acc.Status {
	case store.StatusActive:
		if acc.SealedToken == nil {
			return fmt.Errorf("accounts: account %s is active but has no stored credentials; reconnect it", acc.ID)
		}
		return nil
	case store.StatusRemoved:
		return &AccountError{AccountID: acc.ID, Status: acc.Status, Reason: orDefault(acc.StatusReason, reasonRemoved)}
	case store.StatusNeedsReauth:
		return &AccountError{AccountID: acc.ID, Status: acc.Status, Reason: orDefault(acc.StatusReason, reasonReauth)}
	default:
		return &AccountError{AccountID: acc.ID, Status: acc.Status, Reason: "unknown account status"}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RemoveReport says what happened at the provider when an account was
// removed. The credentials are deleted whatever it says.
type RemoveReport struct {
	// Revoked is true when the provider confirmed the revocation.
	Revoked bool
	// RevokeError says why revocation failed or did not happen; it holds
	// no token.
	RevokeError string
}

// Remove disconnects the tenant's account: it revokes the access at the
// provider (its token, bounded by 10s) and then, whatever it answered,
// deletes the stored credentials and marks the account removed. Removing
// an account already removed is not an error.
func (s *Service) Remove(ctx context.Context, tenantID, id string) (store.Account, RemoveReport, error) {
	acc, err := s.readAccount(ctx, tenantID, id)
	if err != nil {
		return store.Account{}, RemoveReport{}, err
	}
	if acc.Status == store.StatusRemoved && acc.SealedToken == nil {
		return public(acc), RemoveReport{RevokeError: "already removed"}, nil
	}
	report := s.revoke(ctx, acc)
	// The grant may be revoked already: delete the credentials even if the
	// caller gives up now.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		upd := acc
		upd.SealedToken = nil
		upd.TokenExpiry = time.Time{}
		upd.Status = store.StatusRemoved
		upd.StatusReason = reasonRemoved
		upd.RemovedAt = s.now()
		upd.UpdatedAt = upd.RemovedAt
		saved, err := s.store.UpdateAccount(dctx, upd)
		if err == nil {
			ev := s.log.Info()
			if !report.Revoked {
				ev = s.log.Warn().Str("revoke_error", report.RevokeError)
			}
			ev.Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Bool("revoked", report.Revoked).Msg("account removed")
			return public(saved), report, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == writeAttempts {
			s.log.Error().Err(err).Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Msg("delete credentials of a removed account failed")
			return public(acc), report, fmt.Errorf("accounts: remove account %s: delete credentials: %w", id, err)
		}
		cur, err := s.readAccount(dctx, tenantID, id)
		if err != nil {
			return public(acc), report, fmt.Errorf("accounts: remove account %s: %w", id, err)
		}
		if cur.Status == store.StatusRemoved && cur.SealedToken == nil {
			return public(cur), report, nil // removed concurrently
		}
		if cur.SealedToken != nil && !bytes.Equal(cur.SealedToken, acc.SealedToken) {
			// A refresh or reconnect stored another token meanwhile.
			if r := s.revoke(ctx, cur); r.Revoked || !report.Revoked {
				report = r
			}
		}
		acc = cur
	}
}

// revoke asks the provider to revoke acc's grant.
func (s *Service) revoke(ctx context.Context, acc store.Account) RemoveReport {
	log := s.log.With().Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Logger()
	p, ok := s.providers[acc.Connector]
	if !ok {
		return RemoveReport{RevokeError: fmt.Sprintf("connector %q is not configured; revoke the grant at the provider", acc.Connector)}
	}
	if acc.SealedToken == nil {
		return RemoveReport{RevokeError: "no stored credentials to revoke"}
	}
	tok, err := s.openToken(acc)
	if err != nil {
		log.Error().Err(err).Msg("open token to revoke it")
		return RemoveReport{RevokeError: "the stored credentials could not be decrypted; revoke the grant at the provider"}
	}
	rctx, cancel := context.WithTimeout(ctx, revokeTimeout)
	defer cancel()
	if err := p.Revoke(rctx, tok, acc.Metadata); err != nil {
		err = redact(err, tok.AccessToken, tok.RefreshToken)
		log.Warn().Err(err).Msg("revoke at the provider failed")
		return RemoveReport{RevokeError: "the provider did not confirm revocation: " + err.Error()}
	}
	return RemoveReport{Revoked: true}
}

// Token returns a valid access token for the tenant's account, refreshing
// it first when it expires within RefreshSkew and the provider can refresh
// it. Only one refresh per account runs at a time, in this process and
// across processes sharing the store; a rotated refresh token is stored
// before the new access token is returned. The account comes back without
// its sealed token.
//
// Errors: an *AccountError matching ErrAccountNotFound, ErrAccountRemoved
// or ErrNeedsReauth (set when the provider refuses the grant; no later call
// asks the provider again until the user reconnects), or a wrapped error
// for a failure that may pass (network, store).
func (s *Service) Token(ctx context.Context, tenantID, id string) (*oauth2.Token, store.Account, error) {
	tok, acc, err := s.token(ctx, tenantID, id)
	return tok, public(acc), err
}

// Client returns an *http.Client that sends the account's access token
// (see Token) as a bearer token and does not follow redirects (a 3xx comes
// back as the response). Its base transport is Options.Transport, else
// the one of the oauth2.HTTPClient in ctx, if any. The token is not refreshed ahead of
// its expiry during the client's life (get a client per job), but a token
// the provider refuses is: on a 401 the client tells Rejected, and sends
// the refused request once more with the token it gets, which is safe
// whatever the method (a refused request took no effect) when its body
// can be sent again. When the account can get no other token, the 401
// comes back and the account is marked needs_reauth.
func (s *Service) Client(ctx context.Context, tenantID, id string) (*http.Client, store.Account, error) {
	tok, acc, err := s.Token(ctx, tenantID, id)
	if err != nil {
		return nil, acc, err
	}
	base := s.transport
	if base == nil {
		base = oauth2.NewClient(ctx, nil).Transport
	}
	if base == nil {
		base = http.DefaultTransport
	}
	t := &rejectingTransport{svc: s, tenantID: tenantID, id: id, base: base, tok: tok}
	c := &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c, acc, nil
}

// rejectingTransport adds an account's token to requests, and replaces
// the token when the provider refuses it (see Client).
type rejectingTransport struct {
	svc          *Service
	tenantID, id string
	base         http.RoundTripper

	mu  sync.Mutex
	tok *oauth2.Token
}

func (t *rejectingTransport) token() *oauth2.Token {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tok
}

func (t *rejectingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok := t.token()
	resp, err := t.send(req, tok, req.Body)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	next, rerr := t.svc.Rejected(req.Context(), t.tenantID, t.id, tok.AccessToken)
	if rerr != nil || next == nil || next.AccessToken == tok.AccessToken {
		// Marked needs_reauth, or no answer from the store or the
		// provider: the caller gets the 401 and the next job tries again.
		return resp, nil
	}
	t.mu.Lock()
	t.tok = next
	t.mu.Unlock()
	body := req.Body
	if body != nil && body != http.NoBody {
		if req.GetBody == nil {
			return resp, nil // the body is spent; the next request uses the new token
		}
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return t.send(req, next, body)
}

// send sends a copy of req with tok and body.
func (t *rejectingTransport) send(req *http.Request, tok *oauth2.Token, body io.ReadCloser) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Body = body
	tok.SetAuthHeader(r)
	return t.base.RoundTrip(r)
}

// Rejected tells the service that the provider refused accessToken, a
// token of the account, as invalid (HTTP 401), and returns the token to
// use instead: one stored since (a refresh or a reconnect elsewhere), or a
// new one from a refresh made whatever the token's recorded expiry. An
// account that can get no other token is marked needs_reauth, so later
// calls fail fast: the error then wraps ErrNeedsReauth. Concurrent calls
// for one account cause one refresh, as in Token.
func (s *Service) Rejected(ctx context.Context, tenantID, id, accessToken string) (*oauth2.Token, error) {
	acc, p, tok, err := s.usable(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	if tok.AccessToken != accessToken {
		// Replaced since the caller read it.
		tok, _, err := s.token(ctx, tenantID, id)
		return tok, err
	}
	if !p.CanRefresh(tok) {
		res, err := s.markNeedsReauth(ctx, acc, reasonRefused)
		return res.tok, err
	}
	s.log.Info().Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Msg("the provider refused the account's token; refreshing it")
	res, err := s.refresh(ctx, tenantID+"/"+id+"/rejected", p, acc, accessToken)
	if err != nil {
		return nil, err
	}
	return cloneToken(res.tok), nil
}

func (s *Service) token(ctx context.Context, tenantID, id string) (*oauth2.Token, store.Account, error) {
	acc, p, tok, err := s.usable(ctx, tenantID, id)
	if err != nil {
		return nil, acc, err
	}
	if s.fresh(acc.TokenExpiry) {
		return tok, acc, nil
	}
	if !p.CanRefresh(tok) {
		res, err := s.unrefreshable(ctx, acc, tok)
		return res.tok, res.acc, err
	}
	res, err := s.refresh(ctx, tenantID+"/"+id, p, acc, "")
	if err != nil {
		if res.acc.ID == "" {
			res.acc = acc
		}
		return nil, res.acc, err
	}
	return cloneToken(res.tok), res.acc, nil
}

// usable reads an account that may be used (see statusError), its
// connector's provider and its stored token. The account is returned
// with an error too when it was read.
func (s *Service) usable(ctx context.Context, tenantID, id string) (store.Account, connectors.Provider, *oauth2.Token, error) {
	acc, err := s.readAccount(ctx, tenantID, id)
	if err != nil {
		return store.Account{}, nil, nil, err
	}
	if err := statusError(acc); err != nil {
		return acc, nil, nil, err
	}
	p, err := s.provider(acc.Connector)
	if err != nil {
		return acc, nil, nil, fmt.Errorf("accounts: token for account %s: %w", id, err)
	}
	tok, err := s.openToken(acc)
	if err != nil {
		return acc, nil, nil, err
	}
	return acc, p, tok, nil
}

// refresh runs refreshShared for acc once per process and flight key:
// concurrent callers share it. When the caller running it leaves before
// it starts, a waiting caller runs it itself.
func (s *Service) refresh(ctx context.Context, key string, p connectors.Provider, acc store.Account, rejected string) (flightResult, error) {
	for {
		res, shared, err := s.flights.do(ctx, key, func() (flightResult, error) {
			return s.refreshShared(ctx, p, acc, rejected)
		})
		if err != nil && shared && errors.Is(err, errLeaderGone) && ctx.Err() == nil {
			continue // the caller running the refresh left; run it ourselves
		}
		return res, err
	}
}

// fresh reports whether a token expiring at expiry needs no refresh yet.
func (s *Service) fresh(expiry time.Time) bool {
	return expiry.IsZero() || s.now().Add(s.skew).Before(expiry)
}

func cloneToken(t *oauth2.Token) *oauth2.Token {
	if t == nil {
		return nil
	}
	cp := *t
	return &cp
}

// errLeaderGone reports that the caller running a shared refresh left
// (its context ended) before the refresh started; the callers waiting for
// it try again.
var errLeaderGone = errors.New("accounts: token refresh abandoned by its caller")

// refreshShared is the in-process single flight of a refresh for the
// account before (as read by the caller): it takes the cross-process
// lease, or waits for the process holding it to store a new token. A
// stored token whose access token is rejected (the provider refused it;
// "" for none) is refreshed even when its expiry is far.
func (s *Service) refreshShared(ctx context.Context, p connectors.Provider, before store.Account, rejected string) (flightResult, error) {
	lockKey := "refresh:" + before.TenantID + "/" + before.ID
	log := s.log.With().Str("account_id", before.ID).Str("tenant_id", before.TenantID).Str("connector", before.Connector).Logger()
	gone := func() error { return fmt.Errorf("%w: %w", errLeaderGone, ctx.Err()) }
	var ticker *time.Ticker
	var deadline <-chan time.Time
	for {
		release, held, err := s.store.TryLock(ctx, lockKey, s.lockTTL)
		if err != nil {
			if ctx.Err() != nil {
				return flightResult{}, gone()
			}
			return flightResult{}, fmt.Errorf("accounts: token for account %s: take refresh lease: %w", before.ID, err)
		}
		if held {
			if release == nil {
				release = func() {}
			}
			return s.refreshLocked(ctx, p, before, release, rejected)
		}
		if ticker == nil {
			log.Debug().Msg("another process is refreshing the token; waiting for it")
			ticker = time.NewTicker(pollInterval)
			defer ticker.Stop()
			timer := time.NewTimer(s.lockTTL)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-ctx.Done():
			return flightResult{}, gone()
		case <-deadline:
			return flightResult{}, fmt.Errorf("accounts: token for account %s: another process did not finish refreshing it within %s", before.ID, s.lockTTL)
		case <-ticker.C:
		}
		cur, err := s.readAccount(ctx, before.TenantID, before.ID)
		if err != nil {
			if ctx.Err() != nil {
				return flightResult{}, gone()
			}
			return flightResult{}, err
		}
		if cur.Version == before.Version {
			continue
		}
		if err := statusError(cur); err != nil {
			return flightResult{acc: cur}, err
		}
		if s.fresh(cur.TokenExpiry) {
			tok, err := s.openToken(cur)
			if err != nil {
				return flightResult{acc: cur}, err
			}
			if tok.AccessToken != rejected {
				return flightResult{tok: tok, acc: cur}, nil
			}
		}
		before = cur
	}
}

// refreshLocked refreshes while holding the lease. Once the lease is held
// the work no longer depends on the caller's context (only on LockTTL): a
// refresh the provider has done must be stored, or a rotated refresh token
// would be lost.
func (s *Service) refreshLocked(ctx context.Context, p connectors.Provider, before store.Account, release func(), rejected string) (flightResult, error) {
	defer release()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lockTTL)
	defer cancel()
	// Another process may have refreshed between our read and the lease.
	acc, err := s.readAccount(ctx, before.TenantID, before.ID)
	if err != nil {
		return flightResult{}, err
	}
	if err := statusError(acc); err != nil {
		return flightResult{acc: acc}, err
	}
	tok, err := s.openToken(acc)
	if err != nil {
		return flightResult{acc: acc}, err
	}
	refused := tok.AccessToken == rejected
	if s.fresh(acc.TokenExpiry) && !refused {
		return flightResult{tok: tok, acc: acc}, nil
	}
	if !p.CanRefresh(tok) {
		if refused {
			return s.markNeedsReauth(ctx, acc, reasonRefused)
		}
		return s.unrefreshable(ctx, acc, tok)
	}
	log := s.log.With().Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Logger()
	newTok, err := p.Refresh(ctx, tok)
	if errors.Is(err, connectors.ErrInvalidGrant) {
		return s.markNeedsReauth(ctx, acc, reasonReauth)
	}
	if err != nil {
		err = redact(err, tok.AccessToken, tok.RefreshToken)
		log.Warn().Err(err).Msg("token refresh failed")
		return flightResult{acc: acc}, fmt.Errorf("accounts: refresh token of account %s: %w", acc.ID, err)
	}
	if newTok == nil || newTok.AccessToken == "" {
		return flightResult{acc: acc}, fmt.Errorf("accounts: refresh token of account %s: the provider returned no access token", acc.ID)
	}
	if newTok.RefreshToken == "" {
		// The provider does not rotate: keep the refresh token we have.
		cp := *newTok
		cp.RefreshToken = tok.RefreshToken
		newTok = &cp
	}
	return s.storeRefreshed(ctx, acc, newTok)
}

// storeRefreshed stores a refreshed token with compare-and-set on the
// version read under the lease.
func (s *Service) storeRefreshed(ctx context.Context, acc store.Account, tok *oauth2.Token) (flightResult, error) {
	log := s.log.With().Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Logger()
	base := acc.SealedToken
	sealed, err := s.sealToken(acc.ID, tok)
	if err != nil {
		return flightResult{acc: acc}, err
	}
	for range writeAttempts {
		upd := acc
		upd.SealedToken = sealed
		upd.TokenExpiry = tok.Expiry
		upd.UpdatedAt = s.now()
		saved, err := s.store.UpdateAccount(ctx, upd)
		if err == nil {
			log.Info().Time("expiry", tok.Expiry).Msg("token refreshed")
			return flightResult{tok: tok, acc: saved}, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			log.Error().Err(err).Msg("store the refreshed token failed; the account may need reconnecting")
			return flightResult{acc: acc}, fmt.Errorf("accounts: refresh token of account %s: store it: %w", acc.ID, err)
		}
		cur, err := s.readAccount(ctx, acc.TenantID, acc.ID)
		if err != nil {
			return flightResult{acc: acc}, err
		}
		if err := statusError(cur); err != nil {
			return flightResult{acc: cur}, err // removed meanwhile
		}
		if !bytes.Equal(cur.SealedToken, base) {
			// A reconnect stored another token meanwhile: it wins.
			t, err := s.openToken(cur)
			if err != nil {
				return flightResult{acc: cur}, err
			}
			return flightResult{tok: t, acc: cur}, nil
		}
		acc = cur // another field changed; write over the new version
	}
	return flightResult{acc: acc}, fmt.Errorf("accounts: refresh token of account %s: store it: %d conflicting writes in a row: %w", acc.ID, writeAttempts, store.ErrConflict)
}

// unrefreshable handles a token within the skew of its expiry that cannot
// be refreshed: usable until it expires, then the account needs
// reconnecting.
func (s *Service) unrefreshable(ctx context.Context, acc store.Account, tok *oauth2.Token) (flightResult, error) {
	if acc.TokenExpiry.IsZero() || s.now().Before(acc.TokenExpiry) {
		return flightResult{tok: tok, acc: acc}, nil
	}
	return s.markNeedsReauth(ctx, acc, reasonExpired)
}

// markNeedsReauth records that the account's grant is no longer usable, so
// that later calls fail fast without asking the provider.
func (s *Service) markNeedsReauth(ctx context.Context, acc store.Account, reason string) (flightResult, error) {
	log := s.log.With().Str("account_id", acc.ID).Str("tenant_id", acc.TenantID).Str("connector", acc.Connector).Logger()
	base := acc.SealedToken
	aerr := &AccountError{AccountID: acc.ID, Status: store.StatusNeedsReauth, Reason: reason}
	for range writeAttempts {
		upd := acc
		upd.Status = store.StatusNeedsReauth
		upd.StatusReason = reason
		upd.UpdatedAt = s.now()
		saved, err := s.store.UpdateAccount(ctx, upd)
		if err == nil {
			log.Warn().Str("reason", reason).Msg("account needs reconnecting")
			return flightResult{acc: saved}, aerr
		}
		if !errors.Is(err, store.ErrConflict) {
			log.Error().Err(err).Msg("mark account as needing reconnection failed")
			return flightResult{acc: acc}, aerr
		}
		cur, err := s.readAccount(ctx, acc.TenantID, acc.ID)
		if err != nil {
			return flightResult{acc: acc}, err
		}
		if err := statusError(cur); err != nil {
			return flightResult{acc: cur}, err
		}
		if !bytes.Equal(cur.SealedToken, base) {
			// Someone stored another token meanwhile: use it.
			t, err := s.openToken(cur)
			if err != nil {
				return flightResult{acc: cur}, err
			}
			return flightResult{tok: t, acc: cur}, nil
		}
		acc = cur
	}
	log.Error().Msg("mark account as needing reconnection failed: conflicting writes")
	return flightResult{acc: acc}, aerr
}

// sealedToken is the JSON sealed into Account.SealedToken.
type sealedToken struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

func (s *Service) sealToken(accountID string, tok *oauth2.Token) ([]byte, error) {
	plain, err := json.Marshal(sealedToken{
		AccessToken:  tok.AccessToken,
		RefreshToken: tok.RefreshToken,
		TokenType:    tok.TokenType,
		Expiry:       tok.Expiry,
	})
	if err != nil {
		return nil, fmt.Errorf("accounts: seal token of account %s: %w", accountID, err)
	}
	sealed, err := s.vault.Seal(plain, tokenAAD(accountID))
	if err != nil {
		return nil, fmt.Errorf("accounts: seal token of account %s: %w", accountID, err)
	}
	return sealed, nil
}

func (s *Service) openToken(acc store.Account) (*oauth2.Token, error) {
	if acc.SealedToken == nil {
		return nil, fmt.Errorf("accounts: account %s has no stored credentials", acc.ID)
	}
	plain, err := s.vault.Open(acc.SealedToken, tokenAAD(acc.ID))
	if err != nil {
		return nil, fmt.Errorf("accounts: open token of account %s: %w", acc.ID, err)
	}
	var st sealedToken
	if err := json.Unmarshal(plain, &st); err != nil {
		// The JSON error could quote the plaintext: do not wrap it.
		return nil, fmt.Errorf("accounts: open token of account %s: %w: not a token record", acc.ID, ErrUndecryptable)
	}
	return &oauth2.Token{
		AccessToken:  st.AccessToken,
		RefreshToken: st.RefreshToken,
		TokenType:    st.TokenType,
		Expiry:       st.Expiry,
	}, nil
}
