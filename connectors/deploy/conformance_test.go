package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/specfetch"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
)

// requireSpecs makes a registry's refusal of a description fail the
// conformance tests instead of skipping them.
const requireSpecs = "TRIGGERD_REQUIRE_SPECS"

// vercelDescription fetches Vercel's OpenAPI description. Without it the
// test is skipped, saying why; under CI=true a network failure fails it,
// as does a registry's refusal when $TRIGGERD_REQUIRE_SPECS=1.
func vercelDescription(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, src, err := specfetch.VercelSpec(ctx, specfetch.VercelOptions{})
	if err == nil {
		t.Logf("Vercel's OpenAPI description: %s (%d bytes)", src, len(b))
		return b
	}
	msg := fmt.Sprintf("SKIPPED: Vercel's OpenAPI description (%s of %s) could not be had, so the fake's answers and the client's requests are NOT checked against it: %v. "+
		"Set $%s to a copy of the file to check against it.", specfetch.VercelSpecFile, specfetch.VercelModule, err, specfetch.VercelSpecEnv)
	refused := errors.Is(err, specfetch.ErrVercelUnavailable)
	if os.Getenv(requireSpecs) == "1" || os.Getenv("CI") == "true" && !refused {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}

// endpoint is one endpoint of the product spec's section B, by the path
// versions the fake serves for it (the description of a given date has
// one of them).
type endpoint struct {
	name     string
	method   string
	versions []string // path templates, in the description's spelling
}

// specEndpoints are the product spec's 21 deployment-platform endpoints
// and the few the fake adds (GET one variable, project domains).
var specEndpoints = []endpoint{
	{"list deployments", "GET", []string{"/v6/deployments"}},
	{"get deployment", "GET", []string{"/v13/deployments/{idOrUrl}"}},
	{"create deployment", "POST", []string{"/v13/deployments"}},
	{"cancel deployment", "PATCH", []string{"/v12/deployments/{id}/cancel"}},
	{"delete deployment", "DELETE", []string{"/v13/deployments/{id}"}},
	{"list projects", "GET", []string{"/v9/projects", "/v10/projects"}},
	{"get project", "GET", []string{"/v9/projects/{idOrName}"}},
	{"create project", "POST", []string{"/v10/projects", "/v11/projects"}},
	{"update project", "PATCH", []string{"/v9/projects/{idOrName}"}},
	{"delete project", "DELETE", []string{"/v9/projects/{idOrName}"}},
	{"list domains", "GET", []string{"/v5/domains"}},
	{"get domain", "GET", []string{"/v5/domains/{domain}"}},
	{"add project domain", "POST", []string{"/v10/projects/{idOrName}/domains"}},
	{"remove project domain", "DELETE", []string{"/v9/projects/{idOrName}/domains/{domain}"}},
	{"list env", "GET", []string{"/v9/projects/{idOrName}/env", "/v10/projects/{idOrName}/env"}},
	{"create env", "POST", []string{"/v10/projects/{idOrName}/env"}},
	{"edit env", "PATCH", []string{"/v9/projects/{idOrName}/env/{id}"}},
	{"delete env", "DELETE", []string{"/v9/projects/{idOrName}/env/{id}"}},
	{"list teams", "GET", []string{"/v2/teams"}},
	{"get team", "GET", []string{"/v2/teams/{teamId}"}},
	{"list team members", "GET", []string{"/v2/teams/{teamId}/members", "/v3/teams/{teamId}/members"}},
}

// TestVercelConformance holds the fake's answers, and the requests of the
// deploy steps' client, to Vercel's own OpenAPI description: every
// endpoint of the product spec is called, through the steps where a step
// calls it and directly otherwise, and each exchange must be one the
// description takes (request) and lists (status and body of the answer).
func TestVercelConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: fetches and compiles Vercel's OpenAPI description")
	}
	spec := vercelDescription(t)
	c, err := newSpecChecker(spec, specEndpoints)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range specEndpoints {
		if !slices.ContainsFunc(e.versions, func(p string) bool { return c.has(e.method, p) }) {
			t.Errorf("%s: the description has none of %s %v", e.name, e.method, e.versions)
		}
	}
	rec := &recorder{}
	exerciseVercel(t, rec)
	for _, f := range c.check(rec.exchanges) {
		t.Error(f)
	}
}

// TestConformanceCheckerCatches holds the checker itself to a description
// made for the purpose: an answer lacking a required field, a status the
// description does not list and a request body it does not take are
// each reported; conforming exchanges are not.
func TestConformanceCheckerCatches(t *testing.T) {
	desc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://api.vercel.com"}],"paths":{
	  "/v13/deployments/{idOrUrl}":{"get":{"parameters":[{"name":"idOrUrl","in":"path","required":true,"schema":{"type":"string"}},
	    {"name":"teamId","in":"query","schema":{"type":"string"}}],
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object","required":["id","plan"],
	      "properties":{"id":{"type":"string"},"plan":{"type":"string","enum":["hobby","pro","enterprise"]}}}}}},
	      "404":{"description":""}}}},
	  "/v9/projects/{idOrName}":{"get":{"parameters":[{"name":"idOrName","in":"path","required":true,"schema":{"type":"string"}}],
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object","required":["id","madeUpField"]}}}}}}},
	  "/v13/deployments":{"post":{"requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object",
	    "required":["name"],"properties":{"name":{"type":"string"},"target":{"type":"string"}},"additionalProperties":false}}}},
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`
	eps := []endpoint{
		{"get deployment", "GET", []string{"/v13/deployments/{idOrUrl}"}},
		{"get project", "GET", []string{"/v9/projects/{idOrName}"}},
		{"create deployment", "POST", []string{"/v13/deployments"}},
	}
	c, err := newSpecChecker([]byte(desc), eps)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakedeploy.New(fakedeploy.Options{})
	u := fake.Start()
	t.Cleanup(fake.Close)
	p := fake.AddProject(fakedeploy.Project{Name: "web"})
	d := fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID})
	rec := &recorder{}
	hc := &http.Client{Transport: rec}
	send := func(method, path, body string) {
		req, _ := http.NewRequest(method, u+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("GET", "/v13/deployments/"+d.ID, "")      // conforms
	send("GET", "/v13/deployments/dpl_none", "")   // 404, listed without a body schema
	send("GET", "/v9/projects/web", "")            // lacks madeUpField
	send("POST", "/v13/deployments", `{"nam":1}`)  // a body the description does not take, answered 400
	send("GET", "/v13/deployments/"+d.ID+"/x", "") // no such operation: not the checker's business
	got := strings.Join(c.check(rec.exchanges), "\n")
	for _, want := range []string{"GET /v9/projects/{idOrName}", "madeUpField", "POST /v13/deployments", "400"} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "GET /v13/deployments/{idOrUrl}") {
		t.Errorf("a conforming exchange was reported:\n%s", got)
	}
}

// exchange is one request and answer, with both bodies.
type exchange struct {
	req      *http.Request
	reqBody  []byte
	resp     *http.Response
	respBody []byte
}

// recorder is an http.RoundTripper keeping every exchange.
type recorder struct {
	mu        sync.Mutex
	exchanges []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	kept := *resp
	r.mu.Lock()
	r.exchanges = append(r.exchanges, exchange{req: req, reqBody: body, resp: &kept, respBody: respBody})
	r.mu.Unlock()
	return resp, nil
}

// exerciseVercel calls every endpoint of specEndpoints on a fake through
// rec: the deployment ones through the deploy steps (their client's
// requests are checked too), the others directly, under every path
// version the fake serves, with both answers that succeed and answers
// that refuse.
func exerciseVercel(t *testing.T, rec *recorder) {
	t.Helper()
	h := newHarness(t)
	h.fake.AddProject(fakedeploy.Project{Name: "web", OwnerID: fakedeploy.DefaultTeamID,
		Link: &fakedeploy.GitRepo{Org: "acme", Repo: "web", RepoID: 4242}})
	env := connectors.Env{
		HTTP:    &http.Client{Transport: h.tk.Wrap(team.ID, connectortest.Bearer{Token: h.token, Base: rec})},
		Account: team,
	}
	run := func(id, input string) map[string]any {
		out, err := h.step(t, id).Run(context.Background(), env, json.RawMessage(input))
		if err != nil {
			t.Fatalf("%s %s: %v", id, input, err)
		}
		b, _ := json.Marshal(out)
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	prod := run(StepCreateDeployment, `{"project":"web","environment":"production","meta":{"ticket":"OPS-1"}}`)
	run(StepCreateDeployment, `{"project":"web"}`)
	run(StepListDeployments, `{"project":"web","environment":"production"}`)
	run(StepListDeployments, `{"limit":1}`)
	run(StepCancelDeployment, `{"id":"`+prod["id"].(string)+`"}`)

	base := h.fake.Start()
	hc := &http.Client{Transport: rec}
	send := func(method, path, body string) map[string]any {
		t.Helper()
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		req, _ := http.NewRequest(method, base+path+sep+"teamId="+fakedeploy.DefaultTeamID, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	send("GET", "/v13/deployments/"+prod["id"].(string), "")
	send("GET", "/v13/deployments/dpl_missing", "")
	send("DELETE", "/v13/deployments/"+prod["id"].(string), "")
	for _, v := range []string{"v10", "v11"} {
		send("POST", "/"+v+"/projects", `{"name":"shop-`+v+`","framework":"nextjs","gitRepository":{"type":"github","repo":"acme/shop"}}`)
	}
	send("POST", "/v10/projects", `{"name":"web"}`) // 409
	for _, v := range []string{"v9", "v10"} {
		send("GET", "/"+v+"/projects?limit=2", "")
	}
	send("GET", "/v9/projects/web", "")
	send("PATCH", "/v9/projects/shop-v10", `{"buildCommand":"npm run build"}`)
	send("DELETE", "/v9/projects/shop-v11", "")
	send("POST", "/v10/projects/web/domains", `{"name":"www.example.com"}`)
	send("POST", "/v10/projects/web/domains", `{"name":"www.example.com"}`) // 409
	send("GET", "/v9/projects/web/domains", "")
	send("GET", "/v5/domains", "")
	send("GET", "/v5/domains/example.com", "")
	send("DELETE", "/v9/projects/web/domains/www.example.com", "")
	created := send("POST", "/v10/projects/web/env", `{"key":"API_URL","value":"https://api.example.com","type":"encrypted","target":["production","preview"]}`)
	send("POST", "/v10/projects/web/env?upsert=true", `[{"key":"PLAIN","value":"v","type":"plain","target":["development"]}]`)
	for _, v := range []string{"v9", "v10"} {
		send("GET", "/"+v+"/projects/web/env", "")
	}
	if c, _ := created["created"].(map[string]any); c != nil {
		id, _ := c["id"].(string)
		send("PATCH", "/v9/projects/web/env/"+id, `{"value":"https://api2.example.com"}`)
		send("DELETE", "/v9/projects/web/env/"+id, "")
	}
	send("GET", "/v2/teams", "")
	send("GET", "/v2/teams/"+fakedeploy.DefaultTeamID, "")
	for _, v := range []string{"v2", "v3"} {
		send("GET", "/"+v+"/teams/"+fakedeploy.DefaultTeamID+"/members", "")
	}
}

// specChecker validates exchanges against a description pruned to the
// endpoints exercised (the whole of Vercel's is about 11 MB).
type specChecker struct {
	v         validator.Validator
	ops       map[string]bool // "METHOD template" present in the description
	templates []string
}

func newSpecChecker(spec []byte, eps []endpoint) (*specChecker, error) {
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("the description is not JSON: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	if len(paths) == 0 {
		return nil, errors.New("the description has no paths")
	}
	kept := map[string]any{}
	ops := map[string]bool{}
	for _, e := range eps {
		for _, p := range e.versions {
			item, ok := paths[p].(map[string]any)
			if !ok {
				continue
			}
			kept[p] = item
			if _, ok := item[strings.ToLower(e.method)]; ok {
				ops[e.method+" "+p] = true
			}
		}
	}
	doc["paths"] = kept
	pruned, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	d, err := libopenapi.NewDocument(pruned)
	if err != nil {
		return nil, fmt.Errorf("the description: %w", err)
	}
	v, errs := validator.NewValidator(d, config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("the description: %v", errors.Join(errs...))
	}
	return &specChecker{v: v, ops: ops, templates: slices.Collect(maps.Keys(kept))}, nil
}

func (c *specChecker) has(method, template string) bool { return c.ops[method+" "+template] }

// check returns one finding per exchange that does not conform: a
// request the description does not take (unless the fake refused it,
// 4xx), an answer whose status or body it does not list. Exchanges with
// paths outside the description are left out: the coverage check says
// which endpoints it lacks.
func (c *specChecker) check(exs []exchange) []string {
	var out []string
	for _, ex := range exs {
		r := ex.req.Clone(ex.req.Context())
		r.Body = io.NopCloser(bytes.NewReader(ex.reqBody))
		ok, errs := c.v.ValidateHttpRequestSync(r)
		if !ok && missingPath(errs) {
			continue
		}
		op := ex.req.Method + " " + c.template(ex.req.URL.Path)
		if !ok && (ex.resp.StatusCode < 400 || ex.resp.StatusCode >= 500) {
			out = append(out, fmt.Sprintf("%s: the request is not one Vercel's description takes, yet the fake answered %d: %s\nbody: %.400s",
				op, ex.resp.StatusCode, describe(errs), ex.reqBody))
		}
		r.Body = io.NopCloser(bytes.NewReader(ex.reqBody))
		w := *ex.resp
		w.Body = io.NopCloser(bytes.NewReader(ex.respBody))
		w.ContentLength = int64(len(ex.respBody))
		if ok, errs := c.v.ValidateHttpResponse(r, &w); !ok {
			out = append(out, fmt.Sprintf("%s answered %d, not as Vercel's description lists: %s\nbody: %.600s",
				op, ex.resp.StatusCode, describe(errs), ex.respBody))
		}
	}
	return out
}

func missingPath(errs []*verrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == "path" && (e.ValidationSubType == "missing" || e.ValidationSubType == "missingOperation") {
			return true
		}
	}
	return false
}

// template returns the description's path template matching path, the
// one with the most literal segments when several do, or path itself.
func (c *specChecker) template(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	best, bestLit := path, -1
	for _, tpl := range c.templates {
		ts := strings.Split(strings.Trim(tpl, "/"), "/")
		if len(ts) != len(segs) {
			continue
		}
		lit := 0
		for i, s := range ts {
			switch {
			case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			case s == segs[i]:
				lit++
			default:
				lit = -1
			}
			if lit < 0 {
				break
			}
		}
		if lit > bestLit {
			best, bestLit = tpl, lit
		}
	}
	return best
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  - %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s", se.FieldPath, se.Reason)
		}
	}
	return b.String()
}
