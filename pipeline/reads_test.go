package pipeline

import (
	"encoding/json"
	"testing"
)

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
		if got := InputReadsPayload(json.RawMessage(input)); got != want {
			t.Errorf("InputReadsPayload(%s) = %v, want %v", input, got, want)
		}
	}
}
