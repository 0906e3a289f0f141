package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
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
	CoverageOf(ctx context.Context, t store.Trigger, hooks []store.Hook) (*registry.Coverage, error)
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
