// Package oascheck holds HTTP exchanges to a provider's OpenAPI
// description: that each request is one the description takes and each
// answer one it lists for the request's operation, with its status and
// body. Conformance tests record what a connector client and a sandbox
// fake say to each other (Recorder) and Check the exchanges against the
// provider's description (fetched with internal/specfetch); the Report
// says per operation what does not conform. Only tests import it.
package oascheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
)

// Description is an OpenAPI 3 description, parsed, ready to check
// exchanges against.
type Description struct {
	name     string
	doc      map[string]any
	router   router
	basePath string
}

// Parse reads an OpenAPI 3 description in JSON; name says which in
// reports ("GitHub REST (@octokit/openapi 23.0.2)").
func Parse(name string, spec []byte) (*Description, error) {
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("oascheck: %s is not a JSON document: %w", name, err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		return nil, fmt.Errorf("oascheck: %s is not OpenAPI 3 (openapi: %q)", name, v)
	}
	paths, ok := doc["paths"].(map[string]any)
	if !ok || len(paths) == 0 {
		return nil, fmt.Errorf("oascheck: %s has no paths", name)
	}
	d := &Description{name: name, doc: doc}
	d.router = newRouter(paths, func(t string) bool { return multiSegment(doc, t) })
	// The servers' path (Vercel's and GitHub's have none) prefixes every
	// request path; the host is ignored: exchanges go to fakes.
	if servers, _ := doc["servers"].([]any); len(servers) > 0 {
		if s, _ := servers[0].(map[string]any); s != nil {
			if u, err := url.Parse(fmt.Sprint(s["url"])); err == nil && !strings.Contains(u.Path, "{") {
				d.basePath = strings.TrimSuffix(u.Path, "/")
			}
		}
	}
	return d, nil
}

// Exchange is one request and its answer, with both bodies (the
// request's and response's own Body are not read).
type Exchange struct {
	Request      *http.Request
	RequestBody  []byte
	Response     *http.Response
	ResponseBody []byte
}

// Finding is what Check found of one exchange.
type Finding struct {
	// Operation is "METHOD /template" as the description spells the
	// path, or "METHOD /path" when no operation matched.
	Operation string
	// OperationID is the description's operationId, if any.
	OperationID string
	// Status is the answer's status code.
	Status int
	// Request and Response list what does not conform, each a line;
	// both are empty for an exchange that conforms.
	Request, Response []string
}

// OK reports whether the exchange conforms.
func (f Finding) OK() bool { return len(f.Request) == 0 && len(f.Response) == 0 }

// Report is the findings of a Check, one per exchange, in order.
type Report []Finding

// Failures returns, per operation, the distinct problems found with its
// exchanges, requests' first ("request: ...") then answers'
// ("answer 200: ...").
func (r Report) Failures() map[string][]string {
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, f := range r {
		add := func(line string) {
			k := f.Operation + "\x00" + line
			if !seen[k] {
				seen[k] = true
				out[f.Operation] = append(out[f.Operation], line)
			}
		}
		for _, p := range f.Request {
			add("request: " + p)
		}
		for _, p := range f.Response {
			add(fmt.Sprintf("answer %d: %s", f.Status, p))
		}
	}
	return out
}

// Operations returns the operations the exchanges reached, sorted.
func (r Report) Operations() []string {
	set := map[string]bool{}
	for _, f := range r {
		set[f.Operation] = true
	}
	out := make([]string, 0, len(set))
	for op := range set {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

// String lists the operations that do not conform, each with its
// problems, or says that all conform.
func (r Report) String() string {
	fails := r.Failures()
	ops := r.Operations()
	var b strings.Builder
	bad := 0
	for _, op := range ops {
		if len(fails[op]) == 0 {
			continue
		}
		bad++
		fmt.Fprintf(&b, "\n%s:", op)
		for _, p := range fails[op] {
			fmt.Fprintf(&b, "\n    %s", strings.ReplaceAll(p, "\n", "\n    "))
		}
	}
	return fmt.Sprintf("%d of %d operations do not conform%s", bad, len(ops), b.String())
}

// Check holds each exchange to the description. Building a validator
// compiles every schema it is given, so Check first keeps only the
// operations the exchanges reach and the components those use.
func (d *Description) Check(exs []Exchange) (Report, error) {
	report := make(Report, len(exs))
	matched := make([]bool, len(exs))
	paths := make([]string, len(exs))
	keep := map[string]map[string]bool{}
	for i, ex := range exs {
		method := strings.ToLower(ex.Request.Method)
		template, path := d.router.findFor(ex.Request.URL, d.basePath, func(t string) bool {
			_, ok := d.doc["paths"].(map[string]any)[t].(map[string]any)[method]
			return ok
		})
		paths[i] = path
		report[i] = Finding{Operation: ex.Request.Method + " " + ex.Request.URL.Path, Status: ex.Response.StatusCode}
		if template == "" {
			report[i].Request = []string{"no path of " + d.name + " matches"}
			continue
		}
		op, _ := d.doc["paths"].(map[string]any)[template].(map[string]any)[method].(map[string]any)
		if op == nil {
			report[i].Request = []string{fmt.Sprintf("%s has no %s operation on %s", d.name, ex.Request.Method, template)}
			continue
		}
		matched[i] = true
		report[i].Operation = ex.Request.Method + " " + template
		report[i].OperationID, _ = op["operationId"].(string)
		if keep[template] == nil {
			keep[template] = map[string]bool{}
		}
		keep[template][method] = true
	}
	if len(keep) == 0 {
		return report, nil
	}
	// Templates spelling one path with differently named parameters go
	// to validators of their own: a validator takes the first template
	// matching a path, whatever its methods.
	layers := []map[string]map[string]bool{}
	layerOf := map[string]int{}
	for _, t := range slices.Sorted(maps.Keys(keep)) {
		shape := paramRE.ReplaceAllString(t, "{}")
		i := slices.IndexFunc(layers, func(l map[string]map[string]bool) bool {
			return !slices.ContainsFunc(slices.Collect(maps.Keys(l)), func(o string) bool { return paramRE.ReplaceAllString(o, "{}") == shape })
		})
		if i < 0 {
			layers = append(layers, map[string]map[string]bool{})
			i = len(layers) - 1
		}
		layers[i][t] = keep[t]
		layerOf[t] = i
	}
	vs := make([]validator.Validator, len(layers))
	for i, l := range layers {
		v, err := d.validator(l)
		if err != nil {
			return nil, err
		}
		defer v.Release()
		vs[i] = v
	}
	for i, ex := range exs {
		if !matched[i] {
			continue
		}
		t := strings.TrimPrefix(report[i].Operation, ex.Request.Method+" ")
		report[i].Request, report[i].Response = validate(vs[layerOf[t]], ex, paths[i])
	}
	return report, nil
}

// validator builds a validator of the operations keep names.
func (d *Description) validator(keep map[string]map[string]bool) (validator.Validator, error) {
	pruned, err := prune(d.doc, keep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.name, err)
	}
	raw, err := json.Marshal(pruned)
	if err != nil {
		return nil, fmt.Errorf("oascheck: %s: %w", d.name, err)
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("oascheck: %s: %w", d.name, err)
	}
	// Tests hold their own tokens: whether an operation's security is met
	// is the fake's concern, not the description's. Formats (date-time,
	// uri, email) are asserted: a fake that answers "" for a URL does not
	// conform.
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation(), config.WithFormatAssertions())
	if len(errs) > 0 {
		return nil, fmt.Errorf("oascheck: %s: %v", d.name, errs)
	}
	return v, nil
}

// validate returns the problems of ex's request, sent to the escaped
// path, and of its answer.
func validate(v validator.Validator, ex Exchange, path string) (request, response []string) {
	r := ex.Request.Clone(ex.Request.Context())
	if path != r.URL.EscapedPath() {
		u := *r.URL
		u.RawPath = path
		u.Path, _ = url.PathUnescape(path)
		r.URL = &u
	}
	r.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	r.ContentLength = int64(len(ex.RequestBody))
	if ok, errs := v.ValidateHttpRequestSync(r); !ok {
		request = describe(errs)
	}
	r.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	w := *ex.Response
	w.Body = io.NopCloser(bytes.NewReader(ex.ResponseBody))
	w.ContentLength = int64(len(ex.ResponseBody))
	if ok, errs := v.ValidateHttpResponse(r, &w); !ok {
		response = describe(errs)
	}
	return request, response
}

// describe renders errs one line each, schema failures with the field
// they concern.
func describe(errs []*verrors.ValidationError) []string {
	var out []string
	for _, e := range errs {
		if len(e.SchemaValidationErrors) == 0 {
			out = append(out, strings.TrimSpace(e.Message+": "+e.Reason))
			continue
		}
		for _, se := range e.SchemaValidationErrors {
			field := se.FieldPath
			if field == "" {
				field = "$"
			}
			out = append(out, field+": "+se.Reason)
		}
	}
	sort.Strings(out)
	return out
}
