package analytics

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

// BenchmarkRunReport measures the Run Reports step against the fake: a
// 7-day report of three metrics by date and country (28 rows) over a
// 30-day seeded table, through the policy (semaphore, quota tracking) and
// a loopback HTTP round trip. Most of the time is the fake and HTTP; the
// step's own share shows in allocs/op.
func BenchmarkRunReport(b *testing.B) {
	h := newHarness(b)
	h.fake.SeedReportData(h.prop, 30)
	l := fakeanalytics.DefaultLimits(fakeanalytics.Core)
	l.TokensPerDay, l.TokensPerHour, l.TokensPerProjectPerHour = 1<<50, 1<<50, 1<<50
	h.fake.SetLimits(h.prop, fakeanalytics.Core, l)
	step := h.step(b, StepRunReports)
	env := h.env()
	input := json.RawMessage(`{"property":"properties/` + h.prop + `","metrics":["activeUsers","eventCount","screenPageViews"],
		"dimensions":["date","country"],"date_ranges":[{"start_date":"6daysAgo","end_date":"today"}]}`)
	ctx := context.Background()
	out, err := step.Run(ctx, env, input)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(out.(*Report).Rows); n != 28 {
		b.Fatalf("%d rows, want 28", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := step.Run(ctx, env, input); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkToReport measures only the step's shaping of a decoded answer.
func BenchmarkToReport(b *testing.B) {
	var resp gaReportResponse
	raw := `{"dimensionHeaders":[{"name":"date"},{"name":"country"}],"metricHeaders":[{"name":"activeUsers","type":"TYPE_INTEGER"}],"rows":[`
	for i := range 100 {
		if i > 0 {
			raw += ","
		}
		raw += `{"dimensionValues":[{"value":"20260301"},{"value":"Germany"}],"metricValues":[{"value":"1234"}]}`
	}
	raw += `],"rowCount":100}`
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toReport("1", &resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunReportCanned measures the step's own overhead (input
// decoding, policy, HTTP client, answer decoding and shaping) against a
// server that answers a canned 28-row report at once.
func BenchmarkRunReportCanned(b *testing.B) {
	body := []byte(`{"dimensionHeaders":[{"name":"date"},{"name":"country"}],"metricHeaders":[{"name":"activeUsers","type":"TYPE_INTEGER"},{"name":"eventCount","type":"TYPE_INTEGER"},{"name":"screenPageViews","type":"TYPE_INTEGER"}],"rows":[`)
	for i := range 28 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"dimensionValues":[{"value":"2026030`+string(rune('1'+i%7))+`"},{"value":"Germany"}],"metricValues":[{"value":"12"},{"value":"345"},{"value":"67"}]}`...)
	}
	body = append(body, `],"rowCount":28,"metadata":{"currencyCode":"USD","timeZone":"America/Los_Angeles"},"propertyQuota":{"tokensPerDay":{"consumed":3,"remaining":199997},"tokensPerHour":{"consumed":3,"remaining":39997}},"kind":"analyticsData#runReport"}`...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	kit := newToolkit(ToolkitOptions{DataBaseURL: srv.URL, AdminBaseURL: srv.URL})
	tk := kit.steps()
	env := connectors.Env{HTTP: &http.Client{Transport: kit.policy.wrap("a", connectortest.Bearer{Token: "t", Base: http.DefaultTransport})}, Account: account}
	input := json.RawMessage(`{"property":"properties/1","metrics":["activeUsers","eventCount","screenPageViews"],
		"dimensions":["date","country"],"date_ranges":[{"start_date":"6daysAgo","end_date":"today"}]}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tk[0].Run(ctx, env, input); err != nil {
			b.Fatal(err)
		}
	}
}
