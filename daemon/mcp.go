package daemon

// The MCP endpoint (issue 41): its wiring is here, apart.
// startServices calls newMCP after the management API, listenMCP once
// the bus is up, and mountMCP on the handler it serves; newDispatch
// passes broadcastRun as the dispatcher's OnRunStarted; the API is given
// notifyingAccounts.

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/buildinfo"
	"github.com/triggerd/triggerd/mcpserver"
	"github.com/triggerd/triggerd/steps"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

// mcpSubject carries what MCP sessions must hear of between processes
// (core NATS, nothing stored): a tenant's accounts changed (its tool
// list), or a trigger started a run (its subscribers). Every process,
// the sender included, applies it to its own sessions.
const mcpSubject = "triggerd.control.mcp"

// mcpNotice is one such broadcast: Run set for a run, else an accounts
// change.
type mcpNotice struct {
	Tenant  string `json:"tenant"`
	Trigger string `json:"trigger,omitempty"`
	Event   string `json:"event,omitempty"`
	Run     string `json:"run,omitempty"`
}

// newMCP returns the MCP endpoint, over the same tenant service, step
// runner, registry and records as the management API.
func newMCP(acct *accounts.Service, tenantSvc *tenants.Service, runner *steps.Runner, disp *dispatchParts, st store.Store, log zerolog.Logger) (*mcpserver.Server, error) {
	version := buildinfo.Read().Version
	return mcpserver.New(mcpserver.Options{
		Auth: tenantSvc, Accounts: acct, Steps: runner,
		Triggers: disp.registry, Records: st, DryRunner: disp.dispatcher, Unrecorded: disp.dispatcher,
		Version: version, Logger: log,
	})
}

// mountMCP serves the endpoint at /mcp of e.
func mountMCP(e *echo.Echo, s *mcpserver.Server) {
	e.Any(mcpserver.Path, echo.WrapHandler(s))
}

// listenMCP applies the broadcasts to s's sessions until ctx ends.
func listenMCP(ctx context.Context, b *bus.Bus, s *mcpserver.Server) error {
	return b.Listen(ctx, mcpSubject, func(data []byte) {
		var n mcpNotice
		if json.Unmarshal(data, &n) != nil || n.Tenant == "" {
			return
		}
		if n.Run != "" {
			s.RunStarted(ctx, store.Run{ID: n.Run, TenantID: n.Tenant, TriggerID: n.Trigger, EventID: n.Event})
			return
		}
		s.AccountsChanged(ctx, n.Tenant)
	})
}

// broadcastRun returns the dispatcher's OnRunStarted: it tells every
// process's MCP sessions of the run.
func broadcastRun(b *bus.Bus, log zerolog.Logger) func(store.Run) {
	return func(r store.Run) {
		notifyMCP(b, mcpNotice{Tenant: r.TenantID, Trigger: r.TriggerID, Event: r.EventID, Run: r.ID}, log)
	}
}

func notifyMCP(b *bus.Bus, n mcpNotice, log zerolog.Logger) {
	data, _ := json.Marshal(n)
	if err := b.Notify(mcpSubject, data); err != nil {
		log.Warn().Err(err).Str("tenant", n.Tenant).Msg("MCP notification not broadcast; clients see the change at their next list")
	}
}

// notifyingAccounts is the accounts service as the API uses it: an
// account connected or removed through the API changes the tenant's MCP
// tools, and its sessions are told.
type notifyingAccounts struct {
	*accounts.Service
	b   *bus.Bus
	log zerolog.Logger
}

func (a notifyingAccounts) Callback(ctx context.Context, connector string, query url.Values) (store.Account, string, error) {
	acc, returnTo, err := a.Service.Callback(ctx, connector, query)
	if err == nil {
		notifyMCP(a.b, mcpNotice{Tenant: acc.TenantID}, a.log)
	}
	return acc, returnTo, err
}

func (a notifyingAccounts) Remove(ctx context.Context, tenantID, id string) (store.Account, accounts.RemoveReport, error) {
	acc, report, err := a.Service.Remove(ctx, tenantID, id)
	if err == nil {
		notifyMCP(a.b, mcpNotice{Tenant: tenantID}, a.log)
	}
	return acc, report, err
}
