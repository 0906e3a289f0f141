package apicall

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/analytics"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/connectors/deploy"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
)

// These tests run the API Call steps as the platform does: under their
// connector's policy (Toolkit.Wrap) against the in-repo fakes, so that the
// policy's typed refusals reach the step.

var policyStart = time.Date(2026, 3, 2, 10, 20, 0, 0, time.UTC)

// policyEnv is an Env whose client runs under wrap, as steps.Runner builds
// it.
func policyEnv(wrap func(string, http.RoundTripper) http.RoundTripper, acc connectors.AccountInfo) connectors.Env {
	return connectors.Env{
		HTTP: &http.Client{
			Transport:     wrap(acc.ID, connectortest.Bearer{Token: testToken, Base: http.DefaultTransport}),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Account: acc,
	}
}

func githubUnderPolicy(t *testing.T) (*fakecodehost.Server, connectors.Step, connectors.Env) {
	t.Helper()
	clk := testenv.NewClock(policyStart)
	fake := fakecodehost.New(fakecodehost.Options{Now: clk.Now})
	u := fake.Start()
	t.Cleanup(fake.Close)
	p, err := codehost.NewPolicy(codehost.ToolkitOptions{APIBaseURL: u, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	env := policyEnv(p.Wrap, connectors.AccountInfo{ID: "acc_gh", Login: "octocat"})
	return fake, CodeHost(CodeHostOptions{BaseURL: u}), env
}

func TestCodeHostPolicyRateLimitsKeepTheirType(t *testing.T) {
	fake, step, env := githubUnderPolicy(t)
	const route = fakecodehost.Route("GET /repos/{owner}/{repo}")

	// A secondary rate limit: GitHub's 403 with Retry-After, which the
	// policy classifies.
	if err := fake.SecondaryLimitNext(route, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, step, env, chInput("GET", "/repos/octocat/hello-world"))
	wantCode(t, "secondary limit", err, connectors.CodeRateLimited)
	if err.RetryAfter != 30*time.Second || !err.Retryable || err.Status != http.StatusForbidden {
		t.Errorf("secondary limit: %+v; want RetryAfter 30s, retryable, status 403", err)
	}
	if !strings.Contains(err.Message, "codehost API") || !strings.Contains(err.Message, "secondary rate limit") {
		t.Errorf("secondary limit: message %q lacks the step's context or the policy's reason", err.Message)
	}

	// A spent primary budget: the answer, then a refusal before sending.
	fake.SetRemaining(testToken, fakecodehost.ResourceCore, 0)
	_, err = run(t, step, env, chInput("GET", "/repos/octocat/hello-world"))
	wantCode(t, "primary limit", err, connectors.CodeRateLimited)
	if err.RetryAfter <= 0 || err.Status != http.StatusForbidden {
		t.Errorf("primary limit: %+v; want a RetryAfter and status 403", err)
	}
	sent := len(fake.RequestsTo(route))
	_, err = run(t, step, env, chInput("GET", "/repos/octocat/hello-world"))
	wantCode(t, "budget known spent", err, connectors.CodeRateLimited)
	if err.RetryAfter <= 0 || err.Status != 0 {
		t.Errorf("budget known spent: %+v; want a RetryAfter and no upstream status", err)
	}
	if n := len(fake.RequestsTo(route)); n != sent {
		t.Errorf("the refused call reached the fake: %d requests, want %d", n, sent)
	}
}

// A 403 that is no rate limit is the caller's answer: the API Call step
// returns it as output, whole, although the policy gives named steps a
// CodePermissionDenied error for it.
func TestCodeHostPolicyPermissionRefusalIsOutput(t *testing.T) {
	fake, step, env := githubUnderPolicy(t)
	if err := fake.FailNext("GET /repos/{owner}/{repo}", 1, http.StatusForbidden); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, step, env, chInput("GET", "/repos/octocat/hello-world"))
	if err != nil {
		t.Fatalf("permission refusal: %v; want it as output", err)
	}
	if out.Status != http.StatusForbidden {
		t.Fatalf("status %d; want 403", out.Status)
	}
	var body struct {
		Message string `json:"message"`
	}
	raw, _ := out.Body.(json.RawMessage)
	if json.Unmarshal(raw, &body) != nil || body.Message != "Forbidden" {
		t.Errorf("body %s; want GitHub's error body", raw)
	}
	if out.Headers["x-ratelimit-remaining"] == "" {
		t.Errorf("headers %v lack the rate limit headers of the answer", out.Headers)
	}
}

func TestDeployPolicyBucketRefusalKeepsItsType(t *testing.T) {
	clk := testenv.NewClock(policyStart)
	fake := fakedeploy.New(fakedeploy.Options{Now: clk.Now})
	u := fake.Start()
	t.Cleanup(fake.Close)
	tk := deploy.NewToolkit(deploy.ToolkitOptions{APIBaseURL: u, Now: clk.Now})
	env := policyEnv(tk.Wrap, connectors.AccountInfo{ID: "acc_v", Metadata: map[string]string{}})
	step := Deploy(DeployOptions{BaseURL: u})
	in := map[string]any{"method": "GET", "path": "/v6/deployments"}

	fake.SetRateLimit(fakedeploy.RouteListDeployments, 1, time.Minute)
	out, err := run(t, step, env, in)
	if err != nil || out.Status != http.StatusOK {
		t.Fatalf("first call: %v, status %d", err, out.Status)
	}
	// The answer said the bucket is spent: the policy refuses unsent.
	clk.Advance(15 * time.Second)
	_, err = run(t, step, env, in)
	wantCode(t, "bucket spent", err, connectors.CodeRateLimited)
	if err.RetryAfter != 45*time.Second || !err.Retryable {
		t.Errorf("bucket spent: %+v; want RetryAfter 45s to the reset, retryable", err)
	}
	if n := len(fake.RequestsTo(fakedeploy.RouteListDeployments)); n != 1 {
		t.Errorf("the refused call reached the fake: %d requests, want 1", n)
	}
}

func TestAnalyticsPolicyQuotaRefusalKeepsItsType(t *testing.T) {
	clk := testenv.NewClock(policyStart)
	fake := fakeanalytics.New(fakeanalytics.Options{Now: clk.Now})
	t.Cleanup(fake.Close)
	base := fake.Start() // serves both the Data and the Admin API
	fake.AddAccount(fakeanalytics.Account{ID: "100", DisplayName: "Acme"})
	p := fake.AddProperty(fakeanalytics.Property{Account: "100", DisplayName: "Web", TimeZone: "Europe/Berlin"})
	fake.Grant(fakeanalytics.DefaultUser, "properties/"+p.ID, fakeanalytics.RoleViewer)
	l := fakeanalytics.DefaultLimits(fakeanalytics.Core)
	l.TokensPerHour = 0
	fake.SetLimits(p.ID, fakeanalytics.Core, l)

	tk := analytics.NewToolkit(analytics.ToolkitOptions{DataBaseURL: base, AdminBaseURL: base, Now: clk.Now})
	env := policyEnv(tk.Wrap, connectors.AccountInfo{ID: "acc_ga", Metadata: map[string]string{}})
	step := Analytics(AnalyticsOptions{DataBaseURL: base, AdminBaseURL: base})
	in := map[string]any{"method": "POST", "api": "data", "endpoint": "v1beta/properties/" + p.ID + ":runReport",
		"body": map[string]any{"metrics": []any{map[string]any{"name": "eventCount"}}, "dateRanges": []any{map[string]any{"startDate": "7daysAgo", "endDate": "today"}}}}

	// Google's 429 RESOURCE_EXHAUSTED: the step's own rate limit error.
	_, err := run(t, step, env, in)
	wantCode(t, "quota answer", err, connectors.CodeRateLimited)
	// The policy remembers the spent hourly quota and refuses unsent.
	_, err = run(t, step, env, in)
	wantCode(t, "quota known spent", err, connectors.CodeRateLimited)
	if err.RetryAfter != 40*time.Minute || !err.Retryable || !strings.Contains(err.Message, "tokens per hour") {
		t.Errorf("quota known spent: %+v; want RetryAfter 40m to the next hour", err)
	}
	if n := len(fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 1 {
		t.Errorf("the refused call reached the fake: %d requests, want 1", n)
	}
}
