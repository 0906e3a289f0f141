package codehost_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

const routeIssue = fakecodehost.Route("GET /repos/{owner}/{repo}/issues/{issue_number}")

func asError(t *testing.T, err error) *connectors.Error {
	t.Helper()
	var ce *connectors.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *connectors.Error", err, err)
	}
	return ce
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		token     string
		id, input string
		code      connectors.ErrorCode
		status    int
		msg       string
		requests  int
	}{
		{"404 unknown repository", token, "get_repository_info", `{"owner":"octocat","repo":"nope"}`, connectors.CodeNotFound, 404, "GET /repos/octocat/nope", 1},
		{"404 private repository", token, "get_issue", `{"owner":"monalisa","repo":"secret","issue_number":1}`, connectors.CodeNotFound, 404, "Not Found", 1},
		{"404 unknown file", token, "get_file", `{"owner":"octocat","repo":"hello-world","path":"nope.txt"}`, connectors.CodeNotFound, 404, "contents/nope.txt", 1},
		{"403 not an admin", token, "add_collaborator", `{"owner":"monalisa","repo":"octo-app","username":"hubot"}`, connectors.CodePermissionDenied, 403, "Must have admin rights", 1},
		{"401 bad token", "revoked", "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`, connectors.CodeNeedsReauth, 401, "Bad credentials", 1},
		{"422 repository exists", token, "create_repository", `{"name":"hello-world"}`, connectors.CodeValidation, 422, "Repository.name name already exists on this account", 1},
		{"422 missing sha", token, "create_or_update_file_contents", `{"owner":"octocat","repo":"hello-world","path":"README.md","content":"x","message":"m"}`, connectors.CodeValidation, 422, `"sha" wasn't supplied`, 1},
		{"422 assignee", token, "create_issue", `{"owner":"octocat","repo":"hello-world","title":"t","assignees":["monalisa"]}`, connectors.CodeValidation, 422, "Issue.assignees invalid (value monalisa)", 1},
		{"422 branch exists", token, "create_branch", `{"owner":"octocat","repo":"hello-world","branch":"feature"}`, connectors.CodeValidation, 422, "Reference already exists", 3},
		{"404 from branch", token, "create_branch", `{"owner":"octocat","repo":"hello-world","branch":"x","from":"nope"}`, connectors.CodeNotFound, 404, `branch "nope"`, 1},
		{"404 not a pull request", token, "merge_pull_request", `{"owner":"octocat","repo":"hello-world","pull_number":3}`, connectors.CodeNotFound, 404, "", 1},
		{"409 head moved", token, "merge_pull_request", `{"owner":"octocat","repo":"hello-world","pull_number":4,"sha":"` + strings.Repeat("a", 40) + `"}`, connectors.CodeUpstream, 409, "Head branch was modified", 1},
		{"422 dispatch without trigger", token, "create_workflow_dispatch", `{"owner":"octocat","repo":"hello-world","workflow_id":"deploy.yml","ref":"main"}`, connectors.CodeValidation, 422, "workflow_dispatch", 1},
		{"graphql not found", token, "update_project_v2_item_status", `{"project_id":"PVT_nope","item_id":"i","field_id":"f","option_id":"o"}`, connectors.CodeNotFound, 0, "Could not resolve", 1},
		{"graphql no such field", token, "get_project_v2_field", `{"field_id":"PVTSSF_nope"}`, connectors.CodeNotFound, 0, "Could not resolve to a node with the global id of 'PVTSSF_nope'", 1},
		{"graphql not a field", token, "get_project_v2_field", `{"field_id":"PVTI_lADOA1"}`, connectors.CodeValidation, 0, "is a ProjectV2Item, not a Projects (v2) field", 1},
		{"graphql no field id, nothing sent", token, "get_project_v2_field", `{}`, connectors.CodeValidation, 0, "field_id", 0},
		{"graphql bad option", token, "update_project_v2_item_status", `{"project_id":"PVT_kwDOA1","item_id":"PVTI_lADOA1","field_id":"PVTSSF_status","option_id":"nope"}`, connectors.CodeValidation, 0, "does not belong", 1},
		{"bad permission, nothing sent", token, "add_collaborator", `{"owner":"octocat","repo":"hello-world","username":"hubot","permission":"owner"}`, connectors.CodeValidation, 0, "permission must be one of pull, push, triage, maintain, admin", 0},
		{"unknown field, nothing sent", token, "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1,"x":1}`, connectors.CodeValidation, 0, "unknown field", 0},
		{"dot-dot path, nothing sent", token, "get_file", `{"owner":"octocat","repo":"hello-world","path":"../etc/passwd"}`, connectors.CodeValidation, 0, "segments", 0},
		{"nothing to update", token, "update_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`, connectors.CodeValidation, 0, "nothing to update", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakecodehost.Options{Authenticate: func(tok string) (string, bool) { return "octocat", tok == token }}, codehost.ToolkitOptions{})
			_, err := h.runAs(t.Context(), tc.token, tc.id, tc.input)
			ce := asError(t, err)
			if ce.Code != tc.code || ce.Status != tc.status || !strings.Contains(ce.Message, tc.msg) {
				t.Errorf("error %+v, want code %s, status %d, message with %q", ce, tc.code, tc.status, tc.msg)
			}
			if ce.Retryable {
				t.Errorf("%s is retryable", ce.Code)
			}
			if got := h.fake.RequestCount(); got != tc.requests {
				t.Errorf("the fake saw %d requests, want %d", got, tc.requests)
			}
			if strings.Contains(ce.Error(), token) {
				t.Error("the error shows the token")
			}
		})
	}
}

// TestNotMergeable: merging a merged pull request answers 405.
func TestNotMergeable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	h.mustRun(t, "merge_pull_request", `{"owner":"octocat","repo":"hello-world","pull_number":4}`)
	_, err := h.run(t.Context(), "merge_pull_request", `{"owner":"octocat","repo":"hello-world","pull_number":4}`)
	if ce := asError(t, err); ce.Code != connectors.CodeUpstream || ce.Status != 405 || ce.Retryable || !strings.Contains(ce.Message, "not mergeable") {
		t.Errorf("merging twice: %+v", ce)
	}
}

func TestETagCache(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	in := `{"owner":"octocat","repo":"hello-world","issue_number":1}`
	first := h.mustRun(t, "get_issue", in)
	_, afterFirst, _ := h.fake.RateLimit(token, fakecodehost.ResourceCore)
	second := h.mustRun(t, "get_issue", in)
	_, afterSecond, _ := h.fake.RateLimit(token, fakecodehost.ResourceCore)
	if !reflect.DeepEqual(first, second) {
		t.Errorf("cached answer differs:\n%v\n%v", first, second)
	}
	if afterSecond != afterFirst {
		t.Errorf("the second GET cost budget: %d then %d", afterFirst, afterSecond)
	}
	reqs := h.fake.RequestsTo(routeIssue)
	if len(reqs) != 2 || reqs[1].Header.Get("If-None-Match") == "" || reqs[1].Status != 304 {
		t.Fatalf("requests: %+v", reqs)
	}
	if st := h.policy.CacheStats(); st.Hits != 1 || st.Lookups != 2 || st.Revalidated != 1 {
		t.Errorf("CacheStats %+v", st)
	}

	// A change on GitHub's side changes the ETag: the new data arrives.
	h.mustRun(t, "update_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1,"title":"Changed"}`)
	if third := h.mustRun(t, "get_issue", in); third["title"] != "Changed" {
		t.Errorf("after an update: %v", third["title"])
	}
	// Another account has its own cache.
	h.fake.ResetLog()
	if _, err := h.runAs(t.Context(), "other-token", "get_issue", in); err != nil {
		t.Fatal(err)
	}
	if r := h.fake.Requests(); len(r) != 1 || r[0].Header.Get("If-None-Match") != "" {
		t.Errorf("another account revalidated with this account's ETag: %+v", r)
	}
}

func TestETagCacheIsBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{CacheEntries: 2})
	get := func(n string) {
		h.mustRun(t, "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":`+n+`}`)
	}
	get("1")
	get("2")
	get("1") // hit; 1 is now the most recent
	get("3") // evicts 2
	get("1") // hit
	get("2") // miss: evicted
	if st := h.policy.CacheStats(); st.Hits != 2 || st.Revalidated != 2 || st.Lookups != 6 {
		t.Errorf("CacheStats %+v, want 2 hits of 6", st)
	}
}

func TestRateLimitRefusesBeforeSending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{RateLimit: 1}, codehost.ToolkitOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h.mustRun(t, "get_repository_info", `{"owner":"octocat","repo":"hello-world"}`)
	_, err := h.run(ctx, "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`)
	ce := asError(t, err)
	if ce.Code != connectors.CodeRateLimited || !ce.Retryable || ce.RetryAfter != time.Hour || !strings.Contains(ce.Message, "not sent") {
		t.Errorf("error %+v (RetryAfter %s)", ce, ce.RetryAfter)
	}
	if n := h.fake.RequestCount(); n != 1 {
		t.Errorf("the fake saw %d requests, want 1", n)
	}
	if len(h.clock.Sleeps()) != 0 {
		t.Errorf("slept %v", h.clock.Sleeps())
	}
	// Without a deadline the policy does not wait an hour either.
	if _, err := h.run(context.Background(), "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`); errCode(err) != connectors.CodeRateLimited {
		t.Errorf("without a deadline: %v", err)
	}
	// The search budget is another resource.
	if _, err := h.run(ctx, "search_issues_and_pull_requests", `{"q":"bug"}`); err != nil {
		t.Errorf("search with core spent: %v", err)
	}
	// So is /rate_limit, which costs nothing.
	if _, err := h.run(ctx, "get_rate_limit_status", `{}`); err != nil {
		t.Errorf("rate_limit with core spent: %v", err)
	}
}

func TestRateLimitWaitsWithinDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{RateLimit: 1}, codehost.ToolkitOptions{})
	h.mustRun(t, "get_repository_info", `{"owner":"octocat","repo":"hello-world"}`)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Hour)
	defer cancel()
	out, err := h.run(ctx, "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`)
	if err != nil || out["number"] != 1.0 {
		t.Fatalf("after waiting: %v %v", out, err)
	}
	if s := h.clock.Sleeps(); len(s) != 1 || s[0] != time.Hour {
		t.Errorf("slept %v, want one hour (on the fake clock)", s)
	}
	if n := h.fake.RequestCount(); n != 2 {
		t.Errorf("the fake saw %d requests", n)
	}
}

func TestRateLimitAnswers(t *testing.T) {
	t.Parallel()
	in := `{"owner":"octocat","repo":"hello-world","issue_number":1}`
	t.Run("secondary with Retry-After", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.SecondaryLimitNext(routeIssue, 1, 42*time.Second)
		ce := asError(t, func() error { _, err := h.run(t.Context(), "get_issue", in); return err }())
		if ce.Code != connectors.CodeRateLimited || ce.Status != 403 || ce.RetryAfter != 42*time.Second || !ce.Retryable ||
			!strings.Contains(ce.Message, "secondary") {
			t.Errorf("error %+v (RetryAfter %s)", ce, ce.RetryAfter)
		}
		if n := h.fake.RequestCount(); n != 1 {
			t.Errorf("retried: %d requests", n)
		}
	})
	t.Run("secondary without Retry-After", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.SecondaryLimitNext(routeIssue, 1, 0)
		ce := asError(t, func() error { _, err := h.run(t.Context(), "get_issue", in); return err }())
		if ce.Code != connectors.CodeRateLimited || ce.RetryAfter != time.Minute {
			t.Errorf("error %+v (RetryAfter %s)", ce, ce.RetryAfter)
		}
	})
	t.Run("primary 429 the policy did not foresee", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{ExhaustedStatus: 429}, codehost.ToolkitOptions{})
		h.fake.SetRemaining(token, fakecodehost.ResourceCore, 0)
		_, _, reset := h.fake.RateLimit(token, fakecodehost.ResourceCore)
		ce := asError(t, func() error { _, err := h.run(t.Context(), "get_issue", in); return err }())
		if ce.Code != connectors.CodeRateLimited || ce.Status != 429 || ce.RetryAfter != reset.Sub(h.clock.Now()) || !strings.Contains(ce.Message, "primary") {
			t.Errorf("error %+v (RetryAfter %s)", ce, ce.RetryAfter)
		}
	})
	t.Run("raw 403 and 429 through the transport", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.FailNext(routeIssue, 1, 429)
		_ = h.fake.FailNext(routeIssue, 1, 403)
		client := h.env(token).HTTP
		for _, want := range []connectors.ErrorCode{connectors.CodeRateLimited, connectors.CodePermissionDenied} {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", h.url+"/repos/octocat/hello-world/issues/1", nil)
			_, err := client.Do(req)
			var ue *url.Error
			if !errors.As(err, &ue) || errCode(err) != want {
				t.Errorf("got %v, want a *url.Error wrapping %s", err, want)
			}
		}
		if n := h.fake.RequestCount(); n != 2 {
			t.Errorf("%d requests: a 403 or 429 was retried", n)
		}
	})
}

func TestRetries(t *testing.T) {
	t.Parallel()
	in := `{"owner":"octocat","repo":"hello-world","issue_number":1}`
	t.Run("GET after two 503s", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.FailNext(routeIssue, 2, 503)
		if _, err := h.run(t.Context(), "get_issue", in); err != nil {
			t.Fatal(err)
		}
		if n := len(h.fake.RequestsTo(routeIssue)); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		s := h.clock.Sleeps()
		if len(s) != 2 || s[0] < 0 || s[0] >= 200*time.Millisecond || s[1] < 0 || s[1] >= 400*time.Millisecond {
			t.Errorf("backoff %v, want full jitter under 200ms then 400ms", s)
		}
	})
	t.Run("GET gives up after three", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.FailNext(routeIssue, 3, 502)
		_, err := h.run(t.Context(), "get_issue", in)
		if ce := asError(t, err); ce.Code != connectors.CodeUpstream || ce.Status != 502 || !ce.Retryable {
			t.Errorf("error %+v", ce)
		}
		if n := len(h.fake.RequestsTo(routeIssue)); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
	})
	t.Run("idempotent PUT with a body is replayed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		route := fakecodehost.Route("PUT /repos/{owner}/{repo}/collaborators/{username}")
		// Even when the first attempt landed, the second sets the same.
		_ = h.fake.FailNextAfterApplying(route, 1, 500)
		out := h.mustRun(t, "add_collaborator", `{"owner":"octocat","repo":"hello-world","username":"hubot","permission":"maintain"}`)
		reqs := h.fake.RequestsTo(route)
		if out["permission"] != "maintain" || len(reqs) != 2 || string(reqs[0].Body) != string(reqs[1].Body) || len(reqs[1].Body) == 0 {
			t.Errorf("out %v, requests %+v", out, reqs)
		}
	})
	t.Run("POST is not retried", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		route := fakecodehost.Route("POST /repos/{owner}/{repo}/issues")
		_ = h.fake.FailNext(route, 1, 503)
		_, err := h.run(t.Context(), "create_issue", `{"owner":"octocat","repo":"hello-world","title":"t"}`)
		if ce := asError(t, err); ce.Code != connectors.CodeUpstream || ce.Status != 503 || !ce.Retryable {
			t.Errorf("error %+v", ce)
		}
		if n := len(h.fake.RequestsTo(route)); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
		if h.fake.IssueCount("octocat", "hello-world") != 4 {
			t.Error("an issue was created")
		}
	})
	t.Run("no retry once the context is done", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		_ = h.fake.HangNext(routeIssue, 3)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		_, err := h.run(ctx, "get_issue", in)
		if ce := asError(t, err); ce.Code != connectors.CodeUpstream || !ce.Retryable || !strings.Contains(ce.Message, "gave up") {
			t.Errorf("error %+v", ce)
		}
		if n := len(h.fake.RequestsTo(routeIssue)); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
	t.Run("network error on GET", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		u := h.url
		h.fake.Close()
		p, _ := codehost.NewPolicy(codehost.ToolkitOptions{APIBaseURL: u, Now: h.clock.Now, Sleep: h.clock.Sleep})
		tk := p.Toolkit()
		step := stepOf(t, tk.Steps, "codehost.get_issue")
		env := connectors.Env{HTTP: &http.Client{Transport: tk.Wrap("a", http.DefaultTransport)}}
		_, err := step.Run(t.Context(), env, []byte(in))
		if ce := asError(t, err); ce.Code != connectors.CodeUpstream || !ce.Retryable {
			t.Errorf("error %+v", ce)
		}
		if n := len(h.clock.Sleeps()); n != 2 {
			t.Errorf("%d backoffs, want 2", n)
		}
	})
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{UserAgent: "triggerd-test/1.0"})
	h.mustRun(t, "get_issue", `{"owner":"octocat","repo":"hello-world","issue_number":1}`)
	h.mustRun(t, "create_issue", `{"owner":"octocat","repo":"hello-world","title":"t"}`)
	h.mustRun(t, "star_repo", `{"owner":"octocat","repo":"hello-world"}`)
	h.mustRun(t, "remove_collaborator", `{"owner":"octocat","repo":"hello-world","username":"hubot"}`)
	h.mustRun(t, "update_project_v2_item_status", `{"project_id":"PVT_kwDOA1","item_id":"PVTI_lADOA1","field_id":"PVTSSF_status","option_id":"47fc9ee4"}`)
	// An API Call step may send the product spec's media type.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", h.url+"/repos/octocat/hello-world/collaborators/hubot", nil)
	req.Header.Set("Accept", "application/vnd.codehost+json")
	req.Header.Set("User-Agent", "someone-else")
	res, err := h.env(token).HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("API call: %d", res.StatusCode)
	}
	reqs := h.fake.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("User-Agent") != "triggerd-test/1.0" || r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" ||
			r.Header.Get("Accept") != "application/vnd.github+json" || r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("%s %s headers %v", r.Method, r.Path, r.Header)
		}
		if r.Status >= 400 && r.Path != "/repos/octocat/hello-world/collaborators/hubot" {
			t.Errorf("%s %s answered %d", r.Method, r.Path, r.Status)
		}
	}
}

func TestMemoryRateLimitsKeepsTheLowerRemaining(t *testing.T) {
	t.Parallel()
	s := codehost.NewMemoryRateLimits()
	ctx := t.Context()
	reset := time.Unix(1_800_000_000, 0)
	_ = s.Put(ctx, "a", "core", codehost.RateLimit{Limit: 10, Remaining: 3, Reset: reset})
	_ = s.Put(ctx, "a", "core", codehost.RateLimit{Limit: 10, Remaining: 5, Reset: reset}) // an older answer, late
	if rl, ok, _ := s.Get(ctx, "a", "core"); !ok || rl.Remaining != 3 {
		t.Errorf("got %+v", rl)
	}
	_ = s.Put(ctx, "a", "core", codehost.RateLimit{Limit: 10, Remaining: 9, Reset: reset.Add(time.Hour)})
	if rl, _, _ := s.Get(ctx, "a", "core"); rl.Remaining != 9 {
		t.Errorf("a new window did not replace the old: %+v", rl)
	}
	if _, ok, _ := s.Get(ctx, "b", "core"); ok {
		t.Error("another account has a snapshot")
	}
}

// A merge and a file write check state their first attempt changes: a
// retry after a 5xx that followed a landed write would be refused (405,
// 409, 422) and report a failure although the change was made. They are
// not retried after an answer; the 5xx is reported as it came.
func TestNonIdempotentWritesAreNotRetried(t *testing.T) {
	t.Parallel()
	changelog := fakecodehost.BlobSHA([]byte("## v1.0.0\n\n- First release.\n"))
	for _, tc := range []struct {
		name, step, input string
		route             fakecodehost.Route
		landed            func(*fakecodehost.Server) bool
	}{
		{"merge", "merge_pull_request", `{"owner":"octocat","repo":"hello-world","pull_number":4}`,
			"PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge",
			func(f *fakecodehost.Server) bool { is, _ := f.Issue("octocat", "hello-world", 4); return is.Merged }},
		{"create file", "create_or_update_file_contents", `{"owner":"octocat","repo":"hello-world","path":"a.txt","content":"A","message":"m"}`,
			"PUT /repos/{owner}/{repo}/contents/{path...}",
			func(f *fakecodehost.Server) bool {
				b, ok := f.File("octocat", "hello-world", "", "a.txt")
				return ok && string(b) == "A"
			}},
		{"update file", "create_or_update_file_contents", `{"owner":"octocat","repo":"hello-world","path":"CHANGELOG.md","content":"B","message":"m","sha":"` + changelog + `"}`,
			"PUT /repos/{owner}/{repo}/contents/{path...}",
			func(f *fakecodehost.Server) bool {
				b, _ := f.File("octocat", "hello-world", "", "CHANGELOG.md")
				return string(b) == "B"
			}},
		{"delete file", "delete_file", `{"owner":"octocat","repo":"hello-world","path":"CHANGELOG.md","message":"m","sha":"` + changelog + `"}`,
			"DELETE /repos/{owner}/{repo}/contents/{path...}",
			func(f *fakecodehost.Server) bool {
				_, ok := f.File("octocat", "hello-world", "", "CHANGELOG.md")
				return !ok
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
			if err := h.fake.FailNextAfterApplying(tc.route, 1, http.StatusBadGateway); err != nil {
				t.Fatal(err)
			}
			_, err := h.run(t.Context(), tc.step, tc.input)
			if ce := asError(t, err); ce.Code != connectors.CodeUpstream || ce.Status != http.StatusBadGateway {
				t.Errorf("error %+v, want GitHub's 502 as it came", ce)
			}
			if n := len(h.fake.RequestsTo(tc.route)); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			if !tc.landed(h.fake) {
				t.Error("the write did not land at the fake")
			}
			if s := h.clock.Sleeps(); len(s) != 0 {
				t.Errorf("backoffs %v, want none", s)
			}
		})
	}
	// Not sent at all: still retried, as for POST.
	t.Run("merge whose connection failed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		route := fakecodehost.Route("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")
		env := h.env(token)
		env.HTTP.Transport = h.tk.Wrap("acct-"+token, &dialFailOnce{base: connectortest.Bearer{Token: token, Base: http.DefaultTransport}})
		out, err := h.steps["codehost.merge_pull_request"].Run(t.Context(), env, []byte(`{"owner":"octocat","repo":"hello-world","pull_number":4}`))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.fake.RequestsTo(route)); n != 1 || out == nil {
			t.Errorf("%d requests reached the fake, want 1 (output %v)", n, out)
		}
	})
}

// dialFailOnce fails its first round trip as a refused connection.
type dialFailOnce struct {
	base   http.RoundTripper
	failed atomic.Bool
}

func (d *dialFailOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if d.failed.CompareAndSwap(false, true) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return d.base.RoundTrip(r)
}
