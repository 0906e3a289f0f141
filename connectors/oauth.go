package connectors

import (
	"context"
	"errors"
	"net/url"

	"golang.org/x/oauth2"
)

// ErrInvalidGrant reports that the provider no longer honours a refresh
// token or code (OAuth "invalid_grant"): the user must connect again.
var ErrInvalidGrant = errors.New("connectors: invalid_grant: the provider refused the grant; reconnect the account")

// Identity is who a token belongs to at the provider.
type Identity struct {
	// ExternalID is the provider's stable id: the GitHub numeric user id,
	// the Vercel team id (team installs) or user id, the Google subject.
	ExternalID string
	// Login is the human name: GitHub login, Vercel team slug or username,
	// Google e-mail.
	Login string
	// Scopes are the scopes actually granted.
	Scopes []string
	// Metadata holds non-secret details worth keeping (Vercel team_id,
	// configuration_id; analytics account ids and names).
	Metadata map[string]string
}

// Names returns the connectors' names.
func Names() []string { return []string{"codehost", "deploy", "analytics"} }

// SearchTerms returns the words users know connector by, lower-case: its
// display name and the service it speaks to, so that searching the tool
// steps for "code hosting" or "GitHub" lists that connector's steps.
func SearchTerms(connector string) string {
	switch connector {
	case "codehost":
		return "code hosting github"
	case "deploy":
		return "deployment platform vercel"
	case "analytics":
		return "web analytics google analytics ga4"
	}
	return ""
}

// Provider is one connector's OAuth specifics. Implementations are safe for
// concurrent use and never log; they return errors that never contain a
// token or client secret.
type Provider interface {
	// Connector is "codehost", "deploy" or "analytics".
	Connector() string
	// SupportsPKCE reports whether AuthCodeURL and Exchange use PKCE S256.
	SupportsPKCE() bool
	// AuthCodeURL returns where to send the user to sign in and consent.
	// verifier is the PKCE verifier ("" when PKCE is not supported).
	AuthCodeURL(state, verifier string) string
	// Exchange trades the callback's query (code, and for the deployment
	// platform configurationId and teamId) for a token.
	Exchange(ctx context.Context, callback url.Values, verifier string) (*oauth2.Token, error)
	// Identify reads whom tok belongs to. Metadata from the token response
	// (tok.Extra) may be used.
	Identify(ctx context.Context, tok *oauth2.Token) (Identity, error)
	// CanRefresh reports whether tok can be refreshed (it has a refresh
	// token and the provider issues them).
	CanRefresh(tok *oauth2.Token) bool
	// Refresh returns a new token for tok's refresh token. A provider that
	// rotates refresh tokens returns the new one in the result. A refused
	// grant is an error wrapping ErrInvalidGrant.
	Refresh(ctx context.Context, tok *oauth2.Token) (*oauth2.Token, error)
	// Revoke revokes the grant at the provider. metadata is the account's
	// stored Identity.Metadata (the deployment platform needs the
	// configuration id).
	Revoke(ctx context.Context, tok *oauth2.Token, metadata map[string]string) error
}
