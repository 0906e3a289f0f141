package fakeoauth

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors/analytics"
)

// Google routes, for FailNext, HangNext and RequestsTo.
const (
	RouteGoogleAuthorize        Route = "GET /o/oauth2/auth"
	RouteGoogleToken            Route = "POST /token"
	RouteGoogleRevoke           Route = "POST /revoke"
	RouteGoogleUserInfo         Route = "GET /v1/userinfo"
	RouteGoogleAccountSummaries Route = "GET /v1beta/accountSummaries"
)

// Google token lifetimes.
const (
	GoogleAccessTTL = 3599 * time.Second
	googleCodeTTL   = 10 * time.Minute
)

// Google is a fake Google OAuth server (authorize, token and revoke), the
// OpenID Connect userinfo endpoint and the GA4 Admin API's
// accountSummaries list, all on one host.
//
// Refresh tokens are issued only for access_type=offline, and only on the
// first consent or with prompt=consent; refreshing keeps the refresh token
// and issues a new access token (expires_in 3599). Revoking any token of a
// grant revokes the whole grant.
type Google struct {
	*Fake
	// ClientID and ClientSecret are the registered web client's
	// credentials. Treat them as read-only.
	ClientID, ClientSecret string

	// guarded by Fake.mu
	user          GoogleUser
	accounts      []GoogleAccount
	pageSize      int
	refuseRefresh bool
	consented     map[string]bool
}

// GoogleUser is the Google account that signs in.
type GoogleUser struct {
	// Sub is the OpenID subject.
	Sub string
	// Email is the account's e-mail.
	Email string
}

// GoogleAccount is one Analytics account the user can see.
type GoogleAccount struct {
	// Name is the resource name, "accounts/123".
	Name string
	// DisplayName is the account's display name.
	DisplayName string
}

// NewGoogle starts a fake Google with one registered client, one user (sub
// "109876543210987654321", e-mail "analyst@example.com") who sees three
// Analytics accounts, served two per page.
func NewGoogle(t testing.TB) *Google {
	t.Helper()
	g := &Google{
		Fake:         newFake(t, googleFail),
		ClientID:     "123456789012-fake.apps.googleusercontent.com",
		ClientSecret: "GOCSPX-fake-google-client-secret",
		user:         GoogleUser{Sub: "109876543210987654321", Email: "analyst@example.com"},
		accounts: []GoogleAccount{
			{Name: "accounts/1000", DisplayName: "Acme Marketing"},
			{Name: "accounts/1001", DisplayName: "Acme Shop"},
			{Name: "accounts/1002", DisplayName: "Side Project"},
		},
		pageSize:  2,
		consented: map[string]bool{},
	}
	mux := http.NewServeMux()
	g.handle(mux, RouteGoogleAuthorize, g.serveAuthorize)
	g.handle(mux, RouteGoogleToken, g.serveToken)
	g.handle(mux, RouteGoogleRevoke, g.serveRevoke)
	g.handle(mux, RouteGoogleUserInfo, g.serveUserInfo)
	g.handle(mux, RouteGoogleAccountSummaries, g.serveAccountSummaries)
	g.handle(mux, "/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, googleError(http.StatusNotFound, "NOT_FOUND", "Requested entity was not found."))
	})
	g.start(mux)
	return g
}

// Config returns an analytics.Config pointing at the fake, with the
// client's credentials, and registers redirectURL as an authorized
// redirect URI.
func (g *Google) Config(redirectURL string) analytics.Config {
	g.registerRedirect(redirectURL)
	return analytics.Config{
		ClientID:        g.ClientID,
		ClientSecret:    g.ClientSecret,
		RedirectURL:     redirectURL,
		AuthBaseURL:     g.URL() + "/o/oauth2/auth",
		TokenURL:        g.URL() + "/token",
		RevokeURL:       g.URL() + "/revoke",
		UserInfoURL:     g.URL() + "/v1/userinfo",
		AdminAPIBaseURL: g.URL(),
	}
}

// Provider returns an analytics.Provider built from Config(redirectURL),
// failing the test if that is refused.
func (g *Google) Provider(redirectURL string) *analytics.Provider {
	g.t.Helper()
	p, err := analytics.New(g.Config(redirectURL))
	if err != nil {
		g.t.Fatalf("fakeoauth: %v", err)
	}
	return p
}

// SetUser changes the account that signs in next.
func (g *Google) SetUser(u GoogleUser) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.user = u
}

// SetAccounts replaces the Analytics accounts the user sees.
func (g *Google) SetAccounts(accounts ...GoogleAccount) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accounts = slices.Clone(accounts)
}

// SetPageSize caps accountSummaries pages at n items (default 2), below
// the real maximum of 200, so that pagination is exercised.
func (g *Google) SetPageSize(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pageSize = max(n, 1)
}

// RefuseRefresh makes every refresh answer 400 invalid_grant while on.
func (g *Google) RefuseRefresh(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuseRefresh = on
}

// Authorize simulates the user consenting to the request the analytics
// provider makes (access_type=offline, prompt=consent): it issues a code
// bound to the client id, redirectURI and the S256 codeChallenge ("" for
// no PKCE) and returns the callback query (code, scope, state). scopes
// are the requested scopes. It fails the test if redirectURI is not
// registered.
func (g *Google) Authorize(state, redirectURI, codeChallenge string, scopes ...string) url.Values {
	g.t.Helper()
	q := url.Values{
		"client_id":     {g.ClientID},
		"redirect_uri":  {redirectURI},
		"response_type": {"code"},
		"scope":         {strings.Join(scopes, " ")},
		"state":         {state},
		"access_type":   {"offline"},
		"prompt":        {"consent"},
	}
	if codeChallenge != "" {
		q.Set("code_challenge", codeChallenge)
		q.Set("code_challenge_method", "S256")
	}
	cb, err := g.authorize(q)
	if err != nil {
		g.t.Fatalf("fakeoauth: google authorize: %v", err)
	}
	return cb
}

// authorize validates an authorization request and issues a code.
func (g *Google) authorize(q url.Values) (url.Values, error) {
	if q.Get("client_id") != g.ClientID {
		return nil, fmt.Errorf("invalid_client: the OAuth client was not found")
	}
	if q.Get("response_type") != "code" {
		return nil, fmt.Errorf("unsupported_response_type: %q", q.Get("response_type"))
	}
	redirect := q.Get("redirect_uri")
	if _, ok := g.redirectAllowed(redirect); !ok || redirect == "" {
		return nil, fmt.Errorf("redirect_uri_mismatch: %q is not an authorized redirect URI", redirect)
	}
	scopes := splitScopeList(q.Get("scope"))
	if len(scopes) == 0 {
		return nil, fmt.Errorf("invalid_request: missing required parameter: scope")
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	if challenge != "" {
		if method == "" {
			method = "plain"
		}
		if method != "S256" && method != "plain" {
			return nil, fmt.Errorf("invalid_request: unsupported code_challenge_method %q", method)
		}
	}
	g.mu.Lock()
	user := g.user
	g.mu.Unlock()
	code := g.issueCode(authCode{
		clientID:    g.ClientID,
		redirectURI: redirect,
		challenge:   challenge,
		method:      method,
		scopes:      scopes,
		grant:       "google/" + g.ClientID + "/" + user.Sub,
		extra: map[string]string{
			"sub":         user.Sub,
			"email":       user.Email,
			"access_type": q.Get("access_type"),
			"prompt":      q.Get("prompt"),
		},
	}, googleCodeTTL)
	cb := url.Values{"code": {code}, "scope": {strings.Join(scopes, " ")}, "authuser": {"0"}}
	if s := q.Get("state"); s != "" {
		cb.Set("state", s)
	}
	return cb, nil
}

func (g *Google) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	cb, err := g.authorize(r.URL.Query())
	if err != nil {
		http.Error(w, "Error 400: "+err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, r.URL.Query().Get("redirect_uri")+"?"+cb.Encode(), http.StatusFound)
}

// serveToken is POST /token: client credentials in the form only (Google
// does not take them in a Basic header), JSON answers, 400/401 errors.
func (g *Google) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_request", "Could not parse the request body."))
		return
	}
	grantType := r.PostForm.Get("grant_type")
	switch grantType {
	case "authorization_code":
		g.exchanges.Add(1)
	case "refresh_token":
		g.refreshes.Add(1)
	default:
		writeJSON(w, http.StatusBadRequest, oauthError("unsupported_grant_type", "Invalid grant_type: "+grantType))
		return
	}
	id, secret := clientCredentials(r, false)
	if id != g.ClientID {
		writeJSON(w, http.StatusUnauthorized, oauthError("invalid_client", "The OAuth client was not found."))
		return
	}
	if !sameSecret(secret, g.ClientSecret) {
		writeJSON(w, http.StatusUnauthorized, oauthError("invalid_client", "Unauthorized"))
		return
	}
	if grantType == "refresh_token" {
		g.refresh(w, r.PostForm.Get("refresh_token"))
		return
	}
	c, problem := g.redeemCode(r.PostForm.Get("code"), id, r.PostForm.Get("redirect_uri"), r.PostForm.Get("code_verifier"), true)
	switch problem {
	case codeBad:
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_grant", "Bad Request"))
		return
	case codeRedirectMismatch:
		writeJSON(w, http.StatusBadRequest, oauthError("redirect_uri_mismatch", "Bad Request"))
		return
	case codePKCEMismatch:
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_grant", "Invalid code verifier."))
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	base := token{clientID: id, grant: c.grant, scopes: c.scopes, extra: c.extra}
	access := base
	access.kind = "access"
	resp := map[string]any{
		"access_token": g.issueTokenLocked("ya29.", 40, access, GoogleAccessTTL),
		"expires_in":   int(GoogleAccessTTL / time.Second),
		"scope":        strings.Join(c.scopes, " "),
		"token_type":   "Bearer",
	}
	key := c.grant
	if c.extra["access_type"] == "offline" && (c.extra["prompt"] == "consent" || !g.consented[key]) {
		refresh := base
		refresh.kind = "refresh"
		resp["refresh_token"] = g.issueTokenLocked("1//", 60, refresh, 0)
		g.consented[key] = true
	}
	writeJSON(w, http.StatusOK, resp)
}

// refresh answers a refresh_token grant: a new access token, the refresh
// token unchanged (and absent from the answer).
func (g *Google) refresh(w http.ResponseWriter, v string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	rt, ok := g.tokens[v]
	if g.refuseRefresh || !ok || rt.kind != "refresh" || rt.clientID != g.ClientID || g.stateLocked(rt) != TokenLive {
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_grant", "Token has been expired or revoked."))
		return
	}
	access := token{kind: "access", clientID: rt.clientID, grant: rt.grant, scopes: rt.scopes, extra: rt.extra}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": g.issueTokenLocked("ya29.", 40, access, GoogleAccessTTL),
		"expires_in":   int(GoogleAccessTTL / time.Second),
		"scope":        strings.Join(rt.scopes, " "),
		"token_type":   "Bearer",
	})
}

// serveRevoke is POST /revoke: form token= (access or refresh); 200, or
// 400 invalid_token for an unknown, expired or revoked token. Revocation
// covers the whole grant.
func (g *Google) serveRevoke(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	v := r.Form.Get("token")
	g.mu.Lock()
	tk, ok := g.tokens[v]
	live := ok && g.stateLocked(tk) == TokenLive
	if live {
		g.revokeGrantLocked(tk.grant)
		delete(g.consented, tk.grant)
	}
	g.mu.Unlock()
	if !live {
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_token", "Token expired or revoked"))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
}

// auth returns the bearer token's record, answering 401 itself when it is
// not live.
func (g *Google) auth(w http.ResponseWriter, r *http.Request) (token, bool) {
	tk, ok := g.liveToken(bearer(r), "access")
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/", error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, googleError(http.StatusUnauthorized, "UNAUTHENTICATED",
			"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."))
		return token{}, false
	}
	return tk, true
}

// serveUserInfo is the OpenID Connect userinfo endpoint; the e-mail needs
// the email scope.
func (g *Google) serveUserInfo(w http.ResponseWriter, r *http.Request) {
	tk, ok := g.auth(w, r)
	if !ok {
		return
	}
	info := map[string]any{"sub": tk.extra["sub"]}
	if slices.Contains(tk.scopes, "email") || slices.Contains(tk.scopes, "https://www.googleapis.com/auth/userinfo.email") {
		info["email"] = tk.extra["email"]
		info["email_verified"] = true
	}
	writeJSON(w, http.StatusOK, info)
}

// analyticsRead lists the scopes that allow Admin API reads.
var analyticsRead = []string{
	"https://www.googleapis.com/auth/analytics.readonly",
	"https://www.googleapis.com/auth/analytics.edit",
	"https://www.googleapis.com/auth/analytics",
}

// serveAccountSummaries is GET /v1beta/accountSummaries with pageSize and
// pageToken; nextPageToken is omitted on the last page.
func (g *Google) serveAccountSummaries(w http.ResponseWriter, r *http.Request) {
	tk, ok := g.auth(w, r)
	if !ok {
		return
	}
	if !slices.ContainsFunc(tk.scopes, func(s string) bool { return slices.Contains(analyticsRead, s) }) {
		writeJSON(w, http.StatusForbidden, googleError(http.StatusForbidden, "PERMISSION_DENIED", "Request had insufficient authentication scopes."))
		return
	}
	q := r.URL.Query()
	size := 50
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, googleError(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid page size."))
			return
		}
		if n > 0 {
			size = min(n, 200)
		}
	}
	start := 0
	if t := q.Get("pageToken"); t != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "page-"))
		if err != nil || !strings.HasPrefix(t, "page-") || n < 0 {
			writeJSON(w, http.StatusBadRequest, googleError(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid page token."))
			return
		}
		start = n
	}
	g.mu.Lock()
	size = min(size, g.pageSize)
	accounts := slices.Clone(g.accounts)
	g.mu.Unlock()
	start = min(start, len(accounts))
	end := min(start+size, len(accounts))
	items := make([]map[string]any, 0, end-start)
	for _, a := range accounts[start:end] {
		id := strings.TrimPrefix(a.Name, "accounts/")
		items = append(items, map[string]any{
			"name":              "accountSummaries/" + id,
			"account":           a.Name,
			"displayName":       a.DisplayName,
			"propertySummaries": []any{},
		})
	}
	resp := map[string]any{"accountSummaries": items}
	if end < len(accounts) {
		resp["nextPageToken"] = "page-" + strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, resp)
}

// googleError is Google's API error body.
func googleError(code int, status, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}}
}

// googleFail answers an injected failure.
func googleFail(w http.ResponseWriter, status int) {
	canonical := map[int]string{
		http.StatusBadRequest:          "INVALID_ARGUMENT",
		http.StatusUnauthorized:        "UNAUTHENTICATED",
		http.StatusForbidden:           "PERMISSION_DENIED",
		http.StatusNotFound:            "NOT_FOUND",
		http.StatusTooManyRequests:     "RESOURCE_EXHAUSTED",
		http.StatusInternalServerError: "INTERNAL",
		http.StatusServiceUnavailable:  "UNAVAILABLE",
		http.StatusGatewayTimeout:      "DEADLINE_EXCEEDED",
	}[status]
	if canonical == "" {
		canonical = "UNKNOWN"
	}
	writeJSON(w, status, googleError(status, canonical, http.StatusText(status)))
}
