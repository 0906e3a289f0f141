package api

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/store"
)

func runStatusNames() []string {
	names := make([]string, len(runStatuses))
	for i, st := range runStatuses {
		names[i] = string(st)
	}
	return names
}

// runStatuses are the statuses ?status= may filter runs by.
var runStatuses = []store.RunStatus{store.RunClaimed, store.RunStarted, store.RunSucceeded, store.RunFailed}

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
