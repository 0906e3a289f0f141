package match

import "testing"

func TestFilterReadsPayload(t *testing.T) {
	for expr, want := range map[string]bool{
		"event.payload.issue.user.login == 'octocat'":     true,
		"has(event.payload.issue)":                        true,
		"event['payload'] != null":                        true,
		"event['resource'].number > 1":                    true, // event used whole: may reach it
		"size(event) > 3":                                 true,
		"event.exists(k, k == 'x')":                       true,
		"event.resource.number > 3":                       false,
		"event . resource.labels.exists(l, l == 'a')":     false,
		"event.kind == 'new_issue' && event.sender != ''": false,
	} {
		if got := FilterReadsPayload(expr); got != want {
			t.Errorf("FilterReadsPayload(%q) = %v, want %v", expr, got, want)
		}
	}
}
