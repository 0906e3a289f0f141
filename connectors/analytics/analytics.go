// Package analytics is the web-analytics connector (GA4 Data and Admin
// APIs): its OAuth side for connected accounts (this file) and its tool
// steps with their HTTP policy (steps*.go, api.go, client.go, policy.go,
// quota.go: at most 10 concurrent requests per property, core and
// realtime token budgets tracked from returnPropertyQuota and refused
// early once spent, RESOURCE_EXHAUSTED as rate_limited). fakeanalytics is a
// faithful in-process fake for tests and the sandbox.
//
// The OAuth side is Google OAuth for Google Analytics 4.
// It requests offline access (a refresh token, re-issued on every consent)
// with PKCE S256, identifies the Google account through the OpenID Connect
// userinfo endpoint, lists the Analytics accounts the user can see through
// the GA4 Admin API, refreshes tokens (Google keeps the refresh token) and
// revokes them at Google's revocation endpoint.
package analytics

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

// Default endpoints of Google.
const (
	DefaultAuthBaseURL     = "https://accounts.google.com/o/oauth2/auth"
	DefaultTokenURL        = "https://oauth2.googleapis.com/token"
	DefaultRevokeURL       = "https://oauth2.googleapis.com/revoke"
	DefaultUserInfoURL     = "https://openidconnect.googleapis.com/v1/userinfo"
	DefaultAdminAPIBaseURL = "https://analyticsadmin.googleapis.com"
)

// MetaAccounts is the Identity.Metadata key listing the visible Analytics
// accounts as comma-separated "accounts/123=Display name" pairs. Commas and
// percent signs inside display names are percent-encoded ("%2C", "%25"),
// so url.PathUnescape restores a name.
const MetaAccounts = "analytics_accounts"

const (
	name = "analytics"
	// maxPages bounds the accountSummaries walk.
	maxPages = 100
)

// scopes are the OAuth scopes requested from Google.
var scopes = []string{
	"https://www.googleapis.com/auth/analytics.readonly",
	"https://www.googleapis.com/auth/analytics.edit",
	"openid",
	"email",
}

var _ connectors.Provider = (*Provider)(nil)

// Config configures a Provider. ClientID, ClientSecret and RedirectURL are
// required; empty URLs fall back to Google's.
type Config struct {
	// ClientID is the Google OAuth web client id.
	ClientID string
	// ClientSecret is the matching client secret.
	ClientSecret string
	// RedirectURL is an authorized redirect URI of the client.
	RedirectURL string
	// AuthBaseURL is the authorization endpoint
	// (default https://accounts.google.com/o/oauth2/auth).
	AuthBaseURL string
	// TokenURL is the token endpoint
	// (default https://oauth2.googleapis.com/token).
	TokenURL string
	// RevokeURL is the revocation endpoint
	// (default https://oauth2.googleapis.com/revoke).
	RevokeURL string
	// UserInfoURL is the OpenID Connect userinfo endpoint
	// (default https://openidconnect.googleapis.com/v1/userinfo).
	UserInfoURL string
	// AdminAPIBaseURL is the GA4 Admin API root
	// (default https://analyticsadmin.googleapis.com).
	AdminAPIBaseURL string
	// HTTPClient makes every request. Nil means a client with a 30 s
	// timeout that does not follow redirects.
	HTTPClient *http.Client
}

// DefaultConfig returns a Config with Google's endpoints filled in; the
// caller adds the client credentials and redirect URL.
func DefaultConfig() Config {
	return Config{
		AuthBaseURL:     DefaultAuthBaseURL,
		TokenURL:        DefaultTokenURL,
		RevokeURL:       DefaultRevokeURL,
		UserInfoURL:     DefaultUserInfoURL,
		AdminAPIBaseURL: DefaultAdminAPIBaseURL,
	}
}

// Provider is the Google Analytics implementation of connectors.Provider.
// It is safe for concurrent use.
type Provider struct {
	oauth       oauth2.Config
	revokeURL   string
	userInfoURL string
	adminBase   string
	client      *http.Client
}

// New validates c and returns a Provider.
func New(c Config) (*Provider, error) {
	var missing []string
	for _, f := range []struct{ field, value string }{
		{"ClientID", c.ClientID},
		{"ClientSecret", c.ClientSecret},
		{"RedirectURL", c.RedirectURL},
	} {
		if f.value == "" {
			missing = append(missing, f.field)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: config: missing %s", name, strings.Join(missing, ", "))
	}
	d := DefaultConfig()
	for _, f := range []struct {
		field string
		value *string
		def   string
	}{
		{"RedirectURL", &c.RedirectURL, c.RedirectURL},
		{"AuthBaseURL", &c.AuthBaseURL, d.AuthBaseURL},
		{"TokenURL", &c.TokenURL, d.TokenURL},
		{"RevokeURL", &c.RevokeURL, d.RevokeURL},
		{"UserInfoURL", &c.UserInfoURL, d.UserInfoURL},
		{"AdminAPIBaseURL", &c.AdminAPIBaseURL, d.AdminAPIBaseURL},
	} {
		if *f.value == "" {
			*f.value = f.def
		}
		if err := provhttp.CheckURL(*f.value); err != nil {
			return nil, fmt.Errorf("%s: config: %s: %w", name, f.field, err)
		}
	}
	client := c.HTTPClient
	if client == nil {
		client = provhttp.DefaultClient()
	}
	return &Provider{
		oauth: oauth2.Config{
			ClientID:     c.ClientID,
			ClientSecret: c.ClientSecret,
			RedirectURL:  c.RedirectURL,
			Scopes:       scopes,
			Endpoint: oauth2.Endpoint{
				AuthURL:   c.AuthBaseURL,
				TokenURL:  c.TokenURL,
				AuthStyle: oauth2.AuthStyleInParams,
			},
		},
		revokeURL:   c.RevokeURL,
		userInfoURL: c.UserInfoURL,
		adminBase:   strings.TrimRight(c.AdminAPIBaseURL, "/"),
		client:      client,
	}, nil
}

// Connector returns "analytics".
func (p *Provider) Connector() string { return name }

// SupportsPKCE reports true.
func (p *Provider) SupportsPKCE() bool { return true }

// AuthCodeURL returns Google's authorization URL carrying the client id,
// redirect URL, scopes, state, access_type=offline, prompt=consent and,
// when verifier is set, the S256 code challenge.
func (p *Provider) AuthCodeURL(state, verifier string) string {
	opts := []oauth2.AuthCodeOption{oauth2.AccessTypeOffline, oauth2.ApprovalForce}
	if verifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	return p.oauth.AuthCodeURL(state, opts...)
}

// Exchange trades the callback's code (and the PKCE verifier, when one was
// used) for a token. A refused code is an error wrapping
// connectors.ErrInvalidGrant.
func (p *Provider) Exchange(ctx context.Context, callback url.Values, verifier string) (*oauth2.Token, error) {
	return provhttp.ExchangeCode(ctx, upstream, &p.oauth, p.client, callback, verifier)
}

// Identify reads the Google account (userinfo: ExternalID is the subject,
// Login the e-mail) and the Analytics accounts it can see (GA4 Admin
// accountSummaries, every page), kept in Metadata[MetaAccounts]. Scopes
// come from the token response's "scope".
//
// Google docs: https://developers.google.com/identity/openid-connect/openid-connect#obtaininguserprofileinformation
func (p *Provider) Identify(ctx context.Context, tok *oauth2.Token) (connectors.Identity, error) {
	const op = "identify"
	if tok == nil || tok.AccessToken == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: no access token", name, op)
	}
	var info struct {
		Sub   string `json:"sub"`
		Email string `json:"email"`
	}
	if err := p.getJSON(ctx, tok, p.userInfoURL, &info); err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: read userinfo: %w", name, op, err)
	}
	if info.Sub == "" {
		return connectors.Identity{}, fmt.Errorf("%s: %s: userinfo has no subject", name, op)
	}
	accounts, err := p.accounts(ctx, tok)
	if err != nil {
		return connectors.Identity{}, fmt.Errorf("%s: %s: list analytics accounts: %w", name, op, err)
	}
	login := info.Email
	if login == "" {
		login = info.Sub
	}
	return connectors.Identity{
		ExternalID: info.Sub,
		Login:      login,
		Scopes:     strings.Fields(provhttp.ExtraString(tok, "scope")),
		Metadata:   map[string]string{MetaAccounts: accounts},
	}, nil
}

// accounts walks accountSummaries and renders MetaAccounts.
//
// Google API docs: https://developers.google.com/analytics/devguides/config/admin/v1/rest/v1beta/accountSummaries/list
func (p *Provider) accounts(ctx context.Context, tok *oauth2.Token) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	pageToken := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return "", fmt.Errorf("more than %d pages", maxPages)
		}
		q := url.Values{"pageSize": {"200"}}
		if pageToken != "" {
			q.Set("pageToken", pageToken)
		}
		var resp struct {
			AccountSummaries []struct {
				Account     string `json:"account"`
				DisplayName string `json:"displayName"`
			} `json:"accountSummaries"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := p.getJSON(ctx, tok, p.adminBase+"/v1beta/accountSummaries?"+q.Encode(), &resp); err != nil {
			return "", err
		}
		for _, a := range resp.AccountSummaries {
			if a.Account == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(a.Account)
			b.WriteByte('=')
			b.WriteString(escapeName(a.DisplayName))
		}
		if resp.NextPageToken == "" {
			return b.String(), nil
		}
		if seen[resp.NextPageToken] {
			return "", errors.New("page token repeated")
		}
		seen[resp.NextPageToken] = true
		pageToken = resp.NextPageToken
	}
}

// escapeName percent-encodes the characters that would break the
// MetaAccounts list.
func escapeName(s string) string {
	return strings.NewReplacer("%", "%25", ",", "%2C").Replace(s)
}

// CanRefresh reports whether tok carries a refresh token.
func (p *Provider) CanRefresh(tok *oauth2.Token) bool {
	return tok != nil && tok.RefreshToken != ""
}

// Refresh trades tok's refresh token for a new access token. Google
// usually omits refresh_token from the answer; the result then keeps tok's.
// A refused refresh token (invalid_grant: revoked, expired or unused for
// six months) is an error wrapping connectors.ErrInvalidGrant.
//
// Google docs: https://developers.google.com/identity/protocols/oauth2/web-server#offline
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
	if nt.RefreshToken == "" {
		nt.RefreshToken = tok.RefreshToken
	}
	return nt, nil
}

// Revoke revokes the grant at Google's revocation endpoint using the
// refresh token, else the access token. Google answers 400 invalid_token
// for a token already revoked or expired; that error wraps
// connectors.ErrInvalidGrant so callers can treat the grant as gone.
// metadata is not used.
//
// Google docs: https://developers.google.com/identity/protocols/oauth2/web-server#tokenrevoke
func (p *Provider) Revoke(ctx context.Context, tok *oauth2.Token, _ map[string]string) error {
	const op = "revoke token"
	if tok == nil || (tok.RefreshToken == "" && tok.AccessToken == "") {
		return fmt.Errorf("%s: %s: no token", name, op)
	}
	t := tok.RefreshToken
	if t == "" {
		t = tok.AccessToken
	}
	form := url.Values{"token": {t}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.revokeURL, strings.NewReader(form))
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, op, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status, _, body, err := provhttp.Do(p.client, req)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", name, op, err)
	}
	if status == http.StatusOK {
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error == "invalid_token" {
		return fmt.Errorf("%s: %s: google answered invalid_token (HTTP %d): %w", name, op, status, connectors.ErrInvalidGrant)
	}
	return fmt.Errorf("%s: %s: %w", name, op, apiError(status, body))
}

// getJSON GETs u with tok and decodes the 200 response into v.
func (p *Provider) getJSON(ctx context.Context, tok *oauth2.Token, u string, v any) error {
	return provhttp.GetJSON(ctx, p.client, u, tok.AccessToken, v, apiError)
}

// tokenContext carries the configured client for x/oauth2.
func (p *Provider) tokenContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.client)
}

// apiError describes a failed call by its status and Google's error
// ({"error":{"code","message","status"}} or the OAuth {"error":"…"}).
func apiError(status int, body []byte) error {
	var api struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &api) == nil && (api.Error.Status != "" || api.Error.Message != "") {
		if api.Error.Status != "" {
			return fmt.Errorf("google answered HTTP %d %s: %s", status, provhttp.ErrorCode(api.Error.Status), provhttp.Clip(api.Error.Message))
		}
		return fmt.Errorf("google answered HTTP %d: %s", status, provhttp.Clip(api.Error.Message))
	}
	var oauth struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &oauth) == nil && oauth.Error != "" {
		return fmt.Errorf("google answered HTTP %d: %s", status, provhttp.ErrorCode(oauth.Error))
	}
	return fmt.Errorf("google answered HTTP %d", status)
}

// upstream names the provider in token-endpoint errors.
var upstream = provhttp.Upstream{Connector: name, Name: "google", Refused: provhttp.InvalidGrantOnly}
