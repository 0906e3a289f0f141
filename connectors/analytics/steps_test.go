package analytics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

// start is 2026-03-02 10:20 UTC: 02:20 in Los Angeles, 11:20 in Berlin.
var start = time.Date(2026, 3, 2, 10, 20, 0, 0, time.UTC)

var account = connectors.AccountInfo{
	ID: "acc_ga", Login: fakeanalytics.DefaultUser, ExternalID: "sub-1",
	Metadata: map[string]string{MetaAccounts: "accounts/100=Acme%2C Inc,accounts/200=Other"},
}

type harness struct {
	fake  *fakeanalytics.Server
	clock *testenv.Clock
	kit   *toolkit
	tk    connectors.Toolkit
	token string
	// prop is a property of account 100 the user can view.
	prop string
}

// newHarness serves the fake's Data and Admin APIs on two hosts, so a
// request sent to the wrong API gets a 404.
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, fakeanalytics.Options{})
}

// newHarnessWith is newHarness with the fake's options (its clock is the
// harness's).
func newHarnessWith(t testing.TB, o fakeanalytics.Options) *harness {
	t.Helper()
	clk := testenv.NewClock(start)
	o.Now = clk.Now
	fake := fakeanalytics.New(o)
	t.Cleanup(fake.Close)
	data := httptest.NewServer(fake.DataHandler())
	t.Cleanup(data.Close)
	admin := httptest.NewServer(fake.AdminHandler())
	t.Cleanup(admin.Close)
	fake.AddAccount(fakeanalytics.Account{ID: "100", DisplayName: "Acme, Inc"})
	fake.AddAccount(fakeanalytics.Account{ID: "200", DisplayName: "Other"})
	p := fake.AddProperty(fakeanalytics.Property{Account: "100", DisplayName: "Web", TimeZone: "Europe/Berlin", CurrencyCode: "EUR"})
	fake.Grant(fakeanalytics.DefaultUser, "properties/"+p.ID, fakeanalytics.RoleViewer)
	kit := newToolkit(ToolkitOptions{DataBaseURL: data.URL, AdminBaseURL: admin.URL, Now: clk.Now, retryBase: time.Millisecond})
	return &harness{
		fake:  fake,
		clock: clk,
		kit:   kit,
		tk:    connectors.Toolkit{Connector: name, Steps: kit.steps(), Wrap: kit.policy.wrap},
		token: "ya29.fake",
		prop:  p.ID,
	}
}

func (h *harness) step(t testing.TB, id string) connectors.Step {
	t.Helper()
	i := slices.IndexFunc(h.tk.Steps, func(s connectors.Step) bool { return s.ID == id })
	if i < 0 {
		t.Fatalf("no step %s", id)
	}
	return h.tk.Steps[i]
}

func (h *harness) env() connectors.Env {
	return connectors.Env{
		HTTP:    &http.Client{Transport: h.tk.Wrap(account.ID, connectortest.Bearer{Token: h.token, Base: http.DefaultTransport})},
		Account: account,
	}
}

// run validates input against the step's schema, runs the step with ctx
// and validates a successful output against the output schema; it returns
// the output as generic JSON.
func (h *harness) runCtx(ctx context.Context, t testing.TB, id, input string) (map[string]any, error) {
	t.Helper()
	s := h.step(t, id)
	if err := connectortest.CompileSchema(t, s.ID+" input", s.Input).Validate(connectortest.JSON(t, input)); err != nil {
		t.Errorf("%s: input %s does not match the schema: %v", id, input, err)
		return nil, err
	}
	out, err := s.Run(ctx, h.env(), json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := connectortest.CompileSchema(t, s.ID+" output", s.Output).Validate(connectortest.JSON(t, string(b))); err != nil {
		t.Errorf("%s: output %s does not match the schema: %v", id, b, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func (h *harness) run(t testing.TB, id, input string) (map[string]any, error) {
	t.Helper()
	return h.runCtx(context.Background(), t, id, input)
}

func rows(out map[string]any) [][]any {
	var r [][]any
	for _, row := range out["rows"].([]any) {
		m := row.(map[string]any)
		r = append(r, append(slices.Clone(m["dimensions"].([]any)), m["metrics"].([]any)...))
	}
	return r
}

func TestToolkitShape(t *testing.T) {
	tk := NewToolkit(ToolkitOptions{})
	want := map[string]string{
		"analytics.run_reports":            "Run Reports",
		"analytics.run_realtime_report":    "Run Realtime Report",
		"analytics.get_metadata":           "Get Metadata",
		"analytics.create_key_events":      "Create Key Events",
		"analytics.create_properties":      "Create properties",
		"analytics.list_properties":        "List Properties",
		"analytics.get_property":           "Get Property",
		"analytics.list_key_events":        "List Key Events",
		"analytics.list_data_streams":      "List Data Streams",
		"analytics.get_data_stream":        "Get Data Stream",
		"analytics.list_account_summaries": "List Account Summaries",
	}
	if tk.Connector != "analytics" || tk.Wrap == nil || len(tk.Steps) != len(want) {
		t.Fatalf("toolkit: connector %q, %d steps", tk.Connector, len(tk.Steps))
	}
	for _, s := range tk.Steps {
		if want[s.ID] != s.Name || s.Connector != "analytics" || s.Description == "" || s.Run == nil {
			t.Errorf("step %s %q: unexpected shape", s.ID, s.Name)
		}
	}
}

func TestSchemasCompileAndExamplesValidate(t *testing.T) {
	examples := map[string]connectortest.Examples{
		StepRunReports: {
			Good: []string{
				`{"property":"properties/123","metrics":["activeUsers"]}`,
				`{"property":"properties/123","metrics":["sessions","screenPageViews"],"dimensions":["date","country"],
				  "date_ranges":[{"start_date":"30daysAgo","end_date":"today"},{"start_date":"2026-01-01","end_date":"2026-01-31","name":"jan"}],
				  "dimension_filter":{"filter":{"fieldName":"country","stringFilter":{"matchType":"EXACT","value":"Germany"}}},
				  "metric_filter":{"filter":{"fieldName":"sessions","numericFilter":{"operation":"GREATER_THAN","value":{"int64Value":"10"}}}},
				  "order_bys":[{"metric":"sessions","desc":true},{"dimension":"date","order_type":"NUMERIC"}],
				  "limit":100,"offset":100,"keep_empty_rows":true}`,
			},
			Bad: []string{
				`{"property":"123","metrics":["activeUsers"]}`,
				`{"property":"properties/123","metrics":[]}`,
				`{"property":"properties/123"}`,
				`{"property":"properties/123","metrics":["a","b","c","d","e","f","g","h","i","j","k"]}`,
				`{"property":"properties/123","metrics":["x"],"date_ranges":[{"start_date":"last week","end_date":"today"}]}`,
				`{"property":"properties/123","metrics":["x"],"dimension_filter":"country=DE"}`,
				`{"property":"properties/123","metrics":["x"],"dimension_filter":{"filter":{},"andGroup":{}}}`,
				`{"property":"properties/123","metrics":["x"],"order_bys":[{"metric":"x","dimension":"y"}]}`,
				`{"property":"properties/123","metrics":["x"],"limit":0}`,
			},
		},
		StepRunRealtimeReport: {
			Good: []string{`{"property":"properties/1","metrics":["activeUsers"],"dimensions":["country"],"minute_ranges":[{"start_minutes_ago":5}]}`},
			Bad:  []string{`{"property":"properties/1","metrics":["activeUsers"],"date_ranges":[]}`, `{"property":"properties/1","metrics":["a"],"minute_ranges":[{"start_minutes_ago":60}]}`},
		},
		StepGetMetadata: {
			Good: []string{`{"property":"properties/0"}`, `{"property":"properties/123"}`},
			Bad:  []string{`{}`, `{"property":"accounts/1"}`},
		},
		StepCreateKeyEvents: {
			Good: []string{`{"property":"properties/1","event_name":"sign_up"}`, `{"property":"properties/1","event_name":"purchase","counting_method":"ONCE_PER_SESSION"}`},
			Bad:  []string{`{"property":"properties/1"}`, `{"property":"properties/1","event_name":"sign up"}`, `{"property":"properties/1","event_name":"x","counting_method":"ALWAYS"}`},
		},
		StepCreateProperties: {
			Good: []string{
				`{"display_name":"Shop","time_zone":"Europe/Berlin","currency_code":"EUR"}`,
				`{"display_name":"Shop","time_zone":"America/Los_Angeles","currency_code":"USD","industry_category":"SHOPPING","account":"accounts/100"}`,
			},
			Bad: []string{
				`{"display_name":"Shop","time_zone":"Europe/Berlin"}`,
				`{"display_name":"Shop","time_zone":"Europe/Berlin","currency_code":"eur"}`,
				`{"display_name":"Shop","time_zone":"Europe/Berlin","currency_code":"EUR","industry_category":"SHOES"}`,
				`{"display_name":"","time_zone":"Europe/Berlin","currency_code":"EUR"}`,
				`{"display_name":"Shop","time_zone":"Europe/Berlin","currency_code":"EUR","account":"100"}`,
			},
		},
		StepListProperties: {
			Good: []string{`{}`, `{"account":"accounts/100","show_deleted":true,"limit":500,"page_token":"abc"}`},
			Bad:  []string{`{"account":"properties/1"}`, `{"limit":1001}`},
		},
		StepGetProperty: {
			Good: []string{`{"property":"properties/42"}`},
			Bad:  []string{`{"property":"properties/"}`},
		},
		StepListKeyEvents: {
			Good: []string{`{"property":"properties/42","limit":10}`},
			Bad:  []string{`{}`},
		},
		StepListDataStreams: {
			Good: []string{`{"property":"properties/42"}`},
			Bad:  []string{`{"property":"properties/42","type":"web"}`},
		},
		StepGetDataStream: {
			Good: []string{`{"property":"properties/42","data_stream_id":"7"}`},
			Bad:  []string{`{"property":"properties/42","data_stream_id":"G-123"}`},
		},
		StepListAccountSummaries: {
			Good: []string{`{}`, `{"limit":5}`},
			Bad:  []string{`{"limit":"5"}`},
		},
	}
	connectortest.CheckSchemas(t, NewToolkit(ToolkitOptions{}).Steps, examples)
}

// addFacts seeds a small table around start (2026-03-02 in Berlin).
func addFacts(h *harness) {
	h.fake.AddFacts(h.prop,
		fakeanalytics.Fact{Date: "2026-03-01", Country: "Germany", PagePath: "/docs", EventName: "page_view", EventCount: 5, ScreenPageViews: 5},
		fakeanalytics.Fact{Date: "2026-03-01", Country: "Germany", PagePath: "/", EventName: "page_view", EventCount: 3, ScreenPageViews: 3},
		fakeanalytics.Fact{Date: "2026-03-02", Country: "United States", PagePath: "/", EventName: "session_start", EventCount: 7, Sessions: 7, ActiveUsers: 4},
		fakeanalytics.Fact{Date: "2026-03-02", Country: "Brazil", PagePath: "/", EventName: "scroll", EventCount: 2},
		fakeanalytics.Fact{Date: "2026-02-01", Country: "Germany", PagePath: "/", EventName: "page_view", EventCount: 100, ScreenPageViews: 100},
	)
}

func TestRunReports(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	out, err := h.run(t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["eventCount","screenPageViews"],
		"dimensions":["country"],"date_ranges":[{"start_date":"7daysAgo","end_date":"today"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{{"Germany", 8.0, 8.0}, {"United States", 7.0, 0.0}, {"Brazil", 2.0, 0.0}}
	if got := rows(out); !equalRows(got, want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if out["row_count"] != 3.0 || out["time_zone"] != "Europe/Berlin" || out["currency_code"] != "EUR" {
		t.Errorf("output = %v", out)
	}
	if !slices.Equal(out["dimension_headers"].([]any), []any{"country"}) {
		t.Errorf("dimension_headers = %v", out["dimension_headers"])
	}
	mh := out["metric_headers"].([]any)
	if len(mh) != 2 || mh[0].(map[string]any)["name"] != "eventCount" || mh[0].(map[string]any)["type"] != "TYPE_INTEGER" {
		t.Errorf("metric_headers = %v", mh)
	}
	q := out["property_quota"].(map[string]any)
	day := q["tokens_per_day"].(map[string]any)
	use := h.fake.Usage(h.prop, fakeanalytics.Core)
	if day["consumed"] != 2.0 || day["remaining"] != float64(200000-use.TokensToday) {
		t.Errorf("tokens_per_day = %v, fake usage %+v", day, use)
	}
	reqs := h.fake.RequestsTo(fakeanalytics.RouteRunReport)
	if len(reqs) != 1 {
		t.Fatalf("%d runReport requests", len(reqs))
	}
	var body map[string]any
	json.Unmarshal(reqs[0].Body, &body)
	if body["returnPropertyQuota"] != true {
		t.Errorf("the request does not ask for the quota: %s", reqs[0].Body)
	}

	// Filters, ordering, limit and offset; several date ranges.
	out, err = h.run(t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["eventCount"],"dimensions":["pagePath","date"],
		"date_ranges":[{"start_date":"2026-02-01","end_date":"2026-02-28","name":"feb"},{"start_date":"yesterday","end_date":"today","name":"now"}],
		"dimension_filter":{"andGroup":{"expressions":[
			{"filter":{"fieldName":"country","stringFilter":{"matchType":"EXACT","value":"germany"}}},
			{"notExpression":{"filter":{"fieldName":"pagePath","inListFilter":{"values":["/docs"]}}}}]}},
		"metric_filter":{"filter":{"fieldName":"eventCount","numericFilter":{"operation":"GREATER_THAN","value":{"int64Value":"2"}}}},
		"order_bys":[{"dimension":"date","desc":true}],"limit":5,"offset":0}`)
	if err != nil {
		t.Fatal(err)
	}
	want = [][]any{{"/", "20260301", "now", 3.0}, {"/", "20260201", "feb", 100.0}}
	if got := rows(out); !equalRows(got, want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if !slices.Equal(out["dimension_headers"].([]any), []any{"pagePath", "date", "dateRange"}) {
		t.Errorf("dimension_headers = %v", out["dimension_headers"])
	}
	last := h.fake.RequestsTo(fakeanalytics.RouteRunReport)[1]
	json.Unmarshal(last.Body, &body)
	if body["limit"] != "5" || body["offset"] != "0" {
		t.Errorf("limit/offset not sent as int64 strings: %s", last.Body)
	}
}

func equalRows(a, b [][]any) bool {
	return slices.EqualFunc(a, b, func(x, y []any) bool { return slices.Equal(x, y) })
}

func TestRunReportsEmptyIsNotAnError(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	out, err := h.run(t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["activeUsers"],"dimensions":["country"],
		"dimension_filter":{"filter":{"fieldName":"country","stringFilter":{"matchType":"EXACT","value":"Atlantis"}}}}`)
	if err != nil {
		t.Fatalf("an empty report is an error: %v", err)
	}
	if r, ok := out["rows"].([]any); !ok || len(r) != 0 || out["row_count"] != 0.0 {
		t.Errorf("empty report = %v, want rows [] and row_count 0", out)
	}
	if out["property_quota"] == nil {
		t.Error("no property_quota")
	}
	// The default date range is 28daysAgo..yesterday.
	var body map[string]any
	json.Unmarshal(h.fake.RequestsTo(fakeanalytics.RouteRunReport)[0].Body, &body)
	dr := body["dateRanges"].([]any)[0].(map[string]any)
	if dr["startDate"] != "28daysAgo" || dr["endDate"] != "yesterday" {
		t.Errorf("default date range = %v", dr)
	}
}

func TestRunReportsRefusals(t *testing.T) {
	h := newHarness(t)
	p := "properties/" + h.prop
	for _, tc := range []struct{ input, want string }{
		{`{"property":"properties/` + h.prop + `","metrics":["eventCount"],"order_bys":[{"metric":"sessions"}]}`, "not among metrics"},
		{`{"property":"` + p + `","metrics":["eventCount"],"date_ranges":[{"start_date":"2026-03-02","end_date":"2026-03-01"}]}`, "is after end_date"},
		{`{"property":"` + p + `","metrics":["eventCount"],"date_ranges":[{"start_date":"2026-02-30","end_date":"today"}]}`, "is not a date"},
		{`{"property":"` + p + `","metrics":["eventCount"],"dimension_filter":{"filter":{"fieldName":"country"}}}`, "exactly one of stringFilter"},
		{`{"property":"` + p + `","metrics":["eventCount"],"metric_filter":{"orGroup":{"expressions":[]}}}`, "non-empty expressions"},
		{`{"property":"` + p + `","metrics":["sessions","conversions"]}`, "metrics[1]: GA4 renamed conversions to keyEvents"},
		{`{"property":"` + p + `","metrics":["conversions:purchase"]}`, "ask for keyEvents:purchase"},
	} {
		_, err := h.run(t, StepRunReports, tc.input)
		if ce := connectortest.WantCode(t, err, connectors.CodeValidation); !strings.Contains(ce.Message, tc.want) {
			t.Errorf("%s: message %q, want %q", tc.input, ce.Message, tc.want)
		}
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("refused inputs sent %d requests", n)
	}
	// Google's own validation comes back as CodeValidation with its message.
	_, err := h.run(t, StepRunReports, `{"property":"`+p+`","metrics":["eventCount"],"dimensions":["nonsense"]}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); ce.Status != 400 || !strings.Contains(ce.Message, "Field nonsense is not a valid dimension") {
		t.Errorf("error = %v", ce)
	}
	// No access to the property.
	other := h.fake.AddProperty(fakeanalytics.Property{Account: "200"})
	_, err = h.run(t, StepRunReports, `{"property":"properties/`+other.ID+`","metrics":["eventCount"]}`)
	if ce := connectortest.WantCode(t, err, connectors.CodePermissionDenied); !strings.HasPrefix(ce.Message, "reading reports needs at least the Viewer role on properties/"+other.ID) {
		t.Errorf("message = %q", ce.Message)
	}
	// A revoked token.
	h.token = ""
	_, err = h.run(t, StepRunReports, `{"property":"`+p+`","metrics":["eventCount"]}`)
	connectortest.WantCode(t, err, connectors.CodeNeedsReauth)
}

func TestRunRealtimeReport(t *testing.T) {
	h := newHarness(t)
	h.fake.AddRealtime(h.prop,
		fakeanalytics.RealtimeFact{MinutesAgo: 1, Country: "Germany", EventName: "page_view", ActiveUsers: 3, EventCount: 9},
		fakeanalytics.RealtimeFact{MinutesAgo: 10, Country: "Germany", EventName: "scroll", ActiveUsers: 1, EventCount: 1},
		fakeanalytics.RealtimeFact{MinutesAgo: 5, Country: "India", EventName: "page_view", ActiveUsers: 2, EventCount: 2},
		fakeanalytics.RealtimeFact{MinutesAgo: 45, Country: "India", EventName: "page_view", ActiveUsers: 50, EventCount: 50},
	)
	out, err := h.run(t, StepRunRealtimeReport, `{"property":"properties/`+h.prop+`","metrics":["activeUsers","eventCount"],"dimensions":["country"],
		"order_bys":[{"dimension":"country"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rows(out), [][]any{{"Germany", 4.0, 10.0}, {"India", 2.0, 2.0}}; !equalRows(got, want) {
		t.Errorf("rows = %v, want %v", got, want)
	}
	if _, ok := out["time_zone"]; ok {
		t.Error("a realtime report has no metadata")
	}
	out, err = h.run(t, StepRunRealtimeReport, `{"property":"properties/`+h.prop+`","metrics":["activeUsers"],"minute_ranges":[{"start_minutes_ago":4,"end_minutes_ago":0}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(out); !equalRows(got, [][]any{{3.0}}) {
		t.Errorf("last five minutes = %v", got)
	}
	if use := h.fake.Usage(h.prop, fakeanalytics.Realtime); use.TokensToday == 0 {
		t.Error("realtime reports did not charge the realtime quota")
	}
	if use := h.fake.Usage(h.prop, fakeanalytics.Core); use.TokensToday != 0 {
		t.Errorf("realtime reports charged the core quota: %+v", use)
	}
}

func TestGetMetadata(t *testing.T) {
	h := newHarness(t)
	out, err := h.run(t, StepGetMetadata, `{"property":"properties/`+h.prop+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range out["dimensions"].([]any) {
		names = append(names, d.(map[string]any)["api_name"].(string))
	}
	for _, m := range out["metrics"].([]any) {
		names = append(names, m.(map[string]any)["api_name"].(string))
	}
	for _, n := range []string{"date", "country", "eventName", "pagePath", "activeUsers", "sessions", "eventCount", "screenPageViews"} {
		if !slices.Contains(names, n) {
			t.Errorf("metadata lacks %s", n)
		}
	}
	if _, err := h.run(t, StepGetMetadata, `{"property":"properties/0"}`); err != nil {
		t.Errorf("universal metadata: %v", err)
	}
}

func TestCreateKeyEvents(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+h.prop, fakeanalytics.RoleEditor)
	h.fake.CollectEvent(h.prop, "sign_up", 3)
	h.fake.AddFacts(h.prop, fakeanalytics.Fact{Date: "2026-02-20", Country: "Germany", PagePath: "/", EventName: "sign_up", EventCount: 2})

	out, err := h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"sign_up"}`)
	if err != nil {
		t.Fatal(err)
	}
	kes := h.fake.KeyEvents(h.prop)
	if len(kes) != 1 || kes[0].EventName != "sign_up" || kes[0].CountingMethod != "ONCE_PER_EVENT" {
		t.Fatalf("fake key events = %+v", kes)
	}
	if out["key_event_id"] != kes[0].ID || out["name"] != "properties/"+h.prop+"/keyEvents/"+kes[0].ID ||
		out["event_count_30d"] != 5.0 || out["property"] != "properties/"+h.prop || out["already_existed"] != nil {
		t.Errorf("output = %v", out)
	}
	check := h.fake.RequestsTo(fakeanalytics.RouteRunReport)
	if len(check) != 1 {
		t.Fatalf("%d check reports", len(check))
	}
	var body map[string]any
	json.Unmarshal(check[0].Body, &body)
	dr := body["dateRanges"].([]any)[0].(map[string]any)
	if dr["startDate"] != "30daysAgo" || dr["endDate"] != "today" || !strings.Contains(string(check[0].Body), `"value":"sign_up"`) {
		t.Errorf("check report = %s", check[0].Body)
	}

	// Marking it again returns the existing key event.
	out, err = h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"sign_up"}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["already_existed"] != true || out["key_event_id"] != kes[0].ID || len(h.fake.KeyEvents(h.prop)) != 1 {
		t.Errorf("second create = %v", out)
	}
}

func TestCreateKeyEventsForAnUncollectedEvent(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+h.prop, fakeanalytics.RoleEditor)
	addFacts(h)
	h.fake.AddFacts(h.prop, fakeanalytics.Fact{Date: "2026-01-01", Country: "Germany", PagePath: "/", EventName: "purchase", EventCount: 9})
	_, err := h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"purchase"}`)
	ce := connectortest.WantCode(t, err, connectors.CodeValidation)
	want := "event purchase has not been collected in properties/" + h.prop + " in the last 30 days; send it first, then mark it as a key event"
	if ce.Message != want {
		t.Errorf("message = %q, want %q", ce.Message, want)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunRealtimeReport)); n != 1 {
		t.Errorf("%d realtime checks, want 1 before refusing", n)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteCreateKeyEvent)); n != 0 {
		t.Errorf("%d key event POSTs reached the fake", n)
	}
	if n := len(h.fake.KeyEvents(h.prop)); n != 0 {
		t.Errorf("%d key events", n)
	}
}

// An event collected minutes ago is not in runReport yet (GA4 processes
// data with a lag); the realtime report shows it, and that is enough.
func TestCreateKeyEventsForAnEventOnlyInRealtime(t *testing.T) {
	h := newHarnessWith(t, fakeanalytics.Options{ProcessingDelay: 24 * time.Hour})
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+h.prop, fakeanalytics.RoleEditor)
	addFacts(h)
	h.fake.CollectEvent(h.prop, "sign_up", 3)
	h.clock.Advance(5 * time.Minute)

	out, err := h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"sign_up"}`)
	if err != nil {
		t.Fatal(err)
	}
	kes := h.fake.KeyEvents(h.prop)
	if len(kes) != 1 || kes[0].EventName != "sign_up" || out["key_event_id"] != kes[0].ID || out["event_count_30d"] != 3.0 {
		t.Fatalf("output %v, fake key events %+v", out, kes)
	}
	rt := h.fake.RequestsTo(fakeanalytics.RouteRunRealtimeReport)
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 1 || len(rt) != 1 {
		t.Fatalf("%d runReport and %d realtime checks, want 1 each", n, len(rt))
	}
	var body map[string]any
	if err := json.Unmarshal(rt[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["dateRanges"]; ok || !strings.Contains(string(rt[0].Body), `"name":"eventName"`) ||
		!strings.Contains(string(rt[0].Body), `"name":"eventCount"`) || !strings.Contains(string(rt[0].Body), `"value":"sign_up"`) {
		t.Errorf("realtime check = %s", rt[0].Body)
	}
}

func TestCreateKeyEventsNeedsEditor(t *testing.T) {
	h := newHarness(t) // Viewer only
	h.fake.CollectEvent(h.prop, "generate_lead", 1)
	_, err := h.run(t, StepCreateKeyEvents, `{"property":"properties/`+h.prop+`","event_name":"generate_lead"}`)
	ce := connectortest.WantCode(t, err, connectors.CodePermissionDenied)
	if !strings.HasPrefix(ce.Message, "creating a key event needs the Editor role on properties/"+h.prop) {
		t.Errorf("message = %q", ce.Message)
	}
}

func TestCreateProperties(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakeanalytics.DefaultUser, "accounts/100", fakeanalytics.RoleAdministrator)
	out, err := h.run(t, StepCreateProperties, `{"display_name":"Shop","time_zone":"Asia/Kolkata","currency_code":"INR","industry_category":"SHOPPING"}`)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := h.fake.Property(out["property_id"].(string))
	if !ok {
		t.Fatalf("the fake has no property %v", out["property_id"])
	}
	if p.Account != "100" || p.DisplayName != "Shop" || p.TimeZone != "Asia/Kolkata" || p.CurrencyCode != "INR" || p.IndustryCategory != "SHOPPING" {
		t.Errorf("fake property = %+v", p)
	}
	if out["property"] != "properties/"+p.ID || out["parent"] != "accounts/100" || out["time_zone"] != "Asia/Kolkata" || out["display_name"] != "Shop" {
		t.Errorf("output = %v", out)
	}

	// Without Administrator on the account (Editor is not enough).
	h.fake.Grant(fakeanalytics.DefaultUser, "accounts/200", fakeanalytics.RoleEditor)
	before := len(h.fake.Properties())
	_, err = h.run(t, StepCreateProperties, `{"display_name":"Blog","time_zone":"UTC","currency_code":"USD","account":"accounts/200"}`)
	ce := connectortest.WantCode(t, err, connectors.CodePermissionDenied)
	if !strings.HasPrefix(ce.Message, "creating a property needs the Administrator role on accounts/200") || ce.Status != 403 {
		t.Errorf("error = %+v", ce)
	}
	if len(h.fake.Properties()) != before {
		t.Error("a property was created")
	}

	// Refused before sending.
	h.fake.ClearRequests()
	for _, in := range []string{
		`{"display_name":"X","time_zone":"Mars/Olympus","currency_code":"USD"}`,
		`{"display_name":"X","time_zone":"Local","currency_code":"USD"}`,
	} {
		_, err := h.run(t, StepCreateProperties, in)
		connectortest.WantCode(t, err, connectors.CodeValidation)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteCreateProperty)); n != 0 {
		t.Errorf("%d creates", n)
	}
}

func TestAdminReads(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakeanalytics.DefaultUser, "accounts/100", fakeanalytics.RoleViewer)
	for range 240 {
		h.fake.AddProperty(fakeanalytics.Property{Account: "100", DisplayName: "Bulk"})
	}
	h.fake.AddProperty(fakeanalytics.Property{Account: "200", DisplayName: "Hidden"})

	out, err := h.run(t, StepListProperties, `{"limit":230}`)
	if err != nil {
		t.Fatal(err)
	}
	props := out["properties"].([]any)
	if len(props) != 230 || out["next_page_token"] == nil {
		t.Fatalf("%d properties, next %v", len(props), out["next_page_token"])
	}
	reqs := h.fake.RequestsTo(fakeanalytics.RouteListProperties)
	if len(reqs) != 2 || reqs[0].Query.Get("filter") != "parent:accounts/100" || reqs[0].Query.Get("pageSize") != "200" || reqs[1].Query.Get("pageSize") != "30" {
		t.Errorf("pages: %v", reqs)
	}
	rest, err := h.run(t, StepListProperties, `{"account":"accounts/100","page_token":"`+out["next_page_token"].(string)+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rest["properties"].([]any)); n != 11 || rest["next_page_token"] != nil {
		t.Errorf("rest: %d properties, next %v", n, rest["next_page_token"])
	}

	got, err := h.run(t, StepGetProperty, `{"property":"properties/`+h.prop+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got["display_name"] != "Web" || got["time_zone"] != "Europe/Berlin" || got["currency_code"] != "EUR" || got["account"] != "accounts/100" {
		t.Errorf("property = %v", got)
	}
	_, err = h.run(t, StepGetProperty, `{"property":"properties/999999"}`)
	connectortest.WantCode(t, err, connectors.CodeNotFound)

	h.fake.AddKeyEvent(h.prop, fakeanalytics.KeyEvent{EventName: "purchase", Deletable: true})
	kes, err := h.run(t, StepListKeyEvents, `{"property":"properties/`+h.prop+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if k := kes["key_events"].([]any); len(k) != 1 || k[0].(map[string]any)["event_name"] != "purchase" {
		t.Errorf("key events = %v", kes)
	}

	ds := h.fake.AddDataStream(h.prop, fakeanalytics.DataStream{DisplayName: "Site", DefaultURI: "https://acme.example"})
	streams, err := h.run(t, StepListDataStreams, `{"property":"properties/`+h.prop+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if s := streams["data_streams"].([]any); len(s) != 1 || s[0].(map[string]any)["measurement_id"] != ds.MeasurementID {
		t.Errorf("streams = %v", streams)
	}
	one, err := h.run(t, StepGetDataStream, `{"property":"properties/`+h.prop+`","data_stream_id":"`+ds.ID+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	if one["data_stream_id"] != ds.ID || one["type"] != "WEB_DATA_STREAM" || one["default_uri"] != "https://acme.example" {
		t.Errorf("stream = %v", one)
	}

	sums, err := h.run(t, StepListAccountSummaries, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	as := sums["account_summaries"].([]any)
	if len(as) != 1 {
		t.Fatalf("summaries = %v", as)
	}
	a := as[0].(map[string]any)
	if a["account"] != "accounts/100" || a["display_name"] != "Acme, Inc" || len(a["properties"].([]any)) != 241 {
		t.Errorf("summary: %v %v %d properties", a["account"], a["display_name"], len(a["properties"].([]any)))
	}

	// An empty list is [] (GA4 leaves the key out).
	empty, err := h.run(t, StepListDataStreams, `{"property":"properties/`+props[len(props)-1].(map[string]any)["property_id"].(string)+`"}`)
	if err != nil || len(empty["data_streams"].([]any)) != 0 {
		t.Errorf("empty list = %v, %v", empty, err)
	}
}

// Run Reports says from which date its figures may still change (GA4
// processes data within 48 hours), in the property's time zone, and
// whether the report reaches that date; realtime reports say how many
// minutes they cover.
func TestReportsSayWhichFiguresMayStillChange(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	p := "properties/" + h.prop
	// start is 2026-03-02 11:20 in Berlin: 48 hours earlier it was
	// 2026-02-28, the first date not final yet.
	for _, tc := range []struct {
		ranges string
		change bool
	}{
		{``, true}, // the default, 28daysAgo..yesterday
		{`,"date_ranges":[{"start_date":"2026-02-01","end_date":"2026-02-27"}]`, false},
		{`,"date_ranges":[{"start_date":"2026-02-01","end_date":"2026-02-28"}]`, true},
		{`,"date_ranges":[{"start_date":"30daysAgo","end_date":"3daysAgo"}]`, false},
		{`,"date_ranges":[{"start_date":"30daysAgo","end_date":"2daysAgo"}]`, true},
		{`,"date_ranges":[{"start_date":"30daysAgo","end_date":"3daysAgo"},{"start_date":"today","end_date":"today"}]`, true},
	} {
		out, err := h.run(t, StepRunReports, `{"property":"`+p+`","metrics":["eventCount"]`+tc.ranges+`}`)
		if err != nil {
			t.Fatal(err)
		}
		if out["data_may_change_from"] != "2026-02-28" || out["may_change"] != tc.change {
			t.Errorf("%s: data_may_change_from %v may_change %v; want 2026-02-28 %v", tc.ranges, out["data_may_change_from"], out["may_change"], tc.change)
		}
		f, _ := out["freshness"].(string)
		if !strings.Contains(f, "2026-02-28") || !strings.Contains(f, "48 hours") || !strings.Contains(f, "Europe/Berlin") {
			t.Errorf("freshness = %q", f)
		}
		if _, ok := out["covers_minutes"]; ok {
			t.Errorf("a core report says covers_minutes: %v", out)
		}
	}

	// The date is the property's: at 2026-03-03 00:20 in Kiritimati
	// (UTC+14) it is already 2026-03-01 there 48 hours earlier.
	far := h.fake.AddProperty(fakeanalytics.Property{Account: "100", TimeZone: "Pacific/Kiritimati"})
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+far.ID, fakeanalytics.RoleViewer)
	out, err := h.run(t, StepRunReports, `{"property":"properties/`+far.ID+`","metrics":["eventCount"],"date_ranges":[{"start_date":"2026-02-01","end_date":"2026-02-28"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["data_may_change_from"] != "2026-03-01" || out["may_change"] != false {
		t.Errorf("Kiritimati: %v %v; want 2026-03-01 false", out["data_may_change_from"], out["may_change"])
	}

	// A day later the date moves on.
	h.clock.Advance(24 * time.Hour)
	out, err = h.run(t, StepRunReports, `{"property":"`+p+`","metrics":["eventCount"],"date_ranges":[{"start_date":"2026-02-01","end_date":"2026-02-28"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["data_may_change_from"] != "2026-03-01" || out["may_change"] != false {
		t.Errorf("a day later: %v %v; want 2026-03-01 false", out["data_may_change_from"], out["may_change"])
	}

	for _, tc := range []struct {
		ranges  string
		minutes float64
	}{
		{``, 30},
		{`,"minute_ranges":[{"start_minutes_ago":4,"end_minutes_ago":0}]`, 5},
		{`,"minute_ranges":[{"start_minutes_ago":4},{"start_minutes_ago":29,"end_minutes_ago":10}]`, 30},
	} {
		out, err := h.run(t, StepRunRealtimeReport, `{"property":"`+p+`","metrics":["activeUsers"]`+tc.ranges+`}`)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := out["freshness"].(string)
		if out["covers_minutes"] != tc.minutes || out["may_change"] != true || !strings.Contains(f, fmt.Sprintf("last %d minutes", int(tc.minutes))) {
			t.Errorf("realtime %s: covers_minutes %v may_change %v freshness %q; want %v", tc.ranges, out["covers_minutes"], out["may_change"], f, tc.minutes)
		}
		if _, ok := out["data_may_change_from"]; ok {
			t.Errorf("a realtime report says data_may_change_from: %v", out)
		}
	}
}
