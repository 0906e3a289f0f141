package apicall

import (
	"regexp"
	"testing"

	"github.com/triggerd/triggerd/internal/discovery"
)

// The rule that picks the analytics API holds for every method Google's
// discovery documents describe, in v1beta and v1alpha: each Data API
// method is the Data API's, each Admin API method the Admin API's.
func TestAnalyticsAPIRuleAgreesWithDiscovery(t *testing.T) {
	paths := []string{
		"analyticsdata/v1beta/analyticsdata-api.json",
		"analyticsdata/v1alpha/analyticsdata-api.json",
		"analyticsadmin/v1beta/analyticsadmin-api.json",
		"analyticsadmin/v1alpha/analyticsadmin-api.json",
	}
	docs := discovery.Load(t, paths...)
	param := regexp.MustCompile(`\{[^}]+\}`)
	for i, d := range docs {
		want := analyticsAPIData
		if d.Name == "analyticsadmin" {
			want = analyticsAPIAdmin
		}
		n := 0
		for _, m := range d.Methods() {
			p := m.FlatPath
			if p == "" {
				p = m.Path
			}
			endpoint := param.ReplaceAllString(p, "123")
			got, why := analyticsAPIOf(endpoint)
			if got != want {
				t.Errorf("%s: %s %s is the %s's; the rule says %q (%s)", paths[i], m.HTTPMethod, endpoint, analyticsAPIName(want), got, why)
			}
			n++
		}
		if n < 5 {
			t.Errorf("%s: only %d methods", paths[i], n)
		}
	}
}
