package fakeoauth_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/sandbox/fakeoauth"
)

const redirect = "https://app.example/callback"

// post sends a form to u with extra headers and returns status, headers
// and body.
func post(t *testing.T, u string, form url.Values, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestGitHubTokenEndpointShapes(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	gh.Config(redirect)
	tokenURL := gh.URL() + "/login/oauth/access_token"
	creds := url.Values{"client_id": {gh.ClientID}, "client_secret": {gh.ClientSecret}, "redirect_uri": {redirect}}

	// Bad code: HTTP 200, form-encoded, error field.
	form := url.Values{"code": {"nope"}}
	for k, v := range creds {
		form[k] = v
	}
	status, h, body := post(t, tokenURL, form, nil)
	vals, _ := url.ParseQuery(body)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/x-www-form-urlencoded") || vals.Get("error") != "bad_verification_code" {
		t.Fatalf("bad code: %d %s %q", status, h.Get("Content-Type"), body)
	}

	// Good code without Accept: JSON: form-encoded token, comma-separated scope.
	cb := gh.Authorize("s", redirect, "", "repo", "gist")
	form.Set("code", cb.Get("code"))
	status, _, body = post(t, tokenURL, form, nil)
	vals, _ = url.ParseQuery(body)
	if status != http.StatusOK || !strings.HasPrefix(vals.Get("access_token"), "ghu_") || vals.Get("scope") != "repo,gist" || vals.Get("expires_in") != "28800" {
		t.Fatalf("form token response: %d %q", status, body)
	}

	// Wrong secret with Accept: JSON: HTTP 200 JSON error.
	cb = gh.Authorize("s", redirect, "")
	form.Set("code", cb.Get("code"))
	form.Set("client_secret", "wrong")
	status, h, body = post(t, tokenURL, form, map[string]string{"Accept": "application/json"})
	var e struct{ Error string }
	_ = json.Unmarshal([]byte(body), &e)
	if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || e.Error != "incorrect_client_credentials" {
		t.Fatalf("wrong secret: %d %q", status, body)
	}
}

func TestGitHubAPIHeaderRules(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	tok, err := p.Exchange(t.Context(), gh.Authorize("s", redirect, "", "repo"), "")
	if err != nil {
		t.Fatal(err)
	}
	get := func(h map[string]string) (int, http.Header) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gh.URL()+"/user", nil)
		req.Header.Set("User-Agent", "")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		status, header, _ := send(t, req)
		return status, header
	}
	auth := "Bearer " + tok.AccessToken
	if s, _ := get(map[string]string{"Authorization": auth}); s != http.StatusForbidden {
		t.Errorf("without User-Agent: %d, want 403", s)
	}
	if s, _ := get(map[string]string{"Authorization": auth, "User-Agent": "t", "X-GitHub-Api-Version": "1999-01-01"}); s != http.StatusBadRequest {
		t.Errorf("unknown API version: %d, want 400", s)
	}
	s, h := get(map[string]string{"Authorization": "token " + tok.AccessToken, "User-Agent": "t"})
	if s != http.StatusOK || h.Get("X-OAuth-Scopes") != "repo" || h.Get("X-RateLimit-Limit") != "5000" {
		t.Errorf("token auth: %d, headers %v", s, h)
	}
	gh.Advance(8*time.Hour + time.Second)
	if s, _ := get(map[string]string{"Authorization": auth, "User-Agent": "t"}); s != http.StatusUnauthorized {
		t.Errorf("expired token: %d, want 401", s)
	}
	if got := gh.TokenState(tok.AccessToken); got != fakeoauth.TokenExpired {
		t.Errorf("TokenState = %v, want expired", got)
	}
	if gh.TokenState("ghu_never_issued") != fakeoauth.TokenUnknown {
		t.Error("unknown token not reported unknown")
	}
}

func TestGitHubAuthorizeEndpoint(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	gh.Config(redirect)
	u := gh.URL() + "/login/oauth/authorize?" + url.Values{
		"client_id": {gh.ClientID}, "redirect_uri": {"https://evil.example/cb"}, "state": {"s"},
	}.Encode()
	if _, err := gh.SignIn(t.Context(), u); err == nil {
		t.Error("unregistered redirect_uri accepted")
	}
	u = gh.URL() + "/login/oauth/authorize?" + url.Values{"client_id": {"someone-else"}}.Encode()
	if _, err := gh.SignIn(t.Context(), u); err == nil {
		t.Error("unknown client_id accepted")
	}
	u = gh.URL() + "/login/oauth/authorize?" + url.Values{"client_id": {gh.ClientID}, "code_challenge": {"abc"}, "code_challenge_method": {"plain"}}.Encode()
	if _, err := gh.SignIn(t.Context(), u); err == nil {
		t.Error("plain PKCE accepted")
	}
}

func TestFailNextThenRecover(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	v.FailNext(fakeoauth.RouteVercelUser, 2, http.StatusServiceUnavailable)
	for i, want := range []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusUnauthorized} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, v.URL()+"/v2/user", nil)
		status, _, body := send(t, req)
		if status != want {
			t.Errorf("call %d: %d, want %d", i, status, want)
		}
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if json.Unmarshal([]byte(body), &e) != nil || e.Error.Code == "" {
			t.Errorf("call %d: body %q is not Vercel's error envelope", i, body)
		}
	}
	if n := len(v.RequestsTo(fakeoauth.RouteVercelUser)); n != 3 {
		t.Errorf("recorded %d requests, want 3", n)
	}
}

func TestVercelInstallPage(t *testing.T) {
	v := fakeoauth.NewVercel(t)
	if _, err := v.SignIn(t.Context(), v.URL()+"/integrations/"+v.Slug+"/new?state=s"); err == nil {
		t.Error("install without a registered Redirect URL succeeded")
	}
	v.Config(redirect)
	if _, err := v.SignIn(t.Context(), v.URL()+"/integrations/other/new?state=s"); err == nil {
		t.Error("unknown slug accepted")
	}
	v.SetTeam(&fakeoauth.VercelTeam{ID: "team_1", Slug: "t", Name: "T"})
	cb, err := v.SignIn(t.Context(), v.URL()+"/integrations/"+v.Slug+"/new?state=s")
	if err != nil {
		t.Fatal(err)
	}
	if cb.Get("teamId") != "team_1" || cb.Get("state") != "s" || !strings.HasPrefix(cb.Get("configurationId"), "icfg_") {
		t.Errorf("callback = %v", cb)
	}
}

func TestGoogleRefreshTokenOnlyWhenOffline(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	cfg := g.Config(redirect)
	oc := oauth2.Config{
		ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: redirect,
		Scopes:   []string{"openid", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: cfg.AuthBaseURL, TokenURL: cfg.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
	}
	exchange := func(opts ...oauth2.AuthCodeOption) *oauth2.Token {
		t.Helper()
		cb, err := g.SignIn(t.Context(), oc.AuthCodeURL("s", opts...))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := oc.Exchange(t.Context(), cb.Get("code"))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	if tok := exchange(); tok.RefreshToken != "" {
		t.Error("refresh token without access_type=offline")
	}
	if tok := exchange(oauth2.AccessTypeOffline); tok.RefreshToken == "" {
		t.Error("no refresh token on the first offline consent")
	}
	if tok := exchange(oauth2.AccessTypeOffline); tok.RefreshToken != "" {
		t.Error("refresh token on a repeated consent without prompt=consent")
	}
	if tok := exchange(oauth2.AccessTypeOffline, oauth2.ApprovalForce); tok.RefreshToken == "" {
		t.Error("no refresh token with prompt=consent")
	}
	if g.Exchanges() != 4 {
		t.Errorf("Exchanges = %d", g.Exchanges())
	}
	// Google takes client credentials in the form only.
	status, _, body := post(t, cfg.TokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}},
		map[string]string{"Authorization": "Basic " + basic(cfg.ClientID, cfg.ClientSecret)})
	if status != http.StatusUnauthorized || !strings.Contains(body, "invalid_client") {
		t.Errorf("Basic client auth: %d %q", status, body)
	}
}

func basic(user, pass string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

func TestGoogleRevokeEndpoint(t *testing.T) {
	g := fakeoauth.NewGoogle(t)
	cfg := g.Config(redirect)
	status, _, body := post(t, cfg.RevokeURL, url.Values{"token": {"never-issued"}}, nil)
	if status != http.StatusBadRequest || !strings.Contains(body, "invalid_token") {
		t.Errorf("revoke of an unknown token: %d %q", status, body)
	}
	p := g.Provider(redirect)
	verifier := oauth2.GenerateVerifier()
	tok, err := p.Exchange(t.Context(), g.Authorize("s", redirect, oauth2.S256ChallengeFromVerifier(verifier), "openid"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	// Revoking the access token revokes the whole grant.
	if status, _, _ := post(t, cfg.RevokeURL, url.Values{"token": {tok.AccessToken}}, nil); status != http.StatusOK {
		t.Fatalf("revoke: %d", status)
	}
	if g.TokenState(tok.RefreshToken) != fakeoauth.TokenRevoked {
		t.Error("refresh token survived revocation of its access token")
	}
	infos := g.Tokens()
	if len(infos) != 2 || infos[tok.AccessToken].Kind != "access" || infos[tok.RefreshToken].State != fakeoauth.TokenRevoked {
		t.Errorf("Tokens = %+v", infos)
	}
}

// DELETE /applications/{client_id}/token revokes the one token; .../grant
// revokes every token of the user's grant.
func TestGitHubRevokeTokenAndGrant(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	connect := func() *oauth2.Token {
		t.Helper()
		tok, err := p.Exchange(t.Context(), gh.Authorize("s", redirect, "", "repo"), "")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	del := func(what, accessToken, secret string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, gh.URL()+"/applications/"+gh.ClientID+"/"+what,
			strings.NewReader(`{"access_token":"`+accessToken+`"}`))
		req.Header.Set("User-Agent", "t")
		req.SetBasicAuth(gh.ClientID, secret)
		status, _, _ := send(t, req)
		return status
	}
	a, b, c := connect(), connect(), connect()
	if s := del("token", a.AccessToken, "wrong"); s != http.StatusUnauthorized || !gh.Live(a.AccessToken) {
		t.Errorf("revoke with a wrong secret: %d, live %v", s, gh.Live(a.AccessToken))
	}
	if s := del("token", a.AccessToken, gh.ClientSecret); s != http.StatusNoContent {
		t.Fatalf("revoke token: %d", s)
	}
	if gh.TokenState(a.AccessToken) != fakeoauth.TokenRevoked || gh.TokenState(a.RefreshToken) != fakeoauth.TokenRevoked {
		t.Errorf("revoked token: access %v, refresh %v", gh.TokenState(a.AccessToken), gh.TokenState(a.RefreshToken))
	}
	if !gh.Live(b.AccessToken) || !gh.Live(c.AccessToken) {
		t.Error("revoking one token revoked the user's others")
	}
	if s := del("token", a.AccessToken, gh.ClientSecret); s != http.StatusUnprocessableEntity {
		t.Errorf("revoke a revoked token: %d, want 422", s)
	}
	if s := del("grant", b.AccessToken, gh.ClientSecret); s != http.StatusNoContent {
		t.Fatalf("revoke grant: %d", s)
	}
	if gh.Live(b.AccessToken) || gh.Live(c.AccessToken) {
		t.Error("revoking the grant left a token of the user live")
	}
}

// GET /user answers GitHub's public profile, and the private one only to
// a token with the user scope; the user's name and public e-mail are
// those it signed in with, null when it has none.
func TestGitHubUserProfile(t *testing.T) {
	gh := fakeoauth.NewGitHub(t)
	p := gh.Provider(redirect)
	profile := func(u fakeoauth.GitHubUser, scopes ...string) map[string]any {
		t.Helper()
		gh.SetUser(u)
		tok, err := p.Exchange(t.Context(), gh.Authorize("s", redirect, "", scopes...), "")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, gh.URL()+"/user", nil)
		req.Header.Set("User-Agent", "t")
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		status, _, body := send(t, req)
		var m map[string]any
		if status != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("GET /user: %d %s", status, body)
		}
		return m
	}
	pub := profile(fakeoauth.GitHubUser{ID: 583231, Login: "octocat", Name: "The Octocat"}, "repo", "read:org")
	for k, want := range map[string]any{
		"login": "octocat", "id": 583231.0, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "type": "User", "user_view_type": "public",
		"name": "The Octocat", "email": nil, "html_url": "https://github.com/octocat",
		"avatar_url": "https://avatars.githubusercontent.com/u/583231?v=4", "url": gh.URL() + "/users/octocat",
		"site_admin": false, "created_at": "2011-01-25T18:44:36Z",
	} {
		if got, ok := pub[k]; !ok || got != want {
			t.Errorf("public %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	for _, k := range []string{"plan", "private_gists", "total_private_repos", "two_factor_authentication"} {
		if _, ok := pub[k]; ok {
			t.Errorf("the public profile has %s, which only the user scope shows", k)
		}
	}
	created := time.Date(2020, 5, 1, 12, 0, 0, 0, time.UTC)
	priv := profile(fakeoauth.GitHubUser{ID: 7, Login: "monalisa", Email: "mona@example.com", CreatedAt: created}, "user", "repo")
	for k, want := range map[string]any{
		"login": "monalisa", "user_view_type": "private", "name": nil, "email": "mona@example.com",
		"notification_email": "mona@example.com", "created_at": "2020-05-01T12:00:00Z", "two_factor_authentication": true,
	} {
		if got, ok := priv[k]; !ok || got != want {
			t.Errorf("private %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := priv["plan"].(map[string]any); !ok {
		t.Errorf("the private profile has no plan: %v", priv)
	}
}
