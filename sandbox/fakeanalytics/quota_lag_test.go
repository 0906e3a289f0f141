package fakeanalytics

import (
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// newClockedFake is newFake on a settable clock, with options.
func newClockedFake(t *testing.T, o Options) (*Server, string, Property, *testenv.Clock) {
	t.Helper()
	clk := testenv.NewClock(now)
	o.Now = clk.Now
	s := New(o)
	u := s.Start()
	t.Cleanup(s.Close)
	p := s.AddProperty(Property{Account: "7", DisplayName: "Web"})
	s.Grant(DefaultUser, "properties/"+p.ID, RoleViewer)
	return s, u, p, clk
}

// The 5xx answers a property got this hour count against its
// serverErrorsPerProjectPerHour; when they are spent, every report on the
// property is refused with 429 until the hour ends.
func TestServerErrorsPerProjectPerHour(t *testing.T) {
	s, u, p, clk := newClockedFake(t, Options{})
	body := `{"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"returnPropertyQuota":true}`
	report := u + "/v1beta/properties/" + p.ID + ":runReport"
	s.FailNext(RouteRunReport, 3, Failure{Code: 500})
	for range 3 {
		if code, m := do(t, "POST", report, "t", body); code != 500 {
			t.Fatalf("injected failure: %d %v", code, m)
		}
	}
	code, m := do(t, "POST", report, "t", body)
	q := m["propertyQuota"].(map[string]any)["serverErrorsPerProjectPerHour"].(map[string]any)
	if code != 200 || q["remaining"] != 7.0 {
		t.Errorf("after three 500s: %d %v", code, q)
	}

	s.FailNext(RouteRunReport, 8, Failure{})
	for range 7 {
		if code, _ := do(t, "POST", report, "t", body); code != 503 {
			t.Fatalf("injected failure: %d", code)
		}
	}
	code, m = do(t, "POST", report, "t", body)
	e, _ := m["error"].(map[string]any)
	if code != 429 || e["status"] != "RESOURCE_EXHAUSTED" || !strings.Contains(e["message"].(string), "server errors per project per hour") {
		t.Errorf("eleventh: %d %v", code, m)
	}
	if use := s.Usage(p.ID, Core); use.ServerErrorsThisHour != 10 {
		t.Errorf("usage %+v", use)
	}
	// Realtime is its own category.
	if code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runRealtimeReport", "t", `{"metrics":[{"name":"activeUsers"}]}`); code != 200 {
		t.Errorf("realtime: %d %v", code, m)
	}
	// The eighth injected failure was not reached: the quota refuses
	// first. A new hour brings the quota back.
	clk.Set(now.Truncate(time.Hour).Add(time.Hour))
	if code, m := do(t, "POST", report, "t", body); code != 503 {
		t.Errorf("after the hour: %d %v, want the injected 503", code, m)
	}
	code, m = do(t, "POST", report, "t", body)
	q = m["propertyQuota"].(map[string]any)["serverErrorsPerProjectPerHour"].(map[string]any)
	if code != 200 || q["remaining"] != 9.0 {
		t.Errorf("after the hour: %d %v", code, q)
	}
}

func TestBatchRunReports(t *testing.T) {
	s, u, p, _ := newClockedFake(t, Options{})
	s.SeedReportData(p.ID, 3)
	batch := u + "/v1beta/properties/" + p.ID + ":batchRunReports"
	one := `{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"2daysAgo","endDate":"today"}]}`
	code, m := do(t, "POST", batch, "t", `{"requests":[`+one+`,
		{"property":"properties/`+p.ID+`","metrics":[{"name":"sessions"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"returnPropertyQuota":true}]}`)
	if code != 200 || m["kind"] != "analyticsData#batchRunReports" {
		t.Fatalf("batch: %d %v", code, m)
	}
	reports := m["reports"].([]any)
	if len(reports) != 2 {
		t.Fatalf("%d reports", len(reports))
	}
	first, second := reports[0].(map[string]any), reports[1].(map[string]any)
	if first["rowCount"] != 4.0 || first["kind"] != "analyticsData#runReport" || first["propertyQuota"] != nil {
		t.Errorf("first report %v", first)
	}
	if second["propertyQuota"] == nil || len(second["rows"].([]any)) != 1 {
		t.Errorf("second report %v", second)
	}
	if use := s.Usage(p.ID, Core); use.TokensToday != 3 { // 2 + 1 tokens
		t.Errorf("usage %+v, want each report charged", use)
	}

	six := strings.Repeat(one+",", 5) + one
	other := s.AddProperty(Property{Account: "7"})
	for name, body := range map[string]string{
		"six requests":        `{"requests":[` + six + `]}`,
		"none":                `{"requests":[]}`,
		"another property":    `{"requests":[{"property":"properties/` + other.ID + `","metrics":[{"name":"sessions"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}]}`,
		"a bad report":        `{"requests":[{"metrics":[{"name":"nope"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}]}`,
		"not a batch request": `{"metrics":[{"name":"sessions"}]}`,
	} {
		code, m := do(t, "POST", batch, "t", body)
		if e, _ := m["error"].(map[string]any); code != 400 || e["status"] != "INVALID_ARGUMENT" {
			t.Errorf("%s: %d %v", name, code, m)
		}
	}
	if use := s.Usage(p.ID, Core); use.TokensToday != 3 {
		t.Errorf("refused batches were charged: %+v", use)
	}
}

// An event collected now shows in realtime at once and in runReport only
// after the processing delay.
func TestProcessingDelay(t *testing.T) {
	s, u, p, clk := newClockedFake(t, Options{ProcessingDelay: 24 * time.Hour})
	s.CollectEvent(p.ID, "sign_up", 3)
	core := `{"dimensions":[{"name":"eventName"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"30daysAgo","endDate":"today"}]}`
	rt := `{"dimensions":[{"name":"eventName"}],"metrics":[{"name":"eventCount"}]}`
	count := func(method, body string) any {
		t.Helper()
		code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":"+method, "t", body)
		if code != 200 {
			t.Fatalf("%s: %d %v", method, code, m)
		}
		rows, _ := m["rows"].([]any)
		if len(rows) == 0 {
			return nil
		}
		return rows[0].(map[string]any)["metricValues"].([]any)[0].(map[string]any)["value"]
	}
	clk.Advance(10 * time.Minute)
	if got := count("runReport", core); got != nil {
		t.Errorf("runReport before processing: %v", got)
	}
	if got := count("runRealtimeReport", rt); got != "3" {
		t.Errorf("realtime: %v, want 3", got)
	}
	clk.Advance(24 * time.Hour)
	if got := count("runReport", core); got != "3" {
		t.Errorf("runReport after processing: %v, want 3", got)
	}
	if got := count("runRealtimeReport", rt); got != nil {
		t.Errorf("realtime a day later: %v", got)
	}
}

// Without Options.ProcessingDelay a collected event is reportable at once,
// as before the option existed.
func TestCollectEventWithoutDelay(t *testing.T) {
	s, u, p, _ := newClockedFake(t, Options{})
	s.CollectEvent(p.ID, "sign_up", 2)
	code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "t",
		`{"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}`)
	if code != 200 || m["rowCount"] != 1.0 {
		t.Errorf("%d %v", code, m)
	}
}

func TestScopes(t *testing.T) {
	s, u, p, _ := newClockedFake(t, Options{Scopes: func(tok string) []string {
		if tok == "reader" {
			return []string{ScopeReadonly}
		}
		return nil
	}})
	s.Grant(DefaultUser, "properties/"+p.ID, RoleEditor)
	for _, tc := range []struct {
		method, path, token, body string
		code                      int
	}{
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "reader", `{"metrics":[{"name":"sessions"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}`, 200},
		{"GET", "/v1beta/properties/" + p.ID + "/keyEvents", "reader", ``, 200},
		{"POST", "/v1beta/properties/" + p.ID + "/keyEvents", "reader", `{"eventName":"x","countingMethod":"ONCE_PER_EVENT"}`, 403},
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "none", `{}`, 403},
	} {
		code, m := do(t, tc.method, u+tc.path, tc.token, tc.body)
		if code != tc.code {
			t.Errorf("%s %s as %s: %d %v, want %d", tc.method, tc.path, tc.token, code, m, tc.code)
			continue
		}
		if code != 403 {
			continue
		}
		e := m["error"].(map[string]any)
		d, _ := e["details"].([]any)
		if e["status"] != "PERMISSION_DENIED" || e["message"] != "Request had insufficient authentication scopes." ||
			len(d) != 1 || d[0].(map[string]any)["reason"] != "ACCESS_TOKEN_SCOPE_INSUFFICIENT" {
			t.Errorf("%s %s: %v", tc.method, tc.path, m)
		}
	}
}
