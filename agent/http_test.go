package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
)

const agentID = "0b7e3f0e-8f5a-4c2e-9d55-6b1f2a3c4d5e"

func testRun(id string) agent.Run {
	return agent.Run{
		ID:        id,
		Tenant:    "t1",
		Agent:     agentID,
		Trigger:   "trg_1",
		Kind:      "new_issue",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Event:     json.RawMessage(`{"id":"evt_1","kind":"new_issue","repository":"octo/hello","payload":{"n":1}}`),
	}
}

// signedRequest is a POST as triggerd sends it: body signed with secret
// under id at ts.
func signedRequest(t *testing.T, secret, id string, ts time.Time, body []byte) *http.Request {
	t.Helper()
	sig, err := agent.Sign(secret, id, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/runs", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(agent.HeaderID, id)
	r.Header.Set(agent.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	r.Header.Set(agent.HeaderSignature, sig)
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHTTPHandlerAnswersWithResult(t *testing.T) {
	secret, _ := agent.NewSecret()
	run := testRun("run_1")
	var got agent.Run
	h := agent.NewHTTPHandler(secret, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		got = r
		return agent.Result{Output: json.RawMessage(`{"comment":42}`)}, nil
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(t, secret, run.ID, time.Now(), mustJSON(t, run)))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if got.ID != run.ID || got.Agent != run.Agent || got.Kind != run.Kind || !got.CreatedAt.Equal(run.CreatedAt) || !bytes.Equal(got.Event, run.Event) {
		t.Errorf("fn got %+v, want %+v", got, run)
	}
	var res agent.Result
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.RunID != run.ID || res.Agent != agentID || res.Status != agent.StatusSucceeded || string(res.Output) != `{"comment":42}` || res.FinishedAt.IsZero() {
		t.Errorf("result %+v", res)
	}
}

func TestHTTPHandlerFailedResult(t *testing.T) {
	secret, _ := agent.NewSecret()
	run := testRun("run_1")
	h := agent.NewHTTPHandler(secret, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		return agent.Result{Error: "repository archived"}, nil
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(t, secret, run.ID, time.Now(), mustJSON(t, run)))
	var res agent.Result
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK || res.Status != agent.StatusFailed || res.Error != "repository archived" {
		t.Fatalf("status %d, result %+v", w.Code, res)
	}
}

func TestHTTPHandlerRefuses(t *testing.T) {
	secret, _ := agent.NewSecret()
	other, _ := agent.NewSecret()
	run := testRun("run_1")
	body := mustJSON(t, run)
	now := time.Now()

	tests := []struct {
		name string
		req  func() *http.Request
		want int
	}{
		{"unsigned", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		}, http.StatusUnauthorized},
		{"unsigned garbage is not parsed", func() *http.Request {
			return httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{{{"))
		}, http.StatusUnauthorized},
		{"wrong secret", func() *http.Request {
			return signedRequest(t, other, run.ID, now, body)
		}, http.StatusUnauthorized},
		{"tampered body", func() *http.Request {
			r := signedRequest(t, secret, run.ID, now, body)
			r.Body = http.NoBody
			tampered := bytes.Replace(body, []byte("new_issue"), []byte("new_issuE"), 1)
			r2 := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(tampered))
			r2.Header = r.Header
			return r2
		}, http.StatusUnauthorized},
		{"stale", func() *http.Request {
			return signedRequest(t, secret, run.ID, now.Add(-10*time.Minute), body)
		}, http.StatusUnauthorized},
		{"from the future", func() *http.Request {
			return signedRequest(t, secret, run.ID, now.Add(10*time.Minute), body)
		}, http.StatusUnauthorized},
		{"signed, not a run", func() *http.Request {
			return signedRequest(t, secret, "run_1", now, []byte("[1,2]"))
		}, http.StatusBadRequest},
		{"signed, id is not the webhook-id", func() *http.Request {
			return signedRequest(t, secret, "run_2", now, body)
		}, http.StatusBadRequest},
		{"GET", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/", nil)
		}, http.StatusMethodNotAllowed},
		{"too large", func() *http.Request {
			big := make([]byte, agent.MaxRunBytes+1)
			return signedRequest(t, secret, run.ID, now, big)
		}, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			h := agent.NewHTTPHandler(secret, func(context.Context, agent.Run) (agent.Result, error) {
				calls.Add(1)
				return agent.Result{}, nil
			})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, tt.req())
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if calls.Load() != 0 {
				t.Fatal("fn was called")
			}
			var e struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("error body %q: %v", w.Body, err)
			}
		})
	}
}

func TestHTTPHandlerFnErrorIs500(t *testing.T) {
	secret, _ := agent.NewSecret()
	run := testRun("run_1")
	h := agent.NewHTTPHandler(secret, func(context.Context, agent.Run) (agent.Result, error) {
		return agent.Result{}, errors.New("upstream down")
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(t, secret, run.ID, time.Now(), mustJSON(t, run)))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "upstream down") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

func TestHTTPHandlerInvalidResultIs500(t *testing.T) {
	secret, _ := agent.NewSecret()
	run := testRun("run_1")
	h := agent.NewHTTPHandler(secret, func(context.Context, agent.Run) (agent.Result, error) {
		return agent.Result{Output: json.RawMessage("{not json")}, nil
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(t, secret, run.ID, time.Now(), mustJSON(t, run)))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

func TestHTTPHandlerInvalidSecretIs500(t *testing.T) {
	secret, _ := agent.NewSecret()
	run := testRun("run_1")
	h := agent.NewHTTPHandler("whsec_%%%", func(context.Context, agent.Run) (agent.Result, error) {
		t.Error("fn called")
		return agent.Result{}, nil
	})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signedRequest(t, secret, run.ID, time.Now(), mustJSON(t, run)))
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "%%%") {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
}
