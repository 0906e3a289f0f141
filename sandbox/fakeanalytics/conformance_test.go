package fakeanalytics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/analytics"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/discovery"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

// The discovery documents the fake and the connector are held to: the
// v1beta Data and Admin APIs the connector calls.
const (
	dataDoc  = "analyticsdata/v1beta/analyticsdata-api.json"
	adminDoc = "analyticsadmin/v1beta/analyticsadmin-api.json"
)

// conformance is a fake with data, a user who administers its account,
// and Google's documents for both APIs.
type conformance struct {
	fake *fakeanalytics.Server
	url  string
	prop string
	data *discovery.Doc
	adm  *discovery.Doc
}

func newConformance(t *testing.T) *conformance {
	t.Helper()
	docs := discovery.Load(t, dataDoc, adminDoc)
	now := time.Date(2026, 3, 2, 10, 20, 0, 0, time.UTC)
	fake := fakeanalytics.New(fakeanalytics.Options{Now: func() time.Time { return now }})
	t.Cleanup(fake.Close)
	fake.AddAccount(fakeanalytics.Account{ID: "100", DisplayName: "Acme"})
	p := fake.AddProperty(fakeanalytics.Property{Account: "100", DisplayName: "Web", TimeZone: "Europe/Berlin", CurrencyCode: "EUR", IndustryCategory: "TECHNOLOGY"})
	fake.Grant(fakeanalytics.DefaultUser, "accounts/100", fakeanalytics.RoleAdministrator)
	fake.SeedReportData(p.ID, 40)
	fake.AddRealtime(p.ID, fakeanalytics.RealtimeFact{MinutesAgo: 3, Country: "Germany", EventName: "page_view", ActiveUsers: 2, EventCount: 5, ScreenPageViews: 5})
	fake.AddKeyEvent(p.ID, fakeanalytics.KeyEvent{EventName: "session_start", Deletable: true, Custom: true})
	fake.AddDataStream(p.ID, fakeanalytics.DataStream{DisplayName: "Site", DefaultURI: "https://acme.example"})
	return &conformance{fake: fake, url: fake.Start(), prop: p.ID, data: docs[0], adm: docs[1]}
}

// method finds the method of either document that serves an exchange.
func (c *conformance) method(httpMethod, path string) (*discovery.Doc, *discovery.Method) {
	path = strings.TrimPrefix(path, "/")
	for _, d := range []*discovery.Doc{c.data, c.adm} {
		if m := d.Find(httpMethod, path); m != nil {
			return d, m
		}
	}
	return nil, nil
}

// Every endpoint the fake serves answers as Google's discovery documents
// describe: the method exists with that HTTP method and path, and the
// 2xx answer has no field the response schema lacks and no value of the
// wrong type. The requests the test sends are checked too, so the
// answers are to requests Google would take.
func TestFakeAnswersConformToDiscovery(t *testing.T) {
	c := newConformance(t)
	p := "properties/" + c.prop
	report := `{"dimensions":[{"name":"date"},{"name":"country"},{"name":"sessionSource"}],"metrics":[{"name":"activeUsers"},{"name":"keyEvents"}],
		"dateRanges":[{"startDate":"30daysAgo","endDate":"yesterday"},{"startDate":"7daysAgo","endDate":"today","name":"week"}],
		"dimensionFilter":{"filter":{"fieldName":"country","inListFilter":{"values":["Germany","India"]}}},
		"orderBys":[{"metric":{"metricName":"activeUsers"},"desc":true}],"limit":"20","offset":"1","returnPropertyQuota":true}`
	pivot := `{"dimensions":[{"name":"country"},{"name":"eventName"}],"metrics":[{"name":"eventCount"}],
		"dateRanges":[{"startDate":"7daysAgo","endDate":"today"}],"returnPropertyQuota":true,
		"pivots":[{"fieldNames":["country"],"limit":"3"},{"fieldNames":["eventName"],"limit":"2","orderBys":[{"dimension":{"dimensionName":"eventName"}}]}]}`
	calls := []struct {
		route        fakeanalytics.Route
		method, path string
		body         string
	}{
		{fakeanalytics.RouteRunReport, "POST", "/v1beta/" + p + ":runReport", report},
		{fakeanalytics.RouteBatchRunReports, "POST", "/v1beta/" + p + ":batchRunReports", `{"requests":[` + report + `]}`},
		{fakeanalytics.RouteRunPivotReport, "POST", "/v1beta/" + p + ":runPivotReport", pivot},
		{fakeanalytics.RouteBatchRunPivots, "POST", "/v1beta/" + p + ":batchRunPivotReports", `{"requests":[` + pivot + `]}`},
		{fakeanalytics.RouteRunRealtimeReport, "POST", "/v1beta/" + p + ":runRealtimeReport",
			`{"dimensions":[{"name":"country"}],"metrics":[{"name":"activeUsers"}],"minuteRanges":[{"startMinutesAgo":29,"endMinutesAgo":0}],"returnPropertyQuota":true}`},
		{fakeanalytics.RouteGetMetadata, "GET", "/v1beta/" + p + "/metadata", ""},
		{fakeanalytics.RouteAccountSummaries, "GET", "/v1beta/accountSummaries?pageSize=10", ""},
		{fakeanalytics.RouteListProperties, "GET", "/v1beta/properties?filter=parent:accounts/100&showDeleted=true", ""},
		{fakeanalytics.RouteGetProperty, "GET", "/v1beta/" + p, ""},
		{fakeanalytics.RouteCreateProperty, "POST", "/v1beta/properties",
			`{"parent":"accounts/100","displayName":"Shop","timeZone":"America/New_York","currencyCode":"USD","industryCategory":"SHOPPING"}`},
		{fakeanalytics.RouteUpdateProperty, "PATCH", "/v1beta/" + p + "?updateMask=display_name,currency_code", `{"displayName":"Web (EU)","currencyCode":"EUR","timeZone":"Europe/Berlin"}`},
		{fakeanalytics.RouteListKeyEvents, "GET", "/v1beta/" + p + "/keyEvents", ""},
		{fakeanalytics.RouteCreateKeyEvent, "POST", "/v1beta/" + p + "/keyEvents", `{"eventName":"scroll","countingMethod":"ONCE_PER_SESSION"}`},
		{fakeanalytics.RouteGetKeyEvent, "GET", "", ""}, // filled below from the list
		{fakeanalytics.RouteListDataStreams, "GET", "/v1beta/" + p + "/dataStreams", ""},
		{fakeanalytics.RouteCreateDataStream, "POST", "/v1beta/" + p + "/dataStreams",
			`{"type":"ANDROID_APP_DATA_STREAM","displayName":"App","androidAppStreamData":{"packageName":"com.acme.app"}}`},
		{fakeanalytics.RouteGetDataStream, "GET", "", ""},
		{fakeanalytics.RouteUpdateDataStream, "PATCH", "", `{"displayName":"Site (new)","webStreamData":{"defaultUri":"https://www.acme.example"}}`},
		{fakeanalytics.RouteDeleteKeyEvent, "DELETE", "", ""},
		{fakeanalytics.RouteDeleteDataStream, "DELETE", "", ""},
		{fakeanalytics.RouteDeleteProperty, "DELETE", "/v1beta/" + p, ""},
	}
	keyEvent := "/v1beta/" + p + "/keyEvents/" + c.fake.KeyEvents(c.prop)[0].ID
	stream := "/v1beta/" + p + "/dataStreams/" + c.fake.DataStreams(c.prop)[0].ID
	for i := range calls {
		switch calls[i].route {
		case fakeanalytics.RouteGetKeyEvent, fakeanalytics.RouteDeleteKeyEvent:
			calls[i].path = keyEvent
		case fakeanalytics.RouteGetDataStream, fakeanalytics.RouteDeleteDataStream:
			calls[i].path = stream
		case fakeanalytics.RouteUpdateDataStream:
			calls[i].path = stream + "?updateMask=display_name,web_stream_data.default_uri"
		}
	}
	for _, call := range calls {
		u, _ := url.Parse(c.url + call.path)
		doc, m := c.method(call.method, u.Path)
		if m == nil {
			t.Errorf("%s %s: no method of Google's documents serves it", call.method, u.Path)
			continue
		}
		for _, pr := range doc.CheckQuery(m, u.Query()) {
			t.Errorf("%s: %s", m.ID, pr)
		}
		if call.body != "" && m.Request != nil {
			for _, pr := range doc.Check(m.Request.Ref, []byte(call.body), requestMode(m)) {
				t.Errorf("%s: the test's request: %s", m.ID, pr)
			}
		}
		status, body := send(t, call.method, u.String(), call.body)
		if status != http.StatusOK {
			t.Errorf("%s %s: %d %s", call.method, call.path, status, body)
			continue
		}
		for _, pr := range doc.Check(m.Response.Ref, body, discovery.Response) {
			t.Errorf("%s: answer: %s", m.ID, pr)
		}
	}
	seen := map[fakeanalytics.Route]bool{}
	for _, r := range c.fake.Requests() {
		if r.Route == "" {
			t.Errorf("%s %s matched no route", r.Method, r.Path)
		}
		seen[r.Route] = true
	}
	if len(seen) != len(calls) {
		t.Errorf("%d routes answered; want %d, one per call", len(seen), len(calls))
	}
}

// requestMode is how a request body to m is checked: a PATCH is a
// partial update.
func requestMode(m *discovery.Method) discovery.Mode {
	if m.HTTPMethod == http.MethodPatch {
		return discovery.Update
	}
	return discovery.Request
}

func send(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer ya29.conformance")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// Every request the analytics connector's steps send names a method of
// Google's documents, with a body its request schema takes (no unknown
// field, no wrong type, no required field missing) and only query
// parameters the method takes.
func TestConnectorRequestsConformToDiscovery(t *testing.T) {
	c := newConformance(t)
	tk := analytics.NewToolkit(analytics.ToolkitOptions{DataBaseURL: c.url, AdminBaseURL: c.url})
	env := connectors.Env{
		HTTP: &http.Client{Transport: tk.Wrap("acc_ga", connectortest.Bearer{Token: "ya29.conformance", Base: http.DefaultTransport})},
		Account: connectors.AccountInfo{ID: "acc_ga", Login: fakeanalytics.DefaultUser,
			Metadata: map[string]string{analytics.MetaAccounts: "accounts/100=Acme"}},
	}
	p := "properties/" + c.prop
	stream := c.fake.DataStreams(c.prop)[0].ID
	inputs := map[string]string{
		analytics.StepRunReports: `{"property":"` + p + `","metrics":["activeUsers","sessions"],"dimensions":["date","sessionSource"],
			"date_ranges":[{"start_date":"28daysAgo","end_date":"yesterday","name":"month"},{"start_date":"7daysAgo","end_date":"today"}],
			"dimension_filter":{"filter":{"fieldName":"country","stringFilter":{"matchType":"BEGINS_WITH","value":"G"}}},
			"metric_filter":{"filter":{"fieldName":"sessions","numericFilter":{"operation":"GREATER_THAN","value":{"int64Value":"0"}}}},
			"order_bys":[{"dimension":"date","order_type":"NUMERIC"},{"metric":"sessions","desc":true}],"limit":50,"offset":5,"keep_empty_rows":true}`,
		analytics.StepRunRealtimeReport:    `{"property":"` + p + `","metrics":["activeUsers"],"dimensions":["country"],"minute_ranges":[{"start_minutes_ago":10,"end_minutes_ago":0,"name":"recent"}],"limit":10}`,
		analytics.StepGetMetadata:          `{"property":"` + p + `"}`,
		analytics.StepCreateKeyEvents:      `{"property":"` + p + `","event_name":"first_visit","counting_method":"ONCE_PER_SESSION"}`,
		analytics.StepCreateProperties:     `{"display_name":"Shop","time_zone":"Europe/Paris","currency_code":"EUR","industry_category":"SHOPPING","account":"accounts/100"}`,
		analytics.StepListProperties:       `{"account":"accounts/100","show_deleted":true,"limit":5}`,
		analytics.StepGetProperty:          `{"property":"` + p + `"}`,
		analytics.StepListKeyEvents:        `{"property":"` + p + `"}`,
		analytics.StepListDataStreams:      `{"property":"` + p + `"}`,
		analytics.StepGetDataStream:        `{"property":"` + p + `","data_stream_id":"` + stream + `"}`,
		analytics.StepListAccountSummaries: `{}`,
	}
	for _, s := range tk.Steps {
		in, ok := inputs[s.ID]
		if !ok {
			t.Errorf("step %s has no input here: add one so its requests are checked", s.ID)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Run(ctx, env, json.RawMessage(in))
		cancel()
		if err != nil {
			t.Errorf("%s: %v", s.ID, err)
		}
	}
	reqs := c.fake.Requests()
	if len(reqs) < len(inputs) {
		t.Fatalf("%d requests for %d steps", len(reqs), len(inputs))
	}
	for _, r := range reqs {
		doc, m := c.method(r.Method, r.Path)
		if m == nil {
			t.Errorf("%s %s: no method of Google's documents serves it", r.Method, r.Path)
			continue
		}
		for _, pr := range doc.CheckQuery(m, r.Query) {
			t.Errorf("%s: %s", m.ID, pr)
		}
		if len(bytes.TrimSpace(r.Body)) > 0 {
			if m.Request == nil {
				t.Errorf("%s takes no body; the connector sent %s", m.ID, r.Body)
				continue
			}
			for _, pr := range doc.Check(m.Request.Ref, r.Body, requestMode(m)) {
				t.Errorf("%s: the connector's request: %s", m.ID, pr)
			}
		}
	}
}
