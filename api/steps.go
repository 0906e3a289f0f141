package api

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/connectors"
)

// stepRunner is what the API needs of the step catalogue.
type stepRunner interface {
	List(q string) []connectors.Step
	Get(id string) (connectors.Step, bool)
	Run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error)
}

// stepSummary is a step in a listing.
type stepSummary struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Connector   string `json:"connector"`
	Description string `json:"description"`
}

func (a *API) registerSteps(g *echo.Group) {
	if a.o.Steps == nil {
		return
	}
	g.GET("/steps", a.listSteps)
	g.GET("/steps/:id", a.getStep)
	g.POST("/steps/:id/run", a.runStep)
}

func (a *API) listSteps(c echo.Context) error {
	list := a.o.Steps.List(c.QueryParam("q"))
	out := make([]stepSummary, len(list))
	for i, s := range list {
		out[i] = stepSummary{ID: s.ID, Name: s.Name, Connector: s.Connector, Description: s.Description}
	}
	return c.JSON(http.StatusOK, map[string]any{"steps": out})
}

func (a *API) getStep(c echo.Context) error {
	s, ok := a.o.Steps.Get(c.Param("id"))
	if !ok {
		return fail(c, http.StatusNotFound, "not_found", "no such step; GET /v1/steps lists them")
	}
	return c.JSON(http.StatusOK, s)
}

// stepStatus is the HTTP status for each step error code.
var stepStatus = map[connectors.ErrorCode]int{
	connectors.CodeValidation:       http.StatusBadRequest,
	connectors.CodeNotFound:         http.StatusNotFound,
	connectors.CodePermissionDenied: http.StatusForbidden,
	connectors.CodeRateLimited:      http.StatusTooManyRequests,
	connectors.CodeAccountRemoved:   http.StatusConflict,
	connectors.CodeNeedsReauth:      http.StatusConflict,
	connectors.CodeUpstream:         http.StatusBadGateway,
	connectors.CodeUnavailable:      http.StatusServiceUnavailable,
}

func (a *API) runStep(c echo.Context) error {
	var req struct {
		Account string          `json:"account"`
		Input   json.RawMessage `json:"input"`
	}
	// Up to 10 MiB: an input may carry a file's content.
	if ok, err := decodeLimited(c, &req, 10<<20); !ok {
		return err
	}
	id := c.Param("id")
	ctx := connectors.WithCaller(c.Request().Context(), "api")
	out, err := a.o.Steps.Run(ctx, tenantOf(c), id, req.Account, req.Input)
	if err != nil {
		var ce *connectors.Error
		if !errors.As(err, &ce) {
			ce = &connectors.Error{Code: connectors.CodeUpstream, Message: err.Error()}
		}
		status, ok := stepStatus[ce.Code]
		if !ok {
			status = http.StatusBadGateway
		}
		body := map[string]any{"code": ce.Code, "message": ce.Message, "retryable": ce.Retryable}
		if ce.Status != 0 {
			body["upstream_status"] = ce.Status
		}
		if ce.RetryAfter > 0 {
			secs := int(math.Ceil(ce.RetryAfter.Seconds()))
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			body["retry_after_seconds"] = secs
		}
		return c.JSON(status, map[string]any{"error": body})
	}
	return c.JSON(http.StatusOK, map[string]any{"step": id, "output": out})
}
