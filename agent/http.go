package agent

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// MaxRunBytes bounds the body NewHTTPHandler reads: a run carries one
// event, whose payload triggerd keeps under 8 MiB.
const MaxRunBytes = 16 << 20

// NewHTTPHandler returns the handler of an HTTP agent: it takes the runs
// triggerd POSTs, signed with secret, and answers each with fn's Result.
//
// The handler reads at most MaxRunBytes (413 beyond) and verifies the
// signature on the raw bytes before it parses anything (401 on failure,
// with DefaultTolerance). It answers 400 to a body that is not a run or
// whose id is not the webhook-id, and 405 to anything but POST. It then
// calls fn with the request's context and answers 200 with the Result as
// JSON, its RunID and Agent set to the run's, its Status and FinishedAt
// filled in when fn left them out (failed when Error is set). When fn returns an error it answers 500 with
// {"error": "<text>"}, so triggerd delivers the run again later; an
// invalid secret is also a 500, a fault of the agent to fix.
//
// It panics if fn is nil.
func NewHTTPHandler(secret string, fn RunFunc) http.Handler {
	if fn == nil {
		panic("agent: NewHTTPHandler with a nil RunFunc")
	}
	return &httpHandler{secrets: []string{secret}, fn: fn}
}

type httpHandler struct {
	secrets []string
	fn      RunFunc
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRunBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "run too large")
			return
		}
		writeError(w, http.StatusBadRequest, "cannot read body")
		return
	}
	if err := Verify(h.secrets, r.Header, body, time.Now(), DefaultTolerance); err != nil {
		if errors.Is(err, ErrSecret) {
			writeError(w, http.StatusInternalServerError, "agent misconfigured: "+err.Error())
			return
		}
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	var run Run
	if err := json.Unmarshal(body, &run); err != nil {
		writeError(w, http.StatusBadRequest, "not a run: "+err.Error())
		return
	}
	if run.ID == "" || run.ID != r.Header.Get(HeaderID) {
		writeError(w, http.StatusBadRequest, "run id does not match "+HeaderID)
		return
	}
	res, err := h.fn(r.Context(), run)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out, err := json.Marshal(complete(res, run, run.Agent, time.Now()))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding result: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	out, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
