package discovery

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// doc is a small discovery document in Google's format.
const doc = `{
 "name": "demo", "version": "v1",
 "parameters": {"alt": {"type": "string", "location": "query"}},
 "resources": {"properties": {
  "methods": {
   "runReport": {"id": "demo.properties.runReport", "httpMethod": "POST", "flatPath": "v1/properties/{propertiesId}:runReport",
     "path": "v1/{+property}:runReport", "request": {"$ref": "Req"}, "response": {"$ref": "Resp"}},
   "get": {"id": "demo.properties.get", "httpMethod": "GET", "flatPath": "v1/properties/{propertiesId}",
     "parameters": {"name": {"location": "path", "type": "string"}, "view": {"location": "query", "type": "string"}},
     "response": {"$ref": "Resp"}}
  },
  "resources": {"streams": {"methods": {
   "get": {"id": "demo.properties.streams.get", "httpMethod": "GET", "flatPath": "v1/properties/{propertiesId}/streams/{streamsId}", "response": {"$ref": "Resp"}}
  }}}
 }},
 "schemas": {
  "Req": {"id": "Req", "type": "object", "properties": {
    "name": {"type": "string", "description": "Required. The name."},
    "limit": {"type": "string", "format": "int64"},
    "size": {"type": "integer", "format": "int32"},
    "kind": {"type": "string", "enum": ["A", "B"]},
    "when": {"type": "string", "format": "google-datetime"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "rows": {"type": "array", "items": {"$ref": "Row"}},
    "ratio": {"type": "number", "format": "double"},
    "on": {"type": "boolean"}
  }},
  "Row": {"id": "Row", "type": "object", "properties": {"value": {"type": "string"}, "child": {"$ref": "Row"}}},
  "Resp": {"id": "Resp", "type": "object", "properties": {"rowCount": {"type": "integer", "format": "int32"}, "total": {"type": "string", "format": "int64"}}}
 }
}`

func load(t *testing.T) *Doc {
	t.Helper()
	var d Doc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func TestCheckFindsWhatDoesNotConform(t *testing.T) {
	d := load(t)
	for _, tc := range []struct {
		ref, body string
		mode      Mode
		want      []string // problems' prefixes, in order; none for a conforming body
	}{
		{"Req", `{"name":"x","limit":"10","size":3,"kind":"A","when":"2026-03-02T10:20:00Z","labels":{"a":"b"},"rows":[{"value":"v","child":{"value":"w"}}],"ratio":0.5,"on":true}`, Request, nil},
		{"Req", `{"name":"x","limit":10,"size":"3"}`, Request, nil}, // Google reads integers either way in requests
		{"Req", `{"limit":"10"}`, Request, []string{"$.name: required field"}},
		{"Req", `{"limit":"10"}`, Update, nil},
		{"Req", `{"name":"x","colour":"red"}`, Request, []string{"$.colour: unknown field of Req"}},
		{"Req", `{"name":"x","rows":[{"value":1,"extra":true}]}`, Request, []string{"$.rows[0].extra: unknown field", "$.rows[0].value: want a string"}},
		{"Req", `{"name":"x","kind":"C","when":"yesterday","on":"true","ratio":"1","labels":{"a":2}}`, Request,
			[]string{"$.kind: \"C\" is not one of A, B", "$.labels.a: want a string", "$.on: want a boolean", "$.ratio: want a number", "$.when: \"yesterday\" is not an RFC 3339"}},
		{"Req", `{"name":"x","limit":"ten"}`, Request, []string{`$.limit: "ten" is not an integer`}},
		{"Req", `[]`, Request, []string{"$: want an object"}},
		{"Resp", `{"rowCount":3,"total":"12"}`, Response, nil},
		{"Resp", `{"rowCount":"3","total":12}`, Response, []string{"$.rowCount: want an int32 as a number", "$.total: want an int64 as a string"}},
		{"Nope", `{}`, Response, []string{"$: the document has no schema Nope"}},
	} {
		got := d.Check(tc.ref, []byte(tc.body), tc.mode)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], tc.want[i])
		}
		if !ok {
			t.Errorf("%s %s: problems %q; want %q", tc.ref, tc.body, got, tc.want)
		}
	}
}

func TestFindMatchesFlatPaths(t *testing.T) {
	d := load(t)
	for _, tc := range []struct{ method, path, id string }{
		{"POST", "v1/properties/12:runReport", "demo.properties.runReport"},
		{"GET", "v1/properties/12", "demo.properties.get"},
		{"GET", "v1/properties/12/streams/3", "demo.properties.streams.get"},
		{"GET", "v1/properties/12:runReport", ""},
		{"POST", "v1/properties/12", ""},
		{"GET", "v1/properties/12/streams", ""},
		{"GET", "v1/properties/1/2", ""},
	} {
		m := d.Find(tc.method, tc.path)
		if got := ""; m != nil {
			got = m.ID
			if got != tc.id {
				t.Errorf("%s %s: %s; want %q", tc.method, tc.path, got, tc.id)
			}
		} else if tc.id != "" {
			t.Errorf("%s %s: no method; want %s", tc.method, tc.path, tc.id)
		}
	}
	get := d.Find("GET", "v1/properties/12")
	if got := d.CheckQuery(get, map[string][]string{"view": {"x"}, "alt": {"json"}, "pageSize": {"5"}}); !slices.Equal(got, []string{"query parameter pageSize is not one of demo.properties.get's"}) {
		t.Errorf("CheckQuery = %q", got)
	}
	if n := len(d.Methods()); n != 3 {
		t.Errorf("%d methods; want 3", n)
	}
}
