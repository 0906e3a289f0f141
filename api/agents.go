package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
)

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
