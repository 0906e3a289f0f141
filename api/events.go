package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/store"
)

func (a *API) getEvent(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	v, err := dispatch.LookUpEvent(ctx, a.o.Records, a.o.Unrecorded, tenantOf(c), id)
	switch {
	case errors.Is(err, dispatch.ErrEventSearch):
		a.log.Warn().Err(err).Str("event", id).Msg("looking for an event without a record")
		return fail(c, http.StatusServiceUnavailable, "unavailable",
			fmt.Sprintf("event %s has no record, and the events stream could not be searched for it now: retry", id))
	case errors.Is(err, store.ErrNotFound):
		return fail(c, http.StatusNotFound, "not_found", fmt.Sprintf("no event %s is known to this tenant: "+
			"the id is wrong, or the event is older than the events kept, or another tenant's", id))
	case err != nil:
		return a.registryFail(c, err, "event")
	}
	return c.JSON(http.StatusOK, v)
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
			msg := fmt.Sprintf("no event %s is known to this tenant: the id is wrong, or the event is older than the events kept, or another tenant's (triggerctl triggers events ID lists a trigger's)", c.Param("id"))
			if in.TriggerID != "" {
				msg = fmt.Sprintf("no event %s known to this tenant, or no trigger %s", c.Param("id"), in.TriggerID)
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
