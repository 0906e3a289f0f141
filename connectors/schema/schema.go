// Package schema writes the JSON Schemas (draft 2020-12) of the
// connectors' step inputs and outputs as Go values, so that every
// connector writes them the same way and a typo is a compile error rather
// than a malformed document.
//
// A Schema is a JSON Schema object under construction. Constructors make
// the common shapes (Object, String, Integer, Enum, Array, ...); methods
// return a changed copy (s.Pattern, s.MaxLength, s.Default, s.Nullable,
// ...), so a shared fragment can be refined without changing it. A keyword
// with no helper is written as a literal: Schema{"minProperties": 1}.
// Root turns the top-level schema into the document a step serves:
//
//	in := schema.Object(schema.Props{
//		"owner": schema.String("Repository owner.").Pattern(`^[A-Za-z0-9_.-]{1,100}$`),
//		"state": schema.Enum("Which issues (default open).", "open", "closed", "all"),
//	}, "owner")
//	step.Input = schema.Root(in.Title("List Issues input"))
//
// Constructors taking a description omit the keyword when it is empty.
// The package is pure: it imports nothing of the project.
package schema

import (
	"encoding/json"
	"fmt"
	"maps"
)

// Draft is the JSON Schema dialect every step schema declares.
const Draft = "https://json-schema.org/draft/2020-12/schema"

// Schema is a JSON Schema object: keyword to value.
type Schema map[string]any

// Props are an object's properties by name.
type Props map[string]Schema

// Root returns s as a complete document: s with "$schema" set to Draft,
// marshalled. It panics if s does not marshal, which for the static
// schemas the connectors write is a programming error found by any test
// that builds the toolkit.
func Root(s Schema) json.RawMessage {
	b, err := json.Marshal(s.With("$schema", Draft))
	if err != nil {
		panic(fmt.Sprintf("schema: %v", err))
	}
	return b
}

// With returns a copy of s with keyword set to v.
func (s Schema) With(keyword string, v any) Schema {
	out := maps.Clone(s)
	if out == nil {
		out = Schema{}
	}
	out[keyword] = v
	return out
}

// described is s with desc as its description, unless desc is empty.
func described(s Schema, desc string) Schema {
	if desc != "" {
		s["description"] = desc
	}
	return s
}

// Object is a closed object: no properties beyond p. The required names
// are listed only when there are some.
func Object(p Props, required ...string) Schema {
	s := Schema{"type": "object", "properties": p, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// Map is an object whose every property value matches values (JSON
// Schema's additionalProperties), e.g. string-to-string metadata.
func Map(values Schema, desc string) Schema {
	return described(Schema{"type": "object", "additionalProperties": values}, desc)
}

// AnyObject is any JSON object.
func AnyObject(desc string) Schema { return described(Schema{"type": "object"}, desc) }

// Any is any JSON value.
func Any(desc string) Schema { return described(Schema{}, desc) }

// String is a string.
func String(desc string) Schema { return described(Schema{"type": "string"}, desc) }

// Text is a non-empty string.
func Text(desc string) Schema { return String(desc).MinLength(1) }

// DateTime is an RFC 3339 date-time string.
func DateTime(desc string) Schema { return String(desc).Format("date-time") }

// Enum is a string that is one of values.
func Enum(desc string, values ...string) Schema {
	return described(Schema{"type": "string", "enum": values}, desc)
}

// Integer is an integer.
func Integer(desc string) Schema { return described(Schema{"type": "integer"}, desc) }

// Number is any number.
func Number(desc string) Schema { return described(Schema{"type": "number"}, desc) }

// Boolean is true or false.
func Boolean(desc string) Schema { return described(Schema{"type": "boolean"}, desc) }

// Array is an array of items.
func Array(items Schema, desc string) Schema {
	return described(Schema{"type": "array", "items": items}, desc)
}

// Ref refers to the definition name in the root's $defs (see Defs).
func Ref(name string) Schema { return Schema{"$ref": "#/$defs/" + name} }

// OneOf is valid when exactly one of alts is.
func OneOf(alts ...Schema) Schema { return Schema{"oneOf": alts} }

// Title returns s titled t.
func (s Schema) Title(t string) Schema { return s.With("title", t) }

// Describe returns s with the description d, even an empty one.
func (s Schema) Describe(d string) Schema { return s.With("description", d) }

// Pattern returns s restricted to strings matching the regular
// expression p.
func (s Schema) Pattern(p string) Schema { return s.With("pattern", p) }

// Format returns s with the format annotation f (date-time, email, ...).
func (s Schema) Format(f string) Schema { return s.With("format", f) }

// MinLength returns s restricted to strings of at least n characters.
func (s Schema) MinLength(n int) Schema { return s.With("minLength", n) }

// MaxLength returns s restricted to strings of at most n characters.
func (s Schema) MaxLength(n int) Schema { return s.With("maxLength", n) }

// Min returns s restricted to numbers of at least n.
func (s Schema) Min(n int) Schema { return s.With("minimum", n) }

// Max returns s restricted to numbers of at most n.
func (s Schema) Max(n int) Schema { return s.With("maximum", n) }

// MinItems returns s restricted to arrays of at least n items.
func (s Schema) MinItems(n int) Schema { return s.With("minItems", n) }

// MaxItems returns s restricted to arrays of at most n items.
func (s Schema) MaxItems(n int) Schema { return s.With("maxItems", n) }

// Unique returns s restricted to arrays whose items differ.
func (s Schema) Unique() Schema { return s.With("uniqueItems", true) }

// MinProperties returns s restricted to objects of at least n properties.
func (s Schema) MinProperties(n int) Schema { return s.With("minProperties", n) }

// MaxProperties returns s restricted to objects of at most n properties.
func (s Schema) MaxProperties(n int) Schema { return s.With("maxProperties", n) }

// Default returns s with the default value v (an annotation: the step
// applies it).
func (s Schema) Default(v any) Schema { return s.With("default", v) }

// Types returns s accepting any of the JSON types ts (its "type" becomes
// the list ts), e.g. Types("integer", "string").
func (s Schema) Types(ts ...string) Schema { return s.With("type", ts) }

// Nullable returns s also accepting null: its type t becomes [t, "null"].
func (s Schema) Nullable() Schema { return s.With("type", []any{s["type"], "null"}) }

// Defs returns s with the definitions defs, which Ref names.
func (s Schema) Defs(defs Props) Schema { return s.With("$defs", defs) }

// Merge returns the union of ps; a later name replaces an earlier one.
func Merge(ps ...Props) Props {
	out := Props{}
	for _, p := range ps {
		maps.Copy(out, p)
	}
	return out
}
