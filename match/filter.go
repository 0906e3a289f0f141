package match

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/triggerd/triggerd/triggers"
)

const (
	// maxFilterLen bounds a filter expression's source length.
	maxFilterLen = 4096
	// filterCostLimit bounds the work one filter evaluation may do (in CEL
	// cost units, roughly one per operation or list element visited), so
	// an expensive expression over a large payload cannot stall dispatch.
	filterCostLimit = 100_000
)

// newFilterEnv returns the CEL environment filters are compiled in: one
// variable, event, a map holding the event envelope as decoded JSON.
func newFilterEnv() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable("event", cel.MapType(cel.StringType, cel.DynType)))
}

// compileFilter compiles a filter expression once into a program. The
// expression must yield a bool; one whose type is only known at run time
// (dyn, e.g. event.payload.issue.locked) is accepted and a non-bool result
// then filters the event out.
func compileFilter(env *cel.Env, expr string) (cel.Program, error) {
	if len(expr) > maxFilterLen {
		return nil, fmt.Errorf("filter is %d bytes long; the limit is %d", len(expr), maxFilterLen)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("filter does not compile:\n%s", iss.Err())
	}
	if t := ast.OutputType(); !t.IsExactType(types.BoolType) && !t.IsExactType(types.DynType) {
		return nil, fmt.Errorf("filter must be a boolean expression, but %q yields %s", expr, t)
	}
	prg, err := env.Program(ast, cel.CostLimit(filterCostLimit))
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	return prg, nil
}

// evalFilter runs a compiled filter against an activation holding the
// decoded event and reports whether the event passes; an error (no such
// key, cost limit exceeded, a non-bool result) filters it out.
func evalFilter(prg cel.Program, act any) (bool, error) {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not bool", out.Type())
	}
	return bool(b), nil
}

// decodeEvent decodes the event envelope, payload included, into the
// generic form the filters see: maps, lists, strings, bools, nil, and
// numbers as int64 when they are integers (so event.resource.number == 7
// holds) and float64 otherwise.
func decodeEvent(e *triggers.Event) (map[string]any, error) {
	raw, err := e.AppendJSON(nil)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("event decodes to null")
	}
	for k, v := range m {
		m[k] = convertNumbers(v)
	}
	return m, nil
}

// convertNumbers replaces json.Number values in v by int64 or float64.
func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
	}
	return v
}

// eventRef finds the uses of a filter's variable event, with the field
// read when there is one.
var eventRef = regexp.MustCompile(`\bevent\b(\s*\.\s*([A-Za-z_][A-Za-z0-9_]*))?`)

// FilterReadsPayload reports whether a filter may read the event's
// payload: it names it, or uses event otherwise than to read one of its
// fields (event["..."], size(event), event.exists(...)). Either way it may
// over-report, never under-report.
func FilterReadsPayload(expr string) bool {
	if strings.Contains(expr, "payload") {
		return true
	}
	for _, m := range eventRef.FindAllStringSubmatch(expr, -1) {
		switch m[2] {
		case "", "all", "exists", "exists_one", "map", "filter":
			return true
		}
	}
	return false
}
