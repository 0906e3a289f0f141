package fakecodehost_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

func TestOwnGists(t *testing.T) {
	t.Parallel()
	s, u, clk := start(t, fakecodehost.Options{Authenticate: users})
	var ids []string
	for i := range 3 {
		clk.Advance(time.Minute)
		r := do(t, "POST", u+"/gists", fmt.Sprintf(`{"public":%v,"files":{"a.txt":{"content":"%d"}}}`, i == 0, i), nil)
		ids = append(ids, r.json(t)["id"].(string))
	}
	do(t, "POST", u+"/gists", `{"files":{"b.txt":{"content":"hubot's"}}}`, as("hubot"))
	clk.Advance(time.Minute)
	do(t, "PATCH", u+"/gists/"+ids[0], `{"description":"edited"}`, nil)

	list := func(query string, h map[string]string) (resp, []string) {
		r := do(t, "GET", u+"/gists"+query, "", h)
		var gs []map[string]any
		_ = json.Unmarshal(r.body, &gs)
		var got []string
		for _, g := range gs {
			got = append(got, g["id"].(string))
		}
		return r, got
	}
	r, got := list("", nil)
	if want := []string{ids[0], ids[2], ids[1], fakecodehost.SeedGistID}; r.status != 200 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("GET /gists: %d %v, want %v (most recently updated first, secret ones too, only the caller's)", r.status, got, want)
	}
	// GET /users/{username}/gists lists public gists only, also to their
	// owner.
	var pub []struct{ ID string }
	r0 := do(t, "GET", u+"/users/octocat/gists", "", nil)
	_ = json.Unmarshal(r0.body, &pub)
	if want := fmt.Sprint([]struct{ ID string }{{ids[0]}, {fakecodehost.SeedGistID}}); r0.status != 200 || fmt.Sprint(pub) != want {
		t.Errorf("GET /users/octocat/gists as octocat: %d %v, want only the public ones %v", r0.status, pub, want)
	}
	since := clk.Now().Add(-90 * time.Second).Format(time.RFC3339)
	if _, got := list("?since="+since, nil); fmt.Sprint(got) != fmt.Sprint([]string{ids[0], ids[2]}) {
		t.Errorf("since %s: %v", since, got)
	}
	if _, got := list("?per_page=1&page=2", nil); fmt.Sprint(got) != fmt.Sprint([]string{ids[2]}) {
		t.Errorf("page 2: %v", got)
	}

	etag := r.header.Get("ETag")
	_, before, _ := s.RateLimit("tok", fakecodehost.ResourceCore)
	r304, _ := list("", map[string]string{"If-None-Match": etag})
	if _, after, _ := s.RateLimit("tok", fakecodehost.ResourceCore); r304.status != 304 || after != before {
		t.Errorf("If-None-Match: %d, budget %d → %d", r304.status, before, after)
	}
	clk.Advance(time.Minute)
	do(t, "PATCH", u+"/gists/"+ids[1], `{"description":"again"}`, nil)
	if r, got := list("", map[string]string{"If-None-Match": etag}); r.status != 200 || got[0] != ids[1] {
		t.Errorf("after a change: %d %v", r.status, got)
	}
}

func TestNotifications(t *testing.T) {
	t.Parallel()
	s, u, clk := start(t, fakecodehost.Options{Authenticate: users})
	get := func(token, query string, h map[string]string) (resp, []map[string]any) {
		t.Helper()
		hh := as(token)
		for k, v := range h {
			hh[k] = v
		}
		r := do(t, "GET", u+"/notifications"+query, "", hh)
		var out []map[string]any
		if r.status == 200 {
			if err := json.Unmarshal(r.body, &out); err != nil {
				t.Fatalf("%s: %v", r.body, err)
			}
		}
		return r, out
	}
	r, threads := get("hubot", "", nil)
	lm := r.header.Get("Last-Modified")
	if r.status != 200 || len(threads) != 0 || r.header.Get("X-Poll-Interval") != "60" || lm == "" {
		t.Fatalf("no notifications: %d %s %v", r.status, r.body, r.header)
	}
	if r, _ := get("hubot", "", map[string]string{"If-Modified-Since": lm}); r.status != 304 || r.header.Get("X-Poll-Interval") != "60" || r.header.Get("Last-Modified") != lm {
		t.Errorf("nothing changed: %d %v", r.status, r.header)
	}

	// A mention of hubot (and of octocat by itself, of a team, of nobody,
	// and an e-mail address) in a new issue.
	clk.Advance(time.Minute)
	ri := do(t, "POST", u+"/repos/octocat/hello-world/issues", `{"title":"Help","body":"@hubot and @octocat, @octo-org/team, @nobody mail@monalisa.test"}`, nil)
	if ri.status != 201 {
		t.Fatal(ri.status)
	}
	number := int(ri.json(t)["number"].(float64))
	if n := s.Notifications("octocat"); len(n) != 0 {
		t.Errorf("octocat notified of their own mention: %+v", n)
	}
	if n := s.Notifications("monalisa"); len(n) != 0 {
		t.Errorf("an e-mail address notified: %+v", n)
	}
	_, before, _ := s.RateLimit("hubot", fakecodehost.ResourceCore)
	if r, _ := get("hubot", "", map[string]string{"If-Modified-Since": lm}); r.status != 200 {
		t.Fatalf("after a mention: %d", r.status)
	}
	r, threads = get("hubot", "?participating=true", map[string]string{"If-Modified-Since": lm})
	if len(threads) != 1 {
		t.Fatalf("threads: %s", r.body)
	}
	th := threads[0]
	subject := th["subject"].(map[string]any)
	issueURL := fmt.Sprintf("%s/repos/octocat/hello-world/issues/%d", u, number)
	if th["reason"] != "mention" || th["unread"] != true || subject["type"] != "Issue" || subject["title"] != "Help" ||
		subject["url"] != issueURL || subject["latest_comment_url"] != issueURL ||
		th["repository"].(map[string]any)["full_name"] != "octocat/hello-world" || th["updated_at"] != clk.Now().Format(time.RFC3339) ||
		th["url"] != u+"/notifications/threads/"+th["id"].(string) || th["last_read_at"] != nil {
		t.Errorf("thread: %s", r.body)
	}
	lm2 := r.header.Get("Last-Modified")
	if lm2 != clk.Now().Format(http.TimeFormat) {
		t.Errorf("Last-Modified %q, want %q", lm2, clk.Now().Format(http.TimeFormat))
	}
	r304, _ := get("hubot", "?participating=true", map[string]string{"If-Modified-Since": lm2})
	if _, after, _ := s.RateLimit("hubot", fakecodehost.ResourceCore); r304.status != 304 || after != before-2 {
		t.Errorf("304: %d, budget %d → %d (two 200s cost, the 304 does not)", r304.status, before, after)
	}

	// A comment mentioning hubot again refreshes the thread.
	clk.Advance(time.Minute)
	rc := do(t, "POST", fmt.Sprintf("%s/repos/octocat/hello-world/issues/%d/comments", u, number), `{"body":"ping @HUBOT"}`, nil)
	_, threads = get("hubot", "", map[string]string{"If-Modified-Since": lm2})
	if len(threads) != 1 || threads[0]["id"] != th["id"] || threads[0]["subject"].(map[string]any)["latest_comment_url"] != rc.json(t)["url"] {
		t.Errorf("after a comment: %v", threads)
	}

	// Threads added directly, filtered by participating, all, since and
	// before.
	old := clk.Now().Add(-time.Hour)
	for _, n := range []fakecodehost.Notification{
		{Login: "hubot", Owner: "octocat", Repo: "hello-world", Title: "Release", Type: "Release", UpdatedAt: old},
		{Login: "hubot", Owner: "octocat", Repo: "hello-world", Reason: "author", Read: true, Title: "Read", UpdatedAt: old.Add(-time.Minute),
			SubjectURL: "/repos/octocat/hello-world/issues/2"},
	} {
		if _, err := s.AddNotification(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddNotification(fakecodehost.Notification{Login: "nobody", Owner: "octocat", Repo: "hello-world"}); err == nil {
		t.Error("AddNotification for an unknown user")
	}
	titles := func(query string) string {
		_, ths := get("hubot", query, nil)
		var out []string
		for _, th := range ths {
			out = append(out, th["subject"].(map[string]any)["title"].(string))
		}
		return strings.Join(out, ",")
	}
	for query, want := range map[string]string{
		"":                             "Help,Release",
		"?all=true":                    "Help,Release,Read",
		"?participating=true":          "Help",
		"?participating=true&all=true": "Help,Read",
		"?all=true&since=" + clk.Now().Add(-time.Minute).Format(time.RFC3339):  "Help",
		"?all=true&before=" + clk.Now().Add(-time.Minute).Format(time.RFC3339): "Release,Read",
		"?all=true&per_page=1&page=3":                                          "Read",
	} {
		if got := titles(query); got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
	if n := s.Notifications("hubot"); len(n) != 3 || n[2].Reason != "author" || !n[2].Read {
		t.Errorf("Notifications: %+v", n)
	}
}
