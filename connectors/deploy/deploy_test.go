package deploy_test

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
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/connectors/deploy"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
)

const redirect = "https://app.example/oauth/deploy/callback"

func TestNewValidates(t *testing.T) {
	c := deploy.DefaultConfig()
	c.ClientID, c.ClientSecret, c.RedirectURL = "oac_x", "s3cr3t-value", redirect
	_, err := deploy.New(c)
	if err == nil || !strings.Contains(err.Error(), "IntegrationSlug") {
		t.Fatalf("New without a slug: %v", err)
	}
	connectortest.NoLeak(t, err, "s3cr3t-value")
	c.IntegrationSlug = "my-app"
	p, err := deploy.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.AuthCodeURL("abc", "ignored"); got != "https://vercel.com/integrations/my-app/new?state=abc" {
		t.Errorf("AuthCodeURL = %s", got)
	}
	if p.Connector() != "deploy" || p.SupportsPKCE() {
		t.Errorf("Connector/SupportsPKCE = %q/%v", p.Connector(), p.SupportsPKCE())
	}
}

func TestAuthCodeURL(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	p := v.Provider(redirect)
	u, err := url.Parse(p.AuthCodeURL("state-1", oauth2.GenerateVerifier()))
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/integrations/"+v.Slug+"/new" {
		t.Errorf("path = %s", u.Path)
	}
	if q := u.Query(); len(q) != 1 || q.Get("state") != "state-1" {
		t.Errorf("query = %v, want only state", q)
	}
}

func TestPersonalInstall(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	p := v.Provider(redirect)
	cb, err := v.SignIn(t.Context(), p.AuthCodeURL("st", ""))
	if err != nil {
		t.Fatal(err)
	}
	if cb.Get("state") != "st" || cb.Get("code") == "" || cb.Get("configurationId") == "" || cb.Has("teamId") {
		t.Fatalf("callback = %v", cb)
	}
	tok, err := p.Exchange(t.Context(), cb, "")
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if !tok.Expiry.IsZero() || tok.RefreshToken != "" || p.CanRefresh(tok) {
		t.Errorf("token should be long-lived without refresh: %+v", tok)
	}
	form := v.RequestsTo(fakeoauth.RouteVercelToken)[0]
	if got, _ := url.ParseQuery(string(form.Body)); got.Get("client_id") != v.ClientID || got.Get("redirect_uri") != redirect {
		t.Errorf("token form = %v", got)
	}
	id, err := p.Identify(t.Context(), tok)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if id.ExternalID != "user_fake0001" || id.Login != "jdoe" {
		t.Errorf("identity = %+v", id)
	}
	want := map[string]string{deploy.MetaConfigurationID: cb.Get("configurationId"), deploy.MetaUserID: "user_fake0001"}
	if len(id.Metadata) != len(want) || id.Metadata[deploy.MetaConfigurationID] != want[deploy.MetaConfigurationID] || id.Metadata[deploy.MetaUserID] != want[deploy.MetaUserID] {
		t.Errorf("metadata = %v, want %v", id.Metadata, want)
	}
	if _, err := p.Refresh(t.Context(), tok); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Refresh: %v, want ErrUnsupported", err)
	}
	if err := p.Revoke(t.Context(), tok, id.Metadata); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if got := v.RequestsTo(fakeoauth.RouteVercelConfiguration)[0]; got.Path != "/v1/integrations/configuration/"+cb.Get("configurationId") || got.Query.Has("teamId") {
		t.Errorf("revoke request = %s ?%v", got.Path, got.Query)
	}
	if got := connectortest.BearerStatus(t, v.URL()+"/v2/user", tok.AccessToken); got != http.StatusUnauthorized {
		t.Errorf("GET /v2/user after revoke = %d, want 401", got)
	}
}

func TestTeamInstall(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	v.SetTeam(&fakeoauth.VercelTeam{ID: "team_fake42", Slug: "acme", Name: "Acme"})
	p := v.Provider(redirect)
	cb := v.Authorize("st", redirect)
	if cb.Get("teamId") != "team_fake42" {
		t.Fatalf("callback = %v", cb)
	}
	tok, err := p.Exchange(t.Context(), cb, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Extra("team_id"); got != "team_fake42" {
		t.Errorf("team_id extra = %v", got)
	}
	id, err := p.Identify(t.Context(), tok)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	if id.ExternalID != "team_fake42" || id.Login != "acme" || id.Metadata[deploy.MetaTeamID] != "team_fake42" ||
		id.Metadata[deploy.MetaConfigurationID] != cb.Get("configurationId") || id.Metadata[deploy.MetaUserID] != "user_fake0001" {
		t.Errorf("identity = %+v", id)
	}
	// A token restored from storage has no extras: the metadata carries
	// what Revoke needs, including the team.
	stored := &oauth2.Token{AccessToken: tok.AccessToken, TokenType: "Bearer"}
	if err := p.Revoke(t.Context(), stored, id.Metadata); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if got := v.RequestsTo(fakeoauth.RouteVercelConfiguration)[0].Query.Get("teamId"); got != "team_fake42" {
		t.Errorf("revoke teamId = %q", got)
	}
	if v.TokenState(tok.AccessToken) != fakeoauth.TokenRevoked {
		t.Error("token not revoked")
	}
	_, err = p.Identify(t.Context(), tok)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Identify after revoke: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken)
}

func TestTeamRevokeNeedsTeamID(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	v.SetTeam(&fakeoauth.VercelTeam{ID: "team_fake42", Slug: "acme", Name: "Acme"})
	p := v.Provider(redirect)
	tok, err := p.Exchange(t.Context(), v.Authorize("st", redirect), "")
	if err != nil {
		t.Fatal(err)
	}
	stored := &oauth2.Token{AccessToken: tok.AccessToken}
	err = p.Revoke(t.Context(), stored, map[string]string{deploy.MetaConfigurationID: tok.Extra("configuration_id").(string)})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Revoke of a team configuration without teamId: %v", err)
	}
	if err := p.Revoke(t.Context(), stored, nil); err == nil {
		t.Fatal("Revoke without a configuration id succeeded")
	}
}

func TestExchangeReusedCode(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	p := v.Provider(redirect)
	cb := v.Authorize("st", redirect)
	tok, err := p.Exchange(t.Context(), cb, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Exchange(t.Context(), cb, "")
	if !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("second Exchange: %v, want ErrInvalidGrant", err)
	}
	connectortest.NoLeak(t, err, cb.Get("code"), tok.AccessToken, v.ClientSecret)
}

func TestExchangeWrongSecret(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	c := v.Config(redirect)
	c.ClientSecret = "wrong-secret-do-not-print"
	p, err := deploy.New(c)
	if err != nil {
		t.Fatal(err)
	}
	cb := v.Authorize("st", redirect)
	_, err = p.Exchange(t.Context(), cb, "")
	if err == nil || errors.Is(err, connectors.ErrInvalidGrant) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Exchange with a wrong secret: %v", err)
	}
	connectortest.NoLeak(t, err, c.ClientSecret, v.ClientSecret, cb.Get("code"))
}

func TestExchangeRedirectMismatch(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	p := v.Provider(redirect)
	other := v.Provider("https://other.example/callback")
	cb := v.Authorize("st", redirect)
	if _, err := other.Exchange(t.Context(), cb, ""); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("Exchange with another redirect_uri: %v", err)
	}
	if _, err := p.Exchange(t.Context(), cb, ""); !errors.Is(err, connectors.ErrInvalidGrant) {
		t.Fatalf("the code survived a refused attempt: %v", err)
	}
}

func TestRevokeUnavailable(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	p := v.Provider(redirect)
	tok, err := p.Exchange(t.Context(), v.Authorize("st", redirect), "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := p.Identify(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	v.FailNext(fakeoauth.RouteVercelConfiguration, 1, http.StatusServiceUnavailable)
	err = p.Revoke(t.Context(), tok, id.Metadata)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Revoke during an outage: %v", err)
	}
	connectortest.NoLeak(t, err, tok.AccessToken, v.ClientSecret)
	if !v.Live(tok.AccessToken) {
		t.Error("the token died although revoke failed")
	}
	v.HangNext(fakeoauth.RouteVercelConfiguration, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := p.Revoke(ctx, tok, id.Metadata); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Revoke against a hung provider: %v", err)
	}
	if err := p.Revoke(t.Context(), tok, id.Metadata); err != nil {
		t.Fatalf("Revoke after the outage: %v", err)
	}
}
