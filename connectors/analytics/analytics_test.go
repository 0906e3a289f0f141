package analytics_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/analytics"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
)

const redirect = "https://app.example/oauth/analytics/callback"

var requested = []string{
	"https://www.googleapis.com/auth/analytics.readonly",
	"https://www.googleapis.com/auth/analytics.edit",
	"openid",
	"email",
}

func TestNewValidates(t *testing.T) {
	_, err := analytics.New(analytics.Config{ClientID: "id", ClientSecret: "s3cr3t-value"})
	if err == nil || !strings.Contains(err.Error(), "RedirectURL") {
		t.Fatalf("New without RedirectURL: %v", err)
	}
	connectortest.NoLeak(t, err, "s3cr3t-value")
	c := analytics.DefaultConfig()
	c.ClientID, c.ClientSecret, c.RedirectURL = "id", "s3cr3t-value", redirect
	c.RevokeURL = "ftp://nope"
	if _, err := analytics.New(c); err == nil || !strings.Contains(err.Error(), "RevokeURL") {
		t.Fatalf("New with a bad RevokeURL: %v", err)
	}
	c.RevokeURL = ""
	p, err := analytics.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.AuthCodeURL("x", ""); !strings.HasPrefix(got, analytics.DefaultAuthBaseURL+"?") {
		t.Errorf("default AuthCodeURL = %s", got)
	}
	if p.Connector() != "analytics" || !p.SupportsPKCE() {
		t.Errorf("Connector/SupportsPKCE = %q/%v", p.Connector(), p.SupportsPKCE())
	}
}

func TestAuthCodeURL(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	u, err := url.Parse(p.AuthCodeURL("state-7", verifier))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"client_id":             g.ClientID,
		"redirect_uri":          redirect,
		"response_type":         "code",
		"scope":                 strings.Join(requested, " "),
		"state":                 "state-7",
		"access_type":           "offline",
		"prompt":                "consent",
		"code_challenge":        oauth2.S256ChallengeFromVerifier(verifier),
		"code_challenge_method": "S256",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestSignInExchangeIdentify(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	cb, err := g.SignIn(t.Context(), p.AuthCodeURL("st", verifier))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.Exchange(t.Context(), cb, verifier)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if tok.RefreshToken == "" || !p.CanRefresh(tok) {
		t.Fatal("no refresh token for an offline request")
	}
	if d := time.Until(tok.Expiry); d < 59*time.Minute || d > time.Hour {
		t.Errorf("expiry in %v, want about 1h", d)
	}
	id, err := p.Identify(t.Context(), tok)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if id.ExternalID != "109876543210987654321" || id.Login != "analyst@example.com" {
		t.Errorf("identity = %+v", id)
	}
	if strings.Join(id.Scopes, " ") != strings.Join(requested, " ") {
		t.Errorf("scopes = %v", id.Scopes)
	}
	want := "accounts/1000=Acme Marketing,accounts/1001=Acme Shop,accounts/1002=Side Project"
	if got := id.Metadata[analytics.MetaAccounts]; got != want {
		t.Errorf("accounts = %q, want %q", got, want)
	}
	if n := len(g.RequestsTo(fakeoauth.RouteGoogleAccountSummaries)); n != 2 {
		t.Errorf("accountSummaries pages fetched = %d, want 2", n)
	}
}

func TestIdentifyEscapesNames(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	g.SetAccounts(fakeoauth.GoogleAccount{Name: "accounts/7", DisplayName: "Acme, Inc. 100%"})
	p := g.Provider(redirect)
	id, err := p.Identify(t.Context(), connectortest.ConnectPKCE(t, g, p, redirect, requested...))
	if err != nil {
		t.Fatal(err)
	}
	got := id.Metadata[analytics.MetaAccounts]
	if got != "accounts/7=Acme%2C Inc. 100%25" {
		t.Fatalf("accounts = %q", got)
	}
	_, name, _ := strings.Cut(got, "=")
	if n, err := url.PathUnescape(name); err != nil || n != "Acme, Inc. 100%" {
		t.Errorf("unescaped name = %q, %v", n, err)
	}
}

func TestIdentifyWithoutAnalyticsScope(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, g, p, redirect, "openid", "email")
	_, err := p.Identify(t.Context(), tok)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Identify without analytics scopes: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken)
}

func TestExchangePKCEMismatch(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	cb := g.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), requested...)
	wrong := oauth2.GenerateVerifier()
	_, err := p.Exchange(t.Context(), cb, wrong)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange with the wrong verifier: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), wrong, g.ClientSecret)
}

func TestExchangeReusedCode(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	cb := g.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(verifier), requested...)
	tok, err := p.Exchange(t.Context(), cb, verifier)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Exchange(t.Context(), cb, verifier)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("second Exchange: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), verifier, g.ClientSecret, tok.AccessToken, tok.RefreshToken)
}

func TestExchangeWrongSecret(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	c := g.Config(redirect)
	c.ClientSecret = "wrong-secret-do-not-print"
	p, err := analytics.New(c)
	if err != nil {
		t.Fatal(err)
	}
	verifier := oauth2.GenerateVerifier()
	cb := g.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(verifier), requested...)
	_, err = p.Exchange(t.Context(), cb, verifier)
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("Exchange with a wrong secret: %v", err)
	}
	connectortest.NoLeak(t, err, c.ClientSecret, g.ClientSecret, cb.Get("code"), verifier)
}

func TestRefreshKeepsRefreshToken(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	old := connectortest.ConnectPKCE(t, g, p, redirect, requested...)
	nt, err := p.Refresh(t.Context(), old)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if nt.AccessToken == old.AccessToken || nt.RefreshToken != old.RefreshToken {
		t.Fatalf("Refresh = %+v; want a new access token and the same refresh token", nt)
	}
	if !g.Live(nt.AccessToken) || !g.Live(old.RefreshToken) {
		t.Error("new access token or kept refresh token not live")
	}
	if _, err := p.Refresh(t.Context(), nt); err != nil {
		t.Fatalf("second Refresh: %v", err)
	}
	if g.Refreshes() != 2 {
		t.Errorf("Refreshes = %d, want 2", g.Refreshes())
	}
}

func TestRefreshRefused(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, g, p, redirect, requested...)
	g.RefuseRefresh(true)
	_, err := p.Refresh(t.Context(), tok)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Refresh: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, tok.RefreshToken, tok.AccessToken, g.ClientSecret)
}

func TestRevoke(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, g, p, redirect, requested...)
	if err := p.Revoke(t.Context(), tok, nil); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if got, _ := url.ParseQuery(string(g.RequestsTo(fakeoauth.RouteGoogleRevoke)[0].Body)); got.Get("token") != tok.RefreshToken {
		t.Error("revoke did not send the refresh token")
	}
	if got := connectortest.BearerStatus(t, g.URL()+"/v1/userinfo", tok.AccessToken); got != http.StatusUnauthorized {
		t.Errorf("userinfo after revoke = %d, want 401", got)
	}
	_, err := p.Identify(t.Context(), tok)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Identify after revoke: %v", err)
	}
	if _, err := p.Refresh(t.Context(), tok); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Errorf("Refresh after revoke: %v", err)
	}
	err = p.Revoke(t.Context(), tok, nil)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Errorf("second Revoke: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken, tok.RefreshToken)
}

func TestRevokeUnavailable(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, g, p, redirect, requested...)
	g.FailNext(fakeoauth.RouteGoogleRevoke, 1, http.StatusServiceUnavailable)
	err := p.Revoke(t.Context(), tok, nil)
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Revoke during an outage: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken, tok.RefreshToken, g.ClientSecret)
	if !g.Live(tok.RefreshToken) {
		t.Error("the token died although revoke failed")
	}
	g.HangNext(fakeoauth.RouteGoogleRevoke, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := p.Revoke(ctx, tok, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Revoke against a hung provider: %v", err)
	}
}

func TestRefreshUnavailable(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	p := g.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, g, p, redirect, requested...)
	g.FailNext(fakeoauth.RouteGoogleToken, 1, http.StatusServiceUnavailable)
	_, err := p.Refresh(t.Context(), tok)
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Refresh during an outage: %v", err)
	}
	connectortest.NoLeak(t, err, tok.RefreshToken, g.ClientSecret)
}
