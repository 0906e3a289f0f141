package fakedeploy

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// call is do with the team scope and a check of the status.
func call(t *testing.T, u, method, path, body string, want int) map[string]any {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	resp, m := do(t, method, u+path+sep+"teamId="+DefaultTeamID, "t", body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %v, want %d", method, path, resp.StatusCode, m, want)
	}
	return m
}

// wantError checks a Vercel error envelope.
func wantError(t *testing.T, u, method, path, body string, status int, code string) {
	t.Helper()
	m := call(t, u, method, path, body, status)
	e, _ := m["error"].(map[string]any)
	if e["code"] != code || e["message"] == "" {
		t.Errorf("%s %s: error = %v, want code %q with a message", method, path, m, code)
	}
}

func TestProjectLifecycle(t *testing.T) {
	s, u := newFake(t)
	m := call(t, u, "POST", "/v10/projects", `{"name":"shop","framework":"nextjs","gitRepository":{"type":"github","repo":"acme/shop"},
		"environmentVariables":[{"key":"API_URL","value":"https://api.example.com","target":["production"],"type":"plain"}]}`, 200)
	id, _ := m["id"].(string)
	link, _ := m["link"].(map[string]any)
	if !strings.HasPrefix(id, "prj_") || m["name"] != "shop" || m["framework"] != "nextjs" || m["accountId"] != DefaultTeamID ||
		link["org"] != "acme" || link["repo"] != "shop" || link["productionBranch"] != "main" {
		t.Fatalf("create = %v", m)
	}
	p, ok := s.Project(id)
	if !ok || len(p.Env) != 1 || p.Env[0].Key != "API_URL" {
		t.Fatalf("stored project = %+v", p)
	}
	wantError(t, u, "POST", "/v11/projects", `{"name":"shop"}`, 409, "conflict")
	wantError(t, u, "POST", "/v10/projects", `{"framework":"nextjs"}`, 400, "bad_request")
	wantError(t, u, "POST", "/v10/projects", `{"name":"Shop!"}`, 400, "bad_request")
	wantError(t, u, "POST", "/v10/projects", `{"name":"x","colour":"red"}`, 400, "bad_request")

	// By id and by name, in the team scope only.
	for _, ref := range []string{id, "shop"} {
		if m := call(t, u, "GET", "/v9/projects/"+ref, "", 200); m["id"] != id {
			t.Errorf("GET %s = %v", ref, m)
		}
	}
	if resp, m := do(t, "GET", u+"/v9/projects/shop", "t", ""); resp.StatusCode != 404 || errCode(m) != "not_found" {
		t.Errorf("personal scope = %d %v", resp.StatusCode, m)
	}

	call(t, u, "POST", "/v10/projects", `{"name":"blog"}`, 200)
	m = call(t, u, "PATCH", "/v9/projects/shop", `{"name":"store","buildCommand":"npm run build"}`, 200)
	if m["name"] != "store" || m["buildCommand"] != "npm run build" || m["framework"] != "nextjs" {
		t.Errorf("update = %v", m)
	}
	wantError(t, u, "PATCH", "/v9/projects/store", `{"name":"blog"}`, 409, "conflict")
	wantError(t, u, "PATCH", "/v9/projects/store", `{"gitRepository":{}}`, 400, "bad_request")
	wantError(t, u, "PATCH", "/v9/projects/nope", `{}`, 404, "not_found")

	s.AddDeployment(Deployment{ProjectID: id})
	resp, body := do(t, "DELETE", u+"/v9/projects/store?teamId="+DefaultTeamID, "t", "")
	if resp.StatusCode != 204 || body != nil {
		t.Errorf("delete = %d %v, want 204 and no body", resp.StatusCode, body)
	}
	wantError(t, u, "GET", "/v9/projects/"+id, "", 404, "not_found")
	wantError(t, u, "DELETE", "/v9/projects/store", "", 404, "not_found")
	if n := len(s.Deployments()); n != 0 {
		t.Errorf("%d deployments outlive their project", n)
	}
}

func TestEnvironmentVariables(t *testing.T) {
	s, u := newFake(t)
	s.AddProject(Project{Name: "web", OwnerID: DefaultTeamID})
	m := call(t, u, "POST", "/v10/projects/web/env", `{"key":"TOKEN","value":"s3cret","type":"encrypted","target":["production","preview"]}`, 201)
	created, _ := m["created"].(map[string]any)
	id, _ := created["id"].(string)
	if id == "" || created["key"] != "TOKEN" || created["value"] == "s3cret" || len(m["failed"].([]any)) != 0 {
		t.Fatalf("create = %v: want the variable, its value encrypted, nothing failed", m)
	}
	// The same key for an overlapping target is refused, or replaced with upsert.
	wantError(t, u, "POST", "/v10/projects/web/env", `{"key":"TOKEN","value":"x","type":"plain","target":["preview"]}`, 400, "ENV_ALREADY_EXISTS")
	m = call(t, u, "POST", "/v10/projects/web/env", `[{"key":"TOKEN","value":"x","type":"plain","target":["preview"]},
		{"key":"PLAIN","value":"v","type":"plain","target":["development"]}]`, 201)
	if c, f := m["created"].([]any), m["failed"].([]any); len(c) != 1 || len(f) != 1 || c[0].(map[string]any)["key"] != "PLAIN" {
		t.Errorf("array create = %v: want PLAIN created, TOKEN failed", m)
	}
	for _, bad := range []string{
		`{"key":"1BAD","value":"x","type":"plain","target":["preview"]}`,
		`{"key":"K","value":"x","type":"loud","target":["preview"]}`,
		`{"key":"K","value":"x","type":"plain","target":["staging"]}`,
		`{"key":"K","value":"x","type":"plain"}`,
		`{"key":"K","value":"x","type":"plain","target":["production"],"gitBranch":"dev"}`,
		`{"key":"K","value":"x","type":"sensitive","target":["development"]}`,
	} {
		wantError(t, u, "POST", "/v10/projects/web/env", bad, 400, "bad_request")
	}

	// Listed under both path versions; decrypt shows the value.
	for _, path := range []string{"/v9/projects/web/env", "/v10/projects/web/env"} {
		m = call(t, u, "GET", path, "", 200)
		if envs := m["envs"].([]any); len(envs) != 2 || m["pagination"] == nil {
			t.Errorf("GET %s = %v", path, m)
		}
	}
	m = call(t, u, "GET", "/v9/projects/web/env?decrypt=true", "", 200)
	if v := m["envs"].([]any)[0].(map[string]any); v["value"] != "s3cret" || v["decrypted"] != true {
		t.Errorf("decrypted = %v", v)
	}
	if m = call(t, u, "GET", "/v1/projects/web/env/"+id, "", 200); m["value"] != "s3cret" {
		t.Errorf("GET one = %v", m)
	}

	m = call(t, u, "PATCH", "/v9/projects/web/env/"+id, `{"value":"n3w","target":["production"]}`, 200)
	if m["key"] != "TOKEN" || len(m["target"].([]any)) != 1 {
		t.Errorf("edit = %v", m)
	}
	if p, _ := s.Project("web"); p.Env[0].Value != "n3w" {
		t.Errorf("stored after edit: %+v", p.Env[0])
	}
	wantError(t, u, "PATCH", "/v9/projects/web/env/nope", `{"value":"x"}`, 404, "not_found")
	wantError(t, u, "PATCH", "/v9/projects/web/env/"+id, `{"colour":"x"}`, 400, "bad_request")

	if m = call(t, u, "DELETE", "/v9/projects/web/env/"+id, "", 200); m["id"] != id {
		t.Errorf("delete = %v", m)
	}
	wantError(t, u, "DELETE", "/v9/projects/web/env/"+id, "", 404, "not_found")
	wantError(t, u, "GET", "/v9/projects/nope/env", "", 404, "not_found")
}

func TestDomains(t *testing.T) {
	s, u := newFake(t)
	s.AddProject(Project{Name: "web", OwnerID: DefaultTeamID})
	s.AddProject(Project{Name: "docs", OwnerID: DefaultTeamID})
	s.AddDomain(Domain{Name: "acme.dev", OwnerID: DefaultTeamID, Verified: true, ServiceType: "zeit.world"})

	m := call(t, u, "POST", "/v10/projects/web/domains", `{"name":"www.example.com"}`, 200)
	if m["name"] != "www.example.com" || m["apexName"] != "example.com" || m["verified"] != false || len(m["verification"].([]any)) != 1 {
		t.Errorf("add unverified = %v", m)
	}
	m = call(t, u, "POST", "/v10/projects/web/domains", `{"name":"acme.dev"}`, 200)
	if m["verified"] != true || m["verification"] != nil {
		t.Errorf("add verified = %v", m)
	}
	m = call(t, u, "POST", "/v10/projects/web/domains", `{"name":"old.acme.dev","redirect":"acme.dev","redirectStatusCode":308}`, 200)
	if m["redirect"] != "acme.dev" || m["redirectStatusCode"] != float64(308) {
		t.Errorf("add redirect = %v", m)
	}
	wantError(t, u, "POST", "/v10/projects/docs/domains", `{"name":"acme.dev"}`, 409, "domain_already_in_use")
	wantError(t, u, "POST", "/v10/projects/web/domains", `{"name":"acme.dev"}`, 409, "domain_already_in_use")
	wantError(t, u, "POST", "/v10/projects/web/domains", `{"name":"not a domain"}`, 400, "invalid_domain")
	wantError(t, u, "POST", "/v10/projects/web/domains", `{"name":"x.acme.dev","redirect":"acme.dev","redirectStatusCode":303}`, 400, "bad_request")

	if m = call(t, u, "GET", "/v9/projects/web/domains", "", 200); len(m["domains"].([]any)) != 3 {
		t.Errorf("project domains = %v", m)
	}
	if m = call(t, u, "GET", "/v9/projects/web/domains/acme.dev", "", 200); m["name"] != "acme.dev" {
		t.Errorf("project domain = %v", m)
	}

	// The account lists acme.dev and the apex added with www.example.com.
	m = call(t, u, "GET", "/v5/domains", "", 200)
	var names []string
	for _, d := range m["domains"].([]any) {
		names = append(names, d.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "example.com,acme.dev" {
		t.Errorf("account domains = %v, want example.com,acme.dev", names)
	}
	if m = call(t, u, "GET", "/v5/domains/acme.dev", "", 200); m["domain"].(map[string]any)["verified"] != true {
		t.Errorf("GET domain = %v", m)
	}
	wantError(t, u, "GET", "/v5/domains/nope.dev", "", 404, "not_found")

	if m = call(t, u, "DELETE", "/v9/projects/web/domains/acme.dev", "", 200); len(m) != 0 {
		t.Errorf("remove = %v, want {}", m)
	}
	if m = call(t, u, "GET", "/v9/projects/web/domains/old.acme.dev", "", 200); m["redirect"] != nil {
		t.Errorf("a redirect to a removed domain stays: %v", m)
	}
	wantError(t, u, "DELETE", "/v9/projects/web/domains/acme.dev", "", 404, "not_found")
	// Free again: another project may take it.
	call(t, u, "POST", "/v10/projects/docs/domains", `{"name":"acme.dev"}`, 200)
}

func TestTeamsAndMembers(t *testing.T) {
	s, u := newFake(t)
	s.AddTeam(Team{ID: DefaultTeamID, Slug: "acme", Name: "Acme", Members: []Member{
		{UID: "user_ann", Name: "Ann", Role: "DEVELOPER", Confirmed: true},
		{UID: "user_bob", Role: "VIEWER", Confirmed: true},
		{UID: "user_cy", Role: "MEMBER"},
	}})
	s.AddTeam(Team{ID: "team_other", Slug: "other"})

	resp, m := do(t, "GET", u+"/v2/teams", "t", "")
	teams, _ := m["teams"].([]any)
	if resp.StatusCode != 200 || len(teams) != 1 || m["pagination"] == nil {
		t.Fatalf("teams = %d %v", resp.StatusCode, m)
	}
	if tm := teams[0].(map[string]any); tm["slug"] != "acme" || tm["membership"].(map[string]any)["role"] != "OWNER" {
		t.Errorf("team = %v", tm)
	}
	if resp, m := do(t, "GET", u+"/v2/teams/"+DefaultTeamID, "t", ""); resp.StatusCode != 200 || m["name"] != "Acme" {
		t.Errorf("GET team = %d %v", resp.StatusCode, m)
	}
	if resp, m := do(t, "GET", u+"/v2/teams/team_other", "t", ""); resp.StatusCode != 403 || errCode(m) != "forbidden" {
		t.Errorf("foreign team = %d %v", resp.StatusCode, m)
	}
	if resp, m := do(t, "GET", u+"/v2/teams/team_none", "t", ""); resp.StatusCode != 404 || errCode(m) != "not_found" {
		t.Errorf("unknown team = %d %v", resp.StatusCode, m)
	}
	// slug= scopes like teamId=.
	if resp, _ := do(t, "GET", u+"/v9/projects?slug=acme", "t", ""); resp.StatusCode != 200 {
		t.Errorf("slug scope = %d", resp.StatusCode)
	}

	// Members, a page at a time under both path versions.
	for _, v := range []string{"v2", "v3"} {
		var got []string
		q := "?limit=3"
		for range 5 {
			resp, m := do(t, "GET", u+"/"+v+"/teams/"+DefaultTeamID+"/members"+q, "t", "")
			if resp.StatusCode != 200 {
				t.Fatalf("%s members = %d %v", v, resp.StatusCode, m)
			}
			for _, it := range m["members"].([]any) {
				got = append(got, it.(map[string]any)["uid"].(string))
			}
			pg := m["pagination"].(map[string]any)
			next, ok := pg["next"].(float64)
			if pg["hasNext"] != ok {
				t.Errorf("hasNext %v with next %v", pg["hasNext"], pg["next"])
			}
			if !ok {
				break
			}
			q = "?limit=3&until=" + strconv.FormatInt(int64(next), 10)
		}
		if len(got) != 4 {
			t.Errorf("%s: members %v, want the owner and three", v, got)
		}
	}
	resp, m = do(t, "GET", u+"/v2/teams/"+DefaultTeamID+"/members?role=VIEWER", "t", "")
	if ms := m["members"].([]any); resp.StatusCode != 200 || len(ms) != 1 || ms[0].(map[string]any)["uid"] != "user_bob" {
		t.Errorf("role filter = %v", m)
	}
	if resp, m := do(t, "GET", u+"/v2/teams/"+DefaultTeamID+"/members?role=KING", "t", ""); resp.StatusCode != 400 || errCode(m) != "bad_request" {
		t.Errorf("bad role = %d %v", resp.StatusCode, m)
	}
}

// Create Deployment's targets are Vercel's: omitted (preview), production,
// staging or a custom environment; preview and development named as a
// target are refused, saying why.
func TestDeploymentTargets(t *testing.T) {
	s, u := newFake(t)
	s.AddProject(Project{Name: "web", OwnerID: DefaultTeamID, Link: &GitRepo{Org: "acme", Repo: "web", RepoID: 9},
		CustomEnvironments: []CustomEnvironment{{Slug: "qa"}}})
	git := `"gitSource":{"type":"github","ref":"main","repoId":9}`
	for _, tc := range []struct{ body, target, custom string }{
		{`{"name":"web",` + git + `}`, "", ""},
		{`{"name":"web","target":"production",` + git + `}`, "production", ""},
		{`{"name":"web","target":"staging",` + git + `}`, "staging", ""},
		{`{"name":"web","target":"qa",` + git + `}`, "", "qa"},
		{`{"name":"web","customEnvironmentSlugOrId":"qa",` + git + `}`, "", "qa"},
	} {
		m := call(t, u, "POST", "/v13/deployments", tc.body, 200)
		ce, _ := m["customEnvironment"].(map[string]any)
		if got, _ := m["target"].(string); got != tc.target || (tc.custom != "") != (ce != nil) || ce != nil && ce["slug"] != tc.custom {
			t.Errorf("%s: target %v, custom environment %v", tc.body, m["target"], ce)
		}
	}
	for _, target := range []string{"development", "preview", "nightly"} {
		wantError(t, u, "POST", "/v13/deployments", `{"name":"web","target":"`+target+`",`+git+`}`, 400, "bad_request")
	}
	// The list's target filter: preview is neither a named target nor a
	// custom environment.
	for target, want := range map[string]int{"production": 1, "staging": 1, "preview": 1} {
		m := call(t, u, "GET", "/v6/deployments?target="+target, "", 200)
		if n := len(m["deployments"].([]any)); n != want {
			t.Errorf("target=%s lists %d, want %d", target, n, want)
		}
	}
}

// The account's domains and the token's teams page by Vercel's timestamp
// cursor: pagination.next passed back as until, null at the end.
func TestDomainsAndTeamsPaginate(t *testing.T) {
	s := New(Options{Now: func() time.Time { return now }, Authenticate: func(string) (string, []string, bool) {
		return DefaultUserID, []string{"team_a", "team_b", "team_c"}, true
	}})
	u := s.Start()
	t.Cleanup(s.Close)
	for i := range 5 {
		s.AddDomain(Domain{Name: "site" + strconv.Itoa(i) + ".dev"})
	}
	for i, id := range []string{"team_a", "team_b", "team_c"} {
		s.AddTeam(Team{ID: id, CreatedAt: now.Add(time.Duration(i) * time.Second)})
	}
	for _, tc := range []struct {
		path, list string
		want       int
	}{{"/v5/domains", "domains", 5}, {"/v2/teams", "teams", 3}} {
		seen := map[string]bool{}
		q := "?limit=2"
		pages := 0
		for range 5 {
			resp, m := do(t, "GET", u+tc.path+q, "t", "")
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s%s = %d %v", tc.path, q, resp.StatusCode, m)
			}
			pages++
			for _, it := range m[tc.list].([]any) {
				seen[it.(map[string]any)["id"].(string)] = true
			}
			next, ok := m["pagination"].(map[string]any)["next"].(float64)
			if !ok {
				break
			}
			q = "?limit=2&until=" + strconv.FormatInt(int64(next), 10)
		}
		if len(seen) != tc.want || pages != (tc.want+1)/2 {
			t.Errorf("%s: %d distinct in %d pages, want %d in %d", tc.path, len(seen), pages, tc.want, (tc.want+1)/2)
		}
	}
}
