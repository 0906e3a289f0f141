package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"github.com/triggerd/triggerd/connectors"
)

// The API's OpenAPI 3.1 document has two sources in this directory:
// openapi.yaml, written by hand (every route, body and answer), and
// openapi-steps.json, generated from the tool step catalogue (StepsDocument:
// each step's input and output schema as GET /v1/steps/{id} serves it, and
// a run path per step that uses them). OpenAPI merges them; GET
// /v1/openapi.json serves the result.

//go:embed openapi.yaml
var openapiYAML []byte

//go:embed openapi-steps.json
var openapiSteps []byte

// StepsDocumentFile is the generated part's file name, beside this file.
const StepsDocumentFile = "openapi-steps.json"

// EmbeddedStepsDocument returns the generated part as embedded.
func EmbeddedStepsDocument() []byte { return bytes.Clone(openapiSteps) }

// OpenAPI returns the API's OpenAPI 3.1 document as JSON: openapi.yaml with
// the steps' paths and schemas merged in.
func OpenAPI() ([]byte, error) {
	doc, err := mergedOpenAPI()
	return bytes.Clone(doc), err
}

// mergedOpenAPI merges the embedded documents once per process: the merge
// decodes and re-encodes some 12,000 lines (tens of milliseconds), and
// every api.New needs the result, which cannot change while the binary
// runs.
var mergedOpenAPI = sync.OnceValues(mergeOpenAPI)

func mergeOpenAPI() ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(openapiYAML, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	var steps map[string]any
	if err := json.Unmarshal(openapiSteps, &steps); err != nil {
		return nil, fmt.Errorf("api: %s: %w", StepsDocumentFile, err)
	}
	for _, key := range []string{"paths", "components.schemas"} {
		dst, src := lookup(doc, key), lookup(steps, key)
		if dst == nil || src == nil {
			return nil, fmt.Errorf("api: OpenAPI documents lack %s", key)
		}
		for k, v := range src {
			if _, dup := dst[k]; dup {
				return nil, fmt.Errorf("api: %s %q is in both openapi.yaml and %s", key, k, StepsDocumentFile)
			}
			dst[k] = v
		}
	}
	return json.Marshal(doc)
}

// lookup returns the object at a dotted path in doc, or nil.
func lookup(doc map[string]any, path string) map[string]any {
	cur := doc
	for _, k := range strings.Split(path, ".") {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

// StepsDocument returns the generated part of the OpenAPI document for a
// step catalogue, as openapi-steps.json holds it: the components
// "<id>.input" and "<id>.output" (each schema as the step declares it, its
// $defs moved beside it as "<id>.input.<name>" so that references resolve
// within the OpenAPI document) and a path /v1/steps/<id>/run whose body and
// answer use them.
func StepsDocument(steps []connectors.Step) ([]byte, error) {
	paths := map[string]any{}
	schemas := map[string]any{}
	for _, s := range steps {
		for _, part := range []struct {
			name string
			raw  json.RawMessage
		}{{"input", s.Input}, {"output", s.Output}} {
			base := s.ID + "." + part.name
			hoisted, err := hoistDefs(base, part.raw)
			if err != nil {
				return nil, fmt.Errorf("api: step %s %s schema: %w", s.ID, part.name, err)
			}
			maps.Copy(schemas, hoisted)
		}
		paths["/v1/steps/"+s.ID+"/run"] = map[string]any{
			"post": map[string]any{
				"tags":        []string{"steps"},
				"operationId": "runStep." + s.ID,
				"summary":     s.Name + ": " + s.Description,
				"requestBody": map[string]any{
					"required": true,
					"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
						"type": "object", "additionalProperties": false, "required": []string{"account", "input"},
						"properties": map[string]any{
							"account": map[string]any{"type": "string", "description": "The connected account the step runs as."},
							"input":   map[string]any{"$ref": "#/components/schemas/" + s.ID + ".input"},
						},
					}}},
				},
				"responses": map[string]any{
					"200": map[string]any{
						"description": "The step's output.",
						"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
							"type": "object", "additionalProperties": false, "required": []string{"step", "output"},
							"properties": map[string]any{
								"step":   map[string]any{"const": s.ID},
								"output": map[string]any{"$ref": "#/components/schemas/" + s.ID + ".output"},
							},
						}}},
					},
					"default": map[string]any{"$ref": "#/components/responses/StepError"},
				},
			},
		}
	}
	out, err := json.MarshalIndent(map[string]any{
		"$comment":   "Generated from the tool step catalogue by TestOpenAPIStepsDocument in cmd/triggerd (UPDATE_OPENAPI=1 rewrites it); merged into openapi.yaml by api.OpenAPI. Do not edit.",
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// hoistDefs returns schema raw as the component base, with each of its
// $defs as the component base.<name>, and every "#/$defs/<name>"
// reference rewritten to point at it.
func hoistDefs(base string, raw json.RawMessage) (map[string]any, error) {
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		return nil, err
	}
	out := map[string]any{}
	if defs, ok := schema["$defs"].(map[string]any); ok {
		delete(schema, "$defs")
		for _, name := range slices.Sorted(maps.Keys(defs)) {
			out[base+"."+name] = defs[name]
		}
	}
	out[base] = schema
	for k, v := range out {
		fixed, err := rewriteRefs(base, v)
		if err != nil {
			return nil, err
		}
		out[k] = fixed
	}
	return out, nil
}

func rewriteRefs(base string, v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if ref, ok := e.(string); ok && k == "$ref" {
				name, ok := strings.CutPrefix(ref, "#/$defs/")
				if !ok {
					return nil, fmt.Errorf("reference %q: only #/$defs/<name> references are supported", ref)
				}
				v[k] = "#/components/schemas/" + base + "." + name
				continue
			}
			fixed, err := rewriteRefs(base, e)
			if err != nil {
				return nil, err
			}
			v[k] = fixed
		}
	case []any:
		for i, e := range v {
			fixed, err := rewriteRefs(base, e)
			if err != nil {
				return nil, err
			}
			v[i] = fixed
		}
	}
	return v, nil
}

// serveOpenAPI answers GET /v1/openapi.json.
func (a *API) serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, a.openapi)
}
