package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

func (c *Console) steps(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.o.Steps == nil {
		return errNotFound
	}
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	connector := r.URL.Query().Get("connector")
	var list []connectors.Step
	for _, st := range c.o.Steps.List(q) {
		if connector == "" || st.Connector == connector {
			list = append(list, st)
		}
	}
	c.render(w, r, s, http.StatusOK, "steps", "Tool steps", map[string]any{
		"Steps": list, "Q": q, "Connector": connector, "Connectors": connectorList,
	})
	return nil
}

// field is one input of a step's form, generated from a JSON Schema
// property.
type field struct {
	Name, Type, Description string
	Required                bool
	Enum                    []string
	// Kind is how the form shows it: "text", "number", "bool", "select",
	// "map" (an object of strings, as name and value rows: an API
	// Call's headers) or "json" (other arrays and objects, typed as
	// JSON in an editor the page checks).
	Kind  string
	Value string
	// Pairs are a map's rows (a few empty ones to fill).
	Pairs []pair
}

// pair is one name and value row of a map field.
type pair struct{ Name, Value string }

// mapRows is how many rows a map field offers at least.
const mapRows = 3

// schema is the part of a JSON Schema the form reads.
type schema struct {
	Type        any                `json:"type"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Enum        []any              `json:"enum"`
	Items       *schema            `json:"items"`
	Default     any                `json:"default"`
	// AdditionalProperties is a schema for maps (false, or absent, for
	// others).
	AdditionalProperties any `json:"additionalProperties"`
}

// stringMap reports whether s is an object of strings.
func (s *schema) stringMap() bool {
	ap, ok := s.AdditionalProperties.(map[string]any)
	return ok && s.Properties == nil && ap["type"] == "string"
}

func (s *schema) typeName() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, v := range t {
			if n, ok := v.(string); ok && n != "null" {
				return n
			}
		}
	}
	switch {
	case s.Properties != nil:
		return "object"
	case s.Items != nil:
		return "array"
	}
	return "string"
}

// formFields returns the fields of an input schema: required ones first,
// in the schema's order of them (an API Call's method, endpoint,
// headers, as the spec lists them), then the others by name, JSON
// editors last (an API Call's body).
func formFields(raw json.RawMessage) ([]field, error) {
	var sc schema
	if err := json.Unmarshal(raw, &sc); err != nil {
		return nil, fmt.Errorf("console: step schema: %w", err)
	}
	var out []field
	for name, p := range sc.Properties {
		f := field{Name: name, Type: p.typeName(), Description: p.Description, Required: slices.Contains(sc.Required, name)}
		switch {
		case len(p.Enum) > 0:
			f.Kind = "select"
			for _, e := range p.Enum {
				f.Enum = append(f.Enum, fmt.Sprint(e))
			}
		case f.Type == "integer" || f.Type == "number":
			f.Kind = "number"
		case f.Type == "boolean":
			f.Kind = "bool"
		case p.stringMap():
			f.Kind = "map"
		case f.Type == "array" || f.Type == "object":
			f.Kind = "json"
		default:
			f.Kind = "text"
		}
		out = append(out, f)
	}
	rank := func(f field) int {
		switch {
		case f.Required:
			return slices.Index(sc.Required, f.Name)
		case f.Kind == "map":
			return len(sc.Required) + 1
		case f.Kind == "json":
			return len(sc.Required) + 2
		}
		return len(sc.Required)
	}
	slices.SortFunc(out, func(a, b field) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i := range out {
		if out[i].Kind == "map" {
			out[i].Pairs = make([]pair, mapRows)
		}
	}
	return out, nil
}

// inputOf builds a step's JSON input from its form: empty fields are
// left out; numbers, booleans, arrays and objects are parsed.
func inputOf(fields []field, form func(string) string) (json.RawMessage, error) {
	in := map[string]any{}
	for _, f := range fields {
		if f.Kind == "map" {
			m, err := mapOf(f, form)
			if err != nil {
				return nil, err
			}
			if len(m) > 0 {
				in[f.Name] = m
			}
			continue
		}
		v := strings.TrimSpace(form("in_" + f.Name))
		if v == "" {
			continue
		}
		switch f.Kind {
		case "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("%s must be a number", f.Name)
			}
			in[f.Name] = n
		case "bool":
			in[f.Name] = v == "true"
		case "json":
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				if f.Type == "array" && !strings.HasPrefix(v, "[") {
					// A plain comma-separated list of strings.
					in[f.Name] = splitList(v)
					continue
				}
				return nil, fmt.Errorf("%s must be JSON (%s)", f.Name, f.Type)
			}
			in[f.Name] = x
		default:
			if f.Type == "integer" || f.Type == "number" {
				n, err := strconv.ParseFloat(v, 64)
				if err == nil {
					in[f.Name] = n
					continue
				}
			}
			in[f.Name] = v
		}
	}
	return json.Marshal(in)
}

// maxMapRows bounds the rows a map field's form may send.
const maxMapRows = 50

// mapOf reads a map field's rows (in_<name>.name.<i>, in_<name>.value.<i>,
// i from 0) into an object; empty rows are skipped.
func mapOf(f field, form func(string) string) (map[string]string, error) {
	m := map[string]string{}
	for i := range maxMapRows {
		name, value := strings.TrimSpace(form(fmt.Sprintf("in_%s.name.%d", f.Name, i))), form(fmt.Sprintf("in_%s.value.%d", f.Name, i))
		if name == "" && value == "" {
			continue
		}
		if name == "" {
			return nil, fmt.Errorf("%s: row %d has a value but no name", f.Name, i+1)
		}
		m[name] = value
	}
	return m, nil
}

// pairsOf returns the rows a map field's form sent, for the form again,
// with at least mapRows.
func pairsOf(f field, form func(string) string) []pair {
	ps := make([]pair, maxMapRows)
	n := mapRows
	for i := range ps {
		ps[i] = pair{form(fmt.Sprintf("in_%s.name.%d", f.Name, i)), form(fmt.Sprintf("in_%s.value.%d", f.Name, i))}
		if ps[i] != (pair{}) {
			n = max(n, i+1)
		}
	}
	return ps[:n]
}

func (c *Console) step(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.stepPage(w, r, s, http.StatusOK, nil)
}

// stepResult is what a run from the form gave.
type stepResult struct {
	Output string
	Error  *connectors.Error
	Input  string
}

func (c *Console) stepPage(w http.ResponseWriter, r *http.Request, s *session, status int, res *stepResult) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Steps == nil {
		return errNotFound
	}
	st, ok := c.o.Steps.Get(r.PathValue("id"))
	if !ok {
		return errNotFound
	}
	fields, err := formFields(st.Input)
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		for i := range fields {
			fields[i].Value = r.PostFormValue("in_" + fields[i].Name)
			if fields[i].Kind == "map" {
				fields[i].Pairs = pairsOf(fields[i], r.PostFormValue)
			}
		}
	}
	accs, err := c.o.Accounts.List(r.Context(), tid)
	if err != nil {
		return err
	}
	var usable []store.Account
	for _, a := range accs {
		if a.Connector == st.Connector && a.Status == store.StatusActive {
			usable = append(usable, a)
		}
	}
	c.render(w, r, s, status, "step", st.Name, map[string]any{
		"S": st, "Fields": fields, "Accounts": usable, "Result": res, "Account": r.PostFormValue("account"),
	})
	return nil
}

func (c *Console) runStep(w http.ResponseWriter, r *http.Request, s *session) error {
	tid, err := tenant(s)
	if err != nil {
		return err
	}
	if c.o.Steps == nil {
		return errNotFound
	}
	st, ok := c.o.Steps.Get(r.PathValue("id"))
	if !ok {
		return errNotFound
	}
	fields, err := formFields(st.Input)
	if err != nil {
		return err
	}
	input, err := inputOf(fields, r.PostFormValue)
	if err != nil {
		return c.stepPage(w, r, s, http.StatusBadRequest, &stepResult{Error: &connectors.Error{Code: connectors.CodeValidation, Message: err.Error()}})
	}
	res := &stepResult{Input: prettyJSON(json.RawMessage(input))}
	out, err := c.o.Steps.Run(r.Context(), tid, st.ID, r.PostFormValue("account"), input)
	status := http.StatusOK
	if err != nil {
		var ce *connectors.Error
		if !errors.As(err, &ce) {
			ce = &connectors.Error{Code: connectors.CodeUpstream, Message: err.Error()}
		}
		res.Error = ce
		status = http.StatusUnprocessableEntity
	} else {
		res.Output = prettyJSON(out)
	}
	return c.stepPage(w, r, s, status, res)
}
