package analytics

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

// A read is retried once: every 5xx spends one of the property's ten
// serverErrorsPerProjectPerHour.
func TestRetriesOn503ForReadsOnce(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	h.fake.FailNext(fakeanalytics.RouteRunReport, 1, fakeanalytics.Failure{})
	if err := h.report(t); err != nil {
		t.Fatalf("a 503 then success: %v", err)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}

	h.fake.FailNext(fakeanalytics.RouteGetProperty, 1, fakeanalytics.Failure{Code: 500})
	if _, err := h.run(t, StepGetProperty, `{"property":"properties/`+h.prop+`"}`); err != nil {
		t.Errorf("GET after a 500: %v", err)
	}

	h.fake.ClearRequests()
	h.fake.FailNext(fakeanalytics.RouteRunReport, 2, fakeanalytics.Failure{})
	err := h.report(t)
	if ce := connectortest.WantCode(t, err, connectors.CodeUpstream); ce.Status != 503 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 2 {
		t.Errorf("%d attempts, want 2 at most", n)
	}
}

// A run of 5xx answers: each call sends at most two attempts, so five
// calls spend the ten server errors an hour allows; the fake then answers
// 429 RESOURCE_EXHAUSTED, and the connector holds further calls until the
// hour ends.
func TestServerErrorsSpendTheHourlyQuota(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	h.fake.FailNext(fakeanalytics.RouteRunReport, 100, fakeanalytics.Failure{})
	for i := range 5 {
		before := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport))
		err := h.report(t)
		if ce := connectortest.WantCode(t, err, connectors.CodeUpstream); ce.Status != 503 {
			t.Errorf("call %d: %+v", i, ce)
		}
		if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)) - before; n > 2 {
			t.Errorf("call %d sent %d attempts, want at most 2", i, n)
		}
	}
	if u := h.fake.Usage(h.prop, fakeanalytics.Core); u.ServerErrorsThisHour != 10 {
		t.Fatalf("the fake gave %d server errors, want the 10 an hour allows", u.ServerErrorsThisHour)
	}
	err := h.report(t)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.Status != 429 || ce.RetryAfter != 40*time.Minute || !strings.Contains(ce.Message, "server errors") {
		t.Errorf("spent quota: %+v", ce)
	}
	sent := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport))
	err = h.report(t)
	if ce := connectortest.WantCode(t, err, connectors.CodeRateLimited); ce.Status != 0 || !strings.Contains(ce.Message, "server errors per project per hour") {
		t.Errorf("after the 429: %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != sent {
		t.Errorf("a call was sent while the quota is known spent")
	}
}

// batchRunReports is a read: the policy retries it like runReport.
func TestBatchRunReportsThroughThePolicy(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	h.fake.FailNext(fakeanalytics.RouteBatchRunReports, 1, fakeanalytics.Failure{})
	body := `{"requests":[
		{"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"30daysAgo","endDate":"today"}]},
		{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"30daysAgo","endDate":"today"}],"returnPropertyQuota":true}]}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.kit.data+"/v1beta/properties/"+h.prop+":batchRunReports", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.env().HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Reports []json.RawMessage `json:"reports"`
		Kind    string            `json:"kind"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(out.Reports) != 2 || out.Kind != "analyticsData#batchRunReports" {
		t.Errorf("batch = %d %+v", resp.StatusCode, out)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteBatchRunReports)); n != 2 {
		t.Errorf("%d attempts, want 2 (a 503, then the retry)", n)
	}
}

func TestNoRetryForWrites(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakeanalytics.DefaultUser, "accounts/100", fakeanalytics.RoleAdministrator)
	h.fake.FailNext(fakeanalytics.RouteCreateProperty, 1, fakeanalytics.Failure{})
	_, err := h.run(t, StepCreateProperties, `{"display_name":"Shop","time_zone":"UTC","currency_code":"USD"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeUpstream); ce.Status != 503 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteCreateProperty)); n != 1 {
		t.Errorf("a create was sent %d times", n)
	}
}

func TestDataCall(t *testing.T) {
	p := &policy{}
	p.data, _ = url.Parse("https://analyticsdata.googleapis.com")
	for raw, want := range map[string][2]string{
		"https://analyticsdata.googleapis.com/v1beta/properties/12:runReport":         {"12", "runReport"},
		"https://analyticsdata.googleapis.com/v1beta/properties/12:runRealtimeReport": {"12", "runRealtimeReport"},
		"https://analyticsdata.googleapis.com/v1beta/properties/0/metadata":           {"0", "metadata"},
		"https://analyticsdata.googleapis.com/v1alpha/properties/3:runFunnelReport":   {"3", "runFunnelReport"},
		"https://analyticsadmin.googleapis.com/v1beta/properties/12:runReport":        {},
		"https://analyticsdata.googleapis.com/v1beta/properties/12/keyEvents":         {},
		"https://analyticsdata.googleapis.com/v1beta/properties/x:runReport":          {},
	} {
		u, _ := url.Parse(raw)
		prop, method, ok := p.dataCall(u)
		if ok != (want[0] != "") || prop != want[0] || method != want[1] {
			t.Errorf("dataCall(%s) = %q %q %v, want %v", raw, prop, method, ok, want)
		}
	}
}
