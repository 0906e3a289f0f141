package fakeoauth

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors/deploy"
)

// Vercel routes, for FailNext, HangNext and RequestsTo.
const (
	RouteVercelInstall       Route = "GET /integrations/{slug}/new"
	RouteVercelToken         Route = "POST /v2/oauth/access_token"
	RouteVercelUser          Route = "GET /v2/user"
	RouteVercelTeam          Route = "GET /v2/teams/{team_id}"
	RouteVercelConfiguration Route = "DELETE /v1/integrations/configuration/{id}"
)

// vercelCodeTTL is how long an installation code is valid.
const vercelCodeTTL = 30 * time.Minute

// Vercel is a fake vercel.com integration install page and api.vercel.com
// (token exchange, GET /v2/user, GET /v2/teams/{id} and
// DELETE /v1/integrations/configuration/{id}).
//
// Each installation creates a configuration (icfg_…) and a long-lived
// access token with no expiry and no refresh token; deleting the
// configuration revokes the token. By default the integration is installed
// on the user's personal account; SetTeam makes the next installs team
// installs.
type Vercel struct {
	*Fake
	// ClientID, ClientSecret and Slug identify the integration. Treat them
	// as read-only.
	ClientID, ClientSecret, Slug string

	// guarded by Fake.mu
	user VercelUser
	team *VercelTeam
}

// VercelUser is the user who installs the integration.
type VercelUser struct {
	ID, Username, Email string
}

// VercelTeam is a team the integration can be installed on.
type VercelTeam struct {
	ID, Slug, Name string
}

// NewVercel starts a fake Vercel with one integration (slug
// "triggerd-test") and one user (id "user_fake0001", username "jdoe").
func NewVercel(t testing.TB) *Vercel {
	t.Helper()
	v := &Vercel{
		Fake:         newFake(t, vercelFail),
		ClientID:     "oac_fakevercelclient",
		ClientSecret: "fake-vercel-client-secret-0123456789",
		Slug:         "triggerd-test",
		user:         VercelUser{ID: "user_fake0001", Username: "jdoe", Email: "jdoe@example.com"},
	}
	mux := http.NewServeMux()
	v.handle(mux, RouteVercelInstall, v.serveInstall)
	v.handle(mux, RouteVercelToken, v.serveToken)
	v.handle(mux, RouteVercelUser, v.serveUser)
	v.handle(mux, RouteVercelTeam, v.serveTeam)
	v.handle(mux, RouteVercelConfiguration, v.serveDeleteConfiguration)
	v.handle(mux, "/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, vercelError("not_found", "The requested path was not found"))
	})
	v.start(mux)
	return v
}

// Config returns a deploy.Config pointing at the fake, with the
// integration's credentials and slug, and registers redirectURL as the
// integration's Redirect URL.
func (v *Vercel) Config(redirectURL string) deploy.Config {
	v.registerRedirect(redirectURL)
	return deploy.Config{
		ClientID:        v.ClientID,
		ClientSecret:    v.ClientSecret,
		RedirectURL:     redirectURL,
		IntegrationSlug: v.Slug,
		AuthBaseURL:     v.URL(),
		TokenURL:        v.URL() + "/v2/oauth/access_token",
		APIBaseURL:      v.URL(),
	}
}

// Provider returns a deploy.Provider built from Config(redirectURL),
// failing the test if that is refused.
func (v *Vercel) Provider(redirectURL string) *deploy.Provider {
	v.t.Helper()
	p, err := deploy.New(v.Config(redirectURL))
	if err != nil {
		v.t.Fatalf("fakeoauth: %v", err)
	}
	return p
}

// SetUser changes the user who installs next.
func (v *Vercel) SetUser(u VercelUser) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.user = u
}

// SetTeam makes the next installs team installs on team; nil goes back to
// personal installs.
func (v *Vercel) SetTeam(team *VercelTeam) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if team == nil {
		v.team = nil
		return
	}
	cp := *team
	v.team = &cp
}

// Authorize simulates the user installing the integration: it creates a
// configuration, issues a code bound to the integration and redirectURI,
// and returns the callback query (code, configurationId, teamId for team
// installs, next, state).
func (v *Vercel) Authorize(state, redirectURI string) url.Values {
	v.t.Helper()
	if _, ok := v.redirectAllowed(redirectURI); !ok || redirectURI == "" {
		v.t.Fatalf("fakeoauth: vercel authorize: %q is not the integration's Redirect URL", redirectURI)
	}
	return v.install(state, redirectURI)
}

func (v *Vercel) install(state, redirectURI string) url.Values {
	v.mu.Lock()
	user, team := v.user, v.team
	cfg := v.newValueLocked("icfg_", 24)
	v.mu.Unlock()
	extra := map[string]string{"configuration_id": cfg, "user_id": user.ID, "username": user.Username, "email": user.Email}
	if team != nil {
		extra["team_id"], extra["team_slug"], extra["team_name"] = team.ID, team.Slug, team.Name
	}
	code := v.issueCode(authCode{
		clientID:    v.ClientID,
		redirectURI: redirectURI,
		grant:       "vercel/" + cfg,
		extra:       extra,
	}, vercelCodeTTL)
	cb := url.Values{"code": {code}, "configurationId": {cfg}}
	next := "https://vercel.com/dashboard/integrations/" + cfg
	if team != nil {
		cb.Set("teamId", team.ID)
		next = "https://vercel.com/" + team.Slug + "/~/integrations/" + cfg
	}
	cb.Set("next", next)
	if state != "" {
		cb.Set("state", state)
	}
	return cb
}

// serveInstall is the integration's install page: it installs at once and
// redirects to the registered Redirect URL.
func (v *Vercel) serveInstall(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("slug") != v.Slug {
		http.Error(w, "integration not found", http.StatusNotFound)
		return
	}
	redirect, ok := v.redirectAllowed("")
	if !ok {
		http.Error(w, "the integration has no Redirect URL (call Config first)", http.StatusBadRequest)
		return
	}
	cb := v.install(r.URL.Query().Get("state"), redirect)
	http.Redirect(w, r, redirect+"?"+cb.Encode(), http.StatusFound)
}

// serveToken is POST /v2/oauth/access_token: form body with the client
// credentials in it; OAuth-style errors.
func (v *Vercel) serveToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_request", "The request body could not be parsed"))
		return
	}
	v.exchanges.Add(1)
	if gt := r.PostForm.Get("grant_type"); gt != "" && gt != "authorization_code" {
		writeJSON(w, http.StatusBadRequest, oauthError("unsupported_grant_type", "Only authorization_code is supported"))
		return
	}
	id, secret := clientCredentials(r, false)
	if id != v.ClientID || !sameSecret(secret, v.ClientSecret) {
		writeJSON(w, http.StatusUnauthorized, oauthError("invalid_client", "Invalid client credentials"))
		return
	}
	c, problem := v.redeemCode(r.PostForm.Get("code"), id, r.PostForm.Get("redirect_uri"), "", false)
	switch problem {
	case codeBad:
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_grant", "Invalid grant: authorization code is invalid"))
		return
	case codeRedirectMismatch:
		writeJSON(w, http.StatusBadRequest, oauthError("invalid_grant", "Invalid grant: redirect_uri does not match"))
		return
	}
	access := v.issueToken("", 24, token{kind: "access", clientID: id, grant: c.grant, extra: c.extra}, 0)
	var teamID any
	if t := c.extra["team_id"]; t != "" {
		teamID = t
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":    access,
		"token_type":      "Bearer",
		"installation_id": c.extra["configuration_id"],
		"user_id":         c.extra["user_id"],
		"team_id":         teamID,
	})
}

// auth returns the bearer token's record, answering 401 itself when it is
// not live.
func (v *Vercel) auth(w http.ResponseWriter, r *http.Request) (token, bool) {
	tk, ok := v.liveToken(bearer(r), "access")
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"code": "forbidden", "message": "Not authorized", "invalidToken": true,
		}})
		return token{}, false
	}
	return tk, true
}

// serveUser is GET /v2/user.
func (v *Vercel) serveUser(w http.ResponseWriter, r *http.Request) {
	tk, ok := v.auth(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": map[string]any{
		"id":       tk.extra["user_id"],
		"username": tk.extra["username"],
		"email":    tk.extra["email"],
		"name":     tk.extra["username"],
	}})
}

// serveTeam is GET /v2/teams/{team_id}: only a token of that team may read
// it.
func (v *Vercel) serveTeam(w http.ResponseWriter, r *http.Request) {
	tk, ok := v.auth(w, r)
	if !ok {
		return
	}
	if tk.extra["team_id"] == "" || tk.extra["team_id"] != r.PathValue("team_id") {
		writeJSON(w, http.StatusForbidden, vercelError("forbidden", "You don't have permission to access this team"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":        tk.extra["team_id"],
		"slug":      tk.extra["team_slug"],
		"name":      tk.extra["team_name"],
		"createdAt": strconv.FormatInt(v.Now().UnixMilli(), 10),
	})
}

// serveDeleteConfiguration is DELETE /v1/integrations/configuration/{id}:
// team configurations need ?teamId=; success (204) revokes the token.
func (v *Vercel) serveDeleteConfiguration(w http.ResponseWriter, r *http.Request) {
	tk, ok := v.auth(w, r)
	if !ok {
		return
	}
	if tk.extra["team_id"] != r.URL.Query().Get("teamId") {
		writeJSON(w, http.StatusForbidden, vercelError("forbidden", "Not authorized"))
		return
	}
	if tk.extra["configuration_id"] != r.PathValue("id") {
		writeJSON(w, http.StatusNotFound, vercelError("not_found", fmt.Sprintf("Configuration %s not found", r.PathValue("id"))))
		return
	}
	v.revokeGrant(tk.grant)
	w.WriteHeader(http.StatusNoContent)
}

// oauthError is the RFC 6749 error body.
func oauthError(code, description string) map[string]string {
	return map[string]string{"error": code, "error_description": description}
}

// vercelError is Vercel's API error envelope.
func vercelError(code, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"code": code, "message": msg}}
}

// vercelFail answers an injected failure.
func vercelFail(w http.ResponseWriter, status int) {
	code := "internal_server_error"
	switch {
	case status == http.StatusTooManyRequests:
		code = "rate_limited"
		w.Header().Set("Retry-After", "1")
	case status == http.StatusNotFound:
		code = "not_found"
	case status == http.StatusForbidden:
		code = "forbidden"
	case status < 500:
		code = "bad_request"
	}
	writeJSON(w, status, vercelError(code, http.StatusText(status)))
}
