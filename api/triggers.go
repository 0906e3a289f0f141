package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// kindView is one trigger kind of the catalogue.
type kindView struct {
	triggers.KindInfo
	Params []string `json:"params"`
	// Delivery says how events of the kind reach triggerd: "webhook"
	// (registered on the repository or organisation), "polling" or
	// "endpoint" (the agent's deployment endpoint).
	Delivery string `json:"delivery"`
}

func (a *API) triggerKinds(c echo.Context) error {
	var out []kindView
	for _, info := range triggers.Kinds() {
		v := kindView{KindInfo: info, Params: match.ParamsFor(info.Kind), Delivery: "webhook"}
		if v.Params == nil {
			v.Params = []string{}
		}
		switch {
		case info.Connector == triggers.Deploy:
			v.Delivery = "endpoint"
		case info.Kind == triggers.NewGist:
			v.Delivery = "polling"
		case info.Kind == triggers.NewMention:
			v.Delivery = "webhook with repositories, polling (notifications) without"
		case info.Kind == triggers.NewRepository:
			v.Delivery = "webhook with an organization, polling (the account's own repositories) without"
		}
		out = append(out, v)
	}
	return c.JSON(http.StatusOK, map[string]any{"kinds": out})
}

type hookView struct {
	ID           string           `json:"id"`
	Scope        store.HookScope  `json:"scope"`
	Target       string           `json:"target"`
	URL          string           `json:"url"`
	Events       []string         `json:"events"`
	Status       store.HookStatus `json:"status"`
	StatusReason string           `json:"status_reason,omitempty"`
	ExternalID   int64            `json:"external_id,omitempty"`
	CheckedAt    time.Time        `json:"checked_at,omitzero"`
	// HealedThrough: every delivery GitHub attempted before it was taken,
	// redelivered or given up on (registry/heal.go).
	HealedThrough time.Time `json:"healed_through,omitzero"`
	// Activity is what reached the hook lately (see endpointView).
	Activity *store.HookActivity `json:"activity,omitempty"`
}

type triggerView struct {
	ID           string              `json:"id"`
	Kind         string              `json:"kind"`
	Account      string              `json:"account"`
	Agent        string              `json:"agent"`
	Enabled      bool                `json:"enabled"`
	Status       store.TriggerStatus `json:"status"`
	StatusCode   string              `json:"status_code,omitempty"`
	StatusReason string              `json:"status_reason,omitempty"`
	Params       json.RawMessage     `json:"params"`
	Filter       string              `json:"filter,omitempty"`
	// AccountStatus is the status of the account the trigger acts
	// through: "needs_reauth" (the provider refused its grant: its hooks
	// can be neither repaired nor healed, and tool steps run as it fail,
	// until it is reconnected) shows here, with the reason, as well as on
	// the account.
	AccountStatus       store.AccountStatus `json:"account_status,omitempty"`
	AccountStatusReason string              `json:"account_status_reason,omitempty"`
	Hooks               []hookView          `json:"hooks"`
	// Coverage is, for a trigger on all the account's repositories (no
	// repositories given), how many hooks serve it and where the account
	// lacks the rights to one.
	Coverage *registry.Coverage `json:"coverage,omitempty"`
	// Endpoint is the agent's deployment endpoint, for deployment kinds.
	Endpoint  *endpointView `json:"deploy_endpoint,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// triggerView shows t with its hooks and its account's status; accs, when
// not nil, keeps the accounts read for views of several triggers.
func (a *API) triggerView(c echo.Context, t store.Trigger, withSecret bool, accs map[string]store.Account) triggerView {
	v := triggerView{
		ID: t.ID, Kind: t.Kind, Account: t.AccountID, Agent: t.AgentID, Enabled: t.Enabled, Status: t.Status,
		StatusCode: t.StatusCode, StatusReason: t.StatusReason, Params: t.Params, Filter: t.Filter,
		Hooks: []hookView{}, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
	if len(v.Params) == 0 {
		v.Params = json.RawMessage("{}")
	}
	ctx := c.Request().Context()
	acc, read := accs[t.AccountID]
	if !read {
		var err error
		if acc, err = a.o.Accounts.Get(ctx, t.TenantID, t.AccountID); err != nil && !errors.Is(err, accounts.ErrAccountNotFound) {
			a.log.Warn().Err(err).Str("trigger", t.ID).Msg("reading a trigger's account")
		} else if accs != nil {
			accs[t.AccountID] = acc // a zero Account when there is none
		}
	}
	v.AccountStatus, v.AccountStatusReason = acc.Status, acc.StatusReason
	hooks, err := a.o.Registry.HooksOf(ctx, t)
	if err != nil {
		a.log.Warn().Err(err).Str("trigger", t.ID).Msg("reading a trigger's hooks")
	}
	for _, h := range hooks {
		if h.Scope == store.HookAgentEndpoint {
			ev, _ := a.endpointView(ctx, h, withSecret)
			v.Endpoint = &ev
			continue
		}
		v.Hooks = append(v.Hooks, hookView{
			ID: h.ID, Scope: h.Scope, Target: h.Target, URL: a.o.Registry.HookURL(h), Events: h.Events,
			Status: h.Status, StatusReason: h.StatusReason, ExternalID: h.ExternalID, CheckedAt: h.CheckedAt,
			HealedThrough: h.HealedThrough, Activity: a.activity(ctx, h.ID),
		})
	}
	if v.Coverage, err = a.o.Registry.CoverageOf(ctx, t, hooks); err != nil {
		a.log.Warn().Err(err).Str("trigger", t.ID).Msg("reading a trigger's coverage")
	}
	return v
}

func (a *API) createTrigger(c echo.Context) error {
	var in registry.TriggerInput
	if ok, err := decodeStrict(c, &in); !ok {
		return err
	}
	t, err := a.o.Registry.CreateTrigger(c.Request().Context(), tenantOf(c), in)
	if err != nil {
		return a.registryFail(c, err, "trigger")
	}
	// A deployment trigger's answer holds its endpoint's generated secret.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, a.triggerView(c, t, true, nil))
}

func (a *API) listTriggers(c echo.Context) error {
	ts, err := a.o.Registry.ListTriggers(c.Request().Context(), tenantOf(c))
	if err != nil {
		return a.registryFail(c, err, "triggers")
	}
	out := make([]triggerView, len(ts))
	accs := map[string]store.Account{} // triggers share accounts
	for i, t := range ts {
		out[i] = a.triggerView(c, t, false, accs)
	}
	return c.JSON(http.StatusOK, map[string]any{"triggers": out})
}

func (a *API) getTrigger(c echo.Context) error {
	t, err := a.o.Registry.GetTrigger(c.Request().Context(), tenantOf(c), c.Param("id"))
	if err != nil {
		return a.registryFail(c, err, "trigger")
	}
	return c.JSON(http.StatusOK, a.triggerView(c, t, false, nil))
}

func (a *API) patchTrigger(c echo.Context) error {
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if ok, err := decodeStrict(c, &in); !ok {
		return err
	}
	if in.Enabled == nil {
		return fail(c, http.StatusBadRequest, "invalid_request", `send {"enabled": true} or {"enabled": false}; other fields cannot be changed (delete and create the trigger instead)`)
	}
	t, err := a.o.Registry.SetEnabled(c.Request().Context(), tenantOf(c), c.Param("id"), *in.Enabled)
	if err != nil {
		return a.registryFail(c, err, "trigger")
	}
	return c.JSON(http.StatusOK, a.triggerView(c, t, false, nil))
}

func (a *API) deleteTrigger(c echo.Context) error {
	if err := a.o.Registry.DeleteTrigger(c.Request().Context(), tenantOf(c), c.Param("id")); err != nil {
		return a.registryFail(c, err, "trigger")
	}
	return c.NoContent(http.StatusNoContent)
}

// testDraft answers what a trigger not created yet would have done with
// the latest events of its kind: the body is what POST /triggers takes,
// plus an optional "limit".
func (a *API) testDraft(c echo.Context) error {
	var in struct {
		registry.TriggerInput
		Limit *int `json:"limit"`
	}
	if ok, err := decodeStrict(c, &in); !ok {
		return err
	}
	t, err := a.o.Registry.DraftTrigger(c.Request().Context(), tenantOf(c), in.TriggerInput)
	if err != nil {
		return a.registryFail(c, err, "trigger")
	}
	return a.dryRun(c, t, in.Limit)
}

// testTrigger answers what a trigger would have done with the latest
// events of its kind, with "filter" in place of its own when given ("" for
// none).
func (a *API) testTrigger(c echo.Context) error {
	var in struct {
		Filter *string `json:"filter"`
		Limit  *int    `json:"limit"`
	}
	if c.Request().ContentLength != 0 {
		if ok, err := decodeStrict(c, &in); !ok {
			return err
		}
	}
	t, err := a.o.Registry.GetTrigger(c.Request().Context(), tenantOf(c), c.Param("id"))
	if err != nil {
		return a.registryFail(c, err, "trigger")
	}
	if in.Filter != nil {
		t.Filter = *in.Filter
	}
	return a.dryRun(c, t, in.Limit)
}

func (a *API) dryRun(c echo.Context, t store.Trigger, limit *int) error {
	n := dispatch.DryRunEvents
	if limit != nil {
		n = *limit
	}
	report, err := a.o.DryRunner.DryRun(c.Request().Context(), t, n)
	switch {
	case errors.Is(err, dispatch.ErrInvalidDryRun):
		return fail(c, http.StatusBadRequest, "invalid_request", err.Error())
	case err != nil:
		a.log.Warn().Err(err).Msg("dry run failed")
		return fail(c, http.StatusServiceUnavailable, "unavailable", "the events stream could not be read right now; retry")
	}
	return c.JSON(http.StatusOK, report)
}

// limitParam reads ?limit= (1..1000, default 100). On a bad value it
// writes the answer and returns ok false with the write's result, as
// decodeStrict does.
func limitParam(c echo.Context) (n int, ok bool, err error) {
	s := c.QueryParam("limit")
	if s == "" {
		return 100, true, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 1 || n > 1000 {
		return 0, false, fail(c, http.StatusBadRequest, "invalid_request", fmt.Sprintf("limit %q: want an integer from 1 to 1000", s))
	}
	return n, true, nil
}

func (a *API) triggerEvents(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := a.o.Registry.GetTrigger(ctx, tenantOf(c), c.Param("id")); err != nil {
		return a.registryFail(c, err, "trigger")
	}
	limit, ok, err := limitParam(c)
	if !ok {
		return err
	}
	recs, err := a.o.Records.ListTriggerEvents(ctx, tenantOf(c), c.Param("id"), limit)
	if err != nil {
		return a.registryFail(c, err, "events")
	}
	if recs == nil {
		recs = []store.EventRecord{}
	}
	return c.JSON(http.StatusOK, map[string]any{"events": recs})
}
