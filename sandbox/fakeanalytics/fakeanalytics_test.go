package fakeanalytics

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 2, 10, 20, 0, 0, time.UTC)

func newFake(t *testing.T) (*Server, string, Property) {
	t.Helper()
	s := New(Options{Now: func() time.Time { return now }})
	u := s.Start()
	t.Cleanup(s.Close)
	p := s.AddProperty(Property{Account: "7", DisplayName: "Web"})
	s.Grant(DefaultUser, "properties/"+p.ID, RoleViewer)
	return s, u, p
}

func do(t *testing.T, method, u, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, u, b)
	}
	return resp.StatusCode, m
}

func TestEmptyReportHasNoRowsOrRowCount(t *testing.T) {
	s, u, p := newFake(t)
	s.SeedReportData(p.ID, 3)
	status, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "tok",
		`{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"2daysAgo","endDate":"today"}],
		  "dimensionFilter":{"filter":{"fieldName":"country","stringFilter":{"value":"Atlantis"}}}}`)
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	for _, k := range []string{"rows", "rowCount", "propertyQuota"} {
		if _, ok := m[k]; ok {
			t.Errorf("an empty report has %q", k)
		}
	}
	for _, k := range []string{"dimensionHeaders", "metricHeaders", "metadata", "kind"} {
		if _, ok := m[k]; !ok {
			t.Errorf("an empty report lacks %q", k)
		}
	}
	status, m = do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "tok",
		`{"dimensions":[{"name":"country"}],"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"2daysAgo","endDate":"today"}],"returnPropertyQuota":true,"limit":"2"}`)
	if status != 200 || m["rowCount"] != 4.0 || len(m["rows"].([]any)) != 2 || m["propertyQuota"] == nil {
		t.Errorf("report = %d %v", status, m)
	}
	v := m["rows"].([]any)[0].(map[string]any)["metricValues"].([]any)[0].(map[string]any)["value"]
	if _, ok := v.(string); !ok {
		t.Errorf("metric values must be strings: %v", v)
	}
}

func TestErrorsInGoogleShape(t *testing.T) {
	s, u, p := newFake(t)
	cases := []struct {
		method, path, token, body string
		code                      int
		status                    string
	}{
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "", `{}`, 401, "UNAUTHENTICATED"},
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "t", `{"metrics":[{"name":"nope"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}`, 400, "INVALID_ARGUMENT"},
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "t", `{"metrics":[{"name":"sessions"}],"dateRanges":[{"startDate":"today","endDate":"yesterday"}]}`, 400, "INVALID_ARGUMENT"},
		{"POST", "/v1beta/properties/" + p.ID + ":runReport", "t", `{"metrics":[{"name":"sessions"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"limit":0}`, 400, "INVALID_ARGUMENT"},
		{"POST", "/v1beta/properties/999:runReport", "t", `{}`, 403, "PERMISSION_DENIED"},
		{"GET", "/v1beta/properties", "t", ``, 400, "INVALID_ARGUMENT"},
		{"GET", "/v1beta/properties/999", "t", ``, 404, "NOT_FOUND"},
		{"POST", "/v1beta/properties/" + p.ID + "/keyEvents", "t", `{"eventName":"x","countingMethod":"ONCE_PER_EVENT"}`, 403, "PERMISSION_DENIED"},
		{"POST", "/v1beta/properties", "t", `{"parent":"accounts/7","displayName":"X","timeZone":"UTC"}`, 403, "PERMISSION_DENIED"},
		{"GET", "/v1/properties/" + p.ID, "t", ``, 404, "NOT_FOUND"},
	}
	for _, c := range cases {
		code, m := do(t, c.method, u+c.path, c.token, c.body)
		e, _ := m["error"].(map[string]any)
		if code != c.code || e["status"] != c.status || e["code"] != float64(c.code) || e["message"] == "" {
			t.Errorf("%s %s: %d %v, want %d %s", c.method, c.path, code, m, c.code, c.status)
		}
	}
	s.Grant(DefaultUser, "accounts/7", RoleAdministrator)
	code, m := do(t, "POST", u+"/v1beta/properties", "t", `{"parent":"accounts/7","displayName":"X","timeZone":"Asia/Tokyo","currencyCode":"JPY"}`)
	if code != 200 || m["timeZone"] != "Asia/Tokyo" || !strings.HasPrefix(m["name"].(string), "properties/") {
		t.Errorf("create = %d %v", code, m)
	}
}

func TestQuotaExhaustion(t *testing.T) {
	s, u, p := newFake(t)
	s.SetTokenCost(4)
	l := DefaultLimits(Core)
	l.TokensPerHour = 8
	s.SetLimits(p.ID, Core, l)
	body := `{"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}],"returnPropertyQuota":true}`
	for i, want := range []float64{4, 0} {
		code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "t", body)
		q := m["propertyQuota"].(map[string]any)["tokensPerHour"].(map[string]any)
		if code != 200 || q["remaining"] != want || q["consumed"] != 4.0 {
			t.Errorf("report %d: %d %v", i, code, q)
		}
	}
	code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "t", body)
	e := m["error"].(map[string]any)
	if code != 429 || e["status"] != "RESOURCE_EXHAUSTED" || !strings.Contains(e["message"].(string), "per hour") {
		t.Errorf("spent: %d %v", code, m)
	}
	if u := s.Usage(p.ID, Core); u.TokensThisHour != 8 || u.TokensToday != 8 {
		t.Errorf("usage = %+v", u)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	s, u, p := newFake(t)
	release := s.HoldReports()
	body := `{"metrics":[{"name":"eventCount"}],"dateRanges":[{"startDate":"today","endDate":"today"}]}`
	var wg sync.WaitGroup
	codes := make(chan int, 11)
	for range 10 {
		wg.Go(func() {
			code, _ := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "t", body)
			codes <- code
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitInFlight(ctx, p.ID, 10); err != nil {
		t.Fatal(err)
	}
	code, m := do(t, "POST", u+"/v1beta/properties/"+p.ID+":runReport", "t", body)
	if code != 429 || !strings.Contains(m["error"].(map[string]any)["message"].(string), "concurrent") {
		t.Errorf("eleventh = %d %v", code, m)
	}
	release()
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("held report: %d", c)
		}
	}
	if got := s.MaxInFlight(p.ID); got != 11 {
		t.Errorf("MaxInFlight = %d, want 11", got)
	}
}

func TestAdminPagination(t *testing.T) {
	s, u, _ := newFake(t)
	s.Grant(DefaultUser, "accounts/7", RoleViewer)
	for range 120 {
		s.AddProperty(Property{Account: "7"})
	}
	seen := 0
	token := ""
	for pages := 0; ; pages++ {
		q := "?filter=parent:accounts/7&pageSize=50"
		if token != "" {
			q += "&pageToken=" + token
		}
		code, m := do(t, "GET", u+"/v1beta/properties"+q, "t", "")
		if code != 200 {
			t.Fatalf("%d %v", code, m)
		}
		seen += len(m["properties"].([]any))
		next, ok := m["nextPageToken"].(string)
		if !ok {
			if pages != 2 || seen != 121 {
				t.Errorf("%d pages, %d properties", pages+1, seen)
			}
			return
		}
		token = next
	}
}
