package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/tenants"
)

// The tenant's own API keys: a tenant lists them, makes new ones and
// revokes old ones, so that a key can be rotated and a leaked key stops
// working. A key is shown once, in the answer that creates it; listings
// show its id, name and creation time, never the key or its hash.

// listKeys answers GET /v1/keys with the calling tenant's keys, oldest
// first.
func (a *API) listKeys(c echo.Context) error {
	keys, err := a.o.Tenants.Keys(c.Request().Context(), tenantOf(c))
	if err != nil {
		a.log.Error().Err(err).Msg("listing API keys")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the API keys could not be read; retry")
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": keys})
}

// createKey answers POST /v1/keys {"name": ...} with the new key, shown
// only in this answer.
func (a *API) createKey(c echo.Context) error {
	var req struct {
		Name string `json:"name"`
	}
	if ok, err := decodeLimited(c, &req, 4<<10); !ok {
		return err
	}
	tenant := tenantOf(c)
	k, apiKey, err := a.o.Tenants.CreateKey(c.Request().Context(), tenant, req.Name)
	if errors.Is(err, tenants.ErrInvalidName) {
		return fail(c, http.StatusBadRequest, "validation",
			`send {"name": "<key name>"}, a name of 1 to 100 characters that tells the key from the tenant's others (such as where it is used)`)
	}
	if err != nil {
		a.log.Error().Err(err).Msg("creating an API key")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the API key could not be created; retry")
	}
	a.log.Info().Str("tenant", tenant).Str("key", k.ID).Str("name", k.Name).Msg("API key created")
	// The answer holds a secret: no cache may keep it.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, map[string]any{"key": k, "api_key": apiKey})
}

// revokeKey answers DELETE /v1/keys/{id}: the key is refused from then on.
func (a *API) revokeKey(c echo.Context) error {
	tenant, id := tenantOf(c), c.Param("id")
	err := a.o.Tenants.Revoke(c.Request().Context(), tenant, id)
	switch {
	case errors.Is(err, tenants.ErrKeyNotFound):
		return fail(c, http.StatusNotFound, "not_found", "no such API key: GET /v1/keys lists the tenant's keys and their ids")
	case errors.Is(err, tenants.ErrLastKey):
		return fail(c, http.StatusConflict, "last_key",
			"this is the tenant's only API key, and revoking it would lock the tenant out: create a new key first (POST /v1/keys), switch your clients to it, then revoke this one")
	case err != nil:
		a.log.Error().Err(err).Str("key", id).Msg("revoking an API key")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the API key could not be revoked; retry")
	}
	a.log.Info().Str("tenant", tenant).Str("key", id).Msg("API key revoked")
	return c.NoContent(http.StatusNoContent)
}
