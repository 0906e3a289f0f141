package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
)

func TestRateLimited429(t *testing.T) {
	h := newHarness(t)
	h.fake.SetRateLimit(fakedeploy.RouteListDeployments, 0, time.Minute)
	_, err := h.run(t, StepListDeployments, team, `{}`)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.RetryAfter != time.Minute || !ce.Retryable || ce.Status != 429 {
		t.Errorf("error = %+v, want RetryAfter 1m from Retry-After", ce)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 1 {
		t.Errorf("a 429 was retried: %d requests", n)
	}
	// The bucket is now known to be spent: the next call is refused here.
	h.clock.Advance(20 * time.Second)
	_, err = h.run(t, StepListDeployments, team, `{}`)
	ce = connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.RetryAfter != 40*time.Second || ce.Status != 0 {
		t.Errorf("refusal = %+v, want RetryAfter 40s and no upstream status", ce)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 1 {
		t.Errorf("the refused call reached the fake: %d requests", n)
	}
}

func TestRateLimitKnownSpentIsRefusedBeforeSending(t *testing.T) {
	h := newHarness(t)
	p := linkedProject(h, fakedeploy.DefaultTeamID)
	d := h.fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID, State: fakedeploy.StateReady})
	h.fake.SetRateLimit(fakedeploy.RouteListDeployments, 2, time.Minute)

	for range 2 {
		if _, err := h.run(t, StepListDeployments, team, `{}`); err != nil {
			t.Fatal(err)
		}
	}
	_, err := h.run(t, StepListDeployments, team, `{}`)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.RetryAfter != time.Minute {
		t.Errorf("RetryAfter = %v, want the reset one minute on", ce.RetryAfter)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 2 {
		t.Fatalf("the fake saw %d list requests, want 2", n)
	}
	// Buckets are per endpoint and per account.
	_, err = h.run(t, StepCancelDeployment, team, `{"id":"`+d.ID+`"}`)
	connectortest.WantCode(t, err, connectors.CodeValidation) // GET /v13/deployments/{id} has its own bucket
	if _, err := h.run(t, StepListDeployments, personal, `{}`); err != nil {
		t.Errorf("another account shares the bucket: %v", err)
	}
	// After the reset the request goes out again.
	h.clock.Advance(time.Minute)
	if _, err := h.run(t, StepListDeployments, team, `{}`); err != nil {
		t.Errorf("after the reset: %v", err)
	}
}

func TestRetriesOn503ForReads(t *testing.T) {
	h := newHarness(t)
	h.fake.FailNext(fakedeploy.RouteListDeployments, 2, fakedeploy.Failure{Status: 503})
	if _, err := h.run(t, StepListDeployments, personal, `{}`); err != nil {
		t.Fatalf("two 503s then success: %v", err)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	h.fake.ClearRequests()
	h.fake.FailNext(fakedeploy.RouteListDeployments, 3, fakedeploy.Failure{Status: 502, Empty: true})
	_, err := h.run(t, StepListDeployments, personal, `{}`)
	ce := connectortest.WantCode(t, err, connectors.CodeUpstream)
	if ce.Status != 502 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 3 {
		t.Errorf("%d attempts, want at most 3", n)
	}
}

func TestNoRetryForCreate(t *testing.T) {
	h := newHarness(t)
	linkedProject(h, fakedeploy.DefaultUserID)
	h.fake.FailNext(fakedeploy.RouteCreateDeployment, 1, fakedeploy.Failure{Status: 503})
	_, err := h.run(t, StepCreateDeployment, personal, `{"project":"web"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeUpstream); ce.Status != 503 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteCreateDeployment)); n != 1 {
		t.Errorf("a POST was sent %d times", n)
	}
	if n := len(h.fake.Deployments()); n != 0 {
		t.Errorf("%d deployments", n)
	}
}

func TestRetryStopsAtTheDeadline(t *testing.T) {
	h := newHarness(t)
	tk := NewToolkit(ToolkitOptions{APIBaseURL: h.fake.Start(), Now: h.clock.Now, retryBase: time.Hour})
	h.fake.FailNext(fakedeploy.RouteListDeployments, 1, fakedeploy.Failure{Status: 503})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second) // every wait is at least 2 s
	defer cancel()
	env := connectors.Env{HTTP: &http.Client{Transport: tk.Wrap("a", connectortest.Bearer{Token: "t", Base: http.DefaultTransport})}, Account: personal}
	step := tk.Steps[1]
	_, err := step.Run(ctx, env, json.RawMessage(`{}`))
	if ce := connectortest.WantCode(t, err, connectors.CodeUpstream); ce.Status != 503 {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 1 {
		t.Errorf("%d attempts: a retry would have waited past the deadline", n)
	}
}

func TestBucketKey(t *testing.T) {
	for path, want := range map[string]string{
		"/v6/deployments":                 "GET /v6/deployments",
		"/v13/deployments/dpl_1":          "GET /v13/deployments/{}",
		"/v12/deployments/dpl_1/cancel":   "GET /v12/deployments/{}/cancel",
		"/v9/projects/web/env/env_1":      "GET /v9/projects/{}/env/{}",
		"/v2/teams/team_1/members":        "GET /v2/teams/{}/members",
		"/v9/projects/web/domains/a.com/": "GET /v9/projects/{}/domains/{}",
	} {
		if got := bucketKey(http.MethodGet, path); got != want {
			t.Errorf("bucketKey(%s) = %s, want %s", path, got, want)
		}
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("X-RateLimit-Reset", "1772445630") // 30 s after now
	e := stepAPIError("list deployments", 429, h, []byte(`{"error":{"code":"rate_limited","message":"slow down"}}`), now)
	if e.Code != connectors.CodeRateLimited || e.RetryAfter != 30*time.Second {
		t.Errorf("from reset: %+v", e)
	}
	e = stepAPIError("x", 429, http.Header{}, []byte(`{"error":{"code":"rate_limited","limit":{"resetMs":1772445605000}}}`), now)
	if e.RetryAfter != 5*time.Second {
		t.Errorf("from body: %v", e.RetryAfter)
	}
	e = stepAPIError("x", 429, http.Header{}, nil, now)
	if e.RetryAfter != time.Second {
		t.Errorf("default: %v", e.RetryAfter)
	}
	e = stepAPIError("x", 500, http.Header{}, nil, now)
	if e.Code != connectors.CodeUpstream || !e.Retryable || e.Message != "x: vercel answered HTTP 500" {
		t.Errorf("empty 500: %+v", e)
	}
	e = stepAPIError("x", 401, http.Header{}, nil, now)
	if e.Code != connectors.CodeNeedsReauth {
		t.Errorf("401: %+v", e)
	}
}
