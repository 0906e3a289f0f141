package pipeline_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/pipeline"
)

func TestRenderInput(t *testing.T) {
	data := map[string]any{
		"resource": map[string]any{"number": json.Number("7"), "labels": []any{"bug", "p1"}},
		"payload":  map[string]any{"commits": []any{map[string]any{"id": "a"}, map[string]any{"id": "b"}}},
	}
	out, err := pipeline.RenderInput(json.RawMessage(`{
		"number": "{{ .resource.number }}",
		"labels": "{{ .resource.labels }}",
		"title": "#{{ .resource.number }}: {{ range $i, $c := .payload.commits }}{{ if $i }}, {{ end }}{{ $c.id }}{{ end }}"
	}`), data)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"labels":["bug","p1"],"number":7,"title":"#7: a, b"}`; string(out) != want {
		t.Errorf("rendered %s, want %s", out, want)
	}
	if _, err := pipeline.RenderInput(json.RawMessage(`{"x":"{{ .resource.nope }}"}`), data); err == nil {
		t.Error("a missing field rendered")
	}
}

// TestTemplatesCannotHoldAWorker: the dispatcher's workers are shared by
// every tenant and a template cannot be stopped once it runs, so what
// could loop for long or render without bound is refused when the agent
// is created, and again when a step renders.
func TestTemplatesCannotHoldAWorker(t *testing.T) {
	for name, tmpl := range map[string]string{
		"a range over a number":       `spin{{range 100000000000}}{{end}}`,
		"a range over a function":     `{{range len .payload.body}}x{{end}}`,
		"a range over a pipeline":     `{{range .payload.commits | json}}x{{end}}`,
		"ranges three deep":           `{{range .a}}{{range .b}}{{range .c}}x{{end}}{{end}}{{end}}`,
		"ranges three deep in an if":  `{{range .a}}{{if .b}}{{range .b}}{{with .c}}{{range .c}}x{{end}}{{end}}{{end}}{{end}}{{end}}`,
		"a template defined":          `{{define "x"}}{{template "x"}}{{end}}`,
		"a template called":           `{{template "y"}}`,
		"a block":                     `{{block "z" .}}{{end}}`,
		"a range over a number, else": `{{if .a}}{{else}}{{range 5}}{{end}}{{end}}`,
	} {
		input, _ := json.Marshal(map[string]string{"title": tmpl})
		err := pipeline.CheckTemplates(input)
		var te *pipeline.TemplateError
		if !errors.As(err, &te) || te.Path != "title" {
			t.Errorf("%s: CheckTemplates = %v, want a TemplateError at title", name, err)
		}
		if _, err := pipeline.RenderInput(input, map[string]any{}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	// Two deep over the data is fine.
	ok := json.RawMessage(`{"t":"{{range .a}}{{range .b}}x{{end}}{{end}}"}`)
	if err := pipeline.CheckTemplates(ok); err != nil {
		t.Errorf("two nested ranges: %v", err)
	}

	// Output is bounded: rendering stops at the limit.
	many := make([]any, 3000)
	for i := range many {
		many[i] = i
	}
	start := time.Now()
	_, err := pipeline.RenderInput(json.RawMessage(`{"t":"{{range .a}}{{range $.a}}0123456789{{end}}{{end}}"}`), map[string]any{"a": many})
	if err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("90 MB of output: %v, want an error naming the limit", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("rendering up to the limit took %s", d)
	}
}
