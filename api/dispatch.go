package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// registryService is what the API needs of the registry.
type registryService interface {
	CreateAgent(ctx context.Context, tenantID string, in registry.AgentInput) (store.Agent, string, error)
	GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error)
	ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error)
	DeleteAgent(ctx context.Context, tenantID, id string) error
	ResetNATSPassword(ctx context.Context, tenantID, id string) (store.Agent, string, error)
	AgentEndpoint(ctx context.Context, tenantID, agentID string) (store.Hook, bool, error)
	EndpointSecret(ctx context.Context, h store.Hook) (string, error)
	SetEndpointSecrets(ctx context.Context, tenantID, agentID string, secrets []string) (store.Hook, error)
	HookActivity(ctx context.Context, id string) (store.HookActivity, error)
	CreateTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	DraftTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error)
	ListTriggers(ctx context.Context, tenantID string) ([]store.Trigger, error)
	SetEnabled(ctx context.Context, tenantID, id string, enabled bool) (store.Trigger, error)
	DeleteTrigger(ctx context.Context, tenantID, id string) error
	HooksOf(ctx context.Context, t store.Trigger) ([]store.Hook, error)
	HookURL(h store.Hook) string
	AccountRemoving(ctx context.Context, tenantID string, acc store.Account) error
	AccountConnected(ctx context.Context, tenantID, accountID string) error
}

// records is what the API reads of runs and events.
type records interface {
	GetRun(ctx context.Context, tenantID, id string) (store.Run, error)
	ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error)
	GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error)
	ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]store.EventRecord, error)
}

// dryRunner tests triggers against past events (dispatch.Dispatcher).
type dryRunner interface {
	DryRun(ctx context.Context, t store.Trigger, limit int) (dispatch.DryRunReport, error)
}

// replayer replays events (dispatch.Dispatcher).
type replayer interface {
	Replay(ctx context.Context, tenantID, eventID, triggerID string, bypass bool) ([]dispatch.ReplayPlan, error)
}

func (a *API) registerDispatch(g *echo.Group) {
	if a.o.Registry == nil {
		return
	}
	g.POST("/agents", a.createAgent)
	g.GET("/agents", a.listAgents)
	g.GET("/agents/:id", a.getAgent)
	g.DELETE("/agents/:id", a.deleteAgent)
	g.POST("/agents/:id/nats-password", a.resetNATSPassword)
	g.GET("/agents/:id/endpoint", a.agentEndpoint)
	g.PUT("/agents/:id/endpoint/secrets", a.setEndpointSecrets)
	g.GET("/triggers/kinds", a.triggerKinds)
	g.POST("/triggers", a.createTrigger)
	g.GET("/triggers", a.listTriggers)
	g.GET("/triggers/:id", a.getTrigger)
	g.PATCH("/triggers/:id", a.patchTrigger)
	g.DELETE("/triggers/:id", a.deleteTrigger)
	if a.o.Records != nil {
		g.GET("/triggers/:id/events", a.triggerEvents)
		g.GET("/events/:id", a.getEvent)
		g.GET("/runs", a.listRuns)
		g.GET("/runs/:id", a.getRun)
	}
	if a.o.Replayer != nil {
		g.POST("/events/:id/replay", a.replayEvent)
	}
	if a.o.DryRunner != nil {
		g.POST("/triggers/test", a.testDraft)
		g.POST("/triggers/:id/test", a.testTrigger)
	}
}

// registryFail maps the registry's errors onto answers.
func (a *API) registryFail(c echo.Context, err error, what string) error {
	switch {
	case errors.Is(err, registry.ErrInvalid):
		return fail(c, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.Is(err, registry.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return fail(c, http.StatusNotFound, "not_found", "no such "+what)
	case errors.Is(err, registry.ErrNameTaken):
		return fail(c, http.StatusConflict, "name_taken", err.Error())
	case errors.Is(err, registry.ErrConflict):
		return fail(c, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, registry.ErrHookRights):
		return fail(c, http.StatusForbidden, "hook_rights", err.Error())
	case errors.Is(err, registry.ErrUpstream):
		return fail(c, http.StatusBadGateway, "upstream", err.Error())
	}
	a.log.Error().Err(err).Str("what", what).Msg("registry operation failed")
	return fail(c, http.StatusServiceUnavailable, "unavailable", "the "+what+" could not be read or written right now; retry")
}

// endpointView is a deployment endpoint as the API shows it.
type endpointView struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Events are the event types to select in the project's webhook
	// settings.
	Events []string `json:"events"`
	// SecretSource says what deliveries must be signed with: "generated",
	// the secret triggerd made (for test deliveries, or a sender whose
	// secret can be chosen), or "provider", the secrets the user set from
	// the deployment platform (PUT .../endpoint/secrets).
	SecretSource string `json:"secret_source"`
	// SecretsSetAt is when the provider's secrets were set.
	SecretsSetAt time.Time `json:"secrets_set_at,omitzero"`
	// Secret is the generated secret, shown only where the user asks for
	// it; the provider's secrets are never shown back.
	Secret string `json:"secret,omitempty"`
	// Activity is what reached the endpoint lately: when a delivery was
	// last taken, how many were refused and the last refusal's answer.
	Activity *store.HookActivity `json:"activity,omitempty"`
}

// activity returns hook id's activity, or nil when there is none or it
// cannot be read (a view is still worth showing without it).
func (a *API) activity(ctx context.Context, id string) *store.HookActivity {
	act, err := a.o.Registry.HookActivity(ctx, id)
	if err != nil {
		a.log.Warn().Err(err).Str("hook", id).Msg("reading a hook's activity")
		return nil
	}
	if act == (store.HookActivity{}) {
		return nil
	}
	return &act
}

// endpointView shows h; reveal adds the generated secret, if it is the
// one in use.
func (a *API) endpointView(ctx context.Context, h store.Hook, reveal bool) (endpointView, error) {
	v := endpointView{
		ID: h.ID, URL: a.o.Registry.HookURL(h), Events: h.Events, SecretSource: "generated", SecretsSetAt: h.SecretsSetAt,
		Activity: a.activity(ctx, h.ID),
	}
	if !h.SecretsSetAt.IsZero() {
		v.SecretSource = "provider"
		return v, nil
	}
	if reveal {
		var err error
		v.Secret, err = a.o.Registry.EndpointSecret(ctx, h)
		return v, err
	}
	return v, nil
}

type agentView struct {
	ID       string              `json:"id"`
	Name     string              `json:"name"`
	Delivery store.AgentDelivery `json:"delivery"`
	URL      string              `json:"url,omitempty"`
	Subject  string              `json:"runs_subject,omitempty"`
	// NATSUser is what a NATS agent connects as (its id), and
	// NATSInboxPrefix the inbox prefix its connection must use
	// (agent.Connect sets both).
	NATSUser        string `json:"nats_user,omitempty"`
	NATSInboxPrefix string `json:"nats_inbox_prefix,omitempty"`
	// NATSPassword is a NATS agent's password, shown once: at creation,
	// and when POST /agents/{id}/nats-password makes a new one.
	NATSPassword string `json:"nats_password,omitempty"`
	// NATSPasswordSetAt is when the password in use was made; absent for
	// an agent made before agents had passwords, which cannot connect
	// until it gets one.
	NATSPasswordSetAt time.Time            `json:"nats_password_set_at,omitzero"`
	Steps             []store.PipelineStep `json:"steps"`
	// WebhookSecret is the Standard Webhooks signing secret of an HTTP
	// agent, shown once, at creation.
	WebhookSecret string        `json:"webhook_secret,omitempty"`
	Endpoint      *endpointView `json:"deploy_endpoint,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

func (a *API) agentView(c echo.Context, ag store.Agent) agentView {
	v := agentView{
		ID: ag.ID, Name: ag.Name, Delivery: ag.Delivery, URL: ag.URL, Steps: ag.Steps,
		CreatedAt: ag.CreatedAt, UpdatedAt: ag.UpdatedAt,
	}
	if v.Steps == nil {
		v.Steps = []store.PipelineStep{}
	}
	if ag.Delivery == store.DeliverNATS {
		v.Subject = agent.RunsSubject(ag.ID)
		v.NATSUser, v.NATSInboxPrefix = ag.ID, agent.InboxPrefix(ag.ID)
		v.NATSPasswordSetAt = ag.NATSPasswordSetAt
	}
	if h, ok, err := a.o.Registry.AgentEndpoint(c.Request().Context(), ag.TenantID, ag.ID); err == nil && ok {
		ev, _ := a.endpointView(c.Request().Context(), h, false)
		v.Endpoint = &ev
	}
	return v
}

func (a *API) createAgent(c echo.Context) error {
	var in registry.AgentInput
	if ok, err := decodeStrict(c, &in); !ok {
		return err
	}
	ag, secret, err := a.o.Registry.CreateAgent(c.Request().Context(), tenantOf(c), in)
	if err != nil {
		return a.registryFail(c, err, "agent")
	}
	v := a.agentView(c, ag)
	if ag.Delivery == store.DeliverNATS {
		v.NATSPassword = secret
	} else {
		v.WebhookSecret = secret
	}
	// The answer holds the agent's secret, shown this once.
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, v)
}

// resetNATSPassword gives a NATS agent a new password, shown only in this
// answer; the old one stops working, and connections made with it close.
func (a *API) resetNATSPassword(c echo.Context) error {
	ag, pw, err := a.o.Registry.ResetNATSPassword(c.Request().Context(), tenantOf(c), c.Param("id"))
	if err != nil {
		return a.registryFail(c, err, "agent")
	}
	v := a.agentView(c, ag)
	v.NATSPassword = pw
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, v)
}

func (a *API) listAgents(c echo.Context) error {
	ags, err := a.o.Registry.ListAgents(c.Request().Context(), tenantOf(c))
	if err != nil {
		return a.registryFail(c, err, "agents")
	}
	out := make([]agentView, len(ags))
	for i, ag := range ags {
		out[i] = a.agentView(c, ag)
	}
	return c.JSON(http.StatusOK, map[string]any{"agents": out})
}

func (a *API) getAgent(c echo.Context) error {
	ag, err := a.o.Registry.GetAgent(c.Request().Context(), tenantOf(c), c.Param("id"))
	if err != nil {
		return a.registryFail(c, err, "agent")
	}
	return c.JSON(http.StatusOK, a.agentView(c, ag))
}

func (a *API) deleteAgent(c echo.Context) error {
	if err := a.o.Registry.DeleteAgent(c.Request().Context(), tenantOf(c), c.Param("id")); err != nil {
		return a.registryFail(c, err, "agent")
	}
	return c.NoContent(http.StatusNoContent)
}

// agentEndpoint shows an agent's deployment endpoint, with the secret
// triggerd generated while that is the one in use.
func (a *API) agentEndpoint(c echo.Context) error {
	h, ok, err := a.endpointOf(c)
	if !ok {
		return err
	}
	v, err := a.endpointView(c.Request().Context(), h, true)
	if err != nil {
		return a.registryFail(c, err, "endpoint")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, v)
}

// endpointOf returns the deployment endpoint of the agent in the path;
// when there is none (ok false) it has answered, with err the write's
// result.
func (a *API) endpointOf(c echo.Context) (h store.Hook, ok bool, err error) {
	ctx := c.Request().Context()
	ag, err := a.o.Registry.GetAgent(ctx, tenantOf(c), c.Param("id"))
	if err != nil {
		return store.Hook{}, false, a.registryFail(c, err, "agent")
	}
	h, ok, err = a.o.Registry.AgentEndpoint(ctx, ag.TenantID, ag.ID)
	switch {
	case err != nil:
		return store.Hook{}, false, a.registryFail(c, err, "endpoint")
	case !ok:
		return store.Hook{}, false, fail(c, http.StatusNotFound, "not_found", "agent "+ag.ID+" has no deployment endpoint: create a deployment trigger for it first")
	}
	return h, true, nil
}

// endpointSecrets is the body of PUT /agents/{id}/endpoint/secrets.
type endpointSecrets struct {
	Secrets []string `json:"secrets"`
}

// setEndpointSecrets replaces the secrets an agent's deployment endpoint
// accepts with those the deployment platform issued: Vercel shows each
// webhook's secret once, at creation, and signs with it.
func (a *API) setEndpointSecrets(c echo.Context) error {
	var in endpointSecrets
	if ok, err := decodeStrict(c, &in); !ok {
		return err
	}
	if _, ok, err := a.endpointOf(c); !ok {
		return err
	}
	h, err := a.o.Registry.SetEndpointSecrets(c.Request().Context(), tenantOf(c), c.Param("id"), in.Secrets)
	if err != nil {
		return a.registryFail(c, err, "endpoint")
	}
	v, err := a.endpointView(c.Request().Context(), h, false)
	if err != nil {
		return a.registryFail(c, err, "endpoint")
	}
	return c.JSON(http.StatusOK, v)
}

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

func runStatusNames() []string {
	names := make([]string, len(runStatuses))
	for i, st := range runStatuses {
		names[i] = string(st)
	}
	return names
}

// runStatuses are the statuses ?status= may filter runs by.
var runStatuses = []store.RunStatus{store.RunClaimed, store.RunStarted, store.RunSucceeded, store.RunFailed}

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

// eventView is an event's record as GET /v1/events/{id} shows it.
type eventView struct {
	store.EventRecord
	// Note says, when Outcomes is empty, that no trigger of the tenant was
	// a candidate for the event.
	Note string `json:"note,omitempty"`
}

// noCandidateNote is eventView.Note for an event without outcomes.
const noCandidateNote = "triggerd received this event, but no trigger of this tenant was a candidate for it " +
	"(none of its kind on this repository or scope, or none enabled then): nothing started. " +
	"POST /v1/triggers/test tells what a trigger would do with the latest events of its kind."

func (a *API) getEvent(c echo.Context) error {
	id := c.Param("id")
	rec, err := a.o.Records.GetEvent(c.Request().Context(), tenantOf(c), id)
	if errors.Is(err, store.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", fmt.Sprintf("no event %s is known to this tenant: "+
			"the id is wrong, or the event is older than the records kept, or it reached a shared endpoint "+
			"(/webhooks/codehost or /webhooks/deploy without a hook id) and no trigger of this tenant was a candidate for it", id))
	}
	if err != nil {
		return a.registryFail(c, err, "event")
	}
	v := eventView{EventRecord: rec}
	if len(v.Outcomes) == 0 {
		v.Outcomes = []store.Outcome{}
		v.Note = noCandidateNote
	}
	return c.JSON(http.StatusOK, v)
}

func (a *API) listRuns(c echo.Context) error {
	limit, ok, err := limitParam(c)
	if !ok {
		return err
	}
	if st := store.RunStatus(c.QueryParam("status")); st != "" && !slices.Contains(runStatuses, st) {
		return fail(c, http.StatusBadRequest, "invalid_request", fmt.Sprintf("status %q: want one of %s", st, strings.Join(runStatusNames(), ", ")))
	}
	f := store.RunFilter{
		TenantID: tenantOf(c), TriggerID: c.QueryParam("trigger"), AgentID: c.QueryParam("agent"),
		EventID: c.QueryParam("event"), Status: store.RunStatus(c.QueryParam("status")), Limit: limit,
	}
	runs, err := a.o.Records.ListRuns(c.Request().Context(), f)
	if err != nil {
		return a.registryFail(c, err, "runs")
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": runs})
}

func (a *API) getRun(c echo.Context) error {
	r, err := a.o.Records.GetRun(c.Request().Context(), tenantOf(c), c.Param("id"))
	if err != nil {
		return a.registryFail(c, err, "run")
	}
	return c.JSON(http.StatusOK, r)
}

func (a *API) replayEvent(c echo.Context) error {
	var in struct {
		TriggerID    string `json:"trigger_id"`
		BypassFilter bool   `json:"bypass_filter"`
	}
	if c.Request().ContentLength != 0 {
		if ok, err := decodeStrict(c, &in); !ok {
			return err
		}
	}
	if in.BypassFilter && in.TriggerID == "" {
		return fail(c, http.StatusBadRequest, "invalid_request", "bypass_filter needs trigger_id: only a replay to one trigger may skip its filter")
	}
	plans, err := a.o.Replayer.Replay(c.Request().Context(), tenantOf(c), c.Param("id"), in.TriggerID, in.BypassFilter)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			msg := fmt.Sprintf("no event %s with a record for this tenant (an event leaves one when a trigger of the tenant was a candidate for it; triggerctl triggers events ID lists a trigger's)", c.Param("id"))
			if in.TriggerID != "" {
				msg = fmt.Sprintf("no event %s with a record for this tenant, or no trigger %s", c.Param("id"), in.TriggerID)
			}
			return fail(c, http.StatusNotFound, "not_found", msg)
		}
		a.log.Warn().Err(err).Msg("replay failed")
		return fail(c, http.StatusBadRequest, "replay_failed", err.Error())
	}
	if plans == nil {
		plans = []dispatch.ReplayPlan{}
	}
	return c.JSON(http.StatusAccepted, map[string]any{"event_id": c.Param("id"), "replay": plans})
}

// decodeStrict decodes the request body, at most 1 MiB, into v: one JSON
// object of v's fields and nothing after it. On failure it writes the
// answer (413 past the limit, 400 otherwise) and returns ok false with
// the write's result.
func decodeStrict(c echo.Context, v any) (ok bool, err error) {
	return decodeLimited(c, v, 1<<20)
}

// decodeLimited is decodeStrict with a limit of its own.
func decodeLimited(c echo.Context, v any, limit int64) (ok bool, err error) {
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	dec.DisallowUnknownFields()
	var tooLarge *http.MaxBytesError
	err = dec.Decode(v)
	if err == nil {
		// Nothing may follow the object but the end of the body.
		if _, err = dec.Token(); err == io.EOF {
			err = nil
		} else if !errors.As(err, &tooLarge) {
			err = errors.New("more follows the JSON object: send one object")
		}
	}
	switch {
	case errors.As(err, &tooLarge):
		return false, fail(c, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("the body is over the %d-byte limit of this route", limit))
	case err != nil:
		return false, fail(c, http.StatusBadRequest, "invalid_json", "the body must be a JSON object of the documented fields: "+err.Error())
	}
	return true, nil
}
