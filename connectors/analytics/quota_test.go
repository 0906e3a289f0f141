package analytics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakeanalytics"
)

func (h *harness) report(t testing.TB) error {
	t.Helper()
	_, err := h.run(t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["eventCount"],"dimensions":["country"]}`)
	return err
}

func TestQuotaKnownSpentIsRefusedBeforeSending(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	h.fake.SetTokenCost(5)
	l := fakeanalytics.DefaultLimits(fakeanalytics.Core)
	l.TokensPerHour = 10
	h.fake.SetLimits(h.prop, fakeanalytics.Core, l)

	for i := range 2 {
		if err := h.report(t); err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	// The second answer said tokensPerHour.remaining = 0.
	err := h.report(t)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.RetryAfter != 40*time.Minute || !ce.Retryable || ce.Status != 0 || !strings.Contains(ce.Message, "tokens per hour") {
		t.Errorf("refusal = %+v, want RetryAfter 40m to the next hour", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 2 {
		t.Fatalf("the fake saw %d reports, want 2: the third must not be sent", n)
	}
	// Realtime has its own budget.
	if _, err := h.run(t, StepRunRealtimeReport, `{"property":"properties/`+h.prop+`","metrics":["activeUsers"]}`); err != nil {
		t.Errorf("realtime while core is spent: %v", err)
	}
	// Admin calls are not reports.
	if _, err := h.run(t, StepGetProperty, `{"property":"properties/`+h.prop+`"}`); err != nil {
		t.Errorf("admin read while core is spent: %v", err)
	}
	// Another property is unaffected.
	other := h.fake.AddProperty(fakeanalytics.Property{Account: "100"})
	h.fake.Grant(fakeanalytics.DefaultUser, "properties/"+other.ID, fakeanalytics.RoleViewer)
	if _, err := h.run(t, StepRunReports, `{"property":"properties/`+other.ID+`","metrics":["eventCount"]}`); err != nil {
		t.Errorf("another property: %v", err)
	}
	// On the hour the budget is back, at the fake too.
	h.clock.Set(start.Truncate(time.Hour).Add(time.Hour))
	if err := h.report(t); err != nil {
		t.Errorf("after the hour: %v", err)
	}
}

func TestQuotaDailyBudgetResetsAtPacificMidnight(t *testing.T) {
	h := newHarness(t)
	h.fake.SetTokenCost(5)
	l := fakeanalytics.DefaultLimits(fakeanalytics.Core)
	l.TokensPerDay = 5
	h.fake.SetLimits(h.prop, fakeanalytics.Core, l)
	if err := h.report(t); err != nil {
		t.Fatal(err)
	}
	err := h.report(t)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	// 10:20 UTC on 2 March is 02:20 PST; midnight PST is 08:00 UTC on 3 March.
	if want := time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC).Sub(start); ce.RetryAfter != want {
		t.Errorf("RetryAfter = %v, want %v", ce.RetryAfter, want)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 1 {
		t.Errorf("%d reports sent", n)
	}
	h.clock.Set(time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC))
	if err := h.report(t); err != nil {
		t.Errorf("after Pacific midnight: %v", err)
	}
}

func TestQuota429(t *testing.T) {
	h := newHarness(t)
	l := fakeanalytics.DefaultLimits(fakeanalytics.Core)
	l.TokensPerHour = 0
	h.fake.SetLimits(h.prop, fakeanalytics.Core, l)
	err := h.report(t)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if ce.Status != 429 || ce.RetryAfter != 40*time.Minute || !strings.Contains(ce.Message, "RESOURCE_EXHAUSTED") {
		t.Errorf("error = %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 1 {
		t.Errorf("a 429 was retried: %d requests", n)
	}
	// What the 429 said is remembered.
	err = h.report(t)
	if ce := connectortest.WantCode(t, err, connectors.CodeRateLimited); ce.Status != 0 {
		t.Errorf("second call reached google: %+v", ce)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 1 {
		t.Errorf("%d requests", n)
	}
}

func TestConcurrencyIsBoundedPerProperty(t *testing.T) {
	h := newHarness(t)
	addFacts(h)
	waiting := make(chan string, 16)
	h.kit.quota.mu.Lock()
	h.kit.quota.onWait = func(p string) { waiting <- p }
	h.kit.quota.mu.Unlock()
	release := h.fake.HoldReports()
	defer release()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 11
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := h.runCtx(ctx, t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["eventCount"]}`)
			errs <- err
		})
	}
	if err := h.fake.WaitInFlight(ctx, h.prop, maxConcurrentPerProperty); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-waiting:
		if p != h.prop {
			t.Errorf("waiting on %s", p)
		}
	case <-ctx.Done():
		t.Fatal("the eleventh request never queued")
	}
	if got := h.fake.InFlight(h.prop); got != maxConcurrentPerProperty {
		t.Errorf("in flight at the fake = %d", got)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("report: %v", err)
		}
	}
	if got := h.fake.MaxInFlight(h.prop); got != maxConcurrentPerProperty {
		t.Errorf("the fake saw up to %d reports at once, want %d", got, maxConcurrentPerProperty)
	}
	if n := len(h.fake.RequestsTo(fakeanalytics.RouteRunReport)); n != 11 {
		t.Errorf("%d reports", n)
	}
}

func TestConcurrencyWaitEndsWithTheContext(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.kit.quota.mu.Lock()
	h.kit.quota.onWait = func(string) { cancel() }
	h.kit.quota.mu.Unlock()
	// Take every slot.
	for range maxConcurrentPerProperty {
		release, err := h.kit.quota.acquire(context.Background(), h.prop)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
	}
	_, err := h.runCtx(ctx, t, StepRunReports, `{"property":"properties/`+h.prop+`","metrics":["eventCount"]}`)
	ce := connectortest.WantCode(t, err, connectors.CodeRateLimited)
	if !strings.Contains(ce.Message, "in flight") || !errors.Is(err, &connectors.Error{Code: connectors.CodeRateLimited}) {
		t.Errorf("error = %v", ce)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("%d requests", n)
	}
}

func TestExtractQuota(t *testing.T) {
	body := []byte(`{
  "dimensionHeaders": [{"name": "pagePath"}],
  "rows": [{"dimensionValues": [{"value": "/x,\"propertyQuota\": {\"tokensPerDay\": {\"remaining\": 0}}"}]}],
  "propertyQuota": {
    "tokensPerDay": {"consumed": 3, "remaining": 199997},
    "tokensPerHour": {"consumed": 3, "remaining": 0}
  },
  "kind": "analyticsData#runReport"
}`)
	q := extractQuota(body)
	if q == nil || q.TokensPerDay == nil || q.TokensPerDay.Remaining != 199997 || q.TokensPerHour.Remaining != 0 {
		t.Fatalf("quota = %+v", q)
	}
	if q := extractQuota([]byte(`{"rows":[{"dimensionValues":[{"value":"\"propertyQuota\":{}"}]}]}`)); q != nil {
		t.Errorf("found a quota inside a string: %+v", q)
	}
	if q := extractQuota([]byte(`{"kind":"x"}`)); q != nil {
		t.Errorf("found a quota in %+v", q)
	}
}

func TestClassify(t *testing.T) {
	tr := newQuotaTracker(time.Now, 10)
	day := time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC).Sub(start)
	for msg, want := range map[string]time.Duration{
		"Exhausted property tokens per day. These quota tokens will return in under 24 hours.": day,
		"Exhausted property tokens per hour.":                                                  40 * time.Minute,
		"Exhausted property tokens for a project per hour.":                                    40 * time.Minute,
		"Exhausted concurrent requests quota.":                                                 concurrencyRetry,
		"Exhausted potentially thresholded requests quota.":                                    40 * time.Minute,
		"Something else": 40 * time.Minute,
	} {
		if got, _ := tr.classify(msg, start); got != want {
			t.Errorf("%q: %v, want %v", msg, got, want)
		}
	}
	// The server-error quota is named as such, though its message also
	// says "per project per hour".
	if _, blk := tr.classify("Exhausted server errors per project per hour. These quota tokens will return in under an hour.", start); blk.reason != "server errors per project per hour" {
		t.Errorf("server errors classified as %q", blk.reason)
	}
	// Summer time: 10:20 UTC on 1 July is 03:20 PDT; midnight PDT is 07:00 UTC.
	summer := time.Date(2026, 7, 1, 10, 20, 0, 0, time.UTC)
	if got := tr.nextDay(summer); !got.Equal(time.Date(2026, 7, 2, 7, 0, 0, 0, time.UTC)) {
		t.Errorf("nextDay(summer) = %v", got)
	}
}

func TestDefaultAccount(t *testing.T) {
	for md, want := range map[string]string{
		"accounts/1=A%2C B,accounts/2=C": "accounts/1",
		"accounts/9":                     "accounts/9",
		"":                               "",
		"junk=1":                         "",
	} {
		if got := defaultAccount(map[string]string{MetaAccounts: md}); got != want {
			t.Errorf("defaultAccount(%q) = %q, want %q", md, got, want)
		}
	}
}
