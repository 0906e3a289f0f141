package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/store"
)

// connectorInfo names a connector for people.
type connectorInfo struct{ ID, Label string }

var connectorList = []connectorInfo{
	{"codehost", "Code hosting"}, {"deploy", "Deployment platform"}, {"analytics", "Web analytics"},
}

type connectorGroup struct {
	connectorInfo
	Accounts []store.Account
	// Unconfigured names the settings to set before accounts can connect.
	Unconfigured string
}

func (c *Console) integrations(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	accs, err := c.o.Accounts.List(r.Context(), tid)
	if err != nil {
		return err
	}
	var groups []connectorGroup
	for _, ci := range connectorList {
		g := connectorGroup{connectorInfo: ci, Unconfigured: c.o.UnconfiguredConnectors[ci.ID]}
		for _, a := range accs {
			if a.Connector == ci.ID {
				g.Accounts = append(g.Accounts, a)
			}
		}
		groups = append(groups, g)
	}
	c.render(w, r, s, http.StatusOK, "integrations", "Integrations", map[string]any{"Groups": groups})
	return nil
}

// connect starts a connector's connect flow; the provider sends the
// browser back to the Integrations page.
func (c *Console) connect(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	connector := r.PostFormValue("connector")
	if msg := c.o.UnconfiguredConnectors[connector]; msg != "" {
		return badRequest("%s", msg)
	}
	returnTo := ""
	if c.o.PublicURL != "" {
		returnTo = strings.TrimSuffix(c.o.PublicURL, "/") + Prefix + "integrations"
	}
	authURL, err := c.o.Accounts.Start(r.Context(), tid, connector, returnTo)
	if errors.Is(err, accounts.ErrUnknownConnector) {
		return errNotFound
	} else if err != nil {
		return err
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
	return nil
}

func (c *Console) removeAccountPage(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	acc, err := c.o.Accounts.Get(r.Context(), tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	ts, err := c.o.Registry.ListTriggers(r.Context(), tid)
	if err != nil {
		return err
	}
	n := 0
	for _, t := range ts {
		if t.AccountID == acc.ID {
			n++
		}
	}
	c.render(w, r, s, http.StatusOK, "removeaccount", "Remove "+acc.Login, map[string]any{"A": acc, "Triggers": n})
	return nil
}

func (c *Console) removeAccount(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	ctx := r.Context()
	acc, err := c.o.Accounts.Get(ctx, tid, r.PathValue("id"))
	if err != nil {
		return err
	}
	if acc.Status != store.StatusRemoved {
		// As the API does: triggers off and hooks deleted while the
		// token still works; the removal goes ahead if that fails.
		if err := c.o.Registry.AccountRemoving(ctx, tid, acc); err != nil {
			c.log.Warn().Err(err).Str("account", acc.ID).Msg("deactivating the account's triggers")
		}
	}
	acc, report, err := c.o.Accounts.Remove(ctx, tid, acc.ID)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Removed %s: access revoked at the provider.", acc.Login)
	if !report.Revoked {
		msg = fmt.Sprintf("Removed %s. The provider did not confirm the revocation (%s): revoke it there if it matters.", acc.Login, report.RevokeError)
	}
	redirect(w, r, Prefix+"integrations", msg)
	return nil
}
