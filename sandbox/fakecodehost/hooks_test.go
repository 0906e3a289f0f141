package fakecodehost_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// users maps the test tokens to the seeded users.
func users(token string) (string, bool) {
	switch token {
	case "tok":
		return "octocat", true
	case "hubot", "monalisa":
		return token, true
	}
	return "", false
}

// receiver is a webhook endpoint that records what it gets.
type receiver struct {
	url    string
	mu     sync.Mutex
	got    []received
	status int
}

type received struct {
	path   string
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{status: http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.URL.Path, r.Header.Clone(), b})
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func (rc *receiver) answer(status int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.status = status
}

// at returns what was received for path, from the nth delivery on.
func (rc *receiver) at(path string, from int) []received {
	var out []received
	for _, r := range rc.all()[from:] {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func as(token string) map[string]string { return map[string]string{"Authorization": "Bearer " + token} }

func wait(t *testing.T, s *fakecodehost.Server) {
	t.Helper()
	if err := s.WaitDeliveries(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func hookBody(url string, extra string) string {
	return fmt.Sprintf(`{"config":{"url":%q,"content_type":"json","secret":"s3cr3t"}%s}`, url, extra)
}

func TestRepoHooks(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{Authenticate: users, MaxPerPage: 2})
	rc := newReceiver(t)
	hooks := u + "/repos/octocat/hello-world/hooks"

	r := do(t, "POST", hooks, hookBody(rc.url+"/a", `,"events":["issues","issue_comment"]`), nil)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	h := r.json(t)
	id := int64(h["id"].(float64))
	cfg := h["config"].(map[string]any)
	lr := h["last_response"].(map[string]any)
	if h["type"] != "Repository" || h["name"] != "web" || h["active"] != true || cfg["secret"] != "********" ||
		cfg["content_type"] != "json" || cfg["insecure_ssl"] != "0" || cfg["url"] != rc.url+"/a" ||
		lr["status"] != "unused" || lr["code"] != nil || h["test_url"] != fmt.Sprintf("%s/%d/test", hooks, id) ||
		h["ping_url"] != fmt.Sprintf("%s/%d/pings", hooks, id) || h["created_at"] == nil {
		t.Errorf("hook: %s", r.body)
	}
	if r := do(t, "POST", hooks, `{"config":{"url":"`+rc.url+`/b"}}`, nil); r.status != 201 ||
		fmt.Sprint(r.json(t)["events"]) != "[push]" || r.json(t)["config"].(map[string]any)["content_type"] != "form" ||
		r.json(t)["config"].(map[string]any)["secret"] != nil {
		t.Errorf("defaults: %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"duplicate", hookBody(rc.url+"/a", ""), 422, "Hook already exists on this repository"},
		{"no url", `{"config":{}}`, 422, "Config must contain URL"},
		{"no config", `{"events":["push"]}`, 422, "Config must contain URL"},
		{"bad url", `{"config":{"url":"ftp://x"}}`, 422, "not valid"},
		{"bad content type", `{"config":{"url":"http://x.test/","content_type":"xml"}}`, 422, `"content_type"`},
		{"bad name", `{"name":"travis","config":{"url":"http://x.test/"}}`, 422, "web"},
		{"events not a list", `{"events":"push","config":{"url":"http://x.test/"}}`, 422, "events"},
	} {
		if r := do(t, "POST", hooks, tc.body, nil); r.status != tc.status || !strings.Contains(string(r.body), tc.msg) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}

	// Only admins see hooks: a push collaborator and a stranger get 404.
	for _, tok := range []string{"hubot", "monalisa"} {
		if r := do(t, "GET", hooks, "", as(tok)); r.status != 404 {
			t.Errorf("%s lists hooks: %d", tok, r.status)
		}
		if r := do(t, "POST", hooks, hookBody(rc.url+"/c", ""), as(tok)); r.status != 404 {
			t.Errorf("%s creates a hook: %d", tok, r.status)
		}
	}
	if r := do(t, "PUT", u+"/repos/octocat/hello-world/collaborators/hubot", `{"permission":"admin"}`, nil); r.status != 204 {
		t.Fatalf("make hubot admin: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", hooks, "", as("hubot")); r.status != 200 {
		t.Errorf("an admin collaborator lists hooks: %d %s", r.status, r.body)
	}

	// Pages: MaxPerPage is 2.
	for i := range 3 {
		do(t, "POST", hooks, hookBody(fmt.Sprintf("%s/p%d", rc.url, i), ""), nil)
	}
	r = do(t, "GET", hooks+"?per_page=100", "", nil)
	var page []map[string]any
	_ = json.Unmarshal(r.body, &page)
	if r.status != 200 || len(page) != 2 || !strings.Contains(r.header.Get("Link"), `page=3&per_page=2>; rel="last"`) {
		t.Errorf("first page: %d items, Link %q", len(page), r.header.Get("Link"))
	}

	// PATCH: events, add/remove, a config without the secret drops it.
	hook := fmt.Sprintf("%s/%d", hooks, id)
	r = do(t, "PATCH", hook, `{"add_events":["pull_request","issues"],"remove_events":["issue_comment"],"active":false}`, nil)
	if got := r.json(t); r.status != 200 || fmt.Sprint(got["events"]) != "[issues pull_request]" || got["active"] != false ||
		got["config"].(map[string]any)["secret"] != "********" {
		t.Errorf("patch events: %d %s", r.status, r.body)
	}
	r = do(t, "PATCH", hook, `{"events":["*"],"config":{"url":"`+rc.url+`/a2","content_type":"json"}}`, nil)
	if got := r.json(t); r.status != 200 || fmt.Sprint(got["events"]) != "[*]" || got["config"].(map[string]any)["secret"] != nil {
		t.Errorf("patch config: %d %s", r.status, r.body)
	}
	if r := do(t, "PATCH", hook, `{"config":{"url":"`+rc.url+`/b"}}`, nil); r.status != 422 || !strings.Contains(string(r.body), "already exists") {
		t.Errorf("patch to another hook's URL: %d %s", r.status, r.body)
	}
	if r := do(t, "PATCH", hooks+"/1", `{"active":true}`, nil); r.status != 404 {
		t.Errorf("patch an unknown hook: %d", r.status)
	}
	if hs := s.Hooks("octocat", "hello-world"); len(hs) != 5 || hs[0].ID != id || hs[0].Secret != "" || hs[0].URL != rc.url+"/a2" {
		t.Errorf("Hooks: %+v", hs)
	}
	if r := do(t, "DELETE", hook, "", nil); r.status != 204 {
		t.Errorf("delete: %d", r.status)
	}
	if r := do(t, "GET", hook, "", nil); r.status != 404 {
		t.Errorf("get a deleted hook: %d", r.status)
	}
	if r := do(t, "DELETE", hook, "", nil); r.status != 404 {
		t.Errorf("delete again: %d", r.status)
	}
	wait(t, s)
}

func TestHookLimit(t *testing.T) {
	t.Parallel()
	_, u, _ := start(t, fakecodehost.Options{})
	hooks := u + "/repos/octocat/hello-world/hooks"
	for i := range fakecodehost.MaxHooksPerEvent {
		if r := do(t, "POST", hooks, fmt.Sprintf(`{"active":false,"config":{"url":"http://x.test/%d"}}`, i), nil); r.status != 201 {
			t.Fatalf("hook %d: %d %s", i, r.status, r.body)
		}
	}
	r := do(t, "POST", hooks, `{"config":{"url":"http://x.test/over"}}`, nil)
	m := r.json(t)
	errs, _ := m["errors"].([]any)
	if r.status != 422 || m["message"] != "Validation Failed" || len(errs) != 1 ||
		errs[0].(map[string]any)["message"] != `The "push" event cannot have more than 20 hooks` || errs[0].(map[string]any)["resource"] != "Hook" {
		t.Fatalf("21st push hook: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", hooks, `{"events":["issues"],"config":{"url":"http://x.test/issues"}}`, nil); r.status != 201 {
		t.Errorf("a hook for another event: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", hooks, `{"events":["*"],"config":{"url":"http://x.test/all"}}`, nil); r.status != 422 || !strings.Contains(string(r.body), `"push\" event`) {
		t.Errorf("a wildcard hook: %d %s", r.status, r.body)
	}
}

func TestOrgHooksAndRoles(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{Authenticate: users})
	if err := s.SetOrg(fakecodehost.SeedOrg, map[string]string{"hubot": fakecodehost.OrgMember}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOrg("octocat", nil); err == nil {
		t.Error("SetOrg accepted a user's login")
	}
	if err := s.SetOrg("new-org", map[string]string{"nobody": fakecodehost.OrgAdmin}); err == nil {
		t.Error("SetOrg accepted an unknown member")
	}
	hooks := u + "/orgs/octo-org/hooks"
	if r := do(t, "POST", hooks, `{"config":{"url":"http://x.test/"}}`, nil); r.status != 422 || !strings.Contains(string(r.body), `"missing_field"`) {
		t.Errorf("an org hook without name: %d %s", r.status, r.body)
	}
	r := do(t, "POST", hooks, `{"name":"web","events":["issues"],"config":{"url":"http://x.test/"}}`, nil)
	if m := r.json(t); r.status != 201 || m["type"] != "Organization" || m["test_url"] != nil ||
		!strings.HasPrefix(m["url"].(string), hooks+"/") {
		t.Fatalf("org hook: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", hooks, `{"name":"web","config":{"url":"http://x.test/"}}`, nil); r.status != 422 ||
		!strings.Contains(string(r.body), "Hook already exists on this organization") {
		t.Errorf("duplicate org hook: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ tok, path string }{{"hubot", hooks}, {"monalisa", hooks}, {"tok", u + "/orgs/nope/hooks"}, {"tok", u + "/orgs/octocat/hooks"}} {
		if r := do(t, "GET", tc.path, "", as(tc.tok)); r.status != 404 {
			t.Errorf("%s GET %s: %d", tc.tok, tc.path, r.status)
		}
	}
	if len(s.OrgHooks("octo-org")) != 1 {
		t.Errorf("OrgHooks: %+v", s.OrgHooks("octo-org"))
	}

	// An organisation's repository: its admins manage its hooks, a member
	// reads it but may not; the member who creates one is its admin.
	if r := do(t, "POST", u+"/orgs/octo-org/repos", `{"name":"api","private":true}`, nil); r.status != 201 {
		t.Fatalf("create org repo: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", u+"/repos/octo-org/api", "", as("hubot")); r.status != 200 || r.json(t)["permissions"].(map[string]any)["admin"] != false {
		t.Errorf("a member reads the org's private repo: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", u+"/repos/octo-org/api/hooks", "", as("hubot")); r.status != 404 {
		t.Errorf("a member lists the repo's hooks: %d", r.status)
	}
	if r := do(t, "GET", u+"/repos/octo-org/api/hooks", "", nil); r.status != 200 {
		t.Errorf("an org admin lists the repo's hooks: %d", r.status)
	}
	if r := do(t, "POST", u+"/orgs/octo-org/repos", `{"name":"web"}`, as("hubot")); r.status != 201 {
		t.Fatalf("a member creates an org repo: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", u+"/repos/octo-org/web/hooks", "", as("hubot")); r.status != 200 {
		t.Errorf("the member who created the repo lists its hooks: %d", r.status)
	}
	if _, err := s.AddUser("newbie", "New Bie"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddUser("NEWBIE", ""); err == nil {
		t.Error("AddUser accepted a taken login")
	}
	if err := s.SetOrg("acme", map[string]string{"newbie": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
}

// verify checks a delivery's signature with the secret.
func verify(t *testing.T, secret string, r received) {
	t.Helper()
	if got, want := r.header.Get("X-Hub-Signature-256"), fakecodehost.Sign(secret, r.body); got != want || !strings.HasPrefix(got, "sha256=") {
		t.Errorf("signature %q, want %q", got, want)
	}
}

func TestDeliveries(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	rc := newReceiver(t)
	hooks := u + "/repos/octocat/hello-world/hooks"
	r := do(t, "POST", hooks, hookBody(rc.url+"/json", `,"events":["issues","issue_comment"]`), nil)
	id := int64(r.json(t)["id"].(float64))
	r = do(t, "POST", hooks, `{"events":["*"],"config":{"url":"`+rc.url+`/form","content_type":"form"}}`, nil)
	formID := int64(r.json(t)["id"].(float64))
	wait(t, s)

	if got := rc.all(); len(got) != 2 {
		t.Fatalf("%d pings received, want 2", len(got))
	}
	ping := rc.at("/json", 0)[0]
	if ping.header.Get("X-GitHub-Event") != "ping" || ping.header.Get("User-Agent") != fakecodehost.HookshotUserAgent ||
		ping.header.Get("X-GitHub-Hook-ID") != fmt.Sprint(id) || ping.header.Get("Content-Type") != "application/json" ||
		ping.header.Get("X-GitHub-Hook-Installation-Target-Type") != "repository" ||
		ping.header.Get("X-GitHub-Hook-Installation-Target-ID") != fmt.Sprint(fakecodehost.SeedRepoID) ||
		len(ping.header.Get("X-GitHub-Delivery")) != 36 {
		t.Errorf("ping headers: %v", ping.header)
	}
	verify(t, "s3cr3t", ping)
	var pp map[string]any
	if err := json.Unmarshal(ping.body, &pp); err != nil || pp["zen"] == "" || pp["hook_id"] != float64(id) ||
		pp["hook"].(map[string]any)["type"] != "Repository" || pp["repository"].(map[string]any)["full_name"] != "octocat/hello-world" ||
		pp["sender"].(map[string]any)["login"] != "octocat" || pp["repository"].(map[string]any)["permissions"] != nil {
		t.Errorf("ping payload: %s", ping.body)
	}
	form := rc.at("/form", 0)[0]
	if form.header.Get("X-GitHub-Event") != "ping" || form.header.Get("Content-Type") != "application/x-www-form-urlencoded" || form.header.Get("X-Hub-Signature-256") != "" {
		t.Errorf("form ping headers: %v", form.header)
	}
	if v, err := url.ParseQuery(string(form.body)); err != nil || !json.Valid([]byte(v.Get("payload"))) {
		t.Errorf("form body %q", form.body)
	}
	for _, h := range s.Hooks("octocat", "hello-world") {
		if h.LastResponseCode != 200 || h.LastResponseStatus != "active" || h.LastResponseMessage != "OK" {
			t.Errorf("hook %d after the ping: %+v", h.ID, h)
		}
	}

	// Deliver sends any payload to the hooks that want the event.
	ids, err := s.Deliver(t.Context(), "octocat", "hello-world", "issues", []byte(`{"action":"labeled","x":1}`))
	if err != nil || len(ids) != 2 {
		t.Fatalf("Deliver: %v %v", ids, err)
	}
	if ids, err := s.Deliver(t.Context(), "octocat", "hello-world", "push", []byte(`{}`)); err != nil || len(ids) != 1 {
		t.Errorf("push reaches only the wildcard hook: %v %v", ids, err)
	}
	if _, err := s.Deliver(t.Context(), "octocat", "nope", "push", nil); err == nil {
		t.Error("Deliver to an unknown repository")
	}
	wait(t, s)
	j, f := rc.at("/json", 2), rc.at("/form", 2)
	if len(j) != 1 || string(j[0].body) != `{"action":"labeled","x":1}` || j[0].header.Get("X-GitHub-Event") != "issues" || len(f) != 2 {
		t.Fatalf("after Deliver: %d and %d received", len(j), len(f))
	}
	verify(t, "s3cr3t", j[0])
	recorded := s.Deliveries()
	if len(recorded) != 5 {
		t.Fatalf("%d deliveries recorded", len(recorded))
	}
	for _, d := range recorded {
		if d.ID == ids[0] && (d.HookID != id && d.HookID != formID || d.Event != "issues" || d.Action != "labeled" || d.StatusCode != 200 || d.Error != "") {
			t.Errorf("recorded %+v", d)
		}
	}

	// The API's own changes are delivered too.
	rc.answer(http.StatusInternalServerError)
	n0 := len(rc.all())
	do(t, "POST", u+"/repos/octocat/hello-world/issues", `{"title":"Hooked","body":"hi"}`, nil)
	do(t, "POST", u+"/repos/octocat/hello-world/issues/1/comments", `{"body":"seen"}`, nil)
	do(t, "PATCH", u+"/repos/octocat/hello-world/issues/1", `{"title":"Found two bugs","state":"closed","labels":["bug","p1"]}`, nil)
	wait(t, s)
	var actions []string
	for _, g := range rc.at("/json", n0) {
		var p struct {
			Action  string         `json:"action"`
			Issue   map[string]any `json:"issue"`
			Comment map[string]any `json:"comment"`
			Changes map[string]any `json:"changes"`
			Label   map[string]any `json:"label"`
		}
		body := g.body
		verify(t, "s3cr3t", g)
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, g.header.Get("X-GitHub-Event")+"."+p.Action)
		switch g.header.Get("X-GitHub-Event") + "." + p.Action {
		case "issues.opened":
			if p.Issue["title"] != "Hooked" {
				t.Errorf("opened: %s", body)
			}
		case "issue_comment.created":
			if p.Comment["body"] != "seen" || p.Issue["number"] != 1.0 {
				t.Errorf("comment: %s", body)
			}
		case "issues.edited":
			if p.Changes["title"].(map[string]any)["from"] != "Found a bug" {
				t.Errorf("edited: %s", body)
			}
		case "issues.labeled":
			if p.Label["name"] != "p1" {
				t.Errorf("labeled: %s", body)
			}
		case "issues.closed":
			if p.Issue["state"] != "closed" {
				t.Errorf("closed: %s", body)
			}
		}
	}
	slices.Sort(actions)
	if want := "[issue_comment.created issues.closed issues.edited issues.labeled issues.opened]"; fmt.Sprint(actions) != want {
		t.Errorf("JSON deliveries %v, want %s", actions, want)
	}
	if h := s.Hooks("octocat", "hello-world")[0]; h.LastResponseCode != 500 || h.LastResponseStatus != "misconfigured" || h.LastResponseMessage != "Invalid HTTP Response: 500" {
		t.Errorf("after a 500: %+v", h)
	}
	r = do(t, "GET", fmt.Sprintf("%s/%d", hooks, id), "", nil)
	if lr := r.json(t)["last_response"].(map[string]any); lr["code"] != 500.0 || lr["status"] != "misconfigured" {
		t.Errorf("last_response %v", lr)
	}

	// A hook switched off or deleted upstream receives nothing.
	if !s.SetHookActive(id, false) || !s.DeleteHook(formID) || s.DeleteHook(formID) {
		t.Fatal("SetHookActive / DeleteHook")
	}
	if ids, _ := s.Deliver(t.Context(), "octocat", "hello-world", "issues", []byte(`{}`)); len(ids) != 0 {
		t.Errorf("delivered to an inactive hook: %v", ids)
	}
	if r := do(t, "POST", fmt.Sprintf("%s/%d/pings", hooks, id), "", nil); r.status != 204 {
		t.Errorf("ping an inactive hook: %d", r.status)
	}
	wait(t, s)
	if d := s.Deliveries(); d[len(d)-1].Event != "ping" || d[len(d)-1].HookID != id {
		t.Errorf("the explicit ping: %+v", d[len(d)-1])
	}
}

func TestOrgDeliveries(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	rc := newReceiver(t)
	do(t, "POST", u+"/orgs/octo-org/repos", `{"name":"api"}`, nil)
	r := do(t, "POST", u+"/orgs/octo-org/hooks", `{"name":"web","events":["issues"],"config":{"url":"`+rc.url+`","content_type":"json","secret":"org"}}`, nil)
	if r.status != 201 {
		t.Fatalf("org hook: %d %s", r.status, r.body)
	}
	do(t, "POST", u+"/repos/octo-org/api/issues", `{"title":"in the org"}`, nil)
	do(t, "POST", u+"/repos/octocat/hello-world/issues", `{"title":"not in the org"}`, nil)
	if _, err := s.DeliverOrg(t.Context(), "octo-org", "issues", []byte(`{"action":"x"}`)); err != nil {
		t.Fatal(err)
	}
	wait(t, s)
	got := rc.all()
	if len(got) != 3 {
		t.Fatalf("%d received, want ping, issues and DeliverOrg's", len(got))
	}
	var ping, opened map[string]any
	for _, g := range got {
		if g.header.Get("X-GitHub-Hook-Installation-Target-Type") != "organization" {
			t.Errorf("target type %q", g.header.Get("X-GitHub-Hook-Installation-Target-Type"))
		}
		verify(t, "org", g)
		switch g.header.Get("X-GitHub-Event") {
		case "ping":
			_ = json.Unmarshal(g.body, &ping)
		case "issues":
			if strings.Contains(string(g.body), `"opened"`) {
				_ = json.Unmarshal(g.body, &opened)
			}
		}
	}
	if ping["organization"].(map[string]any)["login"] != "octo-org" || ping["repository"] != nil {
		t.Errorf("org ping: %v", ping)
	}
	if opened == nil || opened["repository"].(map[string]any)["full_name"] != "octo-org/api" || opened["organization"] == nil {
		t.Errorf("org issue: %v", opened)
	}
}

// Close waits for the deliveries in flight and refuses later ones.
func TestCloseWaitsForDeliveries(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer recv.Close()
	s := fakecodehost.New(fakecodehost.Options{})
	u := s.Start()
	do(t, "POST", u+"/repos/octocat/hello-world/hooks", `{"config":{"url":"`+recv.URL+`"}}`, nil)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	// A Close that does not wait returns at once; give it the chance to.
	select {
	case <-closed:
		t.Fatal("Close returned with a delivery in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if d := s.Deliveries(); len(d) != 1 || d[0].StatusCode != 200 {
		t.Errorf("deliveries %+v", d)
	}
	if _, err := s.Deliver(t.Context(), "octocat", "hello-world", "push", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if d := s.Deliveries(); len(d) != 2 || d[1].Error == "" {
		t.Errorf("a delivery after Close: %+v", d[1:])
	}
}

func TestPullRequestDeliveries(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	rc := newReceiver(t)
	do(t, "POST", u+"/repos/octocat/hello-world/hooks", `{"events":["pull_request"],"config":{"url":"`+rc.url+`","content_type":"json"}}`, nil)
	wait(t, s) // deliveries run concurrently: wait to keep their order
	pull := fmt.Sprintf("%s/repos/octocat/hello-world/pulls/%d", u, fakecodehost.SeedPullNumber)
	if r := do(t, "PATCH", pull, `{"title":"Louder"}`, nil); r.status != 200 {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	wait(t, s)
	if r := do(t, "PUT", pull+"/merge", `{}`, nil); r.status != 200 {
		t.Fatalf("merge: %d %s", r.status, r.body)
	}
	wait(t, s)
	var got []string
	for _, r := range rc.all() {
		var p struct {
			Action      string         `json:"action"`
			Number      int            `json:"number"`
			PullRequest map[string]any `json:"pull_request"`
			Changes     map[string]any `json:"changes"`
		}
		_ = json.Unmarshal(r.body, &p)
		got = append(got, r.header.Get("X-GitHub-Event")+"."+p.Action)
		if p.Action == "closed" && (p.PullRequest["merged"] != true || p.Number != fakecodehost.SeedPullNumber) {
			t.Errorf("closed: %s", r.body)
		}
		if p.Action == "edited" && p.Changes["title"].(map[string]any)["from"] != "Say hello louder" {
			t.Errorf("edited: %s", r.body)
		}
	}
	if fmt.Sprint(got) != "[ping. pull_request.edited pull_request.closed]" {
		t.Errorf("deliveries %v", got)
	}
}
