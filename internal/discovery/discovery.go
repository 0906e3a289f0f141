// Package discovery reads Google API discovery documents and checks JSON
// bodies against their schemas: unknown fields, wrong types (int64 as a
// string, int32 as a number, as Google's JSON mapping has them), values
// outside an enum, malformed timestamps and, in requests, missing
// required fields. The documents come from the Go module
// google.golang.org/api through the Go module proxy (internal/specfetch),
// never from the repository. Only tests import it.
package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/specfetch"
	"github.com/triggerd/triggerd/internal/testenv"
)

// GoogleAPIModule and GoogleAPIVersion name the Go module, and the
// version of it, whose discovery documents the tests read.
const (
	GoogleAPIModule  = "google.golang.org/api"
	GoogleAPIVersion = "v0.312.0"
)

// Doc is a discovery document, as far as the checks read it.
type Doc struct {
	Name    string             `json:"name"`
	Version string             `json:"version"`
	Schemas map[string]*Schema `json:"schemas"`
	// Parameters are the query parameters every method takes (alt,
	// fields, prettyPrint, ...).
	Parameters map[string]*Schema `json:"parameters"`
	Resources  map[string]*Resource
}

// Resource is a collection of methods and sub-resources.
type Resource struct {
	Methods   map[string]*Method   `json:"methods"`
	Resources map[string]*Resource `json:"resources"`
}

// Method is one API method.
type Method struct {
	ID         string `json:"id"`
	HTTPMethod string `json:"httpMethod"`
	Path       string `json:"path"`
	FlatPath   string `json:"flatPath"`
	// Parameters are the method's path and query parameters.
	Parameters map[string]*Schema `json:"parameters"`
	Request    *struct {
		Ref string `json:"$ref"`
	} `json:"request"`
	Response *struct {
		Ref string `json:"$ref"`
	} `json:"response"`
}

// Schema is a discovery schema.
type Schema struct {
	ID                   string             `json:"id"`
	Type                 string             `json:"type"`
	Ref                  string             `json:"$ref"`
	Format               string             `json:"format"`
	Description          string             `json:"description"`
	Enum                 []string           `json:"enum"`
	Properties           map[string]*Schema `json:"properties"`
	AdditionalProperties *Schema            `json:"additionalProperties"`
	Items                *Schema            `json:"items"`
}

// Load fetches the discovery documents at paths (inside
// google.golang.org/api, e.g. "analyticsdata/v1beta/analyticsdata-api.json")
// through the Go module proxy (specfetch.Fetcher.GoModule), from the cache
// after the first time. When
// they cannot be had the test is skipped loudly, or fails under CI=true.
func Load(t testing.TB, paths ...string) []*Doc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var f specfetch.Fetcher
	files, err := f.GoModule(ctx, GoogleAPIModule, GoogleAPIVersion, paths...)
	if err != nil {
		testenv.Missing(t, "Google's discovery documents ("+GoogleAPIModule+"@"+GoogleAPIVersion+" from the Go module proxy)", err)
	}
	var docs []*Doc
	for _, p := range paths {
		var d Doc
		if err := json.Unmarshal(files[p], &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(d.Schemas) == 0 || len(d.Resources) == 0 {
			t.Fatalf("%s: no schemas or resources", p)
		}
		docs = append(docs, &d)
	}
	return docs
}

// UnmarshalJSON reads the document's resources.
func (d *Doc) UnmarshalJSON(b []byte) error {
	type plain Doc
	var aux struct {
		plain
		Resources map[string]*Resource `json:"resources"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*d = Doc(aux.plain)
	d.Resources = aux.Resources
	return nil
}

// Methods lists every method of the document.
func (d *Doc) Methods() []*Method {
	var out []*Method
	var walk func(map[string]*Resource)
	walk = func(rs map[string]*Resource) {
		for _, r := range rs {
			for _, m := range r.Methods {
				out = append(out, m)
			}
			walk(r.Resources)
		}
	}
	walk(d.Resources)
	slices.SortFunc(out, func(a, b *Method) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Find returns the method that serves httpMethod on path (as sent,
// without the leading slash or query, e.g. "v1beta/properties/1:runReport"),
// or nil. A path parameter matches one segment (no "/" and, before a
// custom method, no ":").
func (d *Doc) Find(httpMethod, path string) *Method {
	for _, m := range d.Methods() {
		if m.HTTPMethod != httpMethod {
			continue
		}
		p := m.FlatPath
		if p == "" {
			p = m.Path
		}
		if ok, _ := regexp.MatchString(quoteParams(p), path); ok {
			return m
		}
	}
	return nil
}

// quoteParams turns a flat path into a regular expression in which each
// {param} matches one segment.
func quoteParams(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for {
		i := strings.Index(p, "{")
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(p))
			break
		}
		j := strings.Index(p[i:], "}")
		if j < 0 {
			b.WriteString(regexp.QuoteMeta(p))
			break
		}
		b.WriteString(regexp.QuoteMeta(p[:i]))
		b.WriteString(`[^/:]+`)
		p = p[i+j+1:]
	}
	b.WriteString("$")
	return b.String()
}

// CheckQuery returns the query parameters of a request to m that neither
// m nor the document takes.
func (d *Doc) CheckQuery(m *Method, q url.Values) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if _, ok := m.Parameters[k]; ok {
			continue
		}
		if _, ok := d.Parameters[k]; ok {
			continue
		}
		out = append(out, fmt.Sprintf("query parameter %s is not one of %s's", k, m.ID))
	}
	return out
}

// Mode says what a checked body is.
type Mode int

// Modes.
const (
	// Response is an answer: int64 values must be strings, int32 values
	// numbers, as Google's servers write them.
	Response Mode = iota
	// Request is a request body: Google reads int64 and int32 values as
	// numbers or strings, and fields described as "Required." must be
	// there.
	Request
	// Update is the body of a partial update (PATCH with updateMask):
	// a Request whose required fields may be left out.
	Update
)

// Check checks body (JSON) against the schema named ref and returns the
// problems found, each prefixed with its JSON path; none means it
// conforms.
func (d *Doc) Check(ref string, body []byte, mode Mode) []string {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return []string{"$: not JSON: " + err.Error()}
	}
	c := &checker{doc: d, mode: mode}
	c.check("$", &Schema{Ref: ref}, v, 0)
	return c.problems
}

type checker struct {
	doc      *Doc
	mode     Mode
	problems []string
}

func (c *checker) fail(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// maxDepth bounds recursive schemas (FilterExpression nests itself).
const maxDepth = 64

func (c *checker) check(path string, s *Schema, v any, depth int) {
	if depth > maxDepth {
		c.fail(path, "nested deeper than %d levels", maxDepth)
		return
	}
	if s.Ref != "" {
		r, ok := c.doc.Schemas[s.Ref]
		if !ok {
			c.fail(path, "the document has no schema %s", s.Ref)
			return
		}
		s = r
	}
	switch s.Type {
	case "any", "":
		return
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			c.fail(path, "want an object (%s), got %s", s.ID, kind(v))
			return
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			p, known := s.Properties[k]
			switch {
			case known:
				c.check(path+"."+k, p, obj[k], depth+1)
			case s.AdditionalProperties != nil:
				c.check(path+"."+k, s.AdditionalProperties, obj[k], depth+1)
			default:
				c.fail(path+"."+k, "unknown field of %s", s.ID)
			}
		}
		if c.mode == Request {
			for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
				if _, ok := obj[k]; !ok && strings.HasPrefix(s.Properties[k].Description, "Required.") {
					c.fail(path+"."+k, "required field of %s is missing", s.ID)
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			c.fail(path, "want an array, got %s", kind(v))
			return
		}
		for i, x := range arr {
			c.check(fmt.Sprintf("%s[%d]", path, i), s.Items, x, depth+1)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			c.fail(path, "want a boolean, got %s", kind(v))
		}
	case "number":
		switch x := v.(type) {
		case json.Number:
		case string:
			if x != "NaN" && x != "Infinity" && x != "-Infinity" {
				c.fail(path, "want a number, got a string")
			}
		default:
			c.fail(path, "want a number, got %s", kind(v))
		}
	case "integer":
		c.integer(path, s, v, false)
	case "string":
		if s.Format == "int64" || s.Format == "uint64" {
			c.integer(path, s, v, true)
			return
		}
		str, ok := v.(string)
		if !ok {
			c.fail(path, "want a string, got %s", kind(v))
			return
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			c.fail(path, "%q is not one of %s", str, strings.Join(s.Enum, ", "))
		}
		if s.Format == "google-datetime" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				c.fail(path, "%q is not an RFC 3339 timestamp", str)
			}
		}
	default:
		c.fail(path, "the document has an unknown type %q", s.Type)
	}
}

// integer checks an integer: a JSON number for int32 and a string of
// digits for int64 in answers; either in requests.
func (c *checker) integer(path string, s *Schema, v any, wide bool) {
	var text string
	switch x := v.(type) {
	case json.Number:
		if wide && c.mode == Response {
			c.fail(path, "want an int64 as a string, got a number")
			return
		}
		text = string(x)
	case string:
		if !wide && c.mode == Response {
			c.fail(path, "want an %s as a number, got a string", s.Format)
			return
		}
		text = x
	default:
		c.fail(path, "want an integer, got %s", kind(v))
		return
	}
	if ok, _ := regexp.MatchString(`^-?[0-9]+$`, text); !ok {
		c.fail(path, "%q is not an integer", text)
	}
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
