package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/store"
)

// eventView is an event's record as GET /v1/events/{id} shows it.
type eventView struct {
	store.EventRecord
	// DispatchedAt hides the record's: absent for an event found in the
	// stream, which no dispatcher decided on.
	DispatchedAt *time.Time `json:"dispatched_at,omitempty"`
	// Note says, when Outcomes is empty, that no trigger of the tenant was
	// a candidate for the event.
	Note string `json:"note,omitempty"`
}

// noCandidateNote is eventView.Note for an event without outcomes.
const noCandidateNote = "triggerd received this event, but no trigger of this tenant was a candidate for it " +
	"(none of its kind on this repository or scope, or none enabled then): nothing started. " +
	"POST /v1/triggers/test tells what a trigger would do with the latest events of its kind."

func (a *API) getEvent(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	rec, err := a.o.Records.GetEvent(ctx, tenantOf(c), id)
	if errors.Is(err, store.ErrNotFound) && a.o.Unrecorded != nil {
		// No record: an event of the shared endpoints no trigger was a
		// candidate for leaves none, and is looked for in the stream.
		u, uerr := a.o.Unrecorded.LookUpUnrecorded(ctx, tenantOf(c), id)
		switch {
		case uerr == nil:
			return c.JSON(http.StatusOK, eventView{EventRecord: u.Record, Note: u.Reason + "."})
		case !errors.Is(uerr, store.ErrNotFound):
			a.log.Warn().Err(uerr).Str("event", id).Msg("looking for an event without a record")
			return fail(c, http.StatusServiceUnavailable, "unavailable",
				fmt.Sprintf("event %s has no record, and the events stream could not be searched for it now: retry", id))
		}
	}
	if errors.Is(err, store.ErrNotFound) {
		return fail(c, http.StatusNotFound, "not_found", fmt.Sprintf("no event %s is known to this tenant: "+
			"the id is wrong, or the event is older than the events kept, or another tenant's", id))
	}
	if err != nil {
		return a.registryFail(c, err, "event")
	}
	v := eventView{EventRecord: rec, DispatchedAt: &rec.DispatchedAt}
	if len(v.Outcomes) == 0 {
		v.Outcomes = []store.Outcome{}
		v.Note = noCandidateNote
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
