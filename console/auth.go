package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s := c.sessions.get(r); s != nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "signin", "Sign in", map[string]any{
		"Next": safeNext(r.URL.Query().Get("next")), "Token": c.signInToken(w, r),
	})
}

// signInCookie carries the sign-in form's token: a POST to sign in must
// send the same value in the form (double submit), so another site
// cannot sign a browser in to its own tenant (login CSRF).
const signInCookie = "triggerd_console_signin"

// signInToken returns the browser's sign-in token, setting a new one when
// it has none.
func (c *Console) signInToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(signInCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	token := randomToken()
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: token, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.o.SecureCookies})
	return token
}

// safeNext returns next if it is a console path, else the console's
// first page: sign-in never sends a browser elsewhere.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix) && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix
}

// signIn takes an API key: an admin key signs in as the admin, a
// tenant's key as that tenant. Neither the key nor a refusal is logged.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	key := strings.TrimSpace(r.PostFormValue("api_key"))
	next := safeNext(r.PostFormValue("next"))
	refuse := func(status int, msg string) {
		c.render(w, r, nil, status, "signin", "Sign in", map[string]any{"Next": next, "Error": msg, "Token": c.signInToken(w, r)})
	}
	if ck, err := r.Cookie(signInCookie); err != nil || ck.Value == "" ||
		subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("signin_token"))) != 1 {
		refuse(http.StatusForbidden, "The sign-in form was not sent from this page (missing or stale token): try again.")
		return
	}
	if key == "" {
		refuse(http.StatusUnauthorized, "Enter an API key.")
		return
	}
	if c.isAdmin(key) {
		id, _ := c.sessions.create(true, "", "")
		http.SetCookie(w, c.cookie(id))
		http.Redirect(w, r, Prefix+"tenants", http.StatusSeeOther)
		return
	}
	tenantID, err := c.o.Auth.Authenticate(r.Context(), key)
	switch {
	case isInvalidKey(err):
		refuse(http.StatusUnauthorized, "That API key is not valid (unknown or revoked).")
		return
	case err != nil:
		c.log.Error().Err(err).Msg("checking an API key at sign-in")
		refuse(http.StatusServiceUnavailable, "The key could not be checked right now; try again.")
		return
	}
	id, _ := c.sessions.create(false, tenantID, c.tenantName(r, tenantID))
	http.SetCookie(w, c.cookie(id))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) tenantName(r *http.Request, id string) string {
	if c.o.Tenants == nil {
		return ""
	}
	ts, err := c.o.Tenants.ListTenants(r.Context())
	if err != nil {
		return ""
	}
	for _, t := range ts {
		if t.ID == id {
			return t.Name
		}
	}
	return ""
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s *session) error {
	c.sessions.end(s)
	http.SetCookie(w, c.cookie(""))
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
	return nil
}

// isAdmin compares key with every admin key in constant time.
func (c *Console) isAdmin(key string) bool {
	hk := sha256.Sum256([]byte(key))
	match := 0
	for _, k := range c.o.AdminKeys {
		if k == "" {
			continue
		}
		ha := sha256.Sum256([]byte(k))
		match |= subtle.ConstantTimeCompare(hk[:], ha[:])
	}
	return match == 1
}
