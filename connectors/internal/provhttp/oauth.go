package provhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
)

// Upstream names a provider in errors: the connector ("codehost") and who
// answered ("github").
type Upstream struct {
	Connector, Name string
	// Refused reports which token-endpoint error codes mean the code or
	// refresh token is no longer honoured (connectors.ErrInvalidGrant).
	Refused func(code string) bool
}

// ExchangeCode trades an OAuth callback's code on cfg's token endpoint, with
// the PKCE verifier when one was used, through client. A callback carrying
// "error" (the user refused) or no code fails before anything is sent.
func ExchangeCode(ctx context.Context, u Upstream, cfg *oauth2.Config, client *http.Client, callback url.Values, verifier string) (*oauth2.Token, error) {
	const op = "exchange code"
	if e := callback.Get("error"); e != "" {
		return nil, fmt.Errorf("%s: %s: authorization failed: %s", u.Connector, op, ErrorCode(e))
	}
	code := callback.Get("code")
	if code == "" {
		return nil, fmt.Errorf("%s: %s: callback has no code", u.Connector, op)
	}
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, client), code, opts...)
	if err != nil {
		return nil, TokenError(u, op, err)
	}
	return tok, nil
}

// TokenError describes a token-endpoint failure by its status and the
// provider's error code only: a token endpoint's body can echo credentials,
// so nothing else of it is kept. A refused grant wraps
// connectors.ErrInvalidGrant.
func TokenError(u Upstream, op string, err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %s: %w", u.Connector, op, err)
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	raw := re.ErrorCode
	if raw == "" {
		// Some providers (Vercel) wrap the code: {"error":{"code":"..."}}.
		var env struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(re.Body, &env) == nil {
			raw = env.Error.Code
		}
	}
	code := ErrorCode(raw)
	switch {
	case u.Refused != nil && u.Refused(raw):
		return fmt.Errorf("%s: %s: %s answered %s: %w", u.Connector, op, u.Name, code, connectors.ErrInvalidGrant)
	case code != "":
		return fmt.Errorf("%s: %s: %s answered %s (HTTP %d)", u.Connector, op, u.Name, code, status)
	default:
		return fmt.Errorf("%s: %s: token endpoint answered HTTP %d", u.Connector, op, status)
	}
}

// InvalidGrantOnly is the Refused rule of providers that signal a refused
// grant with the standard "invalid_grant" code alone.
func InvalidGrantOnly(code string) bool { return code == "invalid_grant" }
