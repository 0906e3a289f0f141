package codehost_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
)

const redirect = "https://app.example/oauth/codehost/callback"

var requested = []string{"repo", "workflow", "gist", "read:org", "project", "admin:org_hook"}

func TestNewValidates(t *testing.T) {
	_, err := codehost.New(codehost.Config{ClientSecret: "s3cr3t-value"})
	if err == nil || !strings.Contains(err.Error(), "ClientID") || !strings.Contains(err.Error(), "RedirectURL") {
		t.Fatalf("New without ClientID/RedirectURL: %v", err)
	}
	connectortest.NoLeak(t, err, "s3cr3t-value")
	c := codehost.DefaultConfig()
	c.ClientID, c.ClientSecret, c.RedirectURL = "id", "s3cr3t-value", "not a url"
	if _, err := codehost.New(c); err == nil || !strings.Contains(err.Error(), "RedirectURL") {
		t.Fatalf("New with a bad RedirectURL: %v", err)
	}
	c.RedirectURL = redirect
	p, err := codehost.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.AuthCodeURL("x", ""); !strings.HasPrefix(got, "https://github.com/login/oauth/authorize?") {
		t.Errorf("default AuthCodeURL = %s", got)
	}
	if p.Connector() != "codehost" || !p.SupportsPKCE() {
		t.Errorf("Connector/SupportsPKCE = %q/%v", p.Connector(), p.SupportsPKCE())
	}
}

func TestAuthCodeURL(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	u, err := url.Parse(p.AuthCodeURL("state-123", verifier))
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/login/oauth/authorize" {
		t.Errorf("path = %s", u.Path)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"client_id":             gh.ClientID,
		"redirect_uri":          redirect,
		"scope":                 "repo workflow gist read:org project admin:org_hook",
		"state":                 "state-123",
		"code_challenge":        oauth2.S256ChallengeFromVerifier(verifier),
		"code_challenge_method": "S256",
	} {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if q.Has("code_verifier") || strings.Contains(u.String(), verifier) {
		t.Error("the verifier itself is in the URL")
	}
	if q := mustQuery(t, p.AuthCodeURL("s", "")); q.Has("code_challenge") {
		t.Error("code_challenge without a verifier")
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func TestSignInExchangeIdentify(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	cb, err := gh.SignIn(t.Context(), p.AuthCodeURL("state-9", verifier))
	if err != nil {
		t.Fatal(err)
	}
	if cb.Get("state") != "state-9" || cb.Get("code") == "" {
		t.Fatalf("callback = %v", cb)
	}
	tok, err := p.Exchange(t.Context(), cb, verifier)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if !strings.HasPrefix(tok.AccessToken, "ghu_") || !strings.HasPrefix(tok.RefreshToken, "ghr_") {
		t.Errorf("token = %q / %q, want ghu_/ghr_", tok.AccessToken, tok.RefreshToken)
	}
	if d := time.Until(tok.Expiry); d < 7*time.Hour || d > 8*time.Hour+time.Minute {
		t.Errorf("expiry in %v, want about 8h", d)
	}
	if !p.CanRefresh(tok) {
		t.Error("CanRefresh = false for a GitHub App user token")
	}
	if got := gh.RequestsTo(fakeoauth.RouteGitHubToken)[0].Header.Get("Accept"); got != "application/json" {
		t.Errorf("token request Accept = %q", got)
	}
	id, err := p.Identify(t.Context(), tok)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if id.ExternalID != "583231" || id.Login != "octocat" {
		t.Errorf("identity = %+v", id)
	}
	if strings.Join(id.Scopes, " ") != strings.Join(requested, " ") {
		t.Errorf("scopes = %v", id.Scopes)
	}
	h := gh.RequestsTo(fakeoauth.RouteGitHubUser)[0].Header
	for k, want := range map[string]string{
		"Authorization":        "Bearer " + tok.AccessToken,
		"Accept":               "application/vnd.github+json",
		"X-Github-Api-Version": "2022-11-28",
		"User-Agent":           "triggerd",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("GET /user %s = %q, want %q", k, got, want)
		}
	}
	if gh.Exchanges() != 1 {
		t.Errorf("Exchanges = %d", gh.Exchanges())
	}
}

func TestIdentifyScopes(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	gh.SetGrantedScopes("repo", "read:org")
	gh.SetUser(fakeoauth.GitHubUser{ID: 42, Login: "hubot"})
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	// A stored token has no token-response extras: the header answers.
	id, err := p.Identify(t.Context(), &oauth2.Token{AccessToken: tok.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	if id.ExternalID != "42" || id.Login != "hubot" || strings.Join(id.Scopes, ",") != "repo,read:org" {
		t.Errorf("identity = %+v", id)
	}
}

func TestExchangePKCEMismatch(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	cb := gh.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()), requested...)
	wrong := oauth2.GenerateVerifier()
	_, err := p.Exchange(t.Context(), cb, wrong)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange with the wrong verifier: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), wrong, gh.ClientSecret)
	// Without a verifier at all the code is refused too.
	cb = gh.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier()))
	if _, err := p.Exchange(t.Context(), cb, ""); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange without a verifier: %v", err)
	}
}

func TestExchangeReusedCode(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	cb := gh.Authorize("st", redirect, oauth2.S256ChallengeFromVerifier(verifier))
	tok, err := p.Exchange(t.Context(), cb, verifier)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Exchange(t.Context(), cb, verifier)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("second Exchange: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), verifier, gh.ClientSecret, tok.AccessToken, tok.RefreshToken)
}

func TestExchangeExpiredCode(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	cb := gh.Authorize("st", redirect, "")
	gh.Advance(11 * time.Minute)
	if _, err := p.Exchange(t.Context(), cb, ""); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange of an expired code: %v", err)
	}
}

func TestExchangeWrongSecret(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	c := gh.Config(redirect)
	c.ClientSecret = "wrong-secret-do-not-print"
	p, err := codehost.New(c)
	if err != nil {
		t.Fatal(err)
	}
	cb := gh.Authorize("st", redirect, "")
	_, err = p.Exchange(t.Context(), cb, "")
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange with a wrong secret: %v", err)
	}
	if !strings.Contains(err.Error(), "incorrect_client_credentials") {
		t.Errorf("error %q does not name the cause", err)
	}
	connectortest.NoLeak(t, err, c.ClientSecret, gh.ClientSecret, cb.Get("code"))
}

func TestExchangeCallbackError(t *testing.T) {
	p := fakeoauth.NewGitHub(t).Provider(redirect)
	_, err := p.Exchange(t.Context(), url.Values{"error": {"access_denied"}, "state": {"s"}}, "")
	if err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("Exchange of a denied callback: %v", err)
	}
	if _, err := p.Exchange(t.Context(), url.Values{"state": {"s"}}, ""); err == nil {
		t.Fatal("Exchange without a code succeeded")
	}
}

func TestTokenEndpointUnavailable(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	cb := gh.Authorize("st", redirect, "")
	gh.FailNext(fakeoauth.RouteGitHubToken, 1, http.StatusServiceUnavailable)
	_, err := p.Exchange(t.Context(), cb, "")
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Exchange during an outage: %v", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), gh.ClientSecret)
	// The code was not consumed by the failed attempt.
	if _, err := p.Exchange(t.Context(), cb, ""); err != nil {
		t.Fatalf("Exchange after the outage: %v", err)
	}
}

func TestRefreshRotates(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	old := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	nt, err := p.Refresh(t.Context(), old)
	if err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if nt.AccessToken == old.AccessToken || nt.RefreshToken == old.RefreshToken || nt.RefreshToken == "" {
		t.Fatalf("Refresh did not rotate: %+v", nt)
	}
	if !gh.Live(nt.AccessToken) || !gh.Live(nt.RefreshToken) {
		t.Error("the new tokens are not live")
	}
	if gh.TokenState(old.RefreshToken) != fakeoauth.TokenRevoked || gh.TokenState(old.AccessToken) != fakeoauth.TokenRevoked {
		t.Errorf("old tokens: refresh %v, access %v; want revoked", gh.TokenState(old.RefreshToken), gh.TokenState(old.AccessToken))
	}
	if got := connectortest.BearerStatus(t, gh.URL()+"/user", old.AccessToken); got != http.StatusUnauthorized {
		t.Errorf("old access token: GET /user = %d", got)
	}
	_, err = p.Refresh(t.Context(), old)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Refresh with the rotated-away token: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, old.RefreshToken, old.AccessToken, nt.RefreshToken, gh.ClientSecret)
	if _, err := p.Refresh(t.Context(), nt); err != nil {
		t.Fatalf("Refresh with the new token: %v", err)
	}
	if gh.Refreshes() != 3 {
		t.Errorf("Refreshes = %d, want 3", gh.Refreshes())
	}
}

func TestRefreshRefused(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	gh.RefuseRefresh(true)
	_, err := p.Refresh(t.Context(), tok)
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Refresh: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, tok.RefreshToken, tok.AccessToken, gh.ClientSecret)
}

func TestOAuthAppTokens(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	gh.SetExpiring(false)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	if !strings.HasPrefix(tok.AccessToken, "gho_") || tok.RefreshToken != "" || !tok.Expiry.IsZero() {
		t.Fatalf("token = %+v", tok)
	}
	if p.CanRefresh(tok) {
		t.Error("CanRefresh = true without a refresh token")
	}
	if _, err := p.Refresh(t.Context(), tok); err == nil {
		t.Error("Refresh without a refresh token succeeded")
	}
}

func TestRevoke(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	if err := p.Revoke(t.Context(), tok, nil); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if n := len(gh.RequestsTo(fakeoauth.RouteGitHubGrant)); n != 0 {
		t.Errorf("%d requests revoked the whole grant, want 0", n)
	}
	reqs := gh.RequestsTo(fakeoauth.RouteGitHubAppToken)
	if len(reqs) != 1 {
		t.Fatalf("%d requests revoked the token, want 1", len(reqs))
	}
	req := reqs[0]
	if user, _, ok := (&http.Request{Header: req.Header}).BasicAuth(); !ok || user != gh.ClientID {
		t.Errorf("revoke did not use Basic auth with the client id")
	}
	if got := connectortest.BearerStatus(t, gh.URL()+"/user", tok.AccessToken); got != http.StatusUnauthorized {
		t.Errorf("GET /user after revoke = %d, want 401", got)
	}
	_, err := p.Identify(t.Context(), tok)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Identify after revoke: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken)
	if _, err := p.Refresh(t.Context(), tok); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Errorf("Refresh after revoke: %v", err)
	}
}

// The same GitHub user connected twice (in two tenants, say) holds two
// tokens of one grant: removing one account must leave the other working.
func TestRevokeLeavesTheUsersOtherTokens(t *testing.T) {
	for _, expiring := range []bool{true, false} {
		t.Run(fmt.Sprintf("expiring %v", expiring), func(t *testing.T) {
			gh := fakeoauth.NewGitHub(t)
			gh.SetExpiring(expiring)
			p := gh.Provider(redirect)
			first, second := connectortest.ConnectPKCE(t, gh, p, redirect, requested...), connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
			if err := p.Revoke(t.Context(), first, nil); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			if got := connectortest.BearerStatus(t, gh.URL()+"/user", first.AccessToken); got != http.StatusUnauthorized {
				t.Errorf("GET /user with the revoked token = %d, want 401", got)
			}
			if got := connectortest.BearerStatus(t, gh.URL()+"/user", second.AccessToken); got != http.StatusOK {
				t.Errorf("GET /user with the user's other token = %d, want 200", got)
			}
			if id, err := p.Identify(t.Context(), second); err != nil || id.Login != "octocat" {
				t.Errorf("Identify with the other token: %+v, %v", id, err)
			}
			if expiring {
				if _, err := p.Refresh(t.Context(), first); !errors.Is(err, connectors.ErrInvalidGrant) {
					t.Errorf("Refresh of the revoked token's refresh token: %v, want ErrInvalidGrant", err)
				}
				if _, err := p.Refresh(t.Context(), second); err != nil {
					t.Errorf("Refresh of the other token: %v", err)
				}
			}
		})
	}
}

func TestRevokeUnavailable(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	gh.FailNext(fakeoauth.RouteGitHubAppToken, 1, http.StatusServiceUnavailable)
	err := p.Revoke(t.Context(), tok, nil)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Revoke during an outage: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken, gh.ClientSecret)
	if !gh.Live(tok.AccessToken) {
		t.Error("the token died although revoke failed")
	}
	if err := p.Revoke(t.Context(), tok, nil); err != nil {
		t.Fatalf("Revoke after the outage: %v", err)
	}
}

func TestRevokeHangs(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	gh.HangNext(fakeoauth.RouteGitHubAppToken, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := p.Revoke(ctx, tok, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Revoke against a hung provider: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken, gh.ClientSecret)
}

// A GitHub App user token expires after 8 hours, and GitHub refuses to
// revoke an expired one, while its refresh token stays good for months.
// Removing an account connected a day ago must still leave nothing alive.
func TestRevokeExpiredToken(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	gh.SetExpiring(true)
	p := gh.Provider(redirect)
	tok := connectortest.ConnectPKCE(t, gh, p, redirect, requested...)
	gh.Advance(24 * time.Hour)
	if gh.Live(tok.AccessToken) {
		t.Fatal("the access token is still live a day later")
	}
	if err := p.Revoke(t.Context(), tok, nil); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	for _, info := range gh.Tokens() {
		if info.State == fakeoauth.TokenLive {
			t.Errorf("a %s token is still live after Revoke", info.Kind)
		}
	}
	if _, err := p.Refresh(t.Context(), tok); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Errorf("Refresh with the removed account's refresh token: %v, want ErrInvalidGrant", err)
	}
	// Revoked before: nothing alive, nothing to do.
	if err := p.Revoke(t.Context(), tok, nil); err != nil {
		t.Errorf("Revoke again: %v", err)
	}
}
