// Package api serves triggerd's management API under /v1: connected
// accounts and their connect flows, the tool step catalogue and runs, and
// what later features add. Every
// endpoint takes "Authorization: Bearer <api key>" and acts within the
// key's tenant; another tenant's resource is a 404. The OAuth callback is
// the exception: the provider redirects the user's browser there, and the
// single-use state, bound to the tenant, authenticates it.
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

// accountService is what the API needs of connected accounts.
type accountService interface {
	Start(ctx context.Context, tenantID, connector, returnTo string) (string, error)
	Callback(ctx context.Context, connector string, query url.Values) (store.Account, string, error)
	List(ctx context.Context, tenantID string) ([]store.Account, error)
	Get(ctx context.Context, tenantID, id string) (store.Account, error)
	Remove(ctx context.Context, tenantID, id string) (store.Account, accounts.RemoveReport, error)
}

// authenticator maps an API key to its tenant.
type authenticator interface {
	Authenticate(ctx context.Context, key string) (string, error)
}

// tenantService makes tenants (only the admin key may) and lets a tenant
// manage its own API keys.
type tenantService interface {
	Create(ctx context.Context, name string) (store.Tenant, string, error)
	Keys(ctx context.Context, tenantID string) ([]tenants.Key, error)
	CreateKey(ctx context.Context, tenantID, name string) (tenants.Key, string, error)
	Revoke(ctx context.Context, tenantID, keyID string) error
}

// Options configures the API.
type Options struct {
	Accounts accountService
	Auth     authenticator
	Tenants  tenantService
	// Steps is the tool step catalogue; nil leaves /v1/steps out.
	Steps stepRunner
	// Registry manages agents and triggers; nil leaves them out.
	Registry registryService
	// Records reads runs and event outcomes; Replayer replays events.
	Records  records
	Replayer replayer
	// Unrecorded finds, for GET /v1/events/{id}, an event of the shared
	// endpoints that left no record because no trigger was a candidate
	// for it; nil answers such an id 404, as an unknown one.
	Unrecorded dispatch.UnrecordedFinder
	// DryRunner tests triggers against past events; nil leaves
	// /triggers/test and /triggers/{id}/test out.
	DryRunner dryRunner
	// AdminKeys authenticate tenant creation; each is accepted, so that
	// a new admin key can be rolled out before the old one is withdrawn.
	// None (or only empty ones) disables tenant creation.
	AdminKeys []string
	// ReturnOrigins are the origins (Origin's form) a connect flow may send
	// the user's browser back to after the callback (return_to); any other
	// return_to is refused when the flow starts, so triggerd's callback
	// never redirects a browser to a site its operator did not name.
	ReturnOrigins []string
	// ReturnOriginsSetting names where operators set ReturnOrigins, for
	// the refusal to say so; empty leaves it out.
	ReturnOriginsSetting string
	Logger               zerolog.Logger
}

// API is the /v1 management API.
type API struct {
	o   Options
	log zerolog.Logger
	// openapi is the OpenAPI document GET /v1/openapi.json serves.
	openapi []byte
}

// New returns the API.
func New(o Options) (*API, error) {
	if o.Accounts == nil || o.Auth == nil || o.Tenants == nil {
		return nil, errors.New("api: Accounts, Auth and Tenants are required")
	}
	// An empty key would accept an empty Bearer token's comparison.
	o.AdminKeys = slices.DeleteFunc(slices.Clone(o.AdminKeys), func(k string) bool { return k == "" })
	doc, err := mergedOpenAPI() // served as it is, never changed
	if err != nil {
		return nil, err
	}
	return &API{o: o, log: o.Logger.With().Str("component", "api").Logger(), openapi: doc}, nil
}

// Register adds the /v1 routes to e.
func (a *API) Register(e *echo.Echo) {
	v1 := e.Group("/v1")
	v1.GET("/openapi.json", a.serveOpenAPI)
	v1.GET("/connect/:connector/callback", a.callback)
	v1.POST("/tenants", a.createTenant)
	authed := v1.Group("", a.authenticate)
	authed.GET("/connect/:connector/start", a.start)
	authed.GET("/accounts", a.listAccounts)
	authed.GET("/accounts/:id", a.getAccount)
	authed.DELETE("/accounts/:id", a.removeAccount)
	authed.GET("/keys", a.listKeys)
	authed.POST("/keys", a.createKey)
	authed.DELETE("/keys/:id", a.revokeKey)
	a.registerSteps(authed)
	a.registerDispatch(authed)
}

const tenantKey = "tenant_id"

// fail writes an error answer.
func fail(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, map[string]map[string]string{"error": {"code": code, "message": msg}})
}

func bearer(c echo.Context) (string, bool) {
	h := c.Request().Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		return "", false
	}
	return strings.TrimSpace(key), true
}

func (a *API) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, ok := bearer(c)
		if !ok {
			return fail(c, http.StatusUnauthorized, "unauthorized",
				"send the tenant's API key as \"Authorization: Bearer <key>\" (a new installation writes one to <data-dir>/default_tenant_key)")
		}
		tenant, err := a.o.Auth.Authenticate(c.Request().Context(), key)
		if err != nil {
			if !errors.Is(err, tenants.ErrInvalidKey) {
				a.log.Error().Err(err).Msg("authenticating an API key")
				return fail(c, http.StatusServiceUnavailable, "unavailable", "the key could not be checked right now; retry")
			}
			return fail(c, http.StatusUnauthorized, "unauthorized", "the API key is not valid (unknown, or revoked): use a current key of the tenant")
		}
		c.Set(tenantKey, tenant)
		return next(c)
	}
}

func tenantOf(c echo.Context) string { s, _ := c.Get(tenantKey).(string); return s }

// accountView is an account as the API shows it: never a token.
type accountView struct {
	ID           string            `json:"id"`
	Connector    string            `json:"connector"`
	Login        string            `json:"login"`
	ExternalID   string            `json:"external_id"`
	Scopes       []string          `json:"scopes"`
	Status       string            `json:"status"`
	StatusReason string            `json:"status_reason,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	RemovedAt    *time.Time        `json:"removed_at,omitempty"`
}

func view(acc store.Account) accountView {
	v := accountView{
		ID: acc.ID, Connector: acc.Connector, Login: acc.Login, ExternalID: acc.ExternalID,
		Scopes: acc.Scopes, Status: string(acc.Status), StatusReason: acc.StatusReason,
		Metadata: acc.Metadata, CreatedAt: acc.CreatedAt, UpdatedAt: acc.UpdatedAt,
	}
	if v.Scopes == nil {
		v.Scopes = []string{}
	}
	if !acc.RemovedAt.IsZero() {
		t := acc.RemovedAt
		v.RemovedAt = &t
	}
	return v
}

func (a *API) start(c echo.Context) error {
	connector := c.Param("connector")
	returnTo := c.QueryParam("return_to")
	if returnTo != "" {
		if msg := a.checkReturnTo(returnTo); msg != "" {
			return fail(c, http.StatusBadRequest, "validation", msg)
		}
	}
	authURL, err := a.o.Accounts.Start(c.Request().Context(), tenantOf(c), connector, returnTo)
	if errors.Is(err, accounts.ErrUnknownConnector) {
		return fail(c, http.StatusNotFound, "not_found", err.Error())
	}
	if err != nil {
		a.log.Error().Err(err).Str("connector", connector).Msg("starting a connect flow")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the connect flow could not be started; retry")
	}
	if c.QueryParam("redirect") == "true" {
		return c.Redirect(http.StatusFound, authURL)
	}
	return c.JSON(http.StatusOK, map[string]string{"authorize_url": authURL})
}

// checkReturnTo returns why a connect flow may not send the browser back
// to returnTo, or "" when it may: an absolute http(s) URL at one of
// ReturnOrigins.
func (a *API) checkReturnTo(returnTo string) string {
	u, err := url.Parse(returnTo)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "return_to must be an absolute http(s) URL"
	}
	origin := u.Scheme + "://" + strings.ToLower(u.Host)
	if u.User == nil && slices.Contains(a.o.ReturnOrigins, origin) {
		return ""
	}
	msg := fmt.Sprintf("return_to's origin %s is not one this server sends users back to", origin)
	if u.User != nil {
		msg = "return_to must not carry a user name or password"
	} else if a.o.ReturnOriginsSetting != "" {
		msg += "; the operator can add it to " + a.o.ReturnOriginsSetting
	}
	return msg
}

// Origin returns the origin of raw, an http(s) URL with no path beyond
// "/", no query, fragment or user: "https://app.example.com" (the host
// lower-cased), the form Options.ReturnOrigins takes.
func Origin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return "", fmt.Errorf("origin %q: %w", raw, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return "", fmt.Errorf("origin %q: want scheme and host, such as https://app.example.com", raw)
	case u.User != nil, u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("origin %q: want only scheme and host (and port), such as https://app.example.com, with no path, query or user", raw)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

func (a *API) callback(c echo.Context) error {
	connector := c.Param("connector")
	acc, returnTo, err := a.o.Accounts.Callback(c.Request().Context(), connector, c.QueryParams())
	var ce *accounts.CallbackError
	switch {
	case errors.As(err, &ce):
		return fail(c, http.StatusBadRequest, "invalid_callback", ce.Reason)
	case errors.Is(err, accounts.ErrUnknownConnector):
		return fail(c, http.StatusNotFound, "not_found", err.Error())
	case err != nil:
		a.log.Error().Err(err).Str("connector", connector).Msg("completing a connect flow")
		return fail(c, http.StatusBadGateway, "upstream", "the provider could not complete the connection; start it again")
	}
	if a.o.Registry != nil {
		if err := a.o.Registry.AccountConnected(c.Request().Context(), acc.TenantID, acc.ID); err != nil {
			a.log.Warn().Err(err).Str("account", acc.ID).Msg("reactivating the account's triggers")
		}
	}
	if returnTo != "" {
		u, _ := url.Parse(returnTo)
		q := u.Query()
		q.Set("account", acc.ID)
		u.RawQuery = q.Encode()
		return c.Redirect(http.StatusFound, u.String())
	}
	return c.JSON(http.StatusOK, map[string]any{"connected": true, "account": view(acc)})
}

func (a *API) listAccounts(c echo.Context) error {
	accs, err := a.o.Accounts.List(c.Request().Context(), tenantOf(c))
	if err != nil {
		a.log.Error().Err(err).Msg("listing accounts")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "accounts could not be read; retry")
	}
	out := make([]accountView, len(accs))
	for i, acc := range accs {
		out[i] = view(acc)
	}
	return c.JSON(http.StatusOK, map[string]any{"accounts": out})
}

func (a *API) getAccount(c echo.Context) error {
	acc, err := a.o.Accounts.Get(c.Request().Context(), tenantOf(c), c.Param("id"))
	if errors.Is(err, accounts.ErrAccountNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no such account")
	}
	if err != nil {
		a.log.Error().Err(err).Msg("reading an account")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the account could not be read; retry")
	}
	return c.JSON(http.StatusOK, view(acc))
}

func (a *API) removeAccount(c echo.Context) error {
	ctx := c.Request().Context()
	if a.o.Registry != nil {
		// Deactivate the account's triggers and delete its hooks while its
		// token still works; the removal goes ahead even if that fails.
		if acc, err := a.o.Accounts.Get(ctx, tenantOf(c), c.Param("id")); err == nil && acc.Status != store.StatusRemoved {
			if err := a.o.Registry.AccountRemoving(ctx, tenantOf(c), acc); err != nil {
				a.log.Warn().Err(err).Str("account", acc.ID).Msg("deactivating the account's triggers")
			}
		}
	}
	acc, report, err := a.o.Accounts.Remove(ctx, tenantOf(c), c.Param("id"))
	if errors.Is(err, accounts.ErrAccountNotFound) {
		return fail(c, http.StatusNotFound, "not_found", "no such account")
	}
	if err != nil {
		a.log.Error().Err(err).Msg("removing an account")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the account could not be removed; retry")
	}
	return c.JSON(http.StatusOK, map[string]any{
		"account":      view(acc),
		"revoked":      report.Revoked,
		"revoke_error": report.RevokeError,
	})
}

func (a *API) createTenant(c echo.Context) error {
	key, ok := bearer(c)
	if !ok || !a.isAdmin(key) {
		return fail(c, http.StatusUnauthorized, "unauthorized",
			"creating tenants needs the admin key (<data-dir>/admin_key or TRIGGERD_ADMIN_KEY) as a Bearer token")
	}
	var req struct {
		Name string `json:"name"`
	}
	if err := c.Bind(&req); err != nil || strings.TrimSpace(req.Name) == "" {
		return fail(c, http.StatusBadRequest, "validation", `send {"name": "<tenant name>"}`)
	}
	t, apiKey, err := a.o.Tenants.Create(c.Request().Context(), req.Name)
	if errors.Is(err, tenants.ErrInvalidName) {
		return fail(c, http.StatusBadRequest, "validation", err.Error())
	}
	if err != nil {
		a.log.Error().Err(err).Msg("creating a tenant")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the tenant could not be created; retry")
	}
	// The answer holds the tenant's key, shown this once: no cache keeps it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]any{"tenant": t, "api_key": apiKey})
}

// isAdmin reports whether key is one of the admin keys. It compares key
// with every one, matched or not, so the time taken does not say which
// matched.
func (a *API) isAdmin(key string) bool {
	match := false
	for _, k := range a.o.AdminKeys {
		if constantTimeEqual(key, k) {
			match = true
		}
	}
	return match
}

// constantTimeEqual compares two secrets without leaking, through timing,
// how much of them matched (hashing first also hides their lengths).
func constantTimeEqual(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
