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
	// Kind is how the form shows it: "text", "number", "bool", "select"
	// or "json" (arrays and objects, typed as JSON).
	Kind  string
	Value string
}

// schema is the part of a JSON Schema the form reads.
type schema struct {
	Type        any                `json:"type"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Enum        []any              `json:"enum"`
	Items       *schema            `json:"items"`
	Default     any                `json:"default"`
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
// then the rest by name.
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
		case f.Type == "array" || f.Type == "object":
			f.Kind = "json"
		default:
			f.Kind = "text"
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b field) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// inputOf builds a step's JSON input from its form: empty fields are
// left out; numbers, booleans, arrays and objects are parsed.
func inputOf(fields []field, form func(string) string) (json.RawMessage, error) {
	in := map[string]any{}
	for _, f := range fields {
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
