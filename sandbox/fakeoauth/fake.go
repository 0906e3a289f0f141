// Package fakeoauth provides faithful in-process fakes of the GitHub,
// Vercel and Google authorization servers, plus the few API endpoints the
// connectors' Identify and Revoke call, for tests.
//
// Each fake is an httptest.Server closed in t.Cleanup. It issues single-use
// codes bound to the client, the redirect URI and the PKCE challenge,
// answers the token endpoint in the vendor's own shapes (GitHub's
// form-encoded, HTTP-200 errors included), rotates refresh tokens the way
// the vendor does, checks bearer tokens on the API endpoints and really
// revokes them. Every route can be made to fail or hang for the next N
// calls.
//
// A test signs the user in either directly:
//
//	gh := fakeoauth.NewGitHub(t)
//	p := gh.Provider("https://app.example/callback")
//	verifier := oauth2.GenerateVerifier()
//	cb := gh.Authorize("st", "https://app.example/callback", oauth2.S256ChallengeFromVerifier(verifier))
//	tok, err := p.Exchange(ctx, cb, verifier)
//
// or through the authorize endpoint, as a browser would:
//
//	cb, err := gh.SignIn(ctx, p.AuthCodeURL("st", verifier))
package fakeoauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Route names one endpoint of a fake by its http.ServeMux pattern, e.g.
// "POST /login/oauth/access_token". The Route* constants list them.
type Route string

// Request is one request a fake received.
type Request struct {
	// Route is the endpoint that matched ("" for an unknown path).
	Route Route
	// Method and Path are the request's method and URL path.
	Method, Path string
	// Query is the parsed URL query.
	Query url.Values
	// Header is a copy of the request headers.
	Header http.Header
	// Body is the raw request body.
	Body []byte
}

// TokenState is what a fake knows of a token value.
type TokenState int

// Token states.
const (
	// TokenUnknown means the fake never issued the value.
	TokenUnknown TokenState = iota
	// TokenLive means the token is accepted.
	TokenLive
	// TokenExpired means the token's lifetime has passed on the fake clock.
	TokenExpired
	// TokenRevoked means the token was revoked or rotated away.
	TokenRevoked
)

// String returns the state's name.
func (s TokenState) String() string {
	switch s {
	case TokenLive:
		return "live"
	case TokenExpired:
		return "expired"
	case TokenRevoked:
		return "revoked"
	default:
		return "unknown"
	}
}

// TokenInfo describes one issued token.
type TokenInfo struct {
	// Kind is "access" or "refresh".
	Kind string
	// ClientID is the client the token was issued to.
	ClientID string
	// Scopes are the granted scopes.
	Scopes []string
	// Expiry is when the token expires on the fake clock (zero: never).
	Expiry time.Time
	// State is the token's state now.
	State TokenState
}

// Fake is the machinery the three vendor fakes share: the server, the
// fake clock, request recording, failure injection, counters and the
// token store. Its methods are safe for concurrent use.
type Fake struct {
	t        testing.TB
	srv      *httptest.Server
	done     chan struct{}
	failBody func(w http.ResponseWriter, status int)

	exchanges atomic.Int64
	refreshes atomic.Int64

	mu        sync.Mutex
	offset    time.Duration
	seq       int
	faults    map[Route][]fault
	requests  []Request
	codes     map[string]*authCode
	tokens    map[string]*token
	redirects []string
}

// fault is one injected failure.
type fault struct {
	status int
	hang   bool
}

// authCode is an issued authorization code and what it is bound to.
type authCode struct {
	clientID    string
	redirectURI string
	challenge   string
	method      string
	scopes      []string
	expires     time.Time
	used        bool
	grant       string
	extra       map[string]string
}

// token is an issued access or refresh token.
type token struct {
	kind     string
	clientID string
	grant    string
	scopes   []string
	expires  time.Time
	revoked  bool
	pair     string // refresh token: its current access token
	extra    map[string]string
}

// codeProblem is why a code was refused.
type codeProblem int

const (
	codeOK codeProblem = iota
	codeBad
	codeRedirectMismatch
	codePKCEMismatch
)

func newFake(t testing.TB, failBody func(http.ResponseWriter, int)) *Fake {
	return &Fake{
		t:        t,
		done:     make(chan struct{}),
		failBody: failBody,
		faults:   map[Route][]fault{},
		codes:    map[string]*authCode{},
		tokens:   map[string]*token{},
	}
}

// start serves mux and arranges for the server to close in t.Cleanup.
func (f *Fake) start(mux *http.ServeMux) {
	f.srv = httptest.NewServer(mux)
	f.t.Cleanup(func() {
		close(f.done)
		f.srv.Close()
	})
}

// handle registers h for route, recording each request and applying
// injected failures first.
func (f *Fake) handle(mux *http.ServeMux, route Route, h http.HandlerFunc) {
	mux.HandleFunc(string(route), func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.record(route, r, body)
		if flt, ok := f.takeFault(route); ok {
			if flt.hang {
				select {
				case <-r.Context().Done():
				case <-f.done:
				}
				return
			}
			f.failBody(w, flt.status)
			return
		}
		h(w, r)
	})
}

func (f *Fake) record(route Route, r *http.Request, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, Request{
		Route:  route,
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
	})
}

func (f *Fake) takeFault(route Route) (fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.faults[route]
	if len(q) == 0 {
		return fault{}, false
	}
	f.faults[route] = q[1:]
	return q[0], true
}

// URL returns the fake's base URL (http://127.0.0.1:port).
func (f *Fake) URL() string { return f.srv.URL }

// FailNext makes the next n calls to route answer status (e.g. 503) with
// the vendor's error body. Calls queue after failures already injected.
func (f *Fake) FailNext(route Route, n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.faults[route] = append(f.faults[route], fault{status: status})
	}
}

// HangNext makes the next n calls to route hang until the request's
// context ends (the client gives up) or the test ends.
func (f *Fake) HangNext(route Route, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.faults[route] = append(f.faults[route], fault{hang: true})
	}
}

// Requests returns a copy of every request received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// RequestsTo returns the requests received on route.
func (f *Fake) RequestsTo(route Route) []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// Exchanges returns how many authorization-code grants the token endpoint
// has answered (successfully or not; injected failures excluded).
func (f *Fake) Exchanges() int64 { return f.exchanges.Load() }

// Refreshes returns how many refresh-token grants the token endpoint has
// answered (successfully or not; injected failures excluded).
func (f *Fake) Refreshes() int64 { return f.refreshes.Load() }

// Now returns the fake clock's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nowLocked()
}

func (f *Fake) nowLocked() time.Time { return time.Now().Add(f.offset) }

// Advance moves the fake clock forward by d, so that codes and tokens
// expire without waiting.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset += d
}

// TokenState reports what the fake knows of the token value v.
func (f *Fake) TokenState(v string) TokenState {
	f.mu.Lock()
	defer f.mu.Unlock()
	tk, ok := f.tokens[v]
	if !ok {
		return TokenUnknown
	}
	return f.stateLocked(tk)
}

// Live reports whether the fake accepts the token value v.
func (f *Fake) Live(v string) bool { return f.TokenState(v) == TokenLive }

// Tokens returns every token issued so far, keyed by value.
func (f *Fake) Tokens() map[string]TokenInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]TokenInfo, len(f.tokens))
	for v, tk := range f.tokens {
		out[v] = TokenInfo{
			Kind:     tk.kind,
			ClientID: tk.clientID,
			Scopes:   slices.Clone(tk.scopes),
			Expiry:   tk.expires,
			State:    f.stateLocked(tk),
		}
	}
	return out
}

// RevokeAll revokes every token issued so far, as if the user removed the
// app at the provider.
func (f *Fake) RevokeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, tk := range f.tokens {
		tk.revoked = true
	}
}

// SignIn plays the browser: it GETs authCodeURL (which must point at this
// fake), expects the 302 to the redirect URI and returns the callback
// query (code, state and the vendor's extras).
func (f *Fake) SignIn(ctx context.Context, authCodeURL string) (url.Values, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authCodeURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fakeoauth: sign in: %w", err)
	}
	client := *f.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fakeoauth: sign in: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("fakeoauth: sign in: authorize answered HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, fmt.Errorf("fakeoauth: sign in: bad Location: %w", err)
	}
	return loc.Query(), nil
}

// registerRedirect records an allowed redirect URI. With none registered,
// any redirect URI is allowed.
func (f *Fake) registerRedirect(u string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u != "" && !slices.Contains(f.redirects, u) {
		f.redirects = append(f.redirects, u)
	}
}

// redirectAllowed reports whether u may be used as a redirect URI, and
// resolves "" to the first registered one.
func (f *Fake) redirectAllowed(u string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u == "" {
		if len(f.redirects) == 0 {
			return "", false
		}
		return f.redirects[0], true
	}
	if len(f.redirects) == 0 {
		return u, true
	}
	return u, slices.Contains(f.redirects, u)
}

// newValueLocked returns a deterministic, unique, random-looking value.
func (f *Fake) newValueLocked(prefix string, n int) string {
	f.seq++
	sum := sha256.Sum256(fmt.Appendf(nil, "fakeoauth/%d", f.seq))
	s := hex.EncodeToString(sum[:])
	if n > len(s) {
		n = len(s)
	}
	return prefix + s[:n]
}

// issueCode stores c under a new code value and returns it.
func (f *Fake) issueCode(c authCode, ttl time.Duration) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.newValueLocked("", 20)
	c.expires = f.nowLocked().Add(ttl)
	f.codes[v] = &c
	return v
}

// redeemCode checks code against the presenting client, redirect URI and
// PKCE verifier. A code known to the client is consumed by the first
// attempt, whatever its outcome.
func (f *Fake) redeemCode(code, clientID, redirectURI, verifier string, checkPKCE bool) (*authCode, codeProblem) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.codes[code]
	if !ok || c.clientID != clientID || c.used || !f.nowLocked().Before(c.expires) {
		return nil, codeBad
	}
	c.used = true
	if c.redirectURI != "" && redirectURI != c.redirectURI {
		return nil, codeRedirectMismatch
	}
	if checkPKCE && c.challenge != "" {
		if verifier == "" || !challengeMatches(c.method, c.challenge, verifier) {
			return nil, codePKCEMismatch
		}
	}
	cp := *c
	return &cp, codeOK
}

// challengeMatches checks a PKCE verifier against its challenge.
func challengeMatches(method, challenge, verifier string) bool {
	want := verifier
	if method == "" || method == "S256" {
		sum := sha256.Sum256([]byte(verifier))
		want = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// issueToken stores a new token and returns its value.
func (f *Fake) issueToken(prefix string, n int, tk token, ttl time.Duration) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issueTokenLocked(prefix, n, tk, ttl)
}

func (f *Fake) issueTokenLocked(prefix string, n int, tk token, ttl time.Duration) string {
	v := f.newValueLocked(prefix, n)
	if ttl > 0 {
		tk.expires = f.nowLocked().Add(ttl)
	}
	tk.scopes = slices.Clone(tk.scopes)
	tk.extra = maps.Clone(tk.extra)
	f.tokens[v] = &tk
	return v
}

func (f *Fake) stateLocked(tk *token) TokenState {
	switch {
	case tk.revoked:
		return TokenRevoked
	case !tk.expires.IsZero() && !f.nowLocked().Before(tk.expires):
		return TokenExpired
	default:
		return TokenLive
	}
}

// liveToken returns a copy of the live token v of the given kind.
func (f *Fake) liveToken(v, kind string) (token, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tk, ok := f.tokens[v]
	if !ok || tk.kind != kind || f.stateLocked(tk) != TokenLive {
		return token{}, false
	}
	cp := *tk
	cp.scopes = slices.Clone(tk.scopes)
	cp.extra = maps.Clone(tk.extra)
	return cp, true
}

// revokeGrantLocked revokes every token of grant.
func (f *Fake) revokeGrantLocked(grant string) {
	for _, tk := range f.tokens {
		if tk.grant == grant {
			tk.revoked = true
		}
	}
}

// revokeGrant revokes every token of grant.
func (f *Fake) revokeGrant(grant string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokeGrantLocked(grant)
}

// bearer returns the token of an "Authorization: Bearer" (or GitHub's
// "token") header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	for _, scheme := range []string{"Bearer ", "bearer ", "token "} {
		if v, ok := strings.CutPrefix(h, scheme); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// splitScopeList splits a space- or comma-separated scope list.
func splitScopeList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
}

// clientCredentials reads client_id and client_secret from the form or,
// when allowBasic, from HTTP Basic auth.
func clientCredentials(r *http.Request, allowBasic bool) (id, secret string) {
	id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	if id == "" && allowBasic {
		if u, p, ok := r.BasicAuth(); ok {
			id, _ = url.QueryUnescape(u)
			secret, _ = url.QueryUnescape(p)
		}
	}
	return id, secret
}

// sameSecret compares secrets in constant time.
func sameSecret(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
