package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/oascheck"
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
	b, src, err := (&specfetch.Fetcher{}).Vercel(ctx)
	if err == nil {
		t.Logf("Vercel's OpenAPI description: %s (%d bytes)", src, len(b))
		return b
	}
	msg := fmt.Sprintf("SKIPPED: Vercel's OpenAPI description (%s of %s) could not be had, so the fake's answers and the client's requests are NOT checked against it: %v. "+
		"Set $%s to a copy of the file to check against it.", specfetch.VercelSpecFile, specfetch.VercelModule, err, specfetch.VercelSpecEnv)
	refused := errors.Is(err, specfetch.ErrUnavailable)
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
// An exchange under a path version the description lacks is left out;
// every endpoint must be in it under one of the versions the fake serves.
func TestVercelConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short: fetches and compiles Vercel's OpenAPI description")
	}
	spec := vercelDescription(t)
	d, err := oascheck.Parse(vercelName, spec)
	if err != nil {
		t.Fatal(err)
	}
	rec := &oascheck.Recorder{}
	exerciseVercel(t, rec)
	report, err := d.Check(rec.Exchanges())
	if err != nil {
		t.Fatal(err)
	}
	reached := map[string]bool{}
	var bad oascheck.Report
	for _, f := range report {
		if !strings.Contains(f.Operation, "{") && !f.OK() && strings.Contains(strings.Join(f.Request, " "), vercelName) {
			continue // a path version the description does not have
		}
		reached[normalize(f.Operation)] = true
		if !f.OK() {
			bad = append(bad, f)
		}
	}
	for _, e := range specEndpoints {
		if !slices.ContainsFunc(e.versions, func(p string) bool { return reached[normalize(e.method+" "+p)] }) {
			t.Errorf("%s: the description has none of %s %v", e.name, e.method, e.versions)
		}
	}
	if len(bad) > 0 {
		t.Errorf("the fake or the client does not conform to Vercel's description: %s", bad)
	}
}

const vercelName = "Vercel REST (vercel-spec.json)"

// normalize spells an operation with its path parameters unnamed
// ("GET /v9/projects/{}"), as descriptions name them differently.
func normalize(op string) string { return paramName.ReplaceAllString(op, "{}") }

var paramName = regexp.MustCompile(`\{[^}/]*\}`)

// TestConformanceCheckCatches holds the check to a description made for
// the purpose: the fake's answer lacking a field the description requires
// and a request body it does not take are reported; a conforming
// exchange is not.
func TestConformanceCheckCatches(t *testing.T) {
	desc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"servers":[{"url":"https://api.vercel.com"}],"paths":{
	  "/v13/deployments/{idOrUrl}":{"get":{"parameters":[{"name":"idOrUrl","in":"path","required":true,"schema":{"type":"string"}}],
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object","required":["id","plan"],
	      "properties":{"id":{"type":"string"},"plan":{"type":"string","enum":["hobby","pro","enterprise"]}}}}}},
	      "404":{"description":""}}}},
	  "/v9/projects/{idOrName}":{"get":{"parameters":[{"name":"idOrName","in":"path","required":true,"schema":{"type":"string"}}],
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object","required":["id","madeUpField"]}}}}}}},
	  "/v13/deployments":{"post":{"requestBody":{"required":true,"content":{"application/json":{"schema":{"type":"object",
	    "required":["name"],"properties":{"name":{"type":"string"}},"additionalProperties":false}}}},
	    "responses":{"200":{"description":"","content":{"application/json":{"schema":{"type":"object"}}}},"400":{"description":""}}}}}}`
	d, err := oascheck.Parse("test description", []byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	fake := fakedeploy.New(fakedeploy.Options{})
	u := fake.Start()
	t.Cleanup(fake.Close)
	p := fake.AddProject(fakedeploy.Project{Name: "web"})
	dep := fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID})
	rec := &oascheck.Recorder{}
	hc := &http.Client{Transport: rec}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v13/deployments/" + dep.ID, ""},   // conforms
		{"GET", "/v13/deployments/dpl_none", ""},    // 404, listed without a body
		{"GET", "/v9/projects/web", ""},             // lacks madeUpField
		{"POST", "/v13/deployments", `{"nam":"x"}`}, // a body the description does not take
	} {
		req, _ := http.NewRequest(r.method, u+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer t")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	report, err := d.Check(rec.Exchanges())
	if err != nil {
		t.Fatal(err)
	}
	fails := report.Failures()
	if len(fails["GET /v13/deployments/{idOrUrl}"]) != 0 {
		t.Errorf("a conforming exchange was reported: %v", fails)
	}
	if !strings.Contains(fmt.Sprint(fails["GET /v9/projects/{idOrName}"]), "madeUpField") || len(fails["POST /v13/deployments"]) == 0 {
		t.Errorf("findings = %v, want the missing field and the wrong body", fails)
	}
}

// exerciseVercel calls every endpoint of specEndpoints on a fake through
// rec: the deployment ones through the deploy steps (their client's
// requests are checked too), the others directly, under every path
// version the fake serves, with both answers that succeed and answers
// that refuse.
func exerciseVercel(t *testing.T, rec *oascheck.Recorder) {
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
