package fakedeploy

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newFake(t *testing.T) (*Server, string) {
	t.Helper()
	s := New(Options{Now: func() time.Time { return now }})
	u := s.Start()
	t.Cleanup(s.Close)
	return s, u
}

func do(t *testing.T, method, u, token, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, u, b)
		}
	}
	return resp, m
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestRoutesVersionsAndAuth(t *testing.T) {
	s, u := newFake(t)
	p := s.AddProject(Project{Name: "web", Link: &GitRepo{Org: "acme", Repo: "web", RepoID: 1}})
	d := s.AddDeployment(Deployment{ProjectID: p.ID})

	resp, m := do(t, "GET", u+"/v13/deployments/"+d.ID, "t", "")
	if resp.StatusCode != 200 || m["id"] != d.ID || m["readyState"] != "QUEUED" {
		t.Errorf("GET v13 = %d %v", resp.StatusCode, m)
	}
	for _, path := range []string{"/v12/deployments/" + d.ID, "/v6/deployments/" + d.ID, "/v5/deployments", "/v9/projects/web/"} {
		resp, m := do(t, "GET", u+path, "t", "")
		if resp.StatusCode != 404 || errCode(m) != "not_found" {
			t.Errorf("GET %s = %d %v, want Vercel's 404", path, resp.StatusCode, m)
		}
	}
	resp, m = do(t, "GET", u+"/v6/deployments", "", "")
	if e := m["error"].(map[string]any); resp.StatusCode != 403 || e["invalidToken"] != true {
		t.Errorf("no token = %d %v", resp.StatusCode, m)
	}
	resp, m = do(t, "GET", u+"/v6/deployments?teamId=team_other", "t", "")
	if resp.StatusCode != 403 || errCode(m) != "forbidden" {
		t.Errorf("foreign team = %d %v", resp.StatusCode, m)
	}
	// List items use uid; GET uses id.
	_, m = do(t, "GET", u+"/v6/deployments", "t", "")
	items := m["deployments"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["uid"] != d.ID || m["pagination"].(map[string]any)["next"] != nil {
		t.Errorf("list = %v", m)
	}
}

func TestRateLimitHeadersAndBudget(t *testing.T) {
	s, u := newFake(t)
	s.SetRateLimit(RouteListDeployments, 2, time.Minute)
	for i, want := range []string{"1", "0"} {
		resp, _ := do(t, "GET", u+"/v6/deployments", "t", "")
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != want || resp.Header.Get("X-RateLimit-Limit") != "2" {
			t.Errorf("request %d: %d remaining %s", i, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
		}
	}
	resp, m := do(t, "GET", u+"/v6/deployments", "t", "")
	reset := strconv.FormatInt(now.Add(time.Minute).Unix(), 10)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" || resp.Header.Get("X-RateLimit-Reset") != reset || errCode(m) != "rate_limited" {
		t.Errorf("spent = %d %v %v", resp.StatusCode, resp.Header, m)
	}
	// Other endpoints and other scopes have their own buckets.
	if resp, _ := do(t, "GET", u+"/v6/deployments?teamId="+DefaultTeamID, "t", ""); resp.StatusCode != 200 {
		t.Errorf("team bucket: %d", resp.StatusCode)
	}
}

func TestCreateAndCancel(t *testing.T) {
	s, u := newFake(t)
	s.AddProject(Project{Name: "web", OwnerID: DefaultTeamID, Link: &GitRepo{Org: "acme", Repo: "web", RepoID: 9, Branches: []string{"main"}}})
	q := "?teamId=" + DefaultTeamID
	resp, m := do(t, "POST", u+"/v13/deployments"+q, "t", `{"name":"web","project":"web","target":"production","gitSource":{"type":"github","ref":"main","repoId":9}}`)
	if resp.StatusCode != 200 || m["readyState"] != "QUEUED" || m["target"] != "production" {
		t.Fatalf("create = %d %v", resp.StatusCode, m)
	}
	id := m["id"].(string)
	for _, body := range []string{
		`{"name":"web","gitSource":{"type":"github","ref":"dev","repoId":9}}`,
		`{"name":"web","target":"development","gitSource":{"type":"github","ref":"main","repoId":9}}`,
		`{"name":"web"}`,
		`{"name":"web","meta":{"n":1},"gitSource":{"type":"github","ref":"main","repoId":9}}`,
	} {
		if resp, m := do(t, "POST", u+"/v13/deployments"+q, "t", body); resp.StatusCode != 400 || errCode(m) != "bad_request" {
			t.Errorf("%s = %d %v", body, resp.StatusCode, m)
		}
	}
	if err := s.SetDeploymentState(id, StateReady); err != nil {
		t.Fatal(err)
	}
	if resp, _ := do(t, "PATCH", u+"/v12/deployments/"+id+"/cancel"+q, "t", ""); resp.StatusCode != 400 {
		t.Errorf("cancel READY = %d", resp.StatusCode)
	}
	s.SetDeploymentState(id, StateBuilding)
	resp, m = do(t, "PATCH", u+"/v12/deployments/"+id+"/cancel"+q, "t", "")
	if resp.StatusCode != 200 || m["readyState"] != "CANCELED" {
		t.Errorf("cancel = %d %v", resp.StatusCode, m)
	}
	resp, m = do(t, "DELETE", u+"/v13/deployments/"+id+q, "t", "")
	if resp.StatusCode != 200 || m["state"] != "DELETED" {
		t.Errorf("delete = %d %v", resp.StatusCode, m)
	}
	if _, ok := s.Deployment(id); ok {
		t.Error("deleted deployment still stored")
	}
}

func TestFailureInjection(t *testing.T) {
	s, u := newFake(t)
	s.FailNext(RouteListDeployments, 1, Failure{Status: 503, Empty: true, RetryAfter: 2 * time.Second})
	resp, m := do(t, "GET", u+"/v6/deployments", "t", "")
	if resp.StatusCode != 503 || m != nil || resp.Header.Get("Retry-After") != "2" {
		t.Errorf("injected = %d %v", resp.StatusCode, m)
	}
	if resp, _ := do(t, "GET", u+"/v6/deployments", "t", ""); resp.StatusCode != 200 {
		t.Errorf("after the failure: %d", resp.StatusCode)
	}
	if n := len(s.RequestsTo(RouteListDeployments)); n != 2 {
		t.Errorf("log has %d requests", n)
	}
}

// Following pagination.next (as until, or as from on /v10) walks the
// projects list page by page, newest first, each project once.
func TestProjectsPagination(t *testing.T) {
	for _, tc := range []struct{ name, path, cursor string }{
		{"v9 until", "/v9/projects", "until"},
		{"v10 from", "/v10/projects", "from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u := newFake(t) // a stopped clock: every project is added at the same instant
			var want []string
			for i := range 7 {
				p := s.AddProject(Project{Name: "site-" + strconv.Itoa(i)})
				want = append([]string{p.ID}, want...) // newest first
			}
			s.AddProject(Project{Name: "theirs", OwnerID: DefaultTeamID})
			var got []string
			var sizes []int
			q := "?limit=3"
			for range 10 { // a cursor that never ends must not hang the test
				resp, m := do(t, "GET", u+tc.path+q, "t", "")
				if resp.StatusCode != 200 {
					t.Fatalf("GET %s%s = %d %v", tc.path, q, resp.StatusCode, m)
				}
				items := m["projects"].([]any)
				sizes = append(sizes, len(items))
				for _, it := range items {
					got = append(got, it.(map[string]any)["id"].(string))
				}
				next, ok := m["pagination"].(map[string]any)["next"].(float64)
				if !ok {
					break
				}
				q = "?limit=3&" + tc.cursor + "=" + strconv.FormatInt(int64(next), 10)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") || len(sizes) != 3 || sizes[0] != 3 || sizes[1] != 3 || sizes[2] != 1 {
				t.Errorf("pages of %v: %v, want %v once each in pages of 3, 3, 1", sizes, got, want)
			}
		})
	}
}
