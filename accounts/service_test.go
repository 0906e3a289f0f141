package accounts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
)

const tokenTTL = time.Hour

type fixture struct {
	t     *testing.T
	clock *testenv.Clock
	store *fakeStore
	vault *Vault
	code  *fakeProvider // "codehost": PKCE, expiring tokens, rotating refresh tokens
	dep   *fakeProvider // "deploy": no PKCE, long-lived tokens
	logs  *testenv.Buffer
	svc   *Service
	seq   int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: newClock(), logs: &testenv.Buffer{}}
	f.store = newFakeStore(f.clock.Now)
	f.vault = mustVault(t, newKey(t))
	f.code = newFakeProvider("codehost", true, f.clock.Now, tokenTTL, true)
	f.dep = newFakeProvider("deploy", false, f.clock.Now, 0, false)
	f.svc = f.newService()
	return f
}

// newService returns another Service on the fixture's store, vault and
// providers: another process.
func (f *fixture) newService() *Service {
	f.t.Helper()
	svc, err := New(Options{
		Store:     f.store,
		Vault:     f.vault,
		Providers: map[string]connectors.Provider{"codehost": f.code, "deploy": f.dep},
		Now:       f.clock.Now,
		Logger:    zerolog.New(f.logs),
		LockTTL:   5 * time.Second,
	})
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return svc
}

// start begins a flow and returns the state the provider received.
func (f *fixture) start(tenant, connector, returnTo string) string {
	f.t.Helper()
	authURL, err := f.svc.Start(context.Background(), tenant, connector, returnTo)
	if err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		f.t.Fatal(err)
	}
	state := u.Query().Get("state")
	if state == "" {
		f.t.Fatalf("auth URL without state: %s", authURL)
	}
	return state
}

func (f *fixture) provider(connector string) *fakeProvider {
	if connector == "deploy" {
		return f.dep
	}
	return f.code
}

// newCode makes the provider of connector accept a fresh code for who.
func (f *fixture) newCode(connector string, who connectors.Identity) string {
	f.seq++
	code := fmt.Sprintf("code-%s-%d-zzzz", connector, f.seq)
	f.provider(connector).grant(code, who)
	return code
}

// connect runs a whole flow for who and returns the account.
func (f *fixture) connect(tenant, connector string, who connectors.Identity) store.Account {
	f.t.Helper()
	state := f.start(tenant, connector, "/integrations")
	code := f.newCode(connector, who)
	acc, returnTo, err := f.svc.Callback(context.Background(), connector, url.Values{"state": {state}, "code": {code}})
	if err != nil {
		f.t.Fatalf("Callback: %v", err)
	}
	if returnTo != "/integrations" {
		f.t.Fatalf("returnTo = %q", returnTo)
	}
	return acc
}

var octocat = connectors.Identity{
	ExternalID: "583231",
	Login:      "octocat",
	Scopes:     []string{"repo", "workflow"},
	Metadata:   map[string]string{"kind": "user"},
}

func TestNewValidates(t *testing.T) {
	f := newFixture(t)
	good := Options{Store: f.store, Vault: f.vault, Providers: map[string]connectors.Provider{"codehost": f.code}}
	for name, mutate := range map[string]func(o *Options){
		"no store":      func(o *Options) { o.Store = nil },
		"no vault":      func(o *Options) { o.Vault = nil },
		"nil provider":  func(o *Options) { o.Providers = map[string]connectors.Provider{"codehost": nil} },
		"name mismatch": func(o *Options) { o.Providers = map[string]connectors.Provider{"deploy": f.code} },
		"negative ttl":  func(o *Options) { o.FlowTTL = -time.Second },
	} {
		o := good
		mutate(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	// A fresh installation has no OAuth client settings: the service runs,
	// and starting a flow says what to configure.
	bare := good
	bare.Providers = nil
	s, err := New(bare)
	if err != nil {
		t.Fatalf("New without providers: %v", err)
	}
	_, err = s.Start(context.Background(), "t1", "codehost", "")
	if !errors.Is(err, ErrUnknownConnector) || !strings.Contains(err.Error(), "TRIGGERD_CODEHOST_CLIENT_SECRET") {
		t.Fatalf("Start without providers = %v, want ErrUnknownConnector naming the settings", err)
	}
}

func TestStartUnknownConnector(t *testing.T) {
	f := newFixture(t)
	_, err := f.svc.Start(context.Background(), "t1", "mailer", "")
	if !errors.Is(err, ErrUnknownConnector) || !strings.Contains(err.Error(), "codehost, deploy") {
		t.Fatalf("err = %v, want ErrUnknownConnector listing the known ones", err)
	}
	_, _, err = f.svc.Callback(context.Background(), "mailer", url.Values{"state": {"x"}, "code": {"y"}})
	if !errors.Is(err, ErrUnknownConnector) {
		t.Fatalf("callback: err = %v", err)
	}
}

func TestStartStoresFlowState(t *testing.T) {
	f := newFixture(t)
	state := f.start("t1", "codehost", "/back")
	if len(state) != 43 {
		t.Fatalf("state %d chars, want 43 (32 bytes base64url)", len(state))
	}
	f.store.mu.Lock()
	fs, ok := f.store.flows[state]
	f.store.mu.Unlock()
	if !ok {
		t.Fatal("flow state not stored")
	}
	if fs.TenantID != "t1" || fs.Connector != "codehost" || fs.ReturnTo != "/back" || fs.SealedVerifier == nil {
		t.Fatalf("flow state = %+v", fs)
	}
	if !fs.ExpiresAt.Equal(f.clock.Now().Add(10 * time.Minute)) {
		t.Fatalf("ExpiresAt = %v, want now+10m", fs.ExpiresAt)
	}
	// A provider without PKCE gets no verifier.
	state = f.start("t1", "deploy", "")
	f.store.mu.Lock()
	fs = f.store.flows[state]
	f.store.mu.Unlock()
	if fs.SealedVerifier != nil {
		t.Fatal("verifier stored for a provider without PKCE")
	}
}

func TestConnectCreatesAccount(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	if !strings.HasPrefix(acc.ID, "acc_") || acc.TenantID != "t1" || acc.Connector != "codehost" {
		t.Fatalf("account = %+v", acc)
	}
	if acc.ExternalID != "583231" || acc.Login != "octocat" || strings.Join(acc.Scopes, ",") != "repo,workflow" || acc.Metadata["kind"] != "user" {
		t.Fatalf("identity not stored: %+v", acc)
	}
	if acc.Status != store.StatusActive || acc.SealedToken != nil {
		t.Fatalf("status %q, sealed token returned: %v", acc.Status, acc.SealedToken != nil)
	}
	stored := f.store.account(t, acc.ID)
	if stored.SealedToken == nil || !stored.TokenExpiry.Equal(f.clock.Now().Add(tokenTTL)) {
		t.Fatalf("stored token expiry %v, sealed %v", stored.TokenExpiry, stored.SealedToken != nil)
	}
	tok, got, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok.AccessToken, "codehost-access-") || tok.RefreshToken == "" || got.ID != acc.ID {
		t.Fatalf("token %+v for %s", tok, got.ID)
	}
	if c := f.code.counts(); c.exchanges != 1 || c.refreshes != 0 {
		t.Fatalf("provider calls %+v", c)
	}
	list, err := f.svc.List(context.Background(), "t1")
	if err != nil || len(list) != 1 || list[0].ID != acc.ID || list[0].SealedToken != nil {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestReconnectUpdatesSameAccount(t *testing.T) {
	f := newFixture(t)
	first := f.connect("t1", "codehost", octocat)
	f.clock.Advance(time.Minute)
	changed := octocat
	changed.Login = "octocat-renamed"
	changed.Scopes = []string{"repo"}
	second := f.connect("t1", "codehost", changed)
	if second.ID != first.ID {
		t.Fatalf("reconnect made a new account %s (was %s)", second.ID, first.ID)
	}
	if second.Login != "octocat-renamed" || len(second.Scopes) != 1 || second.Version <= first.Version {
		t.Fatalf("reconnect did not update: %+v", second)
	}
	list, _ := f.svc.List(context.Background(), "t1")
	if len(list) != 1 {
		t.Fatalf("%d accounts after reconnect, want 1", len(list))
	}
	// Another external account is another record.
	other := f.connect("t1", "codehost", connectors.Identity{ExternalID: "1", Login: "hubot"})
	if other.ID == first.ID {
		t.Fatal("another external account reused the id")
	}

	// A removed account comes back to life with the same id.
	if _, _, err := f.svc.Remove(context.Background(), "t1", first.ID); err != nil {
		t.Fatal(err)
	}
	back := f.connect("t1", "codehost", octocat)
	if back.ID != first.ID || back.Status != store.StatusActive || back.StatusReason != "" || !back.RemovedAt.IsZero() {
		t.Fatalf("reconnected removed account: %+v", back)
	}
	if _, _, err := f.svc.Token(context.Background(), "t1", back.ID); err != nil {
		t.Fatalf("token after reconnecting: %v", err)
	}
}

func TestCallbackRefusals(t *testing.T) {
	ctx := context.Background()
	wantRefused := func(t *testing.T, err error) {
		t.Helper()
		var ce *CallbackError
		if !errors.As(err, &ce) || ce.Reason == "" {
			t.Fatalf("err = %v, want *CallbackError", err)
		}
	}

	t.Run("missing state", func(t *testing.T) {
		f := newFixture(t)
		code := f.newCode("codehost", octocat)
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"code": {code}})
		wantRefused(t, err)
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("tampered state", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		code := f.newCode("codehost", octocat)
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state + "x"}, "code": {code}})
		wantRefused(t, err)
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("reused state", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		q := url.Values{"state": {state}, "code": {f.newCode("codehost", octocat)}}
		if _, _, err := f.svc.Callback(ctx, "codehost", q); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.svc.Callback(ctx, "codehost", q)
		wantRefused(t, err)
		if !strings.Contains(err.Error(), "already used") {
			t.Fatalf("reason: %v", err)
		}
		if c := f.code.counts(); c.exchanges != 1 {
			t.Fatalf("%d exchanges, want 1 (the first callback only)", c.exchanges)
		}
	})
	t.Run("expired state", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		f.clock.Advance(10*time.Minute + time.Second)
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {f.newCode("codehost", octocat)}})
		wantRefused(t, err)
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("expired state kept by the store", func(t *testing.T) {
		// The service checks ExpiresAt itself, whatever the backend does.
		f := newFixture(t)
		storeClock := newClock()
		f.store.now = storeClock.Now
		state := f.start("t1", "codehost", "")
		f.clock.Advance(11 * time.Minute)
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {f.newCode("codehost", octocat)}})
		wantRefused(t, err)
		if !strings.Contains(err.Error(), "expired") {
			t.Fatalf("reason: %v", err)
		}
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("foreign connector", func(t *testing.T) {
		// A code and state from the code-hosting flow delivered to the
		// deployment callback.
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		code := f.newCode("codehost", octocat)
		f.dep.grant(code, octocat) // even if the other provider would take it
		_, _, err := f.svc.Callback(ctx, "deploy", url.Values{"state": {state}, "code": {code}})
		wantRefused(t, err)
		if c, d := f.code.counts(), f.dep.counts(); c.exchanges != 0 || d.exchanges != 0 {
			t.Fatalf("exchanges: codehost %d, deploy %d", c.exchanges, d.exchanges)
		}
		// The state is spent: the right callback cannot use it either.
		_, _, err = f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {code}})
		wantRefused(t, err)
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("user denied", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "error": {"access_denied"}, "error_description": {"<script>"}})
		wantRefused(t, err)
		if !strings.Contains(err.Error(), "access_denied") || strings.Contains(err.Error(), "<script>") {
			t.Fatalf("reason: %v", err)
		}
		_, _, err = f.svc.Callback(ctx, "codehost", url.Values{"error": {"<b>odd</b>"}})
		wantRefused(t, err)
		if strings.Contains(err.Error(), "<b>") {
			t.Fatalf("reason echoes the provider's error: %v", err)
		}
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("missing code", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}})
		wantRefused(t, err)
		if c := f.code.counts(); c.exchanges != 0 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
	t.Run("code refused", func(t *testing.T) {
		f := newFixture(t)
		state := f.start("t1", "codehost", "")
		_, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {"never-issued"}})
		wantRefused(t, err)
		if !strings.Contains(err.Error(), "refused the authorization code") || strings.Contains(err.Error(), "never-issued") {
			t.Fatalf("reason: %v", err)
		}
		if c := f.code.counts(); c.exchanges != 1 {
			t.Fatalf("%d exchanges", c.exchanges)
		}
	})
}

func TestTenantBinding(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("tenant-a", "codehost", octocat)
	if acc.TenantID != "tenant-a" {
		t.Fatalf("account landed in %q", acc.TenantID)
	}
	ctx := context.Background()
	if _, err := f.svc.Get(ctx, "tenant-b", acc.ID); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("Get from another tenant: err = %v", err)
	}
	if _, _, err := f.svc.Token(ctx, "tenant-b", acc.ID); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("Token from another tenant: err = %v", err)
	}
	if _, _, err := f.svc.Remove(ctx, "tenant-b", acc.ID); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("Remove from another tenant: err = %v", err)
	}
	if list, _ := f.svc.List(ctx, "tenant-b"); len(list) != 0 {
		t.Fatalf("tenant-b lists %d accounts", len(list))
	}
	if got, err := f.svc.Get(ctx, "tenant-a", acc.ID); err != nil || got.ID != acc.ID {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	// The same external account connected by another tenant is another
	// account.
	other := f.connect("tenant-b", "codehost", octocat)
	if other.ID == acc.ID || other.TenantID != "tenant-b" {
		t.Fatalf("tenant-b's account: %+v", other)
	}
}

// nearExpiry moves the clock to within the refresh skew of the token's
// expiry (which is an hour after it was issued).
func (f *fixture) nearExpiry() {
	f.clock.Advance(tokenTTL - time.Minute)
}

func TestTokenFreshIsNotRefreshed(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.clock.Advance(tokenTTL - 3*time.Minute) // outside the 2m skew
	if _, _, err := f.svc.Token(context.Background(), "t1", acc.ID); err != nil {
		t.Fatal(err)
	}
	if c := f.code.counts(); c.refreshes != 0 {
		t.Fatalf("%d refreshes", c.refreshes)
	}
	// A token that never expires is never refreshed.
	dep := f.connect("t1", "deploy", connectors.Identity{ExternalID: "team_1", Login: "acme"})
	f.clock.Advance(1000 * time.Hour)
	if _, _, err := f.svc.Token(context.Background(), "t1", dep.ID); err != nil {
		t.Fatal(err)
	}
}

func TestTokenRefreshedNearExpiry(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	old, _, _ := f.svc.Token(context.Background(), "t1", acc.ID)
	f.nearExpiry()
	tok, got, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken == old.AccessToken || tok.RefreshToken == old.RefreshToken {
		t.Fatal("token not refreshed")
	}
	if !got.TokenExpiry.Equal(f.clock.Now().Add(tokenTTL)) || got.SealedToken != nil {
		t.Fatalf("returned account expiry %v", got.TokenExpiry)
	}
	again, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil || again.AccessToken != tok.AccessToken {
		t.Fatalf("second call: %v", err)
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", c.refreshes)
	}
}

func TestConcurrentTokenCallsRefreshOnce(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.nearExpiry()
	gate := make(chan struct{})
	f.code.set(func(p *fakeProvider) { p.refreshGate = gate })

	const n = 20
	var started atomic.Int32
	var wg sync.WaitGroup
	toks := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			started.Add(1)
			tok, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
			errs[i] = err
			if err == nil {
				toks[i] = tok.AccessToken
			}
		})
	}
	<-f.code.refreshEntered
	testenv.Eventually(t, 5*time.Second, "all callers to start", func() bool { return started.Load() == n })
	close(gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if toks[i] != toks[0] {
			t.Fatalf("callers got different tokens")
		}
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want exactly 1", c.refreshes)
	}
	// In one process the callers share one flight: none of them even
	// found the cross-process lease taken.
	if n := f.store.failedLockCount(); n != 0 {
		t.Fatalf("%d failed lease attempts in one process", n)
	}
}

func TestTwoProcessesRefreshOnce(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	other := f.newService() // a second process on the same store
	f.nearExpiry()
	gate := make(chan struct{})
	f.code.set(func(p *fakeProvider) { p.refreshGate = gate })

	var wg sync.WaitGroup
	const perProcess = 10
	errs := make(chan error, 2*perProcess)
	toks := make(chan string, 2*perProcess)
	for _, svc := range []*Service{f.svc, other} {
		for range perProcess {
			wg.Go(func() {
				tok, _, err := svc.Token(context.Background(), "t1", acc.ID)
				errs <- err
				if err == nil {
					toks <- tok.AccessToken
				}
			})
		}
	}
	<-f.code.refreshEntered
	// The other process found the lease taken and is polling.
	testenv.Eventually(t, 5*time.Second, "the other process to find the lease taken", func() bool { return f.store.failedLockCount() >= 1 })
	close(gate)
	wg.Wait()
	close(errs)
	close(toks)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var first string
	for tok := range toks {
		if first == "" {
			first = tok
		}
		if tok != first {
			t.Fatal("processes got different tokens")
		}
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want exactly 1", c.refreshes)
	}
}

func TestRotatedRefreshTokenPersisted(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	orig, _, _ := f.svc.Token(context.Background(), "t1", acc.ID)
	f.nearExpiry()
	tok1, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Before the caller got tok1, the rotated refresh token was stored.
	stored, err := f.svc.openToken(f.store.account(t, acc.ID))
	if err != nil {
		t.Fatal(err)
	}
	if stored.RefreshToken != tok1.RefreshToken || stored.AccessToken != tok1.AccessToken || stored.RefreshToken == orig.RefreshToken {
		t.Fatal("the rotated token was not stored")
	}
	// A fresh process (nothing in memory) refreshes with the stored,
	// rotated refresh token; the provider refuses the old one.
	f.nearExpiry()
	fresh := f.newService()
	tok2, got, err := fresh.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatalf("second refresh: %v", err)
	}
	if got.Status != store.StatusActive || tok2.AccessToken == tok1.AccessToken {
		t.Fatal("second refresh did not happen")
	}
	used := f.code.refreshTokensUsed()
	if len(used) != 2 || used[0] != orig.RefreshToken || used[1] != tok1.RefreshToken {
		t.Fatalf("refresh tokens used: %d, want the original then the rotated one", len(used))
	}
}

func TestRefreshTokenNotStoredIsNotReturned(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.nearExpiry()
	f.store.mu.Lock()
	f.store.failUpdate = errors.New("store unavailable")
	f.store.mu.Unlock()
	tok, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err == nil || tok != nil {
		t.Fatal("a refreshed token that could not be stored was returned")
	}
	if !strings.Contains(err.Error(), "store unavailable") {
		t.Fatalf("err = %v", err)
	}
}

func TestInvalidGrantNeedsReauth(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.nearExpiry()
	f.code.set(func(p *fakeProvider) { p.refreshErr = fmt.Errorf("token endpoint: %w", connectors.ErrInvalidGrant) })
	_, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	var ae *AccountError
	if !errors.Is(err, ErrNeedsReauth) || !errors.As(err, &ae) || ae.AccountID != acc.ID || ae.Status != store.StatusNeedsReauth {
		t.Fatalf("err = %v, want ErrNeedsReauth", err)
	}
	if errors.Is(err, ErrAccountRemoved) || errors.Is(err, ErrAccountNotFound) {
		t.Fatal("needs-reauth error matches other sentinels")
	}
	stored := f.store.account(t, acc.ID)
	if stored.Status != store.StatusNeedsReauth || !strings.Contains(stored.StatusReason, "reconnect") {
		t.Fatalf("stored status %q, reason %q", stored.Status, stored.StatusReason)
	}
	for range 10 {
		if _, _, err := f.svc.Token(context.Background(), "t1", acc.ID); !errors.Is(err, ErrNeedsReauth) {
			t.Fatalf("err = %v", err)
		}
		if _, _, err := f.svc.Client(context.Background(), "t1", acc.ID); !errors.Is(err, ErrNeedsReauth) {
			t.Fatalf("Client: err = %v", err)
		}
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1 (no retry storm)", c.refreshes)
	}
	// Reconnecting makes it active again.
	f.code.set(func(p *fakeProvider) { p.refreshErr = nil })
	back := f.connect("t1", "codehost", octocat)
	if back.ID != acc.ID || back.Status != store.StatusActive {
		t.Fatalf("after reconnect: %+v", back)
	}
}

func TestRefreshNetworkErrorLeavesAccount(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.nearExpiry()
	before := f.store.account(t, acc.ID)
	f.code.set(func(p *fakeProvider) { p.refreshErr = errors.New("dial tcp: connection refused") })
	_, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err == nil || errors.Is(err, ErrNeedsReauth) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v, want a wrapped network error", err)
	}
	after := f.store.account(t, acc.ID)
	if after.Version != before.Version || after.Status != store.StatusActive {
		t.Fatal("a network failure changed the account")
	}
	// It recovers on the next call.
	f.code.set(func(p *fakeProvider) { p.refreshErr = nil })
	if _, _, err := f.svc.Token(context.Background(), "t1", acc.ID); err != nil {
		t.Fatal(err)
	}
}

func TestExpiredUnrefreshableTokenNeedsReauth(t *testing.T) {
	f := newFixture(t)
	p := newFakeProvider("analytics", true, f.clock.Now, tokenTTL, false)
	svc, err := New(Options{Store: f.store, Vault: f.vault, Providers: map[string]connectors.Provider{"analytics": p}, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	f.code = p
	acc := f.connect("t1", "analytics", connectors.Identity{ExternalID: "sub-1", Login: "a@example.test"})
	f.nearExpiry() // within the skew but not expired: still usable
	if _, _, err := svc.Token(context.Background(), "t1", acc.ID); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute)
	if _, _, err := svc.Token(context.Background(), "t1", acc.ID); !errors.Is(err, ErrNeedsReauth) {
		t.Fatalf("err = %v", err)
	}
}

func TestTokenRemovedAndUnknown(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	if _, _, err := f.svc.Remove(context.Background(), "t1", acc.ID); err != nil {
		t.Fatal(err)
	}
	_, got, err := f.svc.Token(context.Background(), "t1", acc.ID)
	var ae *AccountError
	if !errors.Is(err, ErrAccountRemoved) || !errors.As(err, &ae) || !strings.Contains(ae.Reason, "removed by the user") {
		t.Fatalf("err = %v, want ErrAccountRemoved with the reason", err)
	}
	if got.ID != acc.ID || got.Status != store.StatusRemoved {
		t.Fatalf("account = %+v", got)
	}
	if _, _, err := f.svc.Client(context.Background(), "t1", acc.ID); !errors.Is(err, ErrAccountRemoved) {
		t.Fatalf("Client: err = %v", err)
	}
	_, _, err = f.svc.Token(context.Background(), "t1", "acc_nope")
	if !errors.Is(err, ErrAccountNotFound) || !errors.As(err, &ae) || ae.AccountID != "acc_nope" {
		t.Fatalf("err = %v, want ErrAccountNotFound", err)
	}
	if _, err := f.svc.Get(context.Background(), "t1", "acc_nope"); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("Get: err = %v", err)
	}
}

func TestTokenCallerCancelled(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	other := f.newService()
	f.nearExpiry()
	gate := make(chan struct{})
	f.code.set(func(p *fakeProvider) { p.refreshGate = gate })
	done := make(chan error, 1)
	go func() {
		_, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
		done <- err
	}()
	<-f.code.refreshEntered
	// A caller in another process gives up while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, _, err := other.Token(ctx, "t1", acc.ID)
		waited <- err
	}()
	testenv.Eventually(t, 5*time.Second, "the waiter to poll", func() bool { return f.store.failedLockCount() >= 1 })
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: err = %v", err)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes", c.refreshes)
	}
}

func TestClient(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	tok, _, _ := f.svc.Token(context.Background(), "t1", acc.ID)

	var canaryHits atomic.Int32
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		canaryHits.Add(1)
	}))
	defer canary.Close()
	var gotAuth string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		http.Redirect(w, r, canary.URL+"/steal", http.StatusFound)
	}))
	defer api.Close()

	c, got, err := f.svc.Client(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != acc.ID {
		t.Fatal("wrong account")
	}
	resp, err := c.Get(api.URL + "/user")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the 302 itself", resp.StatusCode)
	}
	if gotAuth != "Bearer "+tok.AccessToken {
		t.Fatal("the bearer token was not sent")
	}
	if canaryHits.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestRemoveRevokesAndDeletes(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.clock.Advance(time.Minute)
	got, report, err := f.svc.Remove(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !report.Revoked || report.RevokeError != "" {
		t.Fatalf("report = %+v", report)
	}
	if got.Status != store.StatusRemoved || got.StatusReason != "removed by the user; reconnect it to use it again" || !got.RemovedAt.Equal(f.clock.Now()) {
		t.Fatalf("account = %+v", got)
	}
	stored := f.store.account(t, acc.ID)
	if stored.SealedToken != nil || !stored.TokenExpiry.IsZero() || stored.Status != store.StatusRemoved {
		t.Fatalf("credentials not deleted: %+v", stored)
	}
	if c := f.code.counts(); c.revokes != 1 {
		t.Fatalf("%d revokes", c.revokes)
	}

	// Idempotent.
	again, report, err := f.svc.Remove(context.Background(), "t1", acc.ID)
	if err != nil || again.ID != acc.ID || report.Revoked || report.RevokeError != "already removed" {
		t.Fatalf("second remove: %+v, %+v, %v", again, report, err)
	}
	if c := f.code.counts(); c.revokes != 1 {
		t.Fatalf("%d revokes after the second remove", c.revokes)
	}
	if _, _, err := f.svc.Remove(context.Background(), "t1", "acc_nope"); !errors.Is(err, ErrAccountNotFound) {
		t.Fatalf("remove unknown: err = %v", err)
	}
}

func TestRemoveDeletesWhenRevokeFails(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	tok, _, _ := f.svc.Token(context.Background(), "t1", acc.ID)
	f.code.set(func(p *fakeProvider) {
		p.revokeErr = fmt.Errorf("revoke %s: 503 service unavailable", tok.AccessToken)
	})
	_, report, err := f.svc.Remove(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if report.Revoked || !strings.Contains(report.RevokeError, "503") {
		t.Fatalf("report = %+v", report)
	}
	if strings.Contains(report.RevokeError, tok.AccessToken) {
		t.Fatal("the revoke error holds the token")
	}
	if stored := f.store.account(t, acc.ID); stored.SealedToken != nil || stored.Status != store.StatusRemoved {
		t.Fatal("credentials kept after a failed revocation")
	}
}

func TestRemoveNeedsReauthAccount(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	f.nearExpiry()
	f.code.set(func(p *fakeProvider) { p.refreshErr = connectors.ErrInvalidGrant })
	if _, _, err := f.svc.Token(context.Background(), "t1", acc.ID); !errors.Is(err, ErrNeedsReauth) {
		t.Fatal(err)
	}
	got, _, err := f.svc.Remove(context.Background(), "t1", acc.ID)
	if err != nil || got.Status != store.StatusRemoved {
		t.Fatalf("%+v, %v", got, err)
	}
	if stored := f.store.account(t, acc.ID); stored.SealedToken != nil {
		t.Fatal("credentials kept")
	}
}

// TestNoSecretsLeak runs a whole flow, a refresh, failures and a removal,
// and checks that no token, code, verifier or state reaches the logs or
// an error, and that the store never holds a token or verifier in clear.
func TestNoSecretsLeak(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var records [][]byte

	state := f.start("t1", "codehost", "/back")
	records = append(records, f.store.dump(t)) // the flow state
	code := f.newCode("codehost", octocat)
	acc, _, err := f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {code}})
	if err != nil {
		t.Fatal(err)
	}
	records = append(records, f.store.dump(t))
	// Replay, a foreign connector, a refused code, a failing exchange.
	_, _, err = f.svc.Callback(ctx, "codehost", url.Values{"state": {state}, "code": {code}})
	keep(err)
	s2 := f.start("t1", "codehost", "")
	_, _, err = f.svc.Callback(ctx, "deploy", url.Values{"state": {s2}, "code": {code}})
	keep(err)
	s3 := f.start("t1", "codehost", "")
	_, _, err = f.svc.Callback(ctx, "codehost", url.Values{"state": {s3}, "code": {"unissued-code-123"}})
	keep(err)

	f.nearExpiry()
	_, _, err = f.svc.Token(ctx, "t1", acc.ID)
	keep(err)
	records = append(records, f.store.dump(t))
	_, _, err = f.svc.Client(ctx, "t1", acc.ID)
	keep(err)

	// A refresh failing with an error that echoes the tokens.
	f.nearExpiry()
	cur, _ := f.svc.openToken(f.store.account(t, acc.ID))
	f.code.set(func(p *fakeProvider) {
		p.refreshErr = fmt.Errorf("POST /token refresh_token=%s access=%s: timeout", cur.RefreshToken, cur.AccessToken)
	})
	_, _, err = f.svc.Token(ctx, "t1", acc.ID)
	if err == nil {
		t.Fatal("refresh error not returned")
	}
	keep(err)
	f.code.set(func(p *fakeProvider) { p.refreshErr = connectors.ErrInvalidGrant })
	_, _, err = f.svc.Token(ctx, "t1", acc.ID)
	keep(err)
	_, _, err = f.svc.Token(ctx, "t1", acc.ID)
	keep(err)
	records = append(records, f.store.dump(t))

	f.code.set(func(p *fakeProvider) { p.revokeErr = fmt.Errorf("revoke %s failed", cur.AccessToken) })
	_, report, err := f.svc.Remove(ctx, "t1", acc.ID)
	keep(err)
	errs = append(errs, errors.New(report.RevokeError))
	_, _, err = f.svc.Token(ctx, "t1", acc.ID)
	keep(err)
	records = append(records, f.store.dump(t))

	logs := f.logs.Bytes()
	if !bytes.Contains(logs, []byte(`"account_id":"`+acc.ID+`"`)) || !bytes.Contains(logs, []byte(`"tenant_id":"t1"`)) || !bytes.Contains(logs, []byte(`"connector":"codehost"`)) {
		t.Fatalf("logs lack the account fields:\n%s", logs)
	}
	if len(errs) < 8 {
		t.Fatalf("only %d errors collected", len(errs))
	}
	secrets := append(f.code.allSecrets(), "unissued-code-123")
	var tokens, verifiers int
	for _, s := range secrets {
		if strings.Contains(s, "-access-") || strings.Contains(s, "-refresh-") {
			tokens++
		}
		if len(s) == 43 {
			verifiers++ // states and verifiers
		}
		if bytes.Contains(logs, []byte(s)) {
			t.Errorf("the logs hold a secret (%d chars)", len(s))
		}
		for _, err := range errs {
			if strings.Contains(err.Error(), s) {
				t.Errorf("an error holds a secret: %v", err)
			}
		}
	}
	if tokens < 4 || verifiers < 6 {
		t.Fatalf("the fake recorded %d tokens and %d states/verifiers; the test is not checking much", tokens, verifiers)
	}
	// Stored records: no token or verifier in clear (the state is the
	// flow record's key, so it is stored by design).
	f.code.mu.Lock()
	var verifierValues []string
	for _, v := range f.code.flows {
		verifierValues = append(verifierValues, v)
	}
	f.code.mu.Unlock()
	for _, rec := range records {
		for _, s := range secrets {
			if (strings.Contains(s, "-access-") || strings.Contains(s, "-refresh-")) && bytes.Contains(rec, []byte(s)) {
				t.Error("a stored record holds a token in clear")
			}
		}
		for _, v := range verifierValues {
			if bytes.Contains(rec, []byte(v)) {
				t.Error("a stored record holds a verifier in clear")
			}
		}
	}
}

func TestSealedTokenBoundToAccount(t *testing.T) {
	f := newFixture(t)
	a := f.connect("t1", "codehost", octocat)
	b := f.connect("t1", "codehost", connectors.Identity{ExternalID: "2", Login: "hubot"})
	// Move A's ciphertext onto B: B's token no longer opens.
	f.store.mu.Lock()
	sa := f.store.accounts[a.ID]
	sb := f.store.accounts[b.ID]
	sb.SealedToken = bytes.Clone(sa.SealedToken)
	f.store.accounts[b.ID] = sb
	f.store.mu.Unlock()
	_, _, err := f.svc.Token(context.Background(), "t1", b.ID)
	if !errors.Is(err, ErrUndecryptable) {
		t.Fatalf("swapped ciphertext: err = %v, want ErrUndecryptable", err)
	}
	if _, _, err := f.svc.Token(context.Background(), "t1", a.ID); err != nil {
		t.Fatal(err)
	}
}

func TestAccountErrorIs(t *testing.T) {
	for _, c := range []struct {
		err  *AccountError
		want error
	}{
		{&AccountError{AccountID: "a"}, ErrAccountNotFound},
		{&AccountError{AccountID: "a", Status: store.StatusRemoved}, ErrAccountRemoved},
		{&AccountError{AccountID: "a", Status: store.StatusNeedsReauth}, ErrNeedsReauth},
	} {
		wrapped := fmt.Errorf("step: %w", c.err)
		for _, s := range []error{ErrAccountNotFound, ErrAccountRemoved, ErrNeedsReauth} {
			if errors.Is(wrapped, s) != (s == c.want) {
				t.Errorf("%v: errors.Is(%v) = %v", c.err, s, !(s == c.want))
			}
		}
	}
}

func TestAdopt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok := &oauth2.Token{AccessToken: "adopted-access", TokenType: "Bearer"}
	acc, err := f.svc.Adopt(ctx, "t1", "codehost", connectors.Identity{ExternalID: "42", Login: "sandbox"}, tok)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Status != store.StatusActive || acc.Login != "sandbox" || acc.SealedToken != nil {
		t.Fatalf("adopted account %+v (the sealed token must not be returned)", acc)
	}
	got, _, err := f.svc.Token(ctx, "t1", acc.ID)
	if err != nil || got.AccessToken != "adopted-access" {
		t.Fatalf("Token of the adopted account = %v, %v", got, err)
	}
	again, err := f.svc.Adopt(ctx, "t1", "codehost", connectors.Identity{ExternalID: "42", Login: "sandbox"}, tok)
	if err != nil || again.ID != acc.ID {
		t.Fatalf("adopting the same external account again made %v (%v), want %s", again.ID, err, acc.ID)
	}
	if _, err := f.svc.Adopt(ctx, "t1", "nope", connectors.Identity{ExternalID: "1"}, tok); !errors.Is(err, ErrUnknownConnector) {
		t.Fatalf("unknown connector: %v", err)
	}
}

// TestUnavailableConnectorSaysWhy checks that a connector that does not
// exist and one this server has no OAuth settings for are told apart, and
// each says what to do: "github" is not a connector's name, and an
// unconfigured codehost needs its operator's settings, not another name.
func TestUnavailableConnectorSaysWhy(t *testing.T) {
	f := newFixture(t)
	svc, err := New(Options{Store: f.svc.store, Vault: f.svc.vault}) // no providers
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ connector, want string }{
		{"github", `accounts: connector "github" does not exist: the connectors are codehost, deploy, analytics`},
		{"codehost", `accounts: connector "codehost" has no OAuth client settings on this server: its operator sets --codehost-client-id and TRIGGERD_CODEHOST_CLIENT_SECRET`},
	} {
		_, err := svc.Start(context.Background(), "t1", c.connector, "")
		if !errors.Is(err, ErrUnknownConnector) || err.Error() != c.want {
			t.Errorf("%s: %v, want %q matching ErrUnknownConnector", c.connector, err, c.want)
		}
	}
}

// A token the provider refuses (401) long before its expiry is refreshed
// at once, once for many callers; a caller holding the old token later gets
// the new one without another refresh.
func TestRejectedTokenIsRefreshed(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	old, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	toks := make([]*oauth2.Token, 10)
	errs := make([]error, 10)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = f.svc.Rejected(context.Background(), "t1", acc.ID, old.AccessToken) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] == nil || toks[i].AccessToken == old.AccessToken {
			t.Fatalf("call %d: token %v, err %v; want a new token", i, toks[i], errs[i])
		}
		if toks[i].AccessToken != toks[0].AccessToken {
			t.Fatalf("callers got different tokens")
		}
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", c.refreshes)
	}
	stored, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil || stored.AccessToken != toks[0].AccessToken {
		t.Fatalf("stored token is not the refreshed one (err %v)", err)
	}
	// A late caller with the old token gets the stored one.
	late, err := f.svc.Rejected(context.Background(), "t1", acc.ID, old.AccessToken)
	if err != nil || late.AccessToken != toks[0].AccessToken {
		t.Fatalf("late caller: %v, %v", late, err)
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes after a late caller, want 1", c.refreshes)
	}
	if a := f.store.account(t, acc.ID); a.Status != store.StatusActive {
		t.Fatalf("status %q, want active", a.Status)
	}
}

// A refused token with nothing to refresh it, or whose refresh the
// provider refuses too, marks the account needs_reauth; later calls fail
// fast without asking the provider.
func TestRejectedTokenNeedsReauth(t *testing.T) {
	f := newFixture(t)
	dep := f.connect("t1", "deploy", connectors.Identity{ExternalID: "team_1", Login: "acme"})
	tok, _, err := f.svc.Token(context.Background(), "t1", dep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Rejected(context.Background(), "t1", dep.ID, tok.AccessToken); !errors.Is(err, ErrNeedsReauth) {
		t.Fatalf("unrefreshable: err = %v, want ErrNeedsReauth", err)
	}
	if a := f.store.account(t, dep.ID); a.Status != store.StatusNeedsReauth || !strings.Contains(a.StatusReason, "refused the account's token") {
		t.Fatalf("stored status %q, reason %q", a.Status, a.StatusReason)
	}
	if _, _, err := f.svc.Token(context.Background(), "t1", dep.ID); !errors.Is(err, ErrNeedsReauth) {
		t.Fatalf("Token after: err = %v", err)
	}

	acc := f.connect("t1", "codehost", octocat)
	old, _, err := f.svc.Token(context.Background(), "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.code.set(func(p *fakeProvider) { p.refreshErr = fmt.Errorf("token endpoint: %w", connectors.ErrInvalidGrant) })
	if _, err := f.svc.Rejected(context.Background(), "t1", acc.ID, old.AccessToken); !errors.Is(err, ErrNeedsReauth) {
		t.Fatalf("refused refresh: err = %v, want ErrNeedsReauth", err)
	}
	for range 5 {
		if _, err := f.svc.Rejected(context.Background(), "t1", acc.ID, old.AccessToken); !errors.Is(err, ErrNeedsReauth) {
			t.Fatalf("again: err = %v", err)
		}
	}
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1 (no retry storm)", c.refreshes)
	}
}

// A client's request the provider refuses with 401 is sent once more with
// the token Rejected gets, body included; an account with no other token
// gets the 401 back and is marked needs_reauth.
func TestClientReplacesARefusedToken(t *testing.T) {
	f := newFixture(t)
	acc := f.connect("t1", "codehost", octocat)
	dep := f.connect("t1", "deploy", connectors.Identity{ExternalID: "team_1", Login: "acme"})
	ctx := context.Background()
	old, _, err := f.svc.Token(ctx, "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	depTok, _, err := f.svc.Token(ctx, "t1", dep.ID)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused int
	var bodies []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if auth := r.Header.Get("Authorization"); auth == "Bearer "+old.AccessToken || auth == "Bearer "+depTok.AccessToken {
			refused++
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		bodies = append(bodies, r.Method+" "+string(b))
	}))
	t.Cleanup(api.Close)

	c, _, err := f.svc.Client(ctx, "t1", acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		resp, err := c.Post(api.URL+"/repos/o/r/hooks", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200 with the refreshed token", i, resp.StatusCode)
		}
	}
	mu.Lock()
	if refused != 1 || len(bodies) != 2 || bodies[0] != `POST {"n":0}` || bodies[1] != `POST {"n":1}` {
		t.Fatalf("refused %d, bodies %q; want one refusal, then both bodies with the new token", refused, bodies)
	}
	mu.Unlock()
	if c := f.code.counts(); c.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", c.refreshes)
	}

	c, _, err = f.svc.Client(ctx, "t1", dep.ID)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(api.URL + "/v9/projects")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unrefreshable: %d, want the 401 back", resp.StatusCode)
	}
	if _, _, err := f.svc.Client(ctx, "t1", dep.ID); !errors.Is(err, ErrNeedsReauth) {
		t.Fatalf("Client after the refusal: err = %v, want ErrNeedsReauth", err)
	}
}
