package console

import (
	"errors"
	"net/http"
	"strings"

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
