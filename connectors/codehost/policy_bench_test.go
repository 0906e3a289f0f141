package codehost_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// BenchmarkStepOverhead runs Get Issue against the in-process fake: a bare
// HTTP GET for scale, the step without the policy, and the step under the
// policy (whose repeated GETs are ETag hits).
func BenchmarkStepOverhead(b *testing.B) {
	h := newHarness(b, fakecodehost.Options{RateLimit: 1 << 30, LogLimit: 1}, codehost.ToolkitOptions{})
	in := json.RawMessage(`{"owner":"octocat","repo":"hello-world","issue_number":1}`)
	step := h.steps["codehost.get_issue"]
	ctx := b.Context()
	b.Run("raw_http_get", func(b *testing.B) {
		c := &http.Client{Transport: connectortest.Bearer{Token: token, Base: http.DefaultTransport}}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/repos/octocat/hello-world/issues/1", nil)
			req.Header.Set("User-Agent", "bench")
			res, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	b.Run("step_without_policy", func(b *testing.B) {
		env := connectors.Env{HTTP: &http.Client{Transport: uaOnly{connectortest.Bearer{Token: token, Base: http.DefaultTransport}}}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := step.Run(ctx, env, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step_with_policy", func(b *testing.B) {
		env := h.env(token)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := step.Run(ctx, env, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// uaOnly adds the User-Agent GitHub requires, and nothing else.
type uaOnly struct{ base http.RoundTripper }

func (u uaOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("User-Agent", "bench")
	return u.base.RoundTrip(r)
}

// BenchmarkETagSaving polls like an agent: each round reads four issues
// and the repository; every fifth round one issue changes. It reports the
// fraction of GETs served from the ETag cache and the fraction of requests
// that cost no rate limit budget.
func BenchmarkETagSaving(b *testing.B) {
	h := newHarness(b, fakecodehost.Options{RateLimit: 1 << 30, LogLimit: 1}, codehost.ToolkitOptions{})
	ctx := b.Context()
	env := h.env(token)
	run := func(id, in string) {
		if _, err := h.steps["codehost."+id].Run(ctx, env, json.RawMessage(in)); err != nil {
			b.Fatal(err)
		}
	}
	round := 0
	b.ReportAllocs()
	for b.Loop() {
		for n := 1; n <= 4; n++ {
			run("get_issue", fmt.Sprintf(`{"owner":"octocat","repo":"hello-world","issue_number":%d}`, n))
		}
		run("get_repository_info", `{"owner":"octocat","repo":"hello-world"}`)
		if round%5 == 4 {
			run("update_issue", fmt.Sprintf(`{"owner":"octocat","repo":"hello-world","issue_number":%d,"body":"round %d"}`, round/5%4+1, round))
		}
		round++
	}
	st := h.policy.CacheStats()
	limit, remaining, _ := h.fake.RateLimit(token, fakecodehost.ResourceCore)
	sent := h.fake.RequestCount()
	if st.Lookups > 0 && sent > 0 {
		b.ReportMetric(float64(st.Hits)/float64(st.Lookups), "cached-GET-frac")
		b.ReportMetric(1-float64(limit-remaining)/float64(sent), "budget-saved-frac")
	}
}
