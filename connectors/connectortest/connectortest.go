// Package connectortest holds the helpers the connectors' tests share:
// checking a step's typed error, that an error leaks no secret, reading
// JSON and compiling step schemas the way the platform validates, the
// bearer transport the platform gives a step, and signing in to a fake
// OAuth provider. Only tests import it.
package connectortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
)

// NoLeak fails the test if err's message contains any of secrets.
func NoLeak(t testing.TB, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error %q leaks a secret", err)
		}
	}
}

// WantCode fails the test unless err is a *connectors.Error with code,
// and returns it.
func WantCode(t testing.TB, err error, code connectors.ErrorCode) *connectors.Error {
	t.Helper()
	var ce *connectors.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *connectors.Error %s", err, err, code)
	}
	if ce.Code != code {
		t.Fatalf("code = %s (%v), want %s", ce.Code, ce, code)
	}
	return ce
}

// JSON decodes s as the schema validator does (numbers kept exact), or
// fails the test.
func JSON(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	if err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}

// Bearer is the transport the platform gives a step: it adds the
// account's token to every request and sends it with Base.
type Bearer struct {
	Token string
	Base  http.RoundTripper
}

// RoundTrip sends a copy of r with Authorization: Bearer Token.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return b.Base.RoundTrip(r)
}

// CompileSchema compiles a step's JSON Schema as the platform validates
// with it (formats asserted), or fails the test; name says which schema
// in messages ("codehost.get_issue input").
func CompileSchema(t testing.TB, name string, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s schema is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	loc := "triggerd:test/" + url.PathEscape(name)
	if err := c.AddResource(loc, doc); err != nil {
		t.Fatalf("%s schema: %v", name, err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		t.Fatalf("%s schema does not compile: %v", name, err)
	}
	return s
}

// BearerStatus GETs rawURL with accessToken as a bearer token and returns
// the status: whether a provider (a fake's user endpoint) still accepts
// the token.
func BearerStatus(t testing.TB, rawURL, accessToken string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	req.Header.Set("User-Agent", "connectortest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Consent is a fake provider's consent screen with PKCE: it returns the
// query of the callback for state.
type Consent interface {
	Authorize(state, redirectURI, codeChallenge string, scopes ...string) url.Values
}

// Exchanger trades a callback's code for a token (a connector's
// Provider).
type Exchanger interface {
	Exchange(ctx context.Context, callback url.Values, verifier string) (*oauth2.Token, error)
}

// ConnectPKCE signs in through c with a fresh PKCE verifier, asking for
// scopes, and exchanges the code with p, or fails the test.
func ConnectPKCE(t testing.TB, c Consent, p Exchanger, redirectURI string, scopes ...string) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	cb := c.Authorize("st", redirectURI, oauth2.S256ChallengeFromVerifier(verifier), scopes...)
	tok, err := p.Exchange(t.Context(), cb, verifier)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	return tok
}

// Examples are inputs a step's input schema must accept (Good) and
// refuse (Bad).
type Examples struct{ Good, Bad []string }

// CheckSchemas compiles every step's input and output schema and holds
// each input schema to the step's examples; a step without good and bad
// examples fails the test.
func CheckSchemas(t testing.TB, steps []connectors.Step, examples map[string]Examples) {
	t.Helper()
	for _, s := range steps {
		in := CompileSchema(t, s.ID+" input", s.Input)
		CompileSchema(t, s.ID+" output", s.Output)
		ex := examples[s.ID]
		if len(ex.Good) == 0 || len(ex.Bad) == 0 {
			t.Errorf("%s: no examples", s.ID)
		}
		for _, g := range ex.Good {
			if err := in.Validate(JSON(t, g)); err != nil {
				t.Errorf("%s: %s should validate: %v", s.ID, g, err)
			}
		}
		for _, b := range ex.Bad {
			if err := in.Validate(JSON(t, b)); err == nil {
				t.Errorf("%s: %s should not validate", s.ID, b)
			}
		}
	}
}
