package fakecodehost_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

func start(t *testing.T, o fakecodehost.Options) (*fakecodehost.Server, string, *testenv.Clock) {
	t.Helper()
	clk := testenv.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	if o.Now == nil {
		o.Now = clk.Now
	}
	s := fakecodehost.New(o)
	u := s.Start()
	t.Cleanup(s.Close)
	return s, u, clk
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return m
}

// do sends a request with GitHub's usual headers; h overrides them ("" deletes).
func do(t *testing.T, method, url, body string, h map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "fake-test")
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("Authorization", "Bearer tok")
	for k, v := range h {
		switch {
		case v == "" && k == "User-Agent":
			req.Header.Set(k, "") // present but empty: net/http then sends none
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func TestRequestChecks(t *testing.T) {
	t.Parallel()
	_, u, _ := start(t, fakecodehost.Options{})
	repo := u + "/repos/octocat/hello-world"
	for _, tc := range []struct {
		name   string
		h      map[string]string
		path   string
		status int
		msg    string
	}{
		{"ok", nil, repo, 200, ""},
		{"no user agent", map[string]string{"User-Agent": ""}, repo, 403, "User-Agent"},
		{"unknown version", map[string]string{"X-GitHub-Api-Version": "2020-01-01"}, repo, 400, "not supported"},
		{"new version", map[string]string{"X-GitHub-Api-Version": "2026-03-10"}, repo, 200, ""},
		{"no version", map[string]string{"X-GitHub-Api-Version": ""}, repo, 200, ""},
		{"html accept", map[string]string{"Accept": "text/html"}, repo, 415, "Accept"},
		{"spec media type", map[string]string{"Accept": "application/vnd.codehost+json"}, repo, 415, "Accept"},
		{"json accept", map[string]string{"Accept": "application/json"}, repo, 200, ""},
		{"custom media type", map[string]string{"Accept": "application/vnd.github.raw+json"}, repo, 200, ""},
		{"no accept", map[string]string{"Accept": ""}, repo, 200, ""},
		{"no token", map[string]string{"Authorization": ""}, repo, 401, "Bad credentials"},
		{"unknown repo", nil, u + "/repos/octocat/nope", 404, "Not Found"},
		{"private repo", nil, u + "/repos/monalisa/secret", 404, "Not Found"},
		{"trailing slash", nil, repo + "/", 404, "Not Found"},
		{"unknown path", nil, u + "/nothing/here", 404, "Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "GET", tc.path, "", tc.h)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.msg != "" {
				m := r.json(t)
				if msg, _ := m["message"].(string); !strings.Contains(msg, tc.msg) || m["documentation_url"] == nil {
					t.Errorf("error body %s, want a message with %q and documentation_url", r.body, tc.msg)
				}
			}
		})
	}
}

func TestRateLimitHeadersAndETag(t *testing.T) {
	t.Parallel()
	s, u, clk := start(t, fakecodehost.Options{RateLimit: 3})
	issue := u + "/repos/octocat/hello-world/issues/1"
	r1 := do(t, "GET", issue, "", nil)
	if r1.status != 200 || r1.header.Get("X-RateLimit-Remaining") != "2" || r1.header.Get("X-RateLimit-Limit") != "3" ||
		r1.header.Get("X-RateLimit-Resource") != "core" || r1.header.Get("X-RateLimit-Used") != "1" {
		t.Fatalf("first GET: %d %v", r1.status, r1.header)
	}
	reset, _ := strconv.ParseInt(r1.header.Get("X-RateLimit-Reset"), 10, 64)
	if want := clk.Now().Add(time.Hour).Unix(); reset != want {
		t.Errorf("reset %d, want %d", reset, want)
	}
	etag := r1.header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	r2 := do(t, "GET", issue, "", map[string]string{"If-None-Match": etag})
	if r2.status != 304 || len(r2.body) != 0 || r2.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("conditional GET: %d %q remaining %s", r2.status, r2.body, r2.header.Get("X-RateLimit-Remaining"))
	}
	if r := do(t, "GET", u+"/rate_limit", "", nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("rate_limit: %d remaining %s", r.status, r.header.Get("X-RateLimit-Remaining"))
	}
	do(t, "GET", u+"/repos/octocat/hello-world/issues/2", "", nil)
	do(t, "GET", u+"/repos/octocat/hello-world", "", nil)
	r3 := do(t, "GET", issue, "", nil)
	if r3.status != 403 || r3.header.Get("X-RateLimit-Remaining") != "0" || !strings.Contains(string(r3.body), "rate limit") {
		t.Fatalf("spent budget: %d %v %s", r3.status, r3.header, r3.body)
	}
	if _, rem, _ := s.RateLimit("tok", fakecodehost.ResourceCore); rem != 0 {
		t.Errorf("RateLimit remaining %d", rem)
	}
	clk.Advance(time.Hour)
	if r := do(t, "GET", issue, "", nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("after reset: %d remaining %s", r.status, r.header.Get("X-RateLimit-Remaining"))
	}
}

func TestSearchBucketAndPagination(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	for i := range 5 {
		r := do(t, "POST", u+"/repos/octocat/hello-world/issues", `{"title":"bulk `+strconv.Itoa(i)+`","labels":["bulk"]}`, nil)
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	r := do(t, "GET", u+"/search/issues?q=label:bulk&per_page=2", "", nil)
	if r.status != 200 || r.header.Get("X-RateLimit-Resource") != "search" || r.header.Get("X-RateLimit-Limit") != "30" {
		t.Fatalf("search: %d %v", r.status, r.header)
	}
	m := r.json(t)
	if m["total_count"] != 5.0 || len(m["items"].([]any)) != 2 {
		t.Fatalf("search page: %s", r.body)
	}
	link := r.header.Get("Link")
	if !strings.Contains(link, `rel="next"`) || !strings.Contains(link, "page=2") || !strings.Contains(link, "per_page=2") || !strings.Contains(link, `page=3&per_page=2&q=label%3Abulk>; rel="last"`) {
		t.Fatalf("Link %q", link)
	}
	last := do(t, "GET", u+"/search/issues?q=label:bulk&per_page=2&page=3", "", nil)
	if got := len(last.json(t)["items"].([]any)); got != 1 || strings.Contains(last.header.Get("Link"), `rel="next"`) {
		t.Fatalf("last page: %d items, Link %q", got, last.header.Get("Link"))
	}
	if r := do(t, "GET", u+"/repos/octocat/hello-world/issues?per_page=500&state=all", "", nil); r.header.Get("Link") != "" {
		t.Errorf("per_page is capped at 100 and 9 issues fit one page, Link %q", r.header.Get("Link"))
	}
	if _, rem, _ := s.RateLimit("tok", fakecodehost.ResourceSearch); rem != 28 {
		t.Errorf("search remaining %d, want 28", rem)
	}
	if r := do(t, "GET", u+"/search/issues", "", nil); r.status != 422 || !strings.Contains(string(r.body), `"missing"`) {
		t.Errorf("search without q: %d %s", r.status, r.body)
	}
}

func TestContentsAndValidation(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	r := do(t, "GET", u+"/repos/octocat/hello-world/contents/docs/guide.md", "", nil)
	m := r.json(t)
	content, _ := m["content"].(string)
	if r.status != 200 || m["encoding"] != "base64" || !strings.HasSuffix(content, "\n") {
		t.Fatalf("file: %d %s", r.status, r.body)
	}
	want, _ := s.File("octocat", "hello-world", "", "docs/guide.md")
	if m["sha"] != fakecodehost.BlobSHA(want) {
		t.Errorf("sha %v, want the git blob sha %s", m["sha"], fakecodehost.BlobSHA(want))
	}
	dir := do(t, "GET", u+"/repos/octocat/hello-world/contents/docs", "", nil)
	var entries []map[string]any
	_ = json.Unmarshal(dir.body, &entries)
	if len(entries) != 2 || entries[0]["type"] != "file" || entries[1]["type"] != "dir" || entries[1]["name"] != "img" {
		t.Fatalf("dir: %s", dir.body)
	}
	put := u + "/repos/octocat/hello-world/contents/README.md"
	if r := do(t, "PUT", put, `{"message":"m","content":"aGk="}`, nil); r.status != 422 || !strings.Contains(string(r.body), "sha") {
		t.Errorf("update without sha: %d %s", r.status, r.body)
	}
	if r := do(t, "PUT", put, `{"message":"m","content":"aGk=","sha":"`+strings.Repeat("0", 40)+`"}`, nil); r.status != 409 {
		t.Errorf("stale sha: %d %s", r.status, r.body)
	}
	if r := do(t, "PUT", put, `not json`, nil); r.status != 400 || !strings.Contains(string(r.body), "Problems parsing JSON") {
		t.Errorf("bad JSON: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", u+"/repos/octocat/hello-world/issues", `{"body":"no title"}`, nil); r.status != 422 ||
		!strings.Contains(string(r.body), `"field":"title"`) || !strings.Contains(string(r.body), "Validation Failed") {
		t.Errorf("issue without title: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", u+"/repos/octocat/hello-world/git/refs", `{"ref":"main","sha":"x"}`, nil); r.status != 422 {
		t.Errorf("bad ref: %d %s", r.status, r.body)
	}
}

func TestFaultsAndLog(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{LogLimit: 3})
	route := fakecodehost.Route("GET /repos/{owner}/{repo}")
	if err := s.FailNext(route, 1, 502); err != nil {
		t.Fatal(err)
	}
	if err := s.FailNext("GET /nope", 1, 500); err == nil {
		t.Error("FailNext accepted an unknown route")
	}
	if r := do(t, "GET", u+"/repos/octocat/hello-world", "", nil); r.status != 502 {
		t.Errorf("injected: %d", r.status)
	}
	_ = s.SecondaryLimitNext(route, 1, 30*time.Second)
	r := do(t, "GET", u+"/repos/octocat/hello-world", "", nil)
	if r.status != 403 || r.header.Get("Retry-After") != "30" || !strings.HasSuffix(r.json(t)["documentation_url"].(string), "#secondary-rate-limits") {
		t.Errorf("secondary: %d %v %s", r.status, r.header, r.body)
	}
	_ = s.HangNext(route, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", u+"/repos/octocat/hello-world", nil)
	req.Header.Set("User-Agent", "x")
	req.Header.Set("Authorization", "Bearer tok")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Error("a hanging route answered")
	}
	if r := do(t, "GET", u+"/repos/octocat/hello-world", "", nil); r.status != 200 {
		t.Errorf("after faults: %d", r.status)
	}
	if got := len(s.Requests()); got != 3 {
		t.Errorf("log holds %d, want the last 3", got)
	}
	if s.RequestCount() != 4 {
		t.Errorf("RequestCount %d, want 4", s.RequestCount())
	}
	if got := s.RequestsTo(route); len(got) != 3 || got[2].Status != 200 || got[2].Header.Get("User-Agent") != "fake-test" {
		t.Errorf("RequestsTo: %+v", got)
	}
}

func TestRenamedRepoRedirects(t *testing.T) {
	t.Parallel()
	_, u, _ := start(t, fakecodehost.Options{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", u+"/repos/octocat/hello-world-old/issues/1", nil)
	req.Header.Set("User-Agent", "x")
	req.Header.Set("Authorization", "Bearer tok")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	if res.StatusCode != 301 || loc != u+"/repositories/1296269/issues/1" {
		t.Fatalf("%d Location %q", res.StatusCode, loc)
	}
	if r := do(t, "GET", loc, "", nil); r.status != 200 || r.json(t)["title"] != "Found a bug" {
		t.Errorf("/repositories/{id}: %d %s", r.status, r.body)
	}
}

// SetLatency delays each answer by the round trip asked for, without
// holding other requests back: eight at once take about one delay.
func TestSetLatency(t *testing.T) {
	t.Parallel()
	s, u, _ := start(t, fakecodehost.Options{})
	const d = 200 * time.Millisecond
	s.SetLatency(d)
	begin := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if r := do(t, "GET", u+"/user", "", nil); r.status != 200 {
				t.Errorf("GET /user: %d", r.status)
			}
		})
	}
	wg.Wait()
	if took := time.Since(begin); took < d || took >= 8*d {
		t.Errorf("8 concurrent requests took %s, want at least %s (the latency) and well under %s (one after another)", took, d, 8*d)
	}
	s.SetLatency(0)
	begin = time.Now()
	do(t, "GET", u+"/user", "", nil)
	if took := time.Since(begin); took >= d {
		t.Errorf("without latency a request took %s", took)
	}
}
