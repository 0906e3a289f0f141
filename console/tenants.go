package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

func (c *Console) tenantsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.renderTenants(w, r, s, http.StatusOK, nil)
}

func (c *Console) renderTenants(w http.ResponseWriter, r *http.Request, s *session, status int, extra map[string]any) error {
	if !s.admin {
		return errAdmin
	}
	if c.o.Tenants == nil {
		return errNotFound
	}
	ts, err := c.o.Tenants.ListTenants(r.Context())
	if err != nil {
		return err
	}
	data := map[string]any{"Tenants": ts}
	for k, v := range extra {
		data[k] = v
	}
	c.render(w, r, s, status, "tenants", "Tenants", data)
	return nil
}

func (c *Console) createTenant(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin {
		return errAdmin
	}
	if c.o.Tenants == nil {
		return errNotFound
	}
	t, key, err := c.o.Tenants.Create(r.Context(), strings.TrimSpace(r.PostFormValue("name")))
	if errors.Is(err, tenants.ErrInvalidName) {
		return c.renderTenants(w, r, s, http.StatusBadRequest, map[string]any{"Problem": err.Error()})
	} else if err != nil {
		return err
	}
	// The key is shown on this answer only.
	return c.renderTenants(w, r, s, http.StatusCreated, map[string]any{"Created": t, "Key": key})
}

// viewAs lets the admin act for a tenant on the tenant pages.
func (c *Console) viewAs(w http.ResponseWriter, r *http.Request, s *session) error {
	if !s.admin {
		return errAdmin
	}
	id := r.PostFormValue("tenant")
	ts, err := c.o.Tenants.ListTenants(r.Context())
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.ID == id {
			c.sessions.setTenant(s, t.ID, t.Name)
			redirect(w, r, Prefix, "Viewing "+t.Name+".")
			return nil
		}
	}
	return errNotFound
}

// tenantByPath returns the tenant with the path's id, for the admin.
func (c *Console) tenantByPath(r *http.Request, s *session) (store.Tenant, error) {
	if !s.admin {
		return store.Tenant{}, errAdmin
	}
	if c.o.Tenants == nil {
		return store.Tenant{}, errNotFound
	}
	ts, err := c.o.Tenants.ListTenants(r.Context())
	if err != nil {
		return store.Tenant{}, err
	}
	for _, t := range ts {
		if t.ID == r.PathValue("id") {
			return t, nil
		}
	}
	return store.Tenant{}, errNotFound
}

// tenantKeys lists a tenant's API keys (never the keys themselves, which
// are stored hashed), with the one just created shown once.
func (c *Console) tenantKeys(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := c.tenantByPath(r, s)
	if err != nil {
		return err
	}
	keys, err := c.o.Tenants.Keys(r.Context(), t.ID)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "tenantkeys", "Keys of "+t.Name, map[string]any{
		"T": t, "Keys": keys, "NewKey": c.sessions.takeOnce(s, "key:"+t.ID),
	})
	return nil
}

func (c *Console) createTenantKey(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := c.tenantByPath(r, s)
	if err != nil {
		return err
	}
	_, key, err := c.o.Tenants.CreateKey(r.Context(), t.ID, strings.TrimSpace(r.PostFormValue("name")))
	if errors.Is(err, tenants.ErrInvalidName) {
		return badRequest("%v", err)
	} else if err != nil {
		return err
	}
	c.sessions.keepOnce(s, "key:"+t.ID, key)
	redirect(w, r, Prefix+"tenants/"+url.PathEscape(t.ID)+"/keys", "Key created.")
	return nil
}

func (c *Console) revokeTenantKeyPage(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := c.tenantByPath(r, s)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "confirm", "Revoke a key", map[string]any{
		"Question": "Revoke key " + r.PathValue("key") + " of " + t.Name + "?",
		"Says": []string{"Requests and sessions signed in with it stop working at their next check.",
			"A tenant's only key cannot be revoked: create another first."},
		"Action": Prefix + "tenants/" + t.ID + "/keys/" + r.PathValue("key") + "/revoke", "Button": "Revoke",
		"Back": Prefix + "tenants/" + t.ID + "/keys",
	})
	return nil
}

func (c *Console) revokeTenantKey(w http.ResponseWriter, r *http.Request, s *session) error {
	t, err := c.tenantByPath(r, s)
	if err != nil {
		return err
	}
	err = c.o.Tenants.Revoke(r.Context(), t.ID, r.PathValue("key"))
	switch {
	case errors.Is(err, tenants.ErrKeyNotFound):
		return errNotFound
	case errors.Is(err, tenants.ErrLastKey):
		return badRequest("%v", err)
	case err != nil:
		return err
	}
	redirect(w, r, Prefix+"tenants/"+url.PathEscape(t.ID)+"/keys", "Key revoked.")
	return nil
}
