package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"
)

// A pipeline step's input is JSON whose string values may be Go templates
// over the run's data: the event envelope at the root ({{ .repository.full_name }},
// {{ .resource.number }}, {{ .payload.issue.title }}) and the outputs of
// earlier steps under .steps ({{ .steps.find.output.number }}).
//
// A string that is exactly one field reference ("{{ .resource.number }}")
// takes the referenced value with its JSON type, so a number stays a
// number and a list stays a list; any other template renders to a string.
// A reference to a missing field is an error, not an empty string, so a
// typo fails the step instead of commenting "<no value>".

// fieldRef matches a string that is a single field reference.
var fieldRef = regexp.MustCompile(`^\{\{-?\s*((?:\.[A-Za-z_][A-Za-z0-9_]*)+)\s*-?\}\}$`)

// templateFuncs are the functions templates may call.
var templateFuncs = template.FuncMap{
	// json encodes a value as JSON text.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	// default returns def when v is missing or empty.
	"default": func(def, v any) any {
		if v == nil || v == "" {
			return def
		}
		return v
	},
}

// TemplateError is a template that could not be parsed or executed.
type TemplateError struct {
	// Path is where in the input the template is ("body", "labels[1]").
	Path string
	Err  error
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("input %s: %v", e.Path, e.Err)
}

func (e *TemplateError) Unwrap() error { return e.Err }

// RenderInput renders the templates in a step's input against data and
// returns the resulting JSON.
func RenderInput(input json.RawMessage, data map[string]any) (json.RawMessage, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		return json.RawMessage("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &TemplateError{Path: "(input)", Err: fmt.Errorf("not JSON: %w", err)}
	}
	out, err := render(v, "", data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// CheckTemplates parses every template in input without running it, for
// validating an agent's steps when it is created.
func CheckTemplates(input json.RawMessage) error {
	if len(bytes.TrimSpace(input)) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return &TemplateError{Path: "(input)", Err: fmt.Errorf("not JSON: %w", err)}
	}
	return walkStrings(v, "", func(path, s string) error {
		if !strings.Contains(s, "{{") {
			return nil
		}
		if _, err := parseTemplate(path, s); err != nil {
			return &TemplateError{Path: path, Err: err}
		}
		return nil
	})
}

// Limits on what a template may do: the dispatcher's workers are shared
// by every tenant, and text/template runs to the end once started (it
// takes no context), so a template must not be able to loop for long or
// render without bound.
const (
	// MaxRenderedBytes bounds one template's output.
	MaxRenderedBytes = 1 << 20
	// maxRangeDepth bounds how deeply ranges nest.
	maxRangeDepth = 2
)

// parseTemplate parses s and checks it against the limits: no templates
// defined or called (which could recurse), and ranges only over the
// run's data (a field, or a variable holding one), at most maxRangeDepth
// deep. Ranging over a number ({{range 100000000000}}) or a function's
// result could keep a worker busy for hours.
func parseTemplate(name, s string) (*template.Template, error) {
	tmpl, err := template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, err
	}
	if len(tmpl.Templates()) > 1 {
		return nil, errors.New("a step's input may not define templates")
	}
	if err := checkNodes(tmpl.Tree.Root, 0); err != nil {
		return nil, err
	}
	return tmpl, nil
}

func checkNodes(list *parse.ListNode, depth int) error {
	if list == nil {
		return nil
	}
	for _, n := range list.Nodes {
		var err error
		switch n := n.(type) {
		case *parse.TemplateNode:
			err = fmt.Errorf("{{template %q}}: a step's input may not call templates", n.Name)
		case *parse.IfNode:
			err = checkBranches(&n.BranchNode, depth)
		case *parse.WithNode:
			err = checkBranches(&n.BranchNode, depth)
		case *parse.RangeNode:
			switch {
			case depth+1 > maxRangeDepth:
				err = fmt.Errorf("%s: ranges nest at most %d deep", n, maxRangeDepth)
			case !rangesOverData(n.Pipe):
				err = fmt.Errorf("{{range %s}}: range only over the run's data (a field such as .payload.commits, or a variable holding one)", n.Pipe)
			default:
				err = checkBranches(&n.BranchNode, depth+1)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func checkBranches(b *parse.BranchNode, depth int) error {
	if err := checkNodes(b.List, depth); err != nil {
		return err
	}
	return checkNodes(b.ElseList, depth)
}

// rangesOverData reports whether a range's pipeline is a field of the
// run's data or a variable: one command with one argument, no function.
func rangesOverData(p *parse.PipeNode) bool {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return false
	}
	switch p.Cmds[0].Args[0].(type) {
	case *parse.FieldNode, *parse.VariableNode, *parse.DotNode:
		return true
	}
	return false
}

// limitedWriter fails a write that would take it past max bytes, which
// stops the template's execution. The builder is a field, not embedded:
// an embedded one would lend its WriteString to io.WriteString callers,
// past the limit.
type limitedWriter struct {
	b   strings.Builder
	max int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if w.b.Len()+len(p) > w.max {
		return 0, fmt.Errorf("the rendered text is over %d bytes", w.max)
	}
	return w.b.Write(p)
}

func walkStrings(v any, path string, fn func(path, s string) error) error {
	switch t := v.(type) {
	case string:
		return fn(orRoot(path), t)
	case map[string]any:
		for k, e := range t {
			if err := walkStrings(e, join(path, k), fn); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range t {
			if err := walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func render(v any, path string, data map[string]any) (any, error) {
	switch t := v.(type) {
	case string:
		return renderString(t, orRoot(path), data)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			r, err := render(e, join(path, k), data)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := render(e, fmt.Sprintf("%s[%d]", path, i), data)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func renderString(s, path string, data map[string]any) (any, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	if m := fieldRef.FindStringSubmatch(s); m != nil {
		v, err := lookup(data, m[1])
		if err != nil {
			return nil, &TemplateError{Path: path, Err: err}
		}
		return v, nil
	}
	tmpl, err := parseTemplate(path, s)
	if err != nil {
		return nil, &TemplateError{Path: path, Err: err}
	}
	buf := limitedWriter{max: MaxRenderedBytes}
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, &TemplateError{Path: path, Err: err}
	}
	return buf.b.String(), nil
}

// lookup follows a field chain (".a.b.c") through maps.
func lookup(data map[string]any, chain string) (any, error) {
	var cur any = data
	walked := ""
	for _, name := range strings.Split(strings.TrimPrefix(chain, "."), ".") {
		walked += "." + name
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("{{ %s }}: %s is not an object", chain, strings.TrimSuffix(walked, "."+name))
		}
		v, ok := m[name]
		if !ok {
			return nil, fmt.Errorf("{{ %s }}: no field %s", chain, walked)
		}
		cur = v
	}
	return cur, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orRoot(path string) string {
	if path == "" {
		return "(input)"
	}
	return path
}
