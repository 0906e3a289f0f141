package schema_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/triggerd/triggerd/connectors/schema"
)

func TestRootBuildsTheDocument(t *testing.T) {
	in := schema.Object(schema.Props{
		"owner": schema.String("Owner.").Pattern(`^[a-z]+$`).MaxLength(100),
		"state": schema.Enum("State.", "open", "closed").Default("open"),
		"tags":  schema.Array(schema.String(""), "Tags.").MinItems(1).Unique(),
		"next":  schema.Integer("Next.").Nullable(),
		"since": schema.DateTime("Since.").Types("integer", "string").Min(0),
		"item":  schema.Ref("item"),
	}, "owner").Title("Input").Defs(schema.Props{"item": schema.Object(schema.Props{})})
	var got any
	if err := json.Unmarshal(schema.Root(in), &got); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(`{
	  "$schema": "https://json-schema.org/draft/2020-12/schema",
	  "title": "Input", "type": "object", "additionalProperties": false, "required": ["owner"],
	  "properties": {
	    "owner": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 100, "description": "Owner."},
	    "state": {"type": "string", "enum": ["open", "closed"], "default": "open", "description": "State."},
	    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true, "description": "Tags."},
	    "next": {"type": ["integer", "null"], "description": "Next."},
	    "since": {"type": ["integer", "string"], "format": "date-time", "minimum": 0, "description": "Since."},
	    "item": {"$ref": "#/$defs/item"}
	  },
	  "$defs": {"item": {"type": "object", "properties": {}, "additionalProperties": false}}
	}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Root =\n%s", schema.Root(in))
	}
}

func TestMethodsCopy(t *testing.T) {
	base := schema.String("Base.")
	_ = base.Pattern("x").Nullable()
	if len(base) != 2 {
		t.Errorf("a method changed its receiver: %v", base)
	}
	p := schema.Props{"a": base}
	m := schema.Merge(p, schema.Props{"b": base})
	if len(p) != 1 || len(m) != 2 {
		t.Errorf("Merge changed its argument or lost a name: %v %v", p, m)
	}
}

func TestShapes(t *testing.T) {
	for _, c := range []struct {
		got  schema.Schema
		want string
	}{
		{schema.Map(schema.String(""), "Meta.").MinProperties(1).MaxProperties(9),
			`{"type":"object","additionalProperties":{"type":"string"},"minProperties":1,"maxProperties":9,"description":"Meta."}`},
		{schema.AnyObject(""), `{"type":"object"}`},
		{schema.Any("Body.").Types("string", "number"), `{"type":["string","number"],"description":"Body."}`},
		{schema.OneOf(schema.Schema{"type": "null"}, schema.Ref("q")), `{"oneOf":[{"type":"null"},{"$ref":"#/$defs/q"}]}`},
		{schema.Array(schema.Number(""), "").Describe(""), `{"type":"array","items":{"type":"number"},"description":""}`},
		{schema.Text("T.").MaxLength(3), `{"type":"string","minLength":1,"maxLength":3,"description":"T."}`},
		{schema.Object(schema.Merge(schema.Props{"a": schema.Boolean("")}, schema.Props{"a": schema.Integer("")})),
			`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}`},
	} {
		b, err := json.Marshal(c.got)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %s, want %s", b, c.want)
		}
	}
}
