package fakeoauth

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors/codehost"
)

// GitHub routes, for FailNext, HangNext and RequestsTo.
const (
	RouteGitHubAuthorize Route = "GET /login/oauth/authorize"
	RouteGitHubToken     Route = "POST /login/oauth/access_token"
	RouteGitHubUser      Route = "GET /user"
	RouteGitHubGrant     Route = "DELETE /applications/{client_id}/grant"
	RouteGitHubAppToken  Route = "DELETE /applications/{client_id}/token"
)

// GitHub token lifetimes (GitHub App user tokens with expiration).
const (
	GitHubAccessTTL  = 28800 * time.Second
	GitHubRefreshTTL = 15811200 * time.Second
	gitHubCodeTTL    = 10 * time.Minute
	gitHubDocs       = "https://docs.github.com/rest"
)

// GitHub is a fake github.com (OAuth authorize and token endpoints) and
// api.github.com (GET /user, DELETE /applications/{client_id}/grant, which
// revokes every token of the user's grant, and DELETE
// /applications/{client_id}/token, which revokes one).
//
// By default it issues GitHub App user tokens with expiration: a ghu_
// access token for GitHubAccessTTL (8 h, see SetAccessTTL) and a rotating
// ghr_ refresh token. With SetExpiring(false) it issues non-expiring gho_
// OAuth app tokens.
type GitHub struct {
	*Fake
	// ClientID and ClientSecret are the registered app's credentials.
	// Treat them as read-only.
	ClientID, ClientSecret string

	// guarded by Fake.mu
	user          GitHubUser
	granted       []string
	grantedSet    bool
	expiring      bool
	accessTTL     time.Duration
	refuseRefresh bool
}

// GitHubUser is the user who signs in.
type GitHubUser struct {
	// ID is the numeric user id.
	ID int64
	// Login is the user's login.
	Login string
	// Name is the display name (null in GET /user when empty); Email the
	// public e-mail address (null when empty: most users keep theirs
	// private).
	Name, Email string
	// CreatedAt is when the account was made (gitHubEpoch when zero).
	CreatedAt time.Time
}

// gitHubEpoch is when the fake's users were made unless set.
var gitHubEpoch = time.Date(2011, 1, 25, 18, 44, 36, 0, time.UTC)

// NewGitHub starts a fake GitHub with one registered app and one user
// (id 583231, login "octocat", name "The Octocat").
func NewGitHub(t testing.TB) *GitHub {
	t.Helper()
	g := &GitHub{
		Fake:         newFake(t, gitHubFail),
		ClientID:     "Iv1.fakegithubclient",
		ClientSecret: "fake-github-client-secret-0123456789",
		user:         GitHubUser{ID: 583231, Login: "octocat", Name: "The Octocat"},
		expiring:     true,
		accessTTL:    GitHubAccessTTL,
	}
	mux := http.NewServeMux()
	g.handle(mux, RouteGitHubAuthorize, g.serveAuthorize)
	g.handle(mux, RouteGitHubToken, g.serveToken)
	g.handle(mux, RouteGitHubUser, g.serveUser)
	g.handle(mux, RouteGitHubGrant, g.serveRevokeGrant)
	g.handle(mux, RouteGitHubAppToken, g.serveRevokeToken)
	g.handle(mux, "/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, gitHubError("Not Found"))
	})
	g.start(mux)
	return g
}

// Config returns a codehost.Config pointing at the fake, with the app's
// credentials, and registers redirectURL as the app's callback URL.
func (g *GitHub) Config(redirectURL string) codehost.Config {
	g.registerRedirect(redirectURL)
	return codehost.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		RedirectURL:  redirectURL,
		AuthBaseURL:  g.URL(),
		TokenURL:     g.URL() + "/login/oauth/access_token",
		APIBaseURL:   g.URL(),
	}
}

// Provider returns a codehost.Provider built from Config(redirectURL),
// failing the test if that is refused.
func (g *GitHub) Provider(redirectURL string) *codehost.Provider {
	g.t.Helper()
	p, err := codehost.New(g.Config(redirectURL))
	if err != nil {
		g.t.Fatalf("fakeoauth: %v", err)
	}
	return p
}

// SetUser changes the user who signs in next.
func (g *GitHub) SetUser(u GitHubUser) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.user = u
}

// SetGrantedScopes makes the user grant exactly scopes, whatever the app
// requests (users may grant fewer than requested).
func (g *GitHub) SetGrantedScopes(scopes ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.granted, g.grantedSet = slices.Clone(scopes), true
}

// SetExpiring chooses GitHub App user tokens with expiration (true, the
// default: ghu_/ghr_, refresh with rotation) or non-expiring OAuth app
// tokens (false: gho_, no refresh token).
func (g *GitHub) SetExpiring(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expiring = on
}

// SetAccessTTL sets the lifetime of expiring access tokens (default 8 h).
func (g *GitHub) SetAccessTTL(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accessTTL = d
}

// RefuseRefresh makes every refresh answer bad_refresh_token (HTTP 200, as
// GitHub does) while on.
func (g *GitHub) RefuseRefresh(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refuseRefresh = on
}

// Authorize simulates the user approving the app: it issues a code bound
// to the app's client id, redirectURI and the S256 codeChallenge ("" for
// no PKCE) and returns the callback query (code, state). scopes are the
// requested scopes. It fails the test if redirectURI is not registered.
func (g *GitHub) Authorize(state, redirectURI, codeChallenge string, scopes ...string) url.Values {
	g.t.Helper()
	q := url.Values{
		"client_id":    {g.ClientID},
		"redirect_uri": {redirectURI},
		"scope":        {strings.Join(scopes, " ")},
		"state":        {state},
	}
	if codeChallenge != "" {
		q.Set("code_challenge", codeChallenge)
		q.Set("code_challenge_method", "S256")
	}
	_, cb, err := g.authorize(q)
	if err != nil {
		g.t.Fatalf("fakeoauth: github authorize: %v", err)
	}
	return cb
}

// authorize validates an authorize query and issues a code.
func (g *GitHub) authorize(q url.Values) (redirect string, cb url.Values, err error) {
	if q.Get("client_id") != g.ClientID {
		return "", nil, fmt.Errorf("unknown client_id %q", q.Get("client_id"))
	}
	redirect, ok := g.redirectAllowed(q.Get("redirect_uri"))
	if !ok {
		return "", nil, fmt.Errorf("redirect_uri_mismatch: %q is not a registered callback URL", q.Get("redirect_uri"))
	}
	challenge, method := q.Get("code_challenge"), q.Get("code_challenge_method")
	if challenge != "" && method != "S256" {
		return "", nil, fmt.Errorf("code_challenge_method must be S256, got %q", method)
	}
	g.mu.Lock()
	user := g.user
	scopes := splitScopeList(q.Get("scope"))
	if g.grantedSet {
		scopes = slices.Clone(g.granted)
	}
	g.mu.Unlock()
	code := g.issueCode(authCode{
		clientID:    g.ClientID,
		redirectURI: q.Get("redirect_uri"),
		challenge:   challenge,
		method:      method,
		scopes:      scopes,
		grant:       g.grantID(user),
		extra: map[string]string{"user_id": strconv.FormatInt(user.ID, 10), "login": user.Login,
			"name": user.Name, "email": user.Email, "created_at": cmp.Or(user.CreatedAt, gitHubEpoch).UTC().Format(time.RFC3339)},
	}, gitHubCodeTTL)
	cb = url.Values{"code": {code}}
	if s := q.Get("state"); s != "" {
		cb.Set("state", s)
	}
	return redirect, cb, nil
}

func (g *GitHub) grantID(u GitHubUser) string {
	return "github/" + g.ClientID + "/" + strconv.FormatInt(u.ID, 10)
}

func (g *GitHub) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	redirect, cb, err := g.authorize(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, redirect+"?"+cb.Encode(), http.StatusFound)
}

// serveToken is /login/oauth/access_token: form-encoded answers unless the
// client accepts JSON, and errors as HTTP 200 with an "error" field.
func (g *GitHub) serveToken(w http.ResponseWriter, r *http.Request) {
	wantJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	if err := r.ParseForm(); err != nil {
		writeGitHubToken(w, wantJSON, tokenErr("invalid_request", "The request body could not be parsed."))
		return
	}
	grantType := r.PostForm.Get("grant_type")
	switch grantType {
	case "", "authorization_code":
		g.exchanges.Add(1)
	case "refresh_token":
		g.refreshes.Add(1)
	default:
		writeGitHubToken(w, wantJSON, tokenErr("unsupported_grant_type", "The grant type is not supported."))
		return
	}
	id, secret := clientCredentials(r, true)
	if id != g.ClientID || !sameSecret(secret, g.ClientSecret) {
		writeGitHubToken(w, wantJSON, tokenErr("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect."))
		return
	}
	if grantType == "refresh_token" {
		writeGitHubToken(w, wantJSON, g.refresh(r.PostForm.Get("refresh_token")))
		return
	}
	c, problem := g.redeemCode(r.PostForm.Get("code"), id, r.PostForm.Get("redirect_uri"), r.PostForm.Get("code_verifier"), true)
	switch problem {
	case codeBad:
		writeGitHubToken(w, wantJSON, tokenErr("bad_verification_code", "The code passed is incorrect or expired."))
		return
	case codeRedirectMismatch:
		writeGitHubToken(w, wantJSON, tokenErr("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application."))
		return
	case codePKCEMismatch:
		writeGitHubToken(w, wantJSON, tokenErr("invalid_grant", "The code_verifier does not match the code_challenge."))
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	writeGitHubToken(w, wantJSON, g.issueLocked(c.grant, c.scopes, c.extra))
}

// issueLocked issues an access token (and, when expiring, a refresh token)
// and returns the token response fields in order.
func (g *GitHub) issueLocked(grant string, scopes []string, extra map[string]string) []field {
	base := token{clientID: g.ClientID, grant: grant, scopes: scopes, extra: extra}
	if !g.expiring {
		access := base
		access.kind = "access"
		v := g.issueTokenLocked("gho_", 36, access, 0)
		return []field{
			{"access_token", v},
			{"scope", strings.Join(scopes, ",")},
			{"token_type", "bearer"},
		}
	}
	access := base
	access.kind = "access"
	av := g.issueTokenLocked("ghu_", 36, access, g.accessTTL)
	refresh := base
	refresh.kind, refresh.pair = "refresh", av
	rv := g.issueTokenLocked("ghr_", 76, refresh, GitHubRefreshTTL)
	return []field{
		{"access_token", av},
		{"expires_in", int(g.accessTTL / time.Second)},
		{"refresh_token", rv},
		{"refresh_token_expires_in", int(GitHubRefreshTTL / time.Second)},
		{"scope", strings.Join(scopes, ",")},
		{"token_type", "bearer"},
	}
}

// refresh rotates a refresh token: the old refresh token and its access
// token stop working, a new pair is issued.
func (g *GitHub) refresh(v string) []field {
	g.mu.Lock()
	defer g.mu.Unlock()
	old, ok := g.tokens[v]
	if g.refuseRefresh || !ok || old.kind != "refresh" || old.clientID != g.ClientID || g.stateLocked(old) != TokenLive {
		return tokenErr("bad_refresh_token", "The refresh token passed is incorrect or expired.")
	}
	old.revoked = true
	if a, ok := g.tokens[old.pair]; ok {
		a.revoked = true
	}
	return g.issueLocked(old.grant, old.scopes, old.extra)
}

// serveUser is GET /user: the token's user as GitHub answers it, its
// public profile (public-user, user_view_type "public") or, for a token
// with the user scope, its private profile too (private-user,
// user_view_type "private"), as the description's schemas and GitHub's
// documentation of the endpoint have it.
func (g *GitHub) serveUser(w http.ResponseWriter, r *http.Request) {
	tk, ok := g.apiAuth(w, r)
	if !ok {
		return
	}
	w.Header().Set("X-OAuth-Scopes", strings.Join(tk.scopes, ", "))
	w.Header().Set("X-Accepted-OAuth-Scopes", "")
	writeJSON(w, http.StatusOK, g.userJSON(tk.extra, slices.Contains(tk.scopes, "user")))
}

// userJSON is GitHub's public-user of the user extra describes, or its
// private-user when private.
func (g *GitHub) userJSON(extra map[string]string, private bool) map[string]any {
	id, _ := strconv.ParseInt(extra["user_id"], 10, 64)
	login := extra["login"]
	api := g.URL() + "/users/" + login
	created := cmp.Or(extra["created_at"], gitHubEpoch.Format(time.RFC3339))
	u := map[string]any{
		"login": login, "id": id,
		// GitHub's (legacy) global node id of a user: base64 of
		// "04:User" and the id.
		"node_id":    base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "04:User%d", id)),
		"avatar_url": fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id), "gravatar_id": "",
		"url": api, "html_url": "https://github.com/" + login,
		"followers_url": api + "/followers", "following_url": api + "/following{/other_user}",
		"gists_url": api + "/gists{/gist_id}", "starred_url": api + "/starred{/owner}{/repo}",
		"subscriptions_url": api + "/subscriptions", "organizations_url": api + "/orgs", "repos_url": api + "/repos",
		"events_url": api + "/events{/privacy}", "received_events_url": api + "/received_events",
		"type": "User", "user_view_type": "public", "site_admin": false,
		"name": nullable(extra["name"]), "company": nil, "blog": "", "location": nil, "email": nullable(extra["email"]),
		"hireable": nil, "bio": nil, "twitter_username": nil,
		"public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
		"created_at": created, "updated_at": created,
	}
	if private {
		maps.Copy(u, map[string]any{
			"user_view_type": "private", "notification_email": nullable(extra["email"]),
			"private_gists": 0, "total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0, "collaborators": 0,
			"two_factor_authentication": true,
			"plan":                      map[string]any{"name": "free", "space": 976562499, "collaborators": 0, "private_repos": 10000},
		})
	}
	return u
}

// nullable is s, or JSON null when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// apiAuth applies api.github.com's header rules and returns the bearer
// token's record, answering the error itself when it fails.
func (g *GitHub) apiAuth(w http.ResponseWriter, r *http.Request) (token, bool) {
	if !g.apiHeaders(w, r) {
		return token{}, false
	}
	tk, ok := g.liveToken(bearer(r), "access")
	if !ok {
		writeJSON(w, http.StatusUnauthorized, gitHubError("Bad credentials"))
		return token{}, false
	}
	return tk, true
}

// apiHeaders checks User-Agent and X-GitHub-Api-Version and sets the rate
// limit headers.
func (g *GitHub) apiHeaders(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("User-Agent") == "" {
		writeJSON(w, http.StatusForbidden, gitHubError("Request forbidden by administrative rules. Please make sure your request has a User-Agent header."))
		return false
	}
	switch v := r.Header.Get("X-GitHub-Api-Version"); v {
	case "", "2022-11-28", "2026-03-10":
	default:
		writeJSON(w, http.StatusBadRequest, gitHubError(fmt.Sprintf("Invalid API version provided: %s", v)))
		return false
	}
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", "4999")
	h.Set("X-RateLimit-Used", "1")
	h.Set("X-RateLimit-Reset", strconv.FormatInt(g.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	return true
}

// serveRevokeGrant is DELETE /applications/{client_id}/grant: Basic auth
// with the app's credentials, JSON body {"access_token"}, 204 on success.
// It revokes the grant: every token the app holds for that user, whichever
// connection they were issued to.
func (g *GitHub) serveRevokeGrant(w http.ResponseWriter, r *http.Request) {
	tk, _, ok := g.appTokenRequest(w, r)
	if !ok {
		return
	}
	g.revokeGrant(tk.grant)
	w.WriteHeader(http.StatusNoContent)
}

// serveRevokeToken is DELETE /applications/{client_id}/token: the same
// request as the grant's, but it revokes only the token named (and the
// refresh token issued with it); the user's other tokens keep working.
func (g *GitHub) serveRevokeToken(w http.ResponseWriter, r *http.Request) {
	_, v, ok := g.appTokenRequest(w, r)
	if !ok {
		return
	}
	g.mu.Lock()
	if tk, ok := g.tokens[v]; ok {
		tk.revoked = true
	}
	for _, tk := range g.tokens {
		if tk.kind == "refresh" && tk.pair == v {
			tk.revoked = true
		}
	}
	g.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// appTokenRequest checks a request of the app about one of its tokens
// (Basic auth with the app's credentials, JSON body {"access_token"}) and
// returns the live token and its value, answering the error itself when
// it fails.
func (g *GitHub) appTokenRequest(w http.ResponseWriter, r *http.Request) (token, string, bool) {
	if !g.apiHeaders(w, r) {
		return token{}, "", false
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		writeJSON(w, http.StatusUnauthorized, gitHubError("Requires authentication"))
		return token{}, "", false
	}
	if user != g.ClientID || !sameSecret(pass, g.ClientSecret) {
		writeJSON(w, http.StatusUnauthorized, gitHubError("Bad credentials"))
		return token{}, "", false
	}
	if r.PathValue("client_id") != g.ClientID {
		writeJSON(w, http.StatusNotFound, gitHubError("Not Found"))
		return token{}, "", false
	}
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, gitHubError("Problems parsing JSON"))
		return token{}, "", false
	}
	tk, ok := g.liveToken(body.AccessToken, "access")
	if !ok || tk.clientID != g.ClientID {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
			"message":           "Validation Failed",
			"documentation_url": gitHubDocs,
			"errors":            []map[string]string{{"resource": "Authorization", "field": "access_token", "code": "invalid"}},
		})
		return token{}, "", false
	}
	return tk, body.AccessToken, true
}

// field is one token-response field; fields keep their order.
type field struct {
	key   string
	value any
}

// tokenErr builds an OAuth error response.
func tokenErr(code, description string) []field {
	return []field{{"error", code}, {"error_description", description}}
}

// writeGitHubToken answers the token endpoint the way GitHub does: HTTP
// 200 always, form-encoded unless JSON is accepted.
func writeGitHubToken(w http.ResponseWriter, wantJSON bool, fields []field) {
	if slices.ContainsFunc(fields, func(f field) bool { return f.key == "error" }) {
		fields = append(fields, field{"error_uri", "https://docs.github.com/apps/troubleshooting-authorization-requests"})
	}
	if wantJSON {
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			m[f.key] = f.value
		}
		writeJSON(w, http.StatusOK, m)
		return
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		parts = append(parts, url.QueryEscape(f.key)+"="+url.QueryEscape(fmt.Sprint(f.value)))
	}
	w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(strings.Join(parts, "&")))
}

// gitHubError is GitHub's basic error body.
func gitHubError(msg string) map[string]any {
	return map[string]any{"message": msg, "documentation_url": gitHubDocs}
}

// gitHubFail answers an injected failure.
func gitHubFail(w http.ResponseWriter, status int) {
	writeJSON(w, status, map[string]any{
		"message":           http.StatusText(status),
		"documentation_url": gitHubDocs,
		"status":            strconv.Itoa(status),
	})
}
