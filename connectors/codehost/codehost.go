// Package codehost is the code-hosting connector (GitHub's API): its OAuth
// side for connected accounts (this file) and its tool steps with the HTTP
// policy they run under (steps*.go, api_*.go, client.go, policy.go: per-account
// rate-limit tracking, an ETag cache that makes repeated reads free, and
// retries of idempotent requests). fakecodehost is a faithful in-process
// fake of the REST API for tests and the sandbox.
//
// The OAuth side covers GitHub OAuth apps and GitHub App user-to-server
// tokens. It sends users to GitHub's authorize page (with PKCE S256), exchanges the
// callback code for a token, reads whom the token belongs to, refreshes
// expiring GitHub App user tokens (which rotate their refresh token) and
// revokes the account's token (not the user's whole grant) when an account
// is removed.
package codehost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// Default endpoints of github.com.
const (
	DefaultAuthBaseURL = "https://github.com"
	DefaultAPIBaseURL  = "https://api.github.com"
)

const (
	name       = "codehost"
	tokenPath  = "/login/oauth/access_token"
	authPath   = "/login/oauth/authorize"
	apiVersion = "2022-11-28"
	userAgent  = "triggerd"
	mediaType  = "application/vnd.github+json"
)

// scopes are the OAuth scopes requested from GitHub (space-delimited on the
// wire). GitHub Apps ignore them and use the app's permissions instead.
// admin:org_hook is for the organisation-level triggers: GitHub requires
// it of OAuth app tokens on /orgs/{org}/hooks, and repo, which covers
// repository hooks, does not cover organisation ones.
var scopes = []string{"repo", "workflow", "gist", "read:org", "project", "admin:org_hook"}

var _ connectors.Provider = (*Provider)(nil)

// Config configures a Provider. ClientID, ClientSecret and RedirectURL are
// required; empty URLs fall back to github.com's.
type Config struct {
	// ClientID is the OAuth app's or GitHub App's client id.
	ClientID string
	// ClientSecret is the matching client secret.
	ClientSecret string
	// RedirectURL is the registered callback URL.
	RedirectURL string
	// AuthBaseURL is the web host serving /login/oauth/authorize
	// (default https://github.com).
	AuthBaseURL string
	// TokenURL is the token endpoint (default AuthBaseURL +
	// /login/oauth/access_token).
	TokenURL string
	// APIBaseURL is the REST API root (default https://api.github.com).
	APIBaseURL string
	// HTTPClient makes every request. Nil means a client with a 30 s
	// timeout that does not follow redirects.
	HTTPClient *http.Client
}

// DefaultConfig returns a Config with github.com's endpoints filled in; the
// caller adds the client credentials and redirect URL.
func DefaultConfig() Config {
	return Config{
		AuthBaseURL: DefaultAuthBaseURL,
		TokenURL:    DefaultAuthBaseURL + tokenPath,
		APIBaseURL:  DefaultAPIBaseURL,
	}
}

// Provider is the GitHub implementation of connectors.Provider. It is safe
// for concurrent use.
type Provider struct {
	oauth        oauth2.Config
	clientSecret string
	apiBase      string
	client       *http.Client // API calls
	tokenClient  *http.Client // token endpoint: asks for JSON
}

// New validates c and returns a Provider.
func New(c Config) (*Provider, error) {
	var missing []string
	if c.ClientID == "" {
		missing = append(missing, "ClientID")
	}
	if c.ClientSecret == "" {
		missing = append(missing, "ClientSecret")
	}
	if c.RedirectURL == "" {
		missing = append(missing, "RedirectURL")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: config: missing %s", name, strings.Join(missing, ", "))
	}
	if c.AuthBaseURL == "" {
		c.AuthBaseURL = DefaultAuthBaseURL
	}
	c.AuthBaseURL = strings.TrimRight(c.AuthBaseURL, "/")
	if c.TokenURL == "" {
		c.TokenURL = c.AuthBaseURL + tokenPath
	}
	if c.APIBaseURL == "" {
		c.APIBaseURL = DefaultAPIBaseURL
	}
	c.APIBaseURL = strings.TrimRight(c.APIBaseURL, "/")
	for _, u := range []struct{ field, value string }{
		{"RedirectURL", c.RedirectURL},
		{"AuthBaseURL", c.AuthBaseURL},
		{"TokenURL", c.TokenURL},
		{"APIBaseURL", c.APIBaseURL},
	} {
		if err := provhttp.CheckURL(u.value); err != nil {
			return nil, fmt.Errorf("%s: config: %s: %w", name, u.field, err)
		}
	}
	client := c.HTTPClient
	if client == nil {
		client = provhttp.DefaultClient()
	}
	tokenClient := *client
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	tokenClient.Transport = jsonAccept{base: base}
	return &Provider{
		oauth: oauth2.Config{
			ClientID:     c.ClientID,
			ClientSecret: c.ClientSecret,
			RedirectURL:  c.RedirectURL,
			Scopes:       scopes,
			Endpoint: oauth2.Endpoint{
				AuthURL:   c.AuthBaseURL + authPath,
				TokenURL:  c.TokenURL,
				AuthStyle: oauth2.AuthStyleInParams,
			},
		},
		clientSecret: c.ClientSecret,
		apiBase:      c.APIBaseURL,
		client:       client,
		tokenClient:  &tokenClient,
	}, nil
}

// Connector returns "codehost".
func (p *Provider) Connector() string { return name }

// SupportsPKCE reports true: GitHub accepts PKCE S256 since July 2025.
func (p *Provider) SupportsPKCE() bool { return true }

// AuthCodeURL returns GitHub's authorize URL carrying the client id,
// redirect URL, scopes, state and, when verifier is set, the S256 code
// challenge.
func (p *Provider) AuthCodeURL(state, verifier string) string {
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	return p.oauth.AuthCodeURL(state, opts...)
}

// Exchange trades the callback's code (and the PKCE verifier, when one was
// used) for a token. A refused code is an error wrapping
// connectors.ErrInvalidGrant.
func (p *Provider) Exchange(ctx context.Context, callback url.Values, verifier string) (*oauth2.Token, error) {
	return provhttp.ExchangeCode(ctx, upstream, &p.oauth, p.tokenClient, callback, verifier)
}

// Identify reads the authenticated user (GET /user): ExternalID is the
// numeric user id, Login the login. Scopes come from the token response's
// "scope" or, failing that, the X-OAuth-Scopes response header.
//
// GitHub API docs: https://docs.github.com/rest/users/users#get-the-authenticated-user
func (p *Provider) Identify(ctx context.Context, tok *oauth2.Token) (connectors.Identity, error) {
	const op = "identify"
	if tok == nil || tok.AccessToken == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: no access token", name, op)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.apiBase+"/user", nil)
	if err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: %w", name, op, err)
	}
	setAPIHeaders(req)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	status, header, body, err := provhttp.Do(p.client, req)
	if err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: %w", name, op, err)
	}
	if status != http.StatusOK {
		return connectors.Identity{}, fmt.Errorf("%s: %s: %w", name, op, apiError(status, body))
	}
	var u struct {
		ID    json.Number `json:"id"`
		Login string      `json:"login"`
	}
	if err := json.Unmarshal(body, &u); err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: decode user: %w", name, op, err)
	}
	id, err := strconv.ParseInt(u.ID.String(), 10, 64)
	if err != nil || u.Login == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: user response has no numeric id or login", name, op)
	}
	granted := provhttp.SplitScopes(provhttp.ExtraString(tok, "scope"))
	if len(granted) == 0 {
		granted = provhttp.SplitScopes(header.Get("X-OAuth-Scopes"))
	}
	return connectors.Identity{
		ExternalID: strconv.FormatInt(id, 10),
		Login:      u.Login,
		Scopes:     granted,
		Metadata:   map[string]string{},
	}, nil
}

// CanRefresh reports whether tok carries a refresh token (GitHub App user
// tokens with expiration do; OAuth app tokens never expire and do not).
func (p *Provider) CanRefresh(tok *oauth2.Token) bool {
	return tok != nil && tok.RefreshToken != ""
}

// Refresh trades tok's refresh token for a new token. GitHub rotates
// refresh tokens: the result carries the new one and the old one stops
// working. A refused refresh token is an error wrapping
// connectors.ErrInvalidGrant.
//
// GitHub docs: https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/refreshing-user-access-tokens
func (p *Provider) Refresh(ctx context.Context, tok *oauth2.Token) (*oauth2.Token, error) {
	const op = "refresh token"
	if !p.CanRefresh(tok) {
		return nil, fmt.Errorf("%s: %s: token has no refresh token", name, op)
	}
	src := p.oauth.TokenSource(p.tokenContext(ctx), &oauth2.Token{RefreshToken: tok.RefreshToken})
	nt, err := src.Token()
	if err != nil {
		return nil, provhttp.TokenError(upstream, op, err)
	}
	return nt, nil
}

// Revoke revokes the account's access token alone
// (DELETE /applications/{client_id}/token). Not the grant
// (DELETE /applications/{client_id}/grant): that revokes every token the
// app holds for the GitHub user, so removing one connected account would
// break the same user's accounts in other tenants. metadata is not used.
//
// A GitHub App user token lives 8 hours, and GitHub refuses to revoke one
// that has expired (422) while its refresh token stays good for months.
// So when the access token is refused and tok has a refresh token, Revoke
// trades it for a fresh pair and revokes that; a refresh token GitHub
// refuses too leaves nothing alive to revoke.
func (p *Provider) Revoke(ctx context.Context, tok *oauth2.Token, _ map[string]string) error {
	const op = "revoke token"
	if tok == nil || tok.AccessToken == "" {
		return fmt.Errorf("%s: %s: no access token", name, op)
	}
	status, body, err := p.revokeToken(ctx, tok.AccessToken)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, op, err)
	}
	if (status == http.StatusUnprocessableEntity || status == http.StatusNotFound) && p.CanRefresh(tok) {
		fresh, rerr := p.Refresh(ctx, tok)
		if errors.Is(rerr, connectors.ErrInvalidGrant) {
			return nil // the refresh token is dead as well
		}
		if rerr != nil {
			return fmt.Errorf("%s: %s: the access token has expired and refreshing it to revoke it failed: %w", name, op, rerr)
		}
		if status, body, err = p.revokeToken(ctx, fresh.AccessToken); err != nil {
			return fmt.Errorf("%s: %s: %w", name, op, err)
		}
	}
	if status != http.StatusNoContent {
		return fmt.Errorf("%s: %s: %w", name, op, apiError(status, body))
	}
	return nil
}

// revokeToken sends DELETE /applications/{client_id}/token for the access
// token v with the app's credentials, and returns GitHub's answer.
//
// GitHub API docs: https://docs.github.com/rest/apps/oauth-applications#delete-an-app-token
func (p *Provider) revokeToken(ctx context.Context, v string) (int, []byte, error) {
	payload, err := json.Marshal(map[string]string{"access_token": v})
	if err != nil {
		return 0, nil, err
	}
	u := p.apiBase + "/applications/" + url.PathEscape(p.oauth.ClientID) + "/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, err
	}
	setAPIHeaders(req)
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth(p.oauth.ClientID, p.clientSecret)
	status, _, body, err := provhttp.Do(p.client, req)
	return status, body, err
}

// tokenContext carries the token client for x/oauth2.
func (p *Provider) tokenContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.tokenClient)
}

func setAPIHeaders(req *http.Request) {
	req.Header.Set("Accept", mediaType)
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", userAgent)
}

// jsonAccept asks GitHub's token endpoint for JSON instead of its default
// form encoding.
type jsonAccept struct{ base http.RoundTripper }

// RoundTrip sets Accept and User-Agent on a copy of r.
func (j jsonAccept) RoundTrip(r *http.Request) (*http.Response, error) {
	r2 := r.Clone(r.Context())
	r2.Header.Set("Accept", "application/json")
	r2.Header.Set("User-Agent", userAgent)
	return j.base.RoundTrip(r2)
}

// apiError describes a failed REST call by its status and GitHub's
// message.
func apiError(status int, body []byte) error {
	var e struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Message != "" {
		return fmt.Errorf("github answered HTTP %d: %s", status, provhttp.Clip(e.Message))
	}
	return fmt.Errorf("github answered HTTP %d", status)
}

// refusedGrant lists the token-endpoint error codes that mean the code or
// refresh token is no longer honoured.
var refusedGrant = map[string]bool{
	"invalid_grant":         true,
	"bad_refresh_token":     true,
	"bad_verification_code": true,
}

// upstream names the provider in token-endpoint errors.
var upstream = provhttp.Upstream{Connector: name, Name: "github", Refused: func(c string) bool { return refusedGrant[c] }}
