// Package deploy is the deployment-platform connector (Vercel's API): its
// OAuth side for connected accounts (this file) and its tool steps with
// their HTTP policy (steps*.go, api.go, client.go, policy.go: rate-limit headers,
// 429 as rate_limited, retries of idempotent requests; team accounts get
// teamId). fakedeploy is a faithful in-process fake for tests and the
// sandbox.
//
// The OAuth side is a Vercel integration.
// A Vercel integration is installed rather than authorized: the user is sent
// to the integration's install page, picks a personal account or a team,
// and Vercel redirects back with a code, the configuration id and, for team
// installs, the team id. The code buys a long-lived access token (no expiry,
// no refresh token, no PKCE). Removing the integration configuration
// revokes the token.
package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// Default endpoints of vercel.com.
const (
	DefaultAuthBaseURL = "https://vercel.com"
	DefaultAPIBaseURL  = "https://api.vercel.com"
)

const (
	name      = "deploy"
	tokenPath = "/v2/oauth/access_token"
)

// Metadata keys set by Identify and read by Revoke.
const (
	MetaTeamID          = "team_id"
	MetaConfigurationID = "configuration_id"
	MetaUserID          = "user_id"
)

var _ connectors.Provider = (*Provider)(nil)

// Config configures a Provider. ClientID, ClientSecret, RedirectURL and
// IntegrationSlug are required; empty URLs fall back to Vercel's.
type Config struct {
	// ClientID is the integration's client id (oac_…).
	ClientID string
	// ClientSecret is the integration's client secret.
	ClientSecret string
	// RedirectURL is the Redirect URL configured for the integration; the
	// token exchange must repeat it exactly.
	RedirectURL string
	// IntegrationSlug names the integration in its install URL
	// <AuthBaseURL>/integrations/<slug>/new.
	IntegrationSlug string
	// AuthBaseURL is the web host serving the install page
	// (default https://vercel.com).
	AuthBaseURL string
	// TokenURL is the token endpoint (default APIBaseURL +
	// /v2/oauth/access_token).
	TokenURL string
	// APIBaseURL is the REST API root (default https://api.vercel.com).
	APIBaseURL string
	// HTTPClient makes every request. Nil means a client with a 30 s
	// timeout that does not follow redirects.
	HTTPClient *http.Client
}

// DefaultConfig returns a Config with Vercel's endpoints filled in; the
// caller adds the client credentials, redirect URL and integration slug.
func DefaultConfig() Config {
	return Config{
		AuthBaseURL: DefaultAuthBaseURL,
		TokenURL:    DefaultAPIBaseURL + tokenPath,
		APIBaseURL:  DefaultAPIBaseURL,
	}
}

// Provider is the Vercel implementation of connectors.Provider. It is safe
// for concurrent use.
type Provider struct {
	oauth      oauth2.Config
	installURL string
	apiBase    string
	client     *http.Client
}

// New validates c and returns a Provider.
func New(c Config) (*Provider, error) {
	var missing []string
	for _, f := range []struct{ field, value string }{
		{"ClientID", c.ClientID},
		{"ClientSecret", c.ClientSecret},
		{"RedirectURL", c.RedirectURL},
		{"IntegrationSlug", c.IntegrationSlug},
	} {
		if f.value == "" {
			missing = append(missing, f.field)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: config: missing %s", name, strings.Join(missing, ", "))
	}
	if c.AuthBaseURL == "" {
		c.AuthBaseURL = DefaultAuthBaseURL
	}
	c.AuthBaseURL = strings.TrimRight(c.AuthBaseURL, "/")
	if c.APIBaseURL == "" {
		c.APIBaseURL = DefaultAPIBaseURL
	}
	c.APIBaseURL = strings.TrimRight(c.APIBaseURL, "/")
	if c.TokenURL == "" {
		c.TokenURL = c.APIBaseURL + tokenPath
	}
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
	installURL := c.AuthBaseURL + "/integrations/" + url.PathEscape(c.IntegrationSlug) + "/new"
	return &Provider{
		oauth: oauth2.Config{
			ClientID:     c.ClientID,
			ClientSecret: c.ClientSecret,
			RedirectURL:  c.RedirectURL,
			Endpoint: oauth2.Endpoint{
				AuthURL:   installURL,
				TokenURL:  c.TokenURL,
				AuthStyle: oauth2.AuthStyleInParams,
			},
		},
		installURL: installURL,
		apiBase:    c.APIBaseURL,
		client:     client,
	}, nil
}

// Connector returns "deploy".
func (p *Provider) Connector() string { return name }

// SupportsPKCE reports false: the integration install flow has no PKCE.
func (p *Provider) SupportsPKCE() bool { return false }

// AuthCodeURL returns the integration's install URL carrying state. The
// verifier is ignored.
func (p *Provider) AuthCodeURL(state, _ string) string {
	return p.installURL + "?" + url.Values{"state": {state}}.Encode()
}

// Exchange trades the callback's code for the integration's access token.
// The returned token's extra fields hold "team_id" (empty for a personal
// install), "configuration_id" (the callback's configurationId, else the
// token's installation_id), "installation_id" and "user_id". The verifier
// is ignored. A refused code is an error wrapping
// connectors.ErrInvalidGrant.
//
// Vercel docs: https://vercel.com/docs/rest-api/vercel-api-integrations
func (p *Provider) Exchange(ctx context.Context, callback url.Values, _ string) (*oauth2.Token, error) {
	// Vercel integrations have no PKCE: no verifier.
	tok, err := provhttp.ExchangeCode(ctx, upstream, &p.oauth, p.client, callback, "")
	if err != nil {
		return nil, err
	}
	extra := map[string]any{}
	for _, k := range []string{"token_type", "installation_id", "user_id", "team_id"} {
		if v := provhttp.ExtraString(tok, k); v != "" {
			extra[k] = v
		}
	}
	// The token response is authoritative for the team; the callback (which
	// passed through the user's browser) only fills what it lacks.
	if extra["team_id"] == nil {
		if t := callback.Get("teamId"); t != "" {
			extra["team_id"] = t
		}
	}
	cfg := callback.Get("configurationId")
	if cfg == "" {
		cfg = provhttp.ExtraString(tok, "installation_id")
	}
	if cfg != "" {
		extra["configuration_id"] = cfg
	}
	return tok.WithExtra(extra), nil
}

// Identify reads whom the token belongs to: for a team install the team
// (GET /v2/teams/{id}: ExternalID is the team id, Login its slug), else the
// user (GET /v2/user: ExternalID is the user id, Login the username).
// Metadata holds team_id (team installs), configuration_id and user_id.
//
// Vercel API docs: https://vercel.com/docs/rest-api/teams/get-a-team
// and https://vercel.com/docs/rest-api/user/get-the-user
func (p *Provider) Identify(ctx context.Context, tok *oauth2.Token) (connectors.Identity, error) {
	const op = "identify"
	if tok == nil || tok.AccessToken == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: no access token", name, op)
	}
	meta := map[string]string{}
	for key, extraKey := range map[string]string{
		MetaTeamID:          "team_id",
		MetaConfigurationID: "configuration_id",
		MetaUserID:          "user_id",
	} {
		if v := provhttp.ExtraString(tok, extraKey); v != "" {
			meta[key] = v
		}
	}
	if meta[MetaConfigurationID] == "" {
		if v := provhttp.ExtraString(tok, "installation_id"); v != "" {
			meta[MetaConfigurationID] = v
		}
	}
	if team := meta[MetaTeamID]; team != "" {
		var t struct {
			ID   string `json:"id"`
			Slug string `json:"slug"`
		}
		if err := p.getJSON(ctx, tok, "/v2/teams/"+url.PathEscape(team), &t); err != nil {
			return connectors.Identity{}, fmt.Errorf("%s: %s: read team: %w", name, op, err)
		}
		if t.ID == "" {
			return connectors.Identity{}, fmt.Errorf("%s: %s: team response has no id", name, op)
		}
		return connectors.Identity{ExternalID: t.ID, Login: t.Slug, Metadata: meta}, nil
	}
	var u struct {
		User struct {
			ID       string `json:"id"`
			UID      string `json:"uid"`
			Username string `json:"username"`
		} `json:"user"`
	}
	if err := p.getJSON(ctx, tok, "/v2/user", &u); err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: read user: %w", name, op, err)
	}
	id := u.User.ID
	if id == "" {
		id = u.User.UID
	}
	if id == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: user response has no id", name, op)
	}
	if meta[MetaUserID] == "" {
		meta[MetaUserID] = id
	}
	return connectors.Identity{ExternalID: id, Login: u.User.Username, Metadata: meta}, nil
}

// CanRefresh reports false: integration tokens are long-lived and come
// without a refresh token.
func (p *Provider) CanRefresh(*oauth2.Token) bool { return false }

// Refresh always fails with an error wrapping errors.ErrUnsupported:
// integration tokens cannot be refreshed.
func (p *Provider) Refresh(context.Context, *oauth2.Token) (*oauth2.Token, error) {
	return nil, fmt.Errorf("%s: refresh token: vercel integration tokens do not expire and cannot be refreshed: %w", name, errors.ErrUnsupported)
}

// Revoke removes the integration configuration
// (DELETE /v1/integrations/configuration/{id}, with ?teamId= for team
// installs), which revokes the token. The configuration and team ids come
// from metadata (Identity.Metadata), falling back to tok's extra fields.
//
// Vercel API docs: https://vercel.com/docs/rest-api/integrations/delete-an-integration-configuration
func (p *Provider) Revoke(ctx context.Context, tok *oauth2.Token, metadata map[string]string) error {
	const op = "revoke configuration"
	if tok == nil || tok.AccessToken == "" {
		return fmt.Errorf("%s: %s: no access token", name, op)
	}
	cfg, team := metadata[MetaConfigurationID], metadata[MetaTeamID]
	if cfg == "" {
		cfg = provhttp.ExtraString(tok, "configuration_id")
	}
	if cfg == "" {
		cfg = provhttp.ExtraString(tok, "installation_id")
	}
	if team == "" {
		team = provhttp.ExtraString(tok, "team_id")
	}
	if cfg == "" {
		return fmt.Errorf("%s: %s: no configuration id in the account metadata", name, op)
	}
	u := p.apiBase + "/v1/integrations/configuration/" + url.PathEscape(cfg)
	if team != "" {
		u += "?" + url.Values{"teamId": {team}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, op, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	status, _, body, err := provhttp.Do(p.client, req)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, op, err)
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return fmt.Errorf("%s: %s: %w", name, op, apiError(status, body))
	}
	return nil
}

// getJSON GETs an API path with tok and decodes the 200 response into v.
func (p *Provider) getJSON(ctx context.Context, tok *oauth2.Token, path string, v any) error {
	return provhttp.GetJSON(ctx, p.client, p.apiBase+path, tok.AccessToken, v, apiError)
}

// apiError describes a failed REST call by its status and Vercel's error
// code and message ({"error":{"code","message"}}).
func apiError(status int, body []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	switch {
	case e.Error.Code != "" && e.Error.Message != "":
		return fmt.Errorf("vercel answered HTTP %d: %s: %s", status, provhttp.ErrorCode(e.Error.Code), provhttp.Clip(e.Error.Message))
	case e.Error.Code != "":
		return fmt.Errorf("vercel answered HTTP %d: %s", status, provhttp.ErrorCode(e.Error.Code))
	default:
		return fmt.Errorf("vercel answered HTTP %d", status)
	}
}

// upstream names the provider in token-endpoint errors.
var upstream = provhttp.Upstream{Connector: name, Name: "vercel", Refused: provhttp.InvalidGrantOnly}
