package analytics

import (
	"net/url"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/analytics/fakega"
)

func TestRetriesOn503ForReads(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	h.fake.FailNext(fakega.RouteRunReport, 2, fakega.Failure{})
	if err := h.report(t); err != nil {
		t.Fatalf("two 503s then success: %v", err)
	}
	if n := len(h.fake.RequestsTo(fakega.RouteRunReport)); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}

	h.fake.FailNext(fakega.RouteGetProperty, 1, fakega.Failure{Code: 500})
	if _, err := h.run(t, StepGetProperty, `{"property":"properties/`+h.prop+`"}`); err != nil {
		t.Errorf("GET after a 500: %v", err)
	}

	h.fake.ClearRequests()
	h.fake.FailNext(fakega.RouteRunReport, 3, fakega.Failure{})
	err := h.report(t)
	if ce := wantCode(t, err, connectors.CodeUpstream); ce.Status != 503 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakega.RouteRunReport)); n != 3 {
		t.Errorf("%d attempts, want 3 at most", n)
	}
}

func TestNoRetryForWrites(t *testing.T) {
	h := newHarness(t)
	h.fake.Grant(fakega.DefaultUser, "accounts/100", fakega.RoleAdministrator)
	h.fake.FailNext(fakega.RouteCreateProperty, 1, fakega.Failure{})
	_, err := h.run(t, StepCreateProperties, `{"display_name":"Shop","time_zone":"UTC","currency_code":"USD"}`)
	if ce := wantCode(t, err, connectors.CodeUpstream); ce.Status != 503 || !ce.Retryable {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakega.RouteCreateProperty)); n != 1 {
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
