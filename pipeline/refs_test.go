package pipeline

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckFieldRefs(t *testing.T) {
	outputs := map[string]json.RawMessage{
		"look": json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"user":{"$ref":"#/$defs/user"}},"$defs":{"user":{"type":"object","properties":{"login":{"type":"string"}}}}}`),
		"free": nil,
	}
	for _, tc := range []struct{ input, want string }{
		{`{"body": "{{ .resource.number }} in {{ .repository.full_name }}"}`, ""},
		{`{"n": "{{ .resource.number }}", "labels": ["{{ .resource.labels }}"]}`, ""},
		{`{"body": "{{ .payload.issue.whatever.deep }}"}`, ""},
		{`{"body": "{{ .steps.look.output.title }} by {{ .steps.look.output.user.login }}"}`, ""},
		{`{"body": "{{ .steps.free.output.anything }}"}`, ""},
		{`{"body": "{{ range .resource.labels }}{{ .name }}{{ end }}"}`, ""},
		{`{"body": "{{ if .resource.title }}{{ .resource.title }}{{ else }}{{ .resource.tittle }}{{ end }}"}`, `"tittle"`},
		{`{"body": "{{ .resource.nmber }}"}`, `.resource has no field "nmber"`},
		{`{"body": "{{ .repo.name }}"}`, `the event has no field "repo"`},
		{`{"deep": {"list": ["x", "{{ .steps.look.output.titel }}"]}}`, `no field "titel"`},
		{`{"body": "{{ .steps.look.output.user.name }}"}`, `no field "name"`},
		{`{"body": "{{ .steps.later.output.x }}"}`, `no earlier step is named "later"`},
		{`{"body": "{{ .steps.look.result }}"}`, `.steps.look.output`},
	} {
		err := CheckFieldRefs(json.RawMessage(tc.input), outputs)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.input, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want it to say %s", tc.input, err, tc.want)
		}
		var te *TemplateError
		if err != nil && !errors.As(err, &te) {
			t.Errorf("%s: %T, want a *TemplateError", tc.input, err)
		}
	}
}

// CheckFieldRefs refuses all CheckTemplates refuses: the registry calls
// only it when an agent is saved.
func TestCheckFieldRefsRefusesWhatCheckTemplatesDoes(t *testing.T) {
	for _, input := range []string{
		`not json`,
		`{"body": "{{ .resource.title "}`,
		`{"body": "{{ range 100000 }}x{{ end }}"}`,
		`{"body": "{{ define \"x\" }}x{{ end }}"}`,
		`{"body": "{{ template \"x\" }}"}`,
	} {
		if CheckTemplates(json.RawMessage(input)) == nil {
			t.Errorf("%s: CheckTemplates takes it; the case tests nothing", input)
		}
		var te *TemplateError
		if err := CheckFieldRefs(json.RawMessage(input), nil); !errors.As(err, &te) {
			t.Errorf("%s: CheckFieldRefs: %v, want a *TemplateError", input, err)
		}
	}
	if err := CheckFieldRefs(json.RawMessage("  "), nil); err != nil {
		t.Errorf("an empty input: %v", err)
	}
}
