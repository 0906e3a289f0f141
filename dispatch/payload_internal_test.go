package dispatch

import (
	"encoding/json"
	"testing"
)

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
		if got := filterReadsPayload(expr); got != want {
			t.Errorf("filterReadsPayload(%q) = %v, want %v", expr, got, want)
		}
	}
}

func TestInputReadsPayload(t *testing.T) {
	for input, want := range map[string]bool{
		`{"a": "{{ .payload.issue.title }}"}`:                                         true,
		`{"a": ["x", {"b": "#{{ .resource.number }}: {{ .payload.issue.title }}."}]}`: true,
		`{"a": "{{ json . }}"}`:                                                       true,
		`{"a": "{{ $.payload }}"}`:                                                    true,
		`{"a": "{{ index . \"payload\" }}"}`:                                          true,
		`{"a": "{{ if .payload }}x{{ end }}"}`:                                        true,
		`{"a": "{{ range .resource.labels }}{{ . }}{{ end }}"}`:                       true, // may over-report
		`{"a": "{{ .resource.number }}", "b": "payload, literally."}`:                 false,
		`{"a": "#{{ .resource.number }}: {{ .steps.find.output.id }}."}`:              false,
		`{"a": "{{ default \"x\" .resource.title }}"}`:                                false,
		`{"a": "no template"}`:                                                        false,
		``:                                                                            false,
	} {
		if got := inputReadsPayload(json.RawMessage(input)); got != want {
			t.Errorf("inputReadsPayload(%s) = %v, want %v", input, got, want)
		}
	}
}
