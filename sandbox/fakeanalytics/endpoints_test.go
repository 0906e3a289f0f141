package fakeanalytics

import (
	"strings"
	"testing"
)

// wantError checks a Google error answer: status, canonical status and
// a message containing want.
func wantError(t *testing.T, what string, code int, m map[string]any, wantCode int, wantStatus, want string) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	msg, _ := e["message"].(string)
	if code != wantCode || e["code"] != float64(wantCode) || e["status"] != wantStatus || !strings.Contains(msg, want) {
		t.Errorf("%s: %d %v; want %d %s mentioning %q", what, code, m, wantCode, wantStatus, want)
	}
}

// The spec's example fields: sessionSource is a dimension; conversions
// was renamed keyEvents, which the Data API refuses by its old name,
// saying so, and keyEvents counts the events marked as key events.
func TestSpecExampleFields(t *testing.T) {
	s, u, p := newFake(t)
	s.AddFacts(p.ID,
		Fact{Date: "2026-03-01", Country: "Germany", EventName: "purchase", SessionSource: "google", EventCount: 4},
		Fact{Date: "2026-03-01", Country: "Germany", EventName: "page_view", SessionSource: "google", EventCount: 10, ScreenPageViews: 10},
		Fact{Date: "2026-03-01", Country: "India", EventName: "purchase", EventCount: 1},
	)
	s.AddKeyEvent(p.ID, KeyEvent{EventName: "purchase"})
	report := u + "/v1beta/properties/" + p.ID + ":runReport"
	code, m := do(t, "POST", report, "tok", `{"dimensions":[{"name":"sessionSource"}],"metrics":[{"name":"keyEvents"},{"name":"eventCount"}],
		"dateRanges":[{"startDate":"7daysAgo","endDate":"today"}],"orderBys":[{"dimension":{"dimensionName":"sessionSource"}}]}`)
	if code != 200 {
		t.Fatalf("sessionSource × keyEvents: %d %v", code, m)
	}
	var got []string
	for _, r := range m["rows"].([]any) {
		row := r.(map[string]any)
		got = append(got, row["dimensionValues"].([]any)[0].(map[string]any)["value"].(string)+"="+
			row["metricValues"].([]any)[0].(map[string]any)["value"].(string)+"/"+
			row["metricValues"].([]any)[1].(map[string]any)["value"].(string))
	}
	if strings.Join(got, " ") != "(not set)=1/1 google=4/14" {
		t.Errorf("rows = %v", got)
	}
	for _, old := range []string{"conversions", "conversions:purchase", "sessionConversionRate"} {
		code, m = do(t, "POST", report, "tok", `{"metrics":[{"name":"`+old+`"}],"dateRanges":[{"startDate":"7daysAgo","endDate":"today"}]}`)
		wantError(t, old, code, m, 400, "INVALID_ARGUMENT", "was renamed")
	}
	code, m = do(t, "GET", u+"/v1beta/properties/"+p.ID+"/metadata", "tok", "")
	names := map[string]bool{}
	for _, k := range []string{"dimensions", "metrics"} {
		for _, f := range m[k].([]any) {
			names[f.(map[string]any)["apiName"].(string)] = true
		}
	}
	if code != 200 || !names["sessionSource"] || !names["keyEvents"] || names["conversions"] {
		t.Errorf("metadata: %d %v", code, names)
	}
}

func TestPivotReport(t *testing.T) {
	s, u, p := newFake(t)
	s.AddFacts(p.ID,
		Fact{Date: "2026-03-01", Country: "Germany", EventName: "page_view", EventCount: 5},
		Fact{Date: "2026-03-01", Country: "Germany", EventName: "scroll", EventCount: 2},
		Fact{Date: "2026-03-01", Country: "India", EventName: "page_view", EventCount: 9},
		Fact{Date: "2026-03-01", Country: "Brazil", EventName: "scroll", EventCount: 1},
	)
	pivot := u + "/v1beta/properties/" + p.ID + ":runPivotReport"
	code, m := do(t, "POST", pivot, "tok", `{"dimensions":[{"name":"country"},{"name":"eventName"}],"metrics":[{"name":"eventCount"}],
		"dateRanges":[{"startDate":"7daysAgo","endDate":"today"}],"returnPropertyQuota":true,
		"pivots":[{"fieldNames":["country"],"limit":"2","orderBys":[{"metric":{"metricName":"eventCount"},"desc":true}]},
		          {"fieldNames":["eventName"],"limit":5,"orderBys":[{"dimension":{"dimensionName":"eventName"}}]}]}`)
	if code != 200 || m["kind"] != "analyticsData#runPivotReport" || m["propertyQuota"] == nil || m["metadata"] == nil {
		t.Fatalf("pivot: %d %v", code, m)
	}
	if _, ok := m["rowCount"]; ok {
		t.Error("a pivot report has no rowCount of its own")
	}
	hs := m["pivotHeaders"].([]any)
	first := hs[0].(map[string]any)
	if first["rowCount"] != 3.0 || len(first["pivotDimensionHeaders"].([]any)) != 2 {
		t.Errorf("country pivot header = %v", first)
	}
	var got []string
	for _, r := range m["rows"].([]any) {
		row := r.(map[string]any)
		dv := row["dimensionValues"].([]any)
		got = append(got, dv[0].(map[string]any)["value"].(string)+"/"+dv[1].(map[string]any)["value"].(string)+"="+
			row["metricValues"].([]any)[0].(map[string]any)["value"].(string))
	}
	// Germany (7) and India (9) are the two countries with most events,
	// India first; Brazil is cut by the pivot's limit.
	if strings.Join(got, " ") != "India/page_view=9 Germany/page_view=5 Germany/scroll=2" {
		t.Errorf("rows = %v", got)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"pivots":[{"fieldNames":["country"]}]}`, "limit is required"},
		{`{"dimensions":[{"name":"country"},{"name":"eventName"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"pivots":[{"fieldNames":["country"],"limit":3}]}`, "in no pivot"},
		{`{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}`, "pivot is required"},
		{`{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"limit":5,"pivots":[{"fieldNames":["country"],"limit":3}]}`, "Invalid JSON payload"},
		{`{"dimensions":[{"name":"country"},{"name":"eventName"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"pivots":[{"fieldNames":["country"],"limit":1000},{"fieldNames":["eventName"],"limit":1000}]}`, "at most 250000"},
	} {
		code, m := do(t, "POST", pivot, "tok", tc.body)
		wantError(t, tc.want, code, m, 400, "INVALID_ARGUMENT", tc.want)
	}
	code, m = do(t, "POST", u+"/v1beta/properties/"+p.ID+":batchRunPivotReports", "tok", `{"requests":[{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],
		"dateRanges":[{"startDate":"7daysAgo","endDate":"today"}],"pivots":[{"fieldNames":["country"],"limit":10}]}]}`)
	if code != 200 || m["kind"] != "analyticsData#batchRunPivotReports" || len(m["pivotReports"].([]any)) != 1 {
		t.Errorf("batch: %d %v", code, m)
	}
}

func TestPropertyUpdateAndDelete(t *testing.T) {
	s, u, p := newFake(t)
	prop := u + "/v1beta/properties/" + p.ID
	code, m := do(t, "PATCH", prop+"?updateMask=display_name,timeZone", "tok", `{"displayName":"Shop","timeZone":"Europe/Paris","currencyCode":"EUR"}`)
	wantError(t, "viewer patch", code, m, 403, "PERMISSION_DENIED", "permission")
	s.Grant(DefaultUser, "properties/"+p.ID, RoleEditor)
	code, m = do(t, "PATCH", prop+"?updateMask=display_name,timeZone", "tok", `{"displayName":"Shop","timeZone":"Europe/Paris","currencyCode":"EUR"}`)
	if code != 200 || m["displayName"] != "Shop" || m["timeZone"] != "Europe/Paris" || m["currencyCode"] != "USD" {
		t.Errorf("patch: %d %v (currencyCode is not in the mask)", code, m)
	}
	for _, tc := range []struct{ mask, body, want string }{
		{"", `{"displayName":"X"}`, "update_mask is required"},
		{"?updateMask=property_type", `{"propertyType":"PROPERTY_TYPE_ROLLUP"}`, "not an updatable field"},
		{"?updateMask=time_zone", `{"timeZone":"Mars/Olympus"}`, "Invalid timeZone"},
		{"?updateMask=display_name", `{"displayName":"X","colour":"red"}`, "Invalid JSON payload"},
	} {
		code, m := do(t, "PATCH", prop+tc.mask, "tok", tc.body)
		wantError(t, tc.mask, code, m, 400, "INVALID_ARGUMENT", tc.want)
	}
	code, m = do(t, "DELETE", prop, "tok", "")
	wantError(t, "editor delete", code, m, 403, "PERMISSION_DENIED", "permission")
	s.Grant(DefaultUser, "accounts/7", RoleAdministrator)
	code, m = do(t, "DELETE", prop, "tok", "")
	if code != 200 || m["name"] != "properties/"+p.ID || m["deleteTime"] != "2026-03-02T10:20:00Z" || m["expireTime"] != "2026-04-06T10:20:00Z" {
		t.Errorf("delete: %d %v", code, m)
	}
	code, m = do(t, "GET", u+"/v1beta/properties?filter=parent:accounts/7", "tok", "")
	if code != 200 || m["properties"] != nil {
		t.Errorf("a trashed property is listed: %d %v", code, m)
	}
	code, m = do(t, "GET", u+"/v1beta/properties?filter=parent:accounts/7&showDeleted=true", "tok", "")
	if code != 200 || len(m["properties"].([]any)) != 1 {
		t.Errorf("showDeleted: %d %v", code, m)
	}
	code, m = do(t, "DELETE", prop, "tok", "")
	wantError(t, "second delete", code, m, 404, "NOT_FOUND", "not found")
}

func TestDataStreamCreateUpdateDelete(t *testing.T) {
	s, u, p := newFake(t)
	streams := u + "/v1beta/properties/" + p.ID + "/dataStreams"
	body := `{"type":"WEB_DATA_STREAM","displayName":"Site","webStreamData":{"defaultUri":"https://shop.example"}}`
	code, m := do(t, "POST", streams, "tok", body)
	wantError(t, "viewer create", code, m, 403, "PERMISSION_DENIED", "permission")
	s.Grant(DefaultUser, "properties/"+p.ID, RoleEditor)
	code, m = do(t, "POST", streams, "tok", body)
	web, _ := m["webStreamData"].(map[string]any)
	name, _ := m["name"].(string)
	if code != 200 || !strings.HasPrefix(name, "properties/"+p.ID+"/dataStreams/") || m["type"] != "WEB_DATA_STREAM" ||
		web["defaultUri"] != "https://shop.example" || !strings.HasPrefix(web["measurementId"].(string), "G-") {
		t.Fatalf("create: %d %v", code, m)
	}
	code, m = do(t, "POST", streams, "tok", `{"type":"IOS_APP_DATA_STREAM","iosAppStreamData":{"bundleId":"com.example.app"}}`)
	if code != 200 || m["iosAppStreamData"].(map[string]any)["bundleId"] != "com.example.app" {
		t.Errorf("iOS: %d %v", code, m)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"displayName":"x","webStreamData":{}}`, "type is required"},
		{`{"type":"WEB_DATA_STREAM","displayName":"x"}`, "webStreamData must be populated"},
		{`{"type":"WEB_DATA_STREAM","webStreamData":{}}`, "displayName is required"},
		{`{"type":"WEB_DATA_STREAM","displayName":"x","webStreamData":{},"iosAppStreamData":{"bundleId":"a"}}`, "does not apply"},
		{`{"type":"ANDROID_APP_DATA_STREAM","androidAppStreamData":{}}`, "packageName is required"},
		{`{"type":"WEB_DATA_STREAM","displayName":"x","webStreamData":{"defaultUri":"ftp://x"}}`, "Invalid defaultUri"},
	} {
		code, m := do(t, "POST", streams, "tok", tc.body)
		wantError(t, tc.want, code, m, 400, "INVALID_ARGUMENT", tc.want)
	}
	one := u + "/v1beta/" + name
	code, m = do(t, "PATCH", one+"?updateMask=display_name", "tok", `{"displayName":"Shop site","type":"IOS_APP_DATA_STREAM"}`)
	if code != 200 || m["displayName"] != "Shop site" || m["type"] != "WEB_DATA_STREAM" {
		t.Errorf("patch: %d %v", code, m)
	}
	code, m = do(t, "PATCH", one+"?updateMask=type", "tok", `{"type":"IOS_APP_DATA_STREAM"}`)
	wantError(t, "patch type", code, m, 400, "INVALID_ARGUMENT", "not an updatable field")
	code, m = do(t, "PATCH", one, "tok", `{"displayName":"x"}`)
	wantError(t, "patch without mask", code, m, 400, "INVALID_ARGUMENT", "update_mask is required")
	code, m = do(t, "DELETE", one, "tok", "")
	if code != 200 || len(m) != 0 {
		t.Errorf("delete: %d %v", code, m)
	}
	code, m = do(t, "GET", one, "tok", "")
	wantError(t, "get deleted", code, m, 404, "NOT_FOUND", "not found")
	if n := len(s.DataStreams(p.ID)); n != 1 {
		t.Errorf("%d streams left; want the iOS one", n)
	}
}
