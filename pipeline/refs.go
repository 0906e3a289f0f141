package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/template/parse"

	"github.com/triggerd/triggerd/triggers"
)

// CheckFieldRefs checks the field references of input's templates
// ({{ .resource.number }}, {{ .steps.find.output.title }}) against what a
// run's data will hold, so that a typo is refused when the agent is saved
// rather than failing every run: the event envelope (triggers.Event, its
// resource fields being the union of every kind's) and, under .steps, the
// earlier steps' outputs, described by outputs (step name → the step's
// output JSON Schema; a nil schema leaves that step's output unchecked).
// The payload (.payload...) is the provider's, and references into it are
// not checked, nor are those inside range and with, where the dot is no
// longer the run's data. It refuses all CheckTemplates refuses, in the same
// walk, so an agent's steps are parsed once when it is saved. The error is
// a *TemplateError naming the field.
func CheckFieldRefs(input json.RawMessage, outputs map[string]json.RawMessage) error {
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
		tmpl, err := parseTemplate(path, s)
		if err != nil {
			return &TemplateError{Path: path, Err: err}
		}
		var bad error
		visitFields(tmpl.Tree.Root, func(chain []string) {
			if bad == nil {
				bad = checkChain(chain, outputs)
			}
		})
		if bad != nil {
			return &TemplateError{Path: path, Err: bad}
		}
		return nil
	})
}

// visitFields calls fn with each field chain read from the run's data
// itself: not inside range or with, whose dot is something else.
func visitFields(n parse.Node, fn func([]string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			visitFields(c, fn)
		}
	case *parse.ActionNode:
		visitFields(n.Pipe, fn)
	case *parse.IfNode:
		visitFields(n.Pipe, fn)
		visitFields(n.List, fn)
		visitFields(n.ElseList, fn)
	case *parse.RangeNode:
		visitFields(n.Pipe, fn) // the body's dot is each element
	case *parse.WithNode:
		visitFields(n.Pipe, fn)
		visitFields(n.ElseList, fn) // else keeps the outer dot
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			visitFields(c, fn)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			visitFields(a, fn)
		}
	case *parse.FieldNode:
		fn(n.Ident)
	}
}

// envelopeType is the run data's root, besides .steps.
var envelopeType = reflect.TypeFor[triggers.Event]()

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// checkChain checks one field chain, such as [resource nmber].
func checkChain(chain []string, outputs map[string]json.RawMessage) error {
	ref := "." + strings.Join(chain, ".")
	if chain[0] == "steps" {
		if len(chain) < 2 {
			return nil
		}
		schema, ok := outputs[chain[1]]
		if !ok {
			return fmt.Errorf("%s: no earlier step is named %q (earlier steps: %s)", ref, chain[1], listOrNone(slices.Sorted(maps.Keys(outputs))))
		}
		if len(chain) < 3 {
			return nil
		}
		if chain[2] != "output" {
			return fmt.Errorf("%s: a step's data is .steps.%s.output", ref, chain[1])
		}
		return checkSchemaChain(ref, chain[3:], schema)
	}
	t := envelopeType
	for i, name := range chain {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == rawMessageType || t.Kind() != reflect.Struct {
			return nil // the payload, or a value whose fields are not known
		}
		f, fields := fieldByTag(t, name)
		if f == nil {
			at := "the event"
			if i > 0 {
				at = "." + strings.Join(chain[:i], ".")
			}
			return fmt.Errorf("%s: %s has no field %q (it has: %s)", ref, at, name, strings.Join(fields, ", "))
		}
		t = f.Type
	}
	return nil
}

// fieldByTag returns t's field whose JSON name is name, and every JSON
// name of t.
func fieldByTag(t reflect.Type, name string) (*reflect.StructField, []string) {
	var found *reflect.StructField
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		names = append(names, tag)
		if tag == name {
			found = &f
		}
	}
	return found, names
}

// checkSchemaChain checks the fields chain within a step's output, as its
// JSON Schema describes it: each name must be one of the object's
// properties, where it lists them.
func checkSchemaChain(ref string, chain []string, raw json.RawMessage) error {
	if len(raw) == 0 || len(chain) == 0 {
		return nil
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil // not the checker's to judge
	}
	s := root
	for _, name := range chain {
		s = resolveRef(root, s)
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return nil // free-form: nothing to check against
		}
		next, ok := props[name].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: the step's output has no field %q here (it has: %s)", ref, name, strings.Join(slices.Sorted(maps.Keys(props)), ", "))
		}
		s = next
	}
	return nil
}

// resolveRef follows a local "#/$defs/name" reference of s within root.
func resolveRef(root, s map[string]any) map[string]any {
	for range 8 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := root["$defs"].(map[string]any)
		next, found := defs[name].(map[string]any)
		if !ok || !found {
			return s
		}
		s = next
	}
	return s
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
