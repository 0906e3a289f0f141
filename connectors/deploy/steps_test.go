package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakedeploy"
)

var (
	personal = connectors.AccountInfo{ID: "acc_personal", Login: "fake0001", ExternalID: fakedeploy.DefaultUserID,
		Metadata: map[string]string{MetaUserID: fakedeploy.DefaultUserID}}
	team = connectors.AccountInfo{ID: "acc_team", Login: "acme", ExternalID: fakedeploy.DefaultTeamID,
		Metadata: map[string]string{MetaTeamID: fakedeploy.DefaultTeamID, MetaUserID: fakedeploy.DefaultUserID}}
)

type harness struct {
	fake  *fakedeploy.Server
	clock *testenv.Clock
	tk    connectors.Toolkit
	token string
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	clk := testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	fake := fakedeploy.New(fakedeploy.Options{Now: clk.Now})
	u := fake.Start()
	t.Cleanup(fake.Close)
	return &harness{
		fake:  fake,
		clock: clk,
		tk:    NewToolkit(ToolkitOptions{APIBaseURL: u, Now: clk.Now, retryBase: time.Millisecond}),
		token: "vercel-token-1",
	}
}

func (h *harness) step(t testing.TB, id string) connectors.Step {
	t.Helper()
	i := slices.IndexFunc(h.tk.Steps, func(s connectors.Step) bool { return s.ID == id })
	if i < 0 {
		t.Fatalf("no step %s", id)
	}
	return h.tk.Steps[i]
}

func (h *harness) env(acc connectors.AccountInfo) connectors.Env {
	return connectors.Env{
		HTTP:    &http.Client{Transport: h.tk.Wrap(acc.ID, connectortest.Bearer{Token: h.token, Base: http.DefaultTransport})},
		Account: acc,
	}
}

// run validates input against the step's schema, runs the step and
// validates a successful output against the output schema; it returns the
// output as generic JSON.
func (h *harness) run(t *testing.T, id string, acc connectors.AccountInfo, input string) (map[string]any, error) {
	t.Helper()
	s := h.step(t, id)
	if err := connectortest.CompileSchema(t, s.ID+" input", s.Input).Validate(connectortest.JSON(t, input)); err != nil {
		t.Fatalf("%s: input %s does not match the schema: %v", id, input, err)
	}
	out, err := s.Run(context.Background(), h.env(acc), json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := connectortest.JSON(t, string(b))
	if err := connectortest.CompileSchema(t, s.ID+" output", s.Output).Validate(doc); err != nil {
		t.Fatalf("%s: output %s does not match the schema: %v", id, b, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func linkedProject(h *harness, owner string, branches ...string) fakedeploy.Project {
	return h.fake.AddProject(fakedeploy.Project{
		Name:    "web",
		OwnerID: owner,
		Link:    &fakedeploy.GitRepo{Org: "acme", Repo: "web", RepoID: 4242, ProductionBranch: "main", Branches: branches},
	})
}

func TestToolkitShape(t *testing.T) {
	tk := NewToolkit(ToolkitOptions{})
	if tk.Connector != "deploy" || tk.Wrap == nil {
		t.Fatalf("toolkit = %+v", tk)
	}
	want := map[string]string{
		"deploy.create_deployment": "Create Deployment",
		"deploy.list_deployments":  "List Deployments",
		"deploy.cancel_deployment": "Cancel Deployment",
	}
	if len(tk.Steps) != len(want) {
		t.Fatalf("%d steps, want %d", len(tk.Steps), len(want))
	}
	for _, s := range tk.Steps {
		if want[s.ID] != s.Name || s.Connector != "deploy" || s.Description == "" || s.Run == nil {
			t.Errorf("step %s %q: unexpected shape", s.ID, s.Name)
		}
	}
}

func TestSchemasCompileAndExamplesValidate(t *testing.T) {
	tk := NewToolkit(ToolkitOptions{})
	examples := map[string]connectortest.Examples{
		StepCreateDeployment: {
			Good: []string{
				`{"project":"web"}`,
				`{"project":"prj_123","branch":"feature/login","environment":"production","meta":{"ticket":"OPS-1"}}`,
				`{"project":"web","environment":"preview","sha":"0123abc","config":{"projectSettings":{"buildCommand":"npm run build"}}}`,
				`{"project":"web","environment":"staging"}`,
				`{"project":"web","custom_environment":"qa"}`,
			},
			Bad: []string{
				`{}`,
				`{"project":""}`,
				`{"project":"web","environment":"development"}`,
				`{"project":"web","environment":"nightly"}`,
				`{"project":"web","config":{"customEnvironmentSlugOrId":"qa"}}`,
				`{"project":"web","meta":{"n":1}}`,
				`{"project":"web","config":{"gitSource":{}}}`,
				`{"project":"web","colour":"red"}`,
			},
		},
		StepListDeployments: {
			Good: []string{
				`{}`,
				`{"project":"web","environment":"production","state":["READY","ERROR"],"limit":150}`,
				`{"since":1767225600000,"until":"2026-03-01T00:00:00Z","branch":"main"}`,
				`{"environment":"staging"}`,
			},
			Bad: []string{
				`{"state":["DONE"]}`,
				`{"limit":0}`,
				`{"limit":1001}`,
				`{"since":"yesterday"}`,
				`{"environment":"development"}`,
			},
		},
		StepCancelDeployment: {
			Good: []string{`{"id":"dpl_89ab"}`},
			Bad:  []string{`{}`, `{"id":""}`, `{"id":"dpl_1","force":true}`},
		},
	}
	connectortest.CheckSchemas(t, tk.Steps, examples)
}

func TestCreateDeploymentTeamProductionBranch(t *testing.T) {
	h := newHarness(t)
	p := linkedProject(h, fakedeploy.DefaultTeamID, "main", "feature/login")
	out, err := h.run(t, StepCreateDeployment, team, `{
		"project": "web", "branch": "feature/login", "environment": "production",
		"meta": {"ticket": "OPS-1"},
		"config": {"projectSettings": {"buildCommand": "npm run build"}}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := h.fake.Deployment(out["id"].(string))
	if !ok {
		t.Fatalf("the fake has no deployment %v", out["id"])
	}
	if d.ProjectID != p.ID || d.OwnerID != fakedeploy.DefaultTeamID || d.Target != "production" || d.Ref != "feature/login" {
		t.Errorf("fake deployment = %+v", d)
	}
	if out["state"] != "QUEUED" || out["target"] != "production" || out["branch"] != "feature/login" ||
		out["project_id"] != p.ID || out["url"] != "https://"+d.URL || out["name"] != "web" {
		t.Errorf("output = %v", out)
	}
	if m := out["meta"].(map[string]any); m["ticket"] != "OPS-1" || m["githubCommitRef"] != "feature/login" {
		t.Errorf("meta = %v", m)
	}
	if c := out["creator"].(map[string]any); c["id"] != fakedeploy.DefaultUserID {
		t.Errorf("creator = %v", c)
	}
	if out["created_at"] != d.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00") {
		t.Errorf("created_at = %v, want %v", out["created_at"], d.CreatedAt)
	}
	// Every request of a team account carries teamId.
	reqs := h.fake.Requests()
	if len(reqs) != 2 || reqs[0].Route != fakedeploy.RouteGetProject || reqs[1].Route != fakedeploy.RouteCreateDeployment {
		t.Fatalf("requests = %+v", reqs)
	}
	for _, r := range reqs {
		if r.Query.Get("teamId") != fakedeploy.DefaultTeamID {
			t.Errorf("%s %s: teamId = %q", r.Method, r.Path, r.Query.Get("teamId"))
		}
	}
	var body map[string]any
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	gs := body["gitSource"].(map[string]any)
	if gs["type"] != "github" || gs["ref"] != "feature/login" || gs["repoId"] != float64(4242) {
		t.Errorf("gitSource = %v", gs)
	}
	if body["target"] != "production" || body["project"] != p.ID || body["name"] != "web" {
		t.Errorf("body = %v", body)
	}
	if ps, _ := body["projectSettings"].(map[string]any); ps["buildCommand"] != "npm run build" {
		t.Errorf("custom configuration not merged: %v", body)
	}
}

func TestCreateDeploymentPreviewDefaults(t *testing.T) {
	h := newHarness(t)
	linkedProject(h, fakedeploy.DefaultUserID)
	out, err := h.run(t, StepCreateDeployment, personal, `{"project":"web"}`)
	if err != nil {
		t.Fatal(err)
	}
	if out["target"] != "preview" || out["branch"] != "main" {
		t.Errorf("output = %v", out)
	}
	post := h.fake.RequestsTo(fakedeploy.RouteCreateDeployment)
	if len(post) != 1 {
		t.Fatalf("%d POSTs", len(post))
	}
	var body map[string]any
	json.Unmarshal(post[0].Body, &body)
	if _, ok := body["target"]; ok {
		t.Errorf("preview must omit target: %v", body)
	}
	for _, r := range h.fake.Requests() {
		if r.Query.Has("teamId") {
			t.Errorf("personal account sent teamId: %s", r.Query.Encode())
		}
	}
}

func TestCreateDeploymentRefusals(t *testing.T) {
	h := newHarness(t)
	linkedProject(h, fakedeploy.DefaultUserID, "main")
	h.fake.AddProject(fakedeploy.Project{Name: "static"})

	// The schema does not offer development; a caller that skips it is
	// told why.
	_, err := h.step(t, StepCreateDeployment).Run(context.Background(), h.env(personal), json.RawMessage(`{"project":"web","environment":"development"}`))
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); !strings.Contains(ce.Message, "vercel dev") {
		t.Errorf("message = %q, want why development takes no deployment", ce.Message)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("development sent %d requests", n)
	}

	_, err = h.run(t, StepCreateDeployment, personal, `{"project":"web","branch":"nope"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); ce.Status != 400 || !strings.Contains(ce.Message, "nope") {
		t.Errorf("error = %v", ce)
	}

	_, err = h.run(t, StepCreateDeployment, personal, `{"project":"static","branch":"main"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); !strings.Contains(ce.Message, "no linked git repository") {
		t.Errorf("message = %q", ce.Message)
	}

	_, err = h.run(t, StepCreateDeployment, personal, `{"project":"missing"}`)
	connectortest.WantCode(t, err, connectors.CodeNotFound)

	// The same name in the team scope is another project.
	tp := linkedProject(h, fakedeploy.DefaultTeamID)
	h.fake.ClearRequests()
	out, err := h.run(t, StepCreateDeployment, team, `{"project":"web"}`)
	if err != nil {
		t.Fatalf("team deploy: %v", err)
	}
	if out["project_id"] != tp.ID {
		t.Errorf("project_id = %v, want %s", out["project_id"], tp.ID)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteCreateDeployment)); n != 1 {
		t.Errorf("%d POSTs", n)
	}
	if got := len(h.fake.Deployments()); got != 1 {
		t.Errorf("the fake has %d deployments, want only the team one", got)
	}
}

func TestTeamAccessDenied(t *testing.T) {
	h := newHarness(t)
	other := team
	other.ID = "acc_other"
	other.Metadata = map[string]string{MetaTeamID: "team_elsewhere"}
	_, err := h.run(t, StepListDeployments, other, `{}`)
	if ce := connectortest.WantCode(t, err, connectors.CodePermissionDenied); ce.Status != 403 {
		t.Errorf("error = %v", ce)
	}
	if r := h.fake.Requests(); len(r) != 1 || r[0].Query.Get("teamId") != "team_elsewhere" {
		t.Errorf("requests = %+v", r)
	}
}

func TestInvalidTokenNeedsReauth(t *testing.T) {
	h := newHarness(t)
	h.token = ""
	_, err := h.run(t, StepListDeployments, personal, `{}`)
	connectortest.WantCode(t, err, connectors.CodeNeedsReauth)
}

func TestListDeploymentsFiltersAndPagination(t *testing.T) {
	h := newHarness(t)
	p := linkedProject(h, fakedeploy.DefaultTeamID)
	other := h.fake.AddProject(fakedeploy.Project{Name: "docs", OwnerID: fakedeploy.DefaultTeamID})
	states := []string{"READY", "ERROR", "BUILDING", "QUEUED", "CANCELED"}
	for i := range 260 {
		d := fakedeploy.Deployment{ProjectID: p.ID, State: states[i%len(states)], Ref: "main"}
		if i%3 == 0 {
			d.Target = "production"
		}
		if i%10 == 9 {
			d.ProjectID = other.ID
		}
		h.fake.AddDeployment(d)
		h.clock.Advance(time.Minute)
	}
	all := h.fake.Deployments()

	out, err := h.run(t, StepListDeployments, team, `{"project":"web","limit":150}`)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range all {
		if d.ProjectID == p.ID {
			want = append(want, d.ID)
		}
	}
	got := ids(out)
	if !slices.Equal(got, want[:150]) {
		t.Fatalf("got %d ids, want the newest 150 of project web", len(got))
	}
	if out["count"] != float64(150) || out["next"] == nil {
		t.Errorf("count = %v next = %v", out["count"], out["next"])
	}
	reqs := h.fake.RequestsTo(fakedeploy.RouteListDeployments)
	if len(reqs) != 2 || reqs[0].Query.Get("limit") != "100" || reqs[1].Query.Get("limit") != "50" || reqs[1].Query.Get("until") == "" {
		t.Errorf("pages = %v", queries(reqs))
	}

	// Continue from next to the end.
	next := int64(out["next"].(float64))
	rest, err := h.run(t, StepListDeployments, team, `{"project":"web","limit":1000,"until":`+jsonInt(next)+`}`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(rest), want[150:]) || rest["next"] != nil {
		t.Errorf("rest: %d ids, next %v; want %d", len(ids(rest)), rest["next"], len(want)-150)
	}

	// Filters: state, environment, time window.
	since := all[100].CreatedAt
	until := all[20].CreatedAt
	out, err = h.run(t, StepListDeployments, team, `{"state":["READY","ERROR"],"environment":"production","since":"`+
		since.Format(time.RFC3339)+`","until":`+jsonInt(until.UnixMilli())+`,"limit":1000}`)
	if err != nil {
		t.Fatal(err)
	}
	want = want[:0]
	for _, d := range all {
		if (d.State == "READY" || d.State == "ERROR") && d.Target == "production" &&
			!d.CreatedAt.Before(since) && d.CreatedAt.Before(until) {
			want = append(want, d.ID)
		}
	}
	if len(want) == 0 || !slices.Equal(ids(out), want) {
		t.Errorf("filtered ids = %v, want %v", ids(out), want)
	}
	for _, d := range out["deployments"].([]any) {
		m := d.(map[string]any)
		if m["target"] != "production" || (m["state"] != "READY" && m["state"] != "ERROR") {
			t.Errorf("item %v escapes the filter", m)
		}
	}
	last := h.fake.RequestsTo(fakedeploy.RouteListDeployments)
	q := last[len(last)-1].Query
	if q.Get("state") != "READY,ERROR" || q.Get("target") != "production" || q.Get("teamId") != fakedeploy.DefaultTeamID {
		t.Errorf("query = %s", q.Encode())
	}

	// An empty list is not an error.
	out, err = h.run(t, StepListDeployments, personal, `{}`)
	if err != nil || out["count"] != float64(0) || len(out["deployments"].([]any)) != 0 {
		t.Errorf("empty list = %v, %v", out, err)
	}
}

func ids(out map[string]any) []string {
	var s []string
	for _, d := range out["deployments"].([]any) {
		s = append(s, d.(map[string]any)["id"].(string))
	}
	return s
}

func queries(reqs []fakedeploy.Request) []string {
	var s []string
	for _, r := range reqs {
		s = append(s, r.Query.Encode())
	}
	return s
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestCancelDeployment(t *testing.T) {
	h := newHarness(t)
	p := linkedProject(h, fakedeploy.DefaultTeamID)
	queued := h.fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID})
	building := h.fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID})
	if err := h.fake.SetDeploymentState(building.ID, fakedeploy.StateBuilding); err != nil {
		t.Fatal(err)
	}
	ready := h.fake.AddDeployment(fakedeploy.Deployment{ProjectID: p.ID, State: fakedeploy.StateReady})

	for _, d := range []fakedeploy.Deployment{queued, building} {
		out, err := h.run(t, StepCancelDeployment, team, `{"id":"`+d.ID+`"}`)
		if err != nil {
			t.Fatalf("cancel %s: %v", d.ID, err)
		}
		got, _ := h.fake.Deployment(d.ID)
		if got.State != "CANCELED" || out["state"] != "CANCELED" || out["id"] != d.ID || out["canceled_at"] == nil {
			t.Errorf("after cancel: fake %s, output %v", got.State, out)
		}
	}

	h.fake.ClearRequests()
	_, err := h.run(t, StepCancelDeployment, team, `{"id":"`+ready.ID+`"}`)
	ce := connectortest.WantCode(t, err, connectors.CodeValidation)
	if !strings.Contains(ce.Message, "already READY") {
		t.Errorf("message = %q", ce.Message)
	}
	if n := len(h.fake.RequestsTo(fakedeploy.RouteCancelDeployment)); n != 0 {
		t.Errorf("a READY deployment got %d cancel requests", n)
	}
	if got, _ := h.fake.Deployment(ready.ID); got.State != "READY" {
		t.Errorf("state = %s", got.State)
	}

	_, err = h.run(t, StepCancelDeployment, team, `{"id":"dpl_missing"}`)
	connectortest.WantCode(t, err, connectors.CodeNotFound)
	// Deployments are scoped: the personal scope cannot see the team's.
	_, err = h.run(t, StepCancelDeployment, personal, `{"id":"`+queued.ID+`"}`)
	connectortest.WantCode(t, err, connectors.CodeNotFound)
}

func TestCreateDeploymentFromFiles(t *testing.T) {
	h := newHarness(t)
	p := h.fake.AddProject(fakedeploy.Project{Name: "static"})
	out, err := h.run(t, StepCreateDeployment, personal, `{"project":"static","environment":"production",
		"config":{"files":[{"file":"index.html","data":"<h1>hi</h1>"}],"projectSettings":{"framework":null}}}`)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := h.fake.Deployment(out["id"].(string))
	if d.ProjectID != p.ID || d.Ref != "" || out["branch"] != nil || out["target"] != "production" {
		t.Errorf("deployment = %+v, output %v", d, out)
	}
	var body map[string]any
	json.Unmarshal(d.Request, &body)
	if _, ok := body["gitSource"]; ok || body["files"] == nil {
		t.Errorf("body = %v", body)
	}
	_, err = h.run(t, StepCreateDeployment, personal, `{"project":"static","branch":"main","config":{"files":[]}}`)
	connectortest.WantCode(t, err, connectors.CodeValidation)
}

// The environments the steps offer are the targets Vercel deploys to, and
// their schemas say why development is not one of them.
func TestEnvironmentsOffered(t *testing.T) {
	tk := NewToolkit(ToolkitOptions{})
	for _, id := range []string{StepCreateDeployment, StepListDeployments} {
		var sch struct {
			Properties map[string]struct {
				Enum        []string `json:"enum"`
				Description string   `json:"description"`
			} `json:"properties"`
		}
		s := slices.IndexFunc(tk.Steps, func(s connectors.Step) bool { return s.ID == id })
		if err := json.Unmarshal(tk.Steps[s].Input, &sch); err != nil {
			t.Fatal(err)
		}
		env := sch.Properties["environment"]
		slices.Sort(env.Enum)
		if strings.Join(env.Enum, ",") != "preview,production,staging" || !strings.Contains(env.Description, "vercel dev") {
			t.Errorf("%s environment: enum %v, description %q", id, env.Enum, env.Description)
		}
	}
}

func TestCreateDeploymentEnvironments(t *testing.T) {
	h := newHarness(t)
	h.fake.AddProject(fakedeploy.Project{
		Name: "web", OwnerID: fakedeploy.DefaultTeamID,
		Link:               &fakedeploy.GitRepo{Org: "acme", Repo: "web", RepoID: 4242},
		CustomEnvironments: []fakedeploy.CustomEnvironment{{Slug: "qa"}},
	})
	for _, tc := range []struct {
		input, bodyKey, bodyValue, target string
	}{
		{`{"project":"web","environment":"staging"}`, "target", "staging", "staging"},
		{`{"project":"web","environment":"production"}`, "target", "production", "production"},
		{`{"project":"web","custom_environment":"qa"}`, "customEnvironmentSlugOrId", "qa", "qa"},
		{`{"project":"web","custom_environment":"qa","environment":"preview"}`, "customEnvironmentSlugOrId", "qa", "qa"},
	} {
		h.fake.ClearRequests()
		out, err := h.run(t, StepCreateDeployment, team, tc.input)
		if err != nil {
			t.Fatalf("%s: %v", tc.input, err)
		}
		post := h.fake.RequestsTo(fakedeploy.RouteCreateDeployment)
		var body map[string]any
		if len(post) != 1 || json.Unmarshal(post[0].Body, &body) != nil {
			t.Fatalf("%s: POSTs %+v", tc.input, post)
		}
		if body[tc.bodyKey] != tc.bodyValue || out["target"] != tc.target {
			t.Errorf("%s: sent %s=%v, output target %v; want %s, %s", tc.input, tc.bodyKey, body[tc.bodyKey], out["target"], tc.bodyValue, tc.target)
		}
	}

	// Two environments at once, or an unknown custom one.
	h.fake.ClearRequests()
	_, err := h.run(t, StepCreateDeployment, team, `{"project":"web","custom_environment":"qa","environment":"production"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); !strings.Contains(ce.Message, "one of them") {
		t.Errorf("message = %q", ce.Message)
	}
	if n := len(h.fake.Requests()); n != 0 {
		t.Errorf("a refused input sent %d requests", n)
	}
	_, err = h.run(t, StepCreateDeployment, team, `{"project":"web","custom_environment":"nightly"}`)
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); ce.Status != 400 || !strings.Contains(ce.Message, "nightly") {
		t.Errorf("unknown custom environment: %v", ce)
	}

	// List Deployments filters staging as Vercel does.
	out, err := h.run(t, StepListDeployments, team, `{"environment":"staging"}`)
	if err != nil {
		t.Fatal(err)
	}
	ds := out["deployments"].([]any)
	if len(ds) != 1 || ds[0].(map[string]any)["target"] != "staging" {
		t.Errorf("staging list = %v", ds)
	}
	if q := h.fake.RequestsTo(fakedeploy.RouteListDeployments); len(q) != 1 || q[0].Query.Get("target") != "staging" {
		t.Errorf("list requests = %+v", q)
	}
	_, err = h.step(t, StepListDeployments).Run(context.Background(), h.env(team), json.RawMessage(`{"environment":"development"}`))
	if ce := connectortest.WantCode(t, err, connectors.CodeValidation); !strings.Contains(ce.Message, "vercel dev") {
		t.Errorf("list development: %v", ce)
	}
}
