package fakecodehost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// GET /user/repos lists what the caller owns, collaborates on and sees
// as an organisation member, with its permissions; memberships say which
// organisations it owns.
func TestUserReposAndMemberships(t *testing.T) {
	t.Parallel()
	s, u, clk := start(t, fakecodehost.Options{Authenticate: users})
	clk.Advance(time.Minute)
	do(t, "POST", u+"/orgs/"+fakecodehost.SeedOrg+"/repos", `{"name":"tools"}`, nil)
	clk.Advance(time.Minute)
	do(t, "POST", u+"/user/repos", `{"name":"newest"}`, nil)
	if err := s.SetCollaborator(fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo, "octocat", "push"); err != nil {
		t.Fatal(err)
	}
	list := func(query string) map[string]map[string]any {
		t.Helper()
		r := do(t, "GET", u+"/user/repos"+query, "", nil)
		var rs []map[string]any
		if r.status != 200 || json.Unmarshal(r.body, &rs) != nil {
			t.Fatalf("GET /user/repos%s: %d %s", query, r.status, r.body)
		}
		out := map[string]map[string]any{}
		for _, repo := range rs {
			out[repo["full_name"].(string)] = repo["permissions"].(map[string]any)
		}
		return out
	}
	all := list("")
	var names []string
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"monalisa/octo-app", "octo-org/tools", "octocat/hello-world", "octocat/newest"}
	if !slices.Equal(names, want) {
		t.Fatalf("GET /user/repos = %v, want %v (not monalisa/secret: no affiliation)", names, want)
	}
	if all["monalisa/octo-app"]["admin"] != false || all["monalisa/octo-app"]["push"] != true || all["octo-org/tools"]["admin"] != true {
		t.Errorf("permissions = %v", all)
	}
	if own := list("?affiliation=owner"); len(own) != 2 || own["octocat/newest"] == nil {
		t.Errorf("affiliation=owner: %v", own)
	}
	r := do(t, "GET", u+"/user/repos?affiliation=owner&sort=created&direction=desc&per_page=1", "", nil)
	var newest []map[string]any
	_ = json.Unmarshal(r.body, &newest)
	if len(newest) != 1 || newest[0]["full_name"] != "octocat/newest" || r.header.Get("Link") == "" {
		t.Errorf("newest first, one a page: %v (Link %q)", newest, r.header.Get("Link"))
	}
	// since and before bound the time a repository was last updated:
	// newest was created (and updated) a minute after tools.
	mid := clk.Now().Add(-30 * time.Second).UTC().Format(time.RFC3339)
	if got := list("?affiliation=owner&since=" + mid); len(got) != 1 || got["octocat/newest"] == nil {
		t.Errorf("since %s: %v, want only octocat/newest", mid, got)
	}
	if got := list("?affiliation=owner&before=" + mid); len(got) != 1 || got["octocat/hello-world"] == nil {
		t.Errorf("before %s: %v, want only octocat/hello-world", mid, got)
	}
	if r := do(t, "GET", u+"/user/repos?since=yesterday", "", nil); r.status != 422 {
		t.Errorf("since=yesterday: %d, want 422", r.status)
	}
	if r := do(t, "GET", u+"/user/repos?type=owner&affiliation=owner", "", nil); r.status != 422 {
		t.Errorf("type with affiliation: %d, want 422 as GitHub answers", r.status)
	}

	r = do(t, "GET", u+"/user/memberships/orgs", "", nil)
	var ms []struct {
		State, Role  string
		Organization struct{ Login string }
	}
	if err := json.Unmarshal(r.body, &ms); err != nil || fmt.Sprint(ms) != fmt.Sprint([]any{struct {
		State, Role  string
		Organization struct{ Login string }
	}{"active", "admin", struct{ Login string }{fakecodehost.SeedOrg}}}) {
		t.Errorf("GET /user/memberships/orgs = %s", r.body)
	}
	r = do(t, "GET", u+"/user/memberships/orgs", "", as("hubot"))
	if string(r.body) != "[]" {
		t.Errorf("hubot's memberships = %s, want none", r.body)
	}

	r = do(t, "GET", u+"/orgs/"+fakecodehost.SeedOrg+"/repos", "", nil)
	var org []map[string]any
	if err := json.Unmarshal(r.body, &org); err != nil || len(org) != 1 || org[0]["full_name"] != "octo-org/tools" {
		t.Errorf("GET /orgs/octo-org/repos = %d %s", r.status, r.body)
	}
	if r := do(t, "GET", u+"/orgs/no-such-org/repos", "", nil); r.status != 404 {
		t.Errorf("unknown organisation: %d", r.status)
	}
}

// Creating a repository in an organisation tells its hooks.
func TestCreateRepoNotifiesOrganisationHooks(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{Authenticate: users})
	do(t, "POST", u+"/orgs/"+fakecodehost.SeedOrg+"/hooks", `{"name":"web","events":["repository"],"config":{"url":"http://127.0.0.1:1/hook","content_type":"json"}}`, nil)
	do(t, "POST", u+"/orgs/"+fakecodehost.SeedOrg+"/repos", `{"name":"fresh"}`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitDeliveries(ctx); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range s.Deliveries() {
		if d.Event == "repository" && d.Action == "created" && d.TargetType == fakecodehost.TargetOrganization {
			found = true
		}
	}
	if !found {
		t.Errorf("no repository.created delivery to the organisation hook: %+v", s.Deliveries())
	}
}
