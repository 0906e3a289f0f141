package codehost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// clock is the fake time both the fake GitHub and the policy see; Sleep
// advances it instead of waiting.
type clock struct {
	*testenv.Clock
	mu     sync.Mutex // guards sleeps, and makes each Sleep one step
	sleeps []time.Duration
}

func newClock() *clock {
	return &clock{Clock: testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))}
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Advance(d)
	c.sleeps = append(c.sleeps, d)
	return nil
}

func (c *clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sleeps)
}

const token = "gho_octocat"

// harness is a fake GitHub and the codehost toolkit pointed at it.
type harness struct {
	fake   *fakecodehost.Server
	url    string
	clock  *clock
	policy *codehost.Policy
	tk     connectors.Toolkit
	steps  map[string]connectors.Step
}

// stepOf returns the step id of steps, failing the test when there is none.
func stepOf(tb testing.TB, steps []connectors.Step, id string) connectors.Step {
	tb.Helper()
	for _, s := range steps {
		if s.ID == id {
			return s
		}
	}
	tb.Fatalf("no step %s", id)
	return connectors.Step{}
}

func newHarness(tb testing.TB, fo fakecodehost.Options, to codehost.ToolkitOptions) *harness {
	tb.Helper()
	clk := newClock()
	if fo.Now == nil {
		fo.Now = clk.Now
	}
	fake := fakecodehost.New(fo)
	u := fake.Start()
	tb.Cleanup(fake.Close)
	to.APIBaseURL = u
	to.Now, to.Sleep = clk.Now, clk.Sleep
	p, err := codehost.NewPolicy(to)
	if err != nil {
		tb.Fatal(err)
	}
	h := &harness{fake: fake, url: u, clock: clk, policy: p, tk: p.Toolkit(), steps: map[string]connectors.Step{}}
	for _, s := range h.tk.Steps {
		h.steps[s.ID] = s
	}
	return h
}

func (h *harness) env(tok string) connectors.Env {
	return connectors.Env{
		HTTP: &http.Client{
			Transport:     h.tk.Wrap("acct-"+tok, connectortest.Bearer{Token: tok, Base: http.DefaultTransport}),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Account: connectors.AccountInfo{ID: "acct-" + tok, Login: "octocat"},
	}
}

// run runs step id as octocat and returns its output as generic JSON.
func (h *harness) run(ctx context.Context, id, input string) (map[string]any, error) {
	return h.runAs(ctx, token, id, input)
}

func (h *harness) runAs(ctx context.Context, tok, id, input string) (map[string]any, error) {
	return h.runEnv(ctx, h.env(tok), id, input)
}

// runEnv runs step id in env and returns its output as generic JSON.
func (h *harness) runEnv(ctx context.Context, env connectors.Env, id, input string) (map[string]any, error) {
	s, ok := h.steps["codehost."+id]
	if !ok {
		return nil, fmt.Errorf("no step codehost.%s", id)
	}
	out, err := s.Run(ctx, env, json.RawMessage(input))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

func (h *harness) mustRun(t *testing.T, id, input string) map[string]any {
	t.Helper()
	m, err := h.run(t.Context(), id, input)
	if err != nil {
		t.Fatalf("%s %s: %v", id, input, err)
	}
	return m
}

// at reads a dotted path (a.b.0.c) of generic JSON.
func at(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// matches reports the fields of want (dotted path → value; absent means
// the field must be missing) that out does not have.
func matches(t *testing.T, out map[string]any, want map[string]any) {
	t.Helper()
	for path, w := range want {
		got, ok := at(out, path)
		if w == absent {
			if ok {
				t.Errorf("%s = %v, want it absent", path, got)
			}
			continue
		}
		var norm any
		b, _ := json.Marshal(w)
		_ = json.Unmarshal(b, &norm)
		if !ok || !reflect.DeepEqual(got, norm) {
			t.Errorf("%s = %v, want %v", path, got, norm)
		}
	}
}

type absentT struct{}

var absent = absentT{}

func errCode(err error) connectors.ErrorCode {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}

func validate(t *testing.T, s *jsonschema.Schema, raw []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return s.Validate(doc)
}

// stepCase runs one named step against a fresh fake and checks its output
// against the fake's state.
type stepCase struct {
	name  string
	id    string
	setup [][2]string // steps (id, input) to run first
	input string
	want  map[string]any
	check func(t *testing.T, f *fakecodehost.Server, out map[string]any)
}

func blob(t *testing.T, f *fakecodehost.Server, branch, path string) string {
	t.Helper()
	b, ok := f.File("octocat", "hello-world", branch, path)
	if !ok {
		t.Fatalf("no %s on %q", path, branch)
	}
	return fakecodehost.BlobSHA(b)
}

func branchSHA(t *testing.T, f *fakecodehost.Server, b string) string {
	t.Helper()
	sha, ok := f.Branch("octocat", "hello-world", b)
	if !ok {
		t.Fatalf("no branch %s", b)
	}
	return sha
}

const hw = `"owner":"octocat","repo":"hello-world"`

func stepCases() []stepCase {
	return []stepCase{
		{name: "create repository", id: "create_repository", input: `{"name":"new-repo","description":"A new one","auto_init":true}`,
			want: map[string]any{"full_name": "octocat/new-repo", "owner": "octocat", "private": false, "visibility": "public",
				"default_branch": "main", "description": "A new one", "open_issues_count": 0},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if _, ok := f.File("octocat", "new-repo", "main", "README.md"); !ok {
					t.Error("auto_init made no README")
				}
			}},
		{name: "create repository in org", id: "create_repository", input: `{"name":"org-repo","org":"octo-org","visibility":"private"}`,
			want: map[string]any{"full_name": "octo-org/org-repo", "owner": "octo-org", "private": true, "visibility": "private"},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if _, private, ok := f.Repo("octo-org", "org-repo"); !ok || !private {
					t.Error("the fake has no private octo-org/org-repo")
				}
			}},
		{name: "get repository info", id: "get_repository_info", input: `{` + hw + `}`,
			want: map[string]any{"id": fakecodehost.SeedRepoID, "full_name": "octocat/hello-world", "default_branch": "main",
				"description": "My first repository on GitHub!", "open_issues_count": 3, "private": false, "topics": []string{}}},
		{name: "get renamed repository", id: "get_repository_info", input: `{"owner":"octocat","repo":"hello-world-old"}`,
			want: map[string]any{"id": fakecodehost.SeedRepoID, "full_name": "octocat/hello-world"}},
		{name: "get file content", id: "get_repository_content", input: `{` + hw + `,"path":"README.md"}`,
			want: map[string]any{"type": "file", "path": "README.md", "name": "README.md", "encoding": "utf-8",
				"content": "# Hello World\n\nHello, world!\n", "entries": absent},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if out["sha"] != blob(t, f, "", "README.md") {
					t.Errorf("sha %v", out["sha"])
				}
			}},
		{name: "get directory", id: "get_repository_content", input: `{` + hw + `,"path":"docs"}`,
			want: map[string]any{"type": "dir", "path": "docs", "name": "docs", "content": absent,
				"entries.0.name": "guide.md", "entries.0.type": "file", "entries.1.name": "img", "entries.1.type": "dir", "entries.2": absent}},
		{name: "get root at a ref", id: "get_repository_content", input: `{` + hw + `,"ref":"feature"}`,
			want: map[string]any{"type": "dir", "path": "", "entries.0.name": ".github", "entries.1.name": "CHANGELOG.md", "entries.3.name": "docs"}},
		{name: "get file", id: "get_file", input: `{` + hw + `,"path":"src/main.go","ref":"feature"}`,
			want: map[string]any{"path": "src/main.go", "encoding": "utf-8", "content": "package main\n\nfunc main() { println(\"HELLO\") }\n"},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if out["sha"] != blob(t, f, "feature", "src/main.go") {
					t.Errorf("sha %v", out["sha"])
				}
			}},
		{name: "star", id: "star_repo", input: `{` + hw + `}`,
			want: map[string]any{"repository": "octocat/hello-world", "starred": true},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if !f.Starred("octocat", "octocat", "hello-world") {
					t.Error("not starred")
				}
			}},
		{name: "create file", id: "create_or_update_file_contents",
			input: `{` + hw + `,"path":"notes/todo.md","content":"- write tests\n","message":"Add notes","branch":"feature"}`,
			want:  map[string]any{"created": true, "path": "notes/todo.md", "sha": fakecodehost.BlobSHA([]byte("- write tests\n")), "size": 14},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if b, _ := f.File("octocat", "hello-world", "feature", "notes/todo.md"); string(b) != "- write tests\n" {
					t.Errorf("file is %q", b)
				}
				if out["commit_sha"] != branchSHA(t, f, "feature") {
					t.Errorf("commit_sha %v is not the branch head", out["commit_sha"])
				}
			}},
		{name: "create binary file", id: "create_or_update_file_contents",
			input: `{` + hw + `,"path":"bin/x","content":"AAEC/w==","encoding":"base64","message":"Add binary"}`,
			want:  map[string]any{"created": true, "size": 4},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if b, _ := f.File("octocat", "hello-world", "", "bin/x"); !bytes.Equal(b, []byte{0, 1, 2, 255}) {
					t.Errorf("file is %v", b)
				}
			}},
		{name: "delete file", id: "delete_file",
			input: `{` + hw + `,"path":"CHANGELOG.md","message":"Drop the changelog","sha":"` + fakecodehost.BlobSHA([]byte("## v1.0.0\n\n- First release.\n")) + `"}`,
			want:  map[string]any{"path": "CHANGELOG.md", "deleted": true},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if _, ok := f.File("octocat", "hello-world", "", "CHANGELOG.md"); ok {
					t.Error("the file is still there")
				}
			}},
		{name: "list releases", id: "list_releases", input: `{` + hw + `}`,
			want: map[string]any{"count": 2, "has_more": false, "releases.0.tag_name": "v1.0.0", "releases.0.author": "octocat",
				"releases.1.prerelease": true}},
		{name: "rate limit status", id: "get_rate_limit_status", input: `{}`,
			want: map[string]any{"resources.core.limit": 5000, "resources.core.remaining": 5000, "resources.search.limit": 30,
				"resources.core.reset": "2026-03-02T11:00:00Z"}},
		{name: "create branch from default", id: "create_branch", input: `{` + hw + `,"branch":"topic/one"}`,
			want: map[string]any{"branch": "topic/one", "ref": "refs/heads/topic/one", "from": "main"},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if got := branchSHA(t, f, "topic/one"); got != branchSHA(t, f, "main") || out["sha"] != got {
					t.Errorf("new branch at %s, output %v, main %s", got, out["sha"], branchSHA(t, f, "main"))
				}
			}},
		{name: "create branch from branch", id: "create_branch", input: `{` + hw + `,"branch":"topic","from":"feature"}`,
			want: map[string]any{"from": "feature"},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if got := branchSHA(t, f, "topic"); got != branchSHA(t, f, "feature") || out["sha"] != got {
					t.Errorf("new branch at %s, want feature's head", got)
				}
			}},
		{name: "get commit", id: "get_commit", input: `{` + hw + `,"ref":"main"}`,
			want: map[string]any{"message": "Add the changelog", "author.login": "octocat", "author.name": "The Octocat",
				"files.0.filename": "CHANGELOG.md", "files.0.status": "added", "stats.additions": 3, "stats.total": 3, "parents.1": absent},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if out["sha"] != branchSHA(t, f, "main") {
					t.Errorf("sha %v", out["sha"])
				}
			}},
		{name: "list commits", id: "list_commits", input: `{` + hw + `,"sha":"feature"}`,
			want: map[string]any{"count": 3, "has_more": false, "commits.0.message": "Say hello louder", "commits.0.author_login": "hubot",
				"commits.2.message": "Initial commit"}},
		{name: "list commits by path", id: "list_commits", input: `{` + hw + `,"path":"CHANGELOG.md","since":"2026-01-01T00:00:00Z"}`,
			want: map[string]any{"count": 1, "commits.0.message": "Add the changelog"}},
		{name: "list branches", id: "list_branches", input: `{` + hw + `}`,
			want: map[string]any{"count": 2, "branches.0.name": "feature", "branches.0.protected": false, "branches.1.name": "main", "branches.1.protected": true}},
		{name: "list protected branches", id: "list_branches", input: `{` + hw + `,"protected":true}`,
			want: map[string]any{"count": 1, "branches.0.name": "main"}},
		{name: "get branch", id: "get_branch", input: `{` + hw + `,"branch":"main"}`,
			want: map[string]any{"name": "main", "protected": true},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if out["sha"] != branchSHA(t, f, "main") {
					t.Errorf("sha %v", out["sha"])
				}
			}},
		{name: "create issue", id: "create_issue",
			input: `{` + hw + `,"title":"It broke","body":"Details.","labels":["bug","p1"],"assignees":["hubot"],"milestone":1}`,
			want: map[string]any{"number": 5, "repository": "octocat/hello-world", "title": "It broke", "body": "Details.", "state": "open",
				"user": "octocat", "labels": []string{"bug", "p1"}, "assignees": []string{"hubot"}, "milestone.number": 1,
				"milestone.title": "v1.0", "is_pull_request": false, "closed_at": absent},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if is, ok := f.Issue("octocat", "hello-world", 5); !ok || is.Title != "It broke" || !slices.Equal(is.Assignees, []string{"hubot"}) {
					t.Errorf("fake issue %+v", is)
				}
			}},
		{name: "comment", id: "create_issue_comment", input: `{` + hw + `,"issue_number":2,"body":"On it."}`,
			want: map[string]any{"issue_number": 2, "body": "On it.", "user": "octocat"},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 2); !slices.Equal(is.Comments, []string{"On it."}) {
					t.Errorf("comments %v", is.Comments)
				}
			}},
		{name: "close issue", id: "update_issue",
			input: `{` + hw + `,"issue_number":2,"state":"closed","state_reason":"not_planned","labels":[],"assignees":["octocat"]}`,
			want: map[string]any{"number": 2, "state": "closed", "state_reason": "not_planned", "labels": []string{},
				"assignees": []string{"octocat"}, "closed_at": "2026-03-02T10:00:00Z"},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 2); is.State != "closed" || is.StateReason != "not_planned" || len(is.Labels) != 0 {
					t.Errorf("fake issue %+v", is)
				}
			}},
		{name: "clear milestone and retitle", id: "update_issue", input: `{` + hw + `,"issue_number":1,"milestone":null,"title":"Found two bugs"}`,
			want: map[string]any{"title": "Found two bugs", "milestone": absent, "labels": []string{"bug"}},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 1); is.Milestone != 0 || is.Title != "Found two bugs" {
					t.Errorf("fake issue %+v", is)
				}
			}},
		{name: "issue assignees", id: "get_issue_assignees", input: `{` + hw + `,"issue_number":1}`,
			want: map[string]any{"issue_number": 1, "assignees.0.login": "octocat", "assignees.0.id": 1, "assignees.1": absent}},
		{name: "search open issues", id: "search_issues_and_pull_requests", input: `{"q":"repo:octocat/hello-world is:issue is:open"}`,
			want: map[string]any{"total_count": 2, "count": 2, "incomplete_results": false, "items.0.number": 1, "items.1.number": 2,
				"items.0.repository": "octocat/hello-world"}},
		{name: "search pull requests by text", id: "search_issues_and_pull_requests", input: `{"q":"louder is:pr","max_items":1}`,
			want: map[string]any{"total_count": 1, "items.0.number": 4, "items.0.is_pull_request": true, "has_more": false}},
		{name: "list issues", id: "list_issues", input: `{` + hw + `}`,
			want: map[string]any{"count": 3, "issues.0.number": 4, "issues.0.is_pull_request": true, "issues.2.number": 1}},
		{name: "list issues by label", id: "list_issues", input: `{` + hw + `,"state":"all","labels":["documentation"],"direction":"asc"}`,
			want: map[string]any{"count": 1, "issues.0.number": 3, "issues.0.state": "closed"}},
		{name: "get issue", id: "get_issue", input: `{` + hw + `,"issue_number":3}`,
			want: map[string]any{"number": 3, "state": "closed", "state_reason": "completed", "user": "monalisa", "labels": []string{"documentation"},
				"closed_at": "2026-01-05T15:00:00Z"}},
		{name: "create pull request", id: "create_pull_request",
			setup: [][2]string{{"create_branch", `{` + hw + `,"branch":"topic","from":"feature"}`}},
			input: `{` + hw + `,"head":"topic","base":"main","title":"Topic","body":"Please.","draft":true}`,
			want: map[string]any{"number": 5, "head": "topic", "base": "main", "title": "Topic", "state": "open", "draft": true,
				"merged": false, "user": "octocat", "requested_reviewers": []string{}},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 5); !is.PullRequest || is.Head != "topic" || !is.Draft {
					t.Errorf("fake PR %+v", is)
				}
				if out["head_sha"] != branchSHA(t, f, "feature") {
					t.Errorf("head_sha %v", out["head_sha"])
				}
			}},
		{name: "reviewers", id: "get_reviewers", input: `{` + hw + `,"pull_number":4}`,
			want: map[string]any{"pull_number": 4, "requested_users": []string{"octocat"}, "requested_teams": []string{},
				"reviews.0.reviewer": "monalisa", "reviews.0.state": "COMMENTED", "reviews.1.reviewer": "octocat",
				"reviews.1.state": "CHANGES_REQUESTED", "has_more": false}},
		{name: "project field", id: "get_project_v2_field", input: `{"field_id":"` + fakecodehost.SeedFieldID + `"}`,
			want: map[string]any{"id": fakecodehost.SeedFieldID, "name": "Status", "data_type": "SINGLE_SELECT",
				"options.0.name": "In Progress", "options.0.id": fakecodehost.SeedOptionDoing, "options.1.name": "Done", "options.2.name": "Todo"}},
		{name: "project field without options", id: "get_project_v2_field", input: `{"field_id":"` + fakecodehost.SeedTitleFieldID + `"}`,
			want: map[string]any{"id": fakecodehost.SeedTitleFieldID, "name": "Title", "data_type": "TITLE", "options": []string{}}},
		{name: "project item status", id: "update_project_v2_item_status",
			input: `{"project_id":"` + fakecodehost.SeedProjectID + `","item_id":"` + fakecodehost.SeedItemID + `","field_id":"` +
				fakecodehost.SeedFieldID + `","option_id":"` + fakecodehost.SeedOptionDone + `"}`,
			want: map[string]any{"item_id": fakecodehost.SeedItemID, "option_id": fakecodehost.SeedOptionDone},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if got := f.ProjectItemOption(fakecodehost.SeedProjectID, fakecodehost.SeedItemID, fakecodehost.SeedFieldID); got != fakecodehost.SeedOptionDone {
					t.Errorf("option %q", got)
				}
			}},
		{name: "merge", id: "merge_pull_request", input: `{` + hw + `,"pull_number":4,"merge_method":"squash","commit_title":"Louder (#4)"}`,
			want: map[string]any{"pull_number": 4, "merged": true, "message": "Pull Request successfully merged"},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 4); !is.Merged || is.State != "closed" {
					t.Errorf("fake PR %+v", is)
				}
				if out["sha"] != branchSHA(t, f, "main") {
					t.Error("main is not at the merge commit")
				}
				if b, _ := f.File("octocat", "hello-world", "main", "src/main.go"); !strings.Contains(string(b), "HELLO") {
					t.Errorf("main has %q", b)
				}
			}},
		{name: "list pull requests", id: "list_pull_requests", input: `{` + hw + `,"state":"all","base":"main"}`,
			want: map[string]any{"count": 1, "pull_requests.0.number": 4, "pull_requests.0.head": "feature", "pull_requests.0.mergeable": absent}},
		{name: "get pull request", id: "get_pull_request", input: `{` + hw + `,"pull_number":4}`,
			want: map[string]any{"number": 4, "mergeable": true, "merged": false, "head": "feature", "base": "main",
				"requested_reviewers": []string{"octocat"}, "assignees": []string{"hubot"}},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if out["head_sha"] != branchSHA(t, f, "feature") || out["base_sha"] != branchSHA(t, f, "main") {
					t.Errorf("shas %v %v", out["head_sha"], out["base_sha"])
				}
			}},
		{name: "update pull request", id: "update_pull_request", input: `{` + hw + `,"pull_number":4,"title":"Louder","state":"closed"}`,
			want: map[string]any{"number": 4, "title": "Louder", "state": "closed", "merged": false},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if is, _ := f.Issue("octocat", "hello-world", 4); is.Title != "Louder" || is.State != "closed" {
					t.Errorf("fake PR %+v", is)
				}
			}},
		{name: "dispatch by file name", id: "create_workflow_dispatch", input: `{` + hw + `,"workflow_id":"ci.yml","ref":"main","inputs":{"debug":true,"level":"2"}}`,
			want: map[string]any{"workflow_id": "ci.yml", "ref": "main", "dispatched": true, "run_id": absent},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if _, runs := f.WorkflowState("octocat", "hello-world", fakecodehost.SeedWorkflowID); runs != 2 {
					t.Errorf("%d runs", runs)
				}
			}},
		{name: "dispatch by id with run details", id: "create_workflow_dispatch",
			input: `{` + hw + `,"workflow_id":161335,"ref":"feature","return_run_details":true}`,
			want:  map[string]any{"workflow_id": "161335", "dispatched": true},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if id, _ := out["run_id"].(float64); id == 0 {
					t.Errorf("no run_id in %v", out)
				}
			}},
		{name: "disable workflow", id: "disable_workflow", input: `{` + hw + `,"workflow_id":161335}`,
			want: map[string]any{"workflow_id": "161335", "state": "disabled_manually"},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if st, _ := f.WorkflowState("octocat", "hello-world", fakecodehost.SeedWorkflowID); st != "disabled_manually" {
					t.Errorf("state %q", st)
				}
			}},
		{name: "enable workflow", id: "enable_workflow",
			setup: [][2]string{{"disable_workflow", `{` + hw + `,"workflow_id":"deploy.yml"}`}},
			input: `{` + hw + `,"workflow_id":"deploy.yml"}`,
			want:  map[string]any{"workflow_id": "deploy.yml", "state": "active"},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if st, _ := f.WorkflowState("octocat", "hello-world", fakecodehost.SeedDeployWorkflowID); st != "active" {
					t.Errorf("state %q", st)
				}
			}},
		{name: "get workflow run", id: "get_workflow_run", input: `{` + hw + `,"run_id":30433642}`,
			want: map[string]any{"id": fakecodehost.SeedRunID, "name": "CI", "workflow_id": fakecodehost.SeedWorkflowID, "status": "completed",
				"conclusion": "success", "event": "push", "actor": "octocat", "head_branch": "main", "run_number": 1}},
		{name: "list workflow runs", id: "list_workflow_runs",
			setup: [][2]string{{"create_workflow_dispatch", `{` + hw + `,"workflow_id":"ci.yml","ref":"feature"}`}},
			input: `{` + hw + `,"workflow_id":"ci.yml"}`,
			want: map[string]any{"total_count": 2, "count": 2, "runs.0.event": "workflow_dispatch", "runs.0.status": "queued",
				"runs.0.conclusion": absent, "runs.0.head_branch": "feature", "runs.1.id": fakecodehost.SeedRunID}},
		{name: "list runs by status", id: "list_workflow_runs", input: `{` + hw + `,"status":"failure"}`,
			want: map[string]any{"total_count": 0, "count": 0, "runs": []any{}}},
		{name: "create gist", id: "create_gist", input: `{"description":"Notes","public":true,"files":{"b.md":{"content":"# B"},"a.txt":{"content":"a"}}}`,
			want: map[string]any{"description": "Notes", "public": true, "owner": "octocat", "files.0.filename": "a.txt", "files.1.filename": "b.md",
				"files.1.language": "Markdown", "files.0.size": 1},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if d, files, ok := f.Gist(out["id"].(string)); !ok || d != "Notes" || files["b.md"] != "# B" {
					t.Errorf("fake gist %q %v", d, files)
				}
			}},
		{name: "update gist", id: "update_gist",
			input: `{"gist_id":"` + fakecodehost.SeedGistID + `","description":"Renamed","files":{"hello_world.rb":null,"new.py":{"content":"print(1)"}}}`,
			want:  map[string]any{"id": fakecodehost.SeedGistID, "description": "Renamed", "files.0.filename": "new.py", "files.1": absent},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if _, files, _ := f.Gist(fakecodehost.SeedGistID); len(files) != 1 || files["new.py"] != "print(1)" {
					t.Errorf("fake files %v", files)
				}
			}},
		{name: "list gists", id: "list_gists_for_a_user", input: `{"username":"octocat"}`,
			want: map[string]any{"count": 1, "gists.0.id": fakecodehost.SeedGistID, "gists.0.files.0.filename": "hello_world.rb"}},
		{name: "collaborator permission", id: "check_collaborator_permission", input: `{` + hw + `,"username":"hubot"}`,
			want: map[string]any{"username": "hubot", "permission": "write", "role_name": "write"}},
		{name: "no permission", id: "check_collaborator_permission", input: `{` + hw + `,"username":"monalisa"}`,
			want: map[string]any{"permission": "none", "role_name": ""}},
		{name: "invite collaborator", id: "add_collaborator", input: `{` + hw + `,"username":"monalisa","permission":"triage"}`,
			want: map[string]any{"username": "monalisa", "permission": "triage", "invited": true},
			check: func(t *testing.T, f *fakecodehost.Server, out map[string]any) {
				if _, invited := f.Collaborator("octocat", "hello-world", "monalisa"); !invited || out["invitation_id"] == nil {
					t.Errorf("no invitation (output %v)", out)
				}
			}},
		{name: "change collaborator permission", id: "add_collaborator", input: `{` + hw + `,"username":"hubot","permission":"maintain"}`,
			want: map[string]any{"invited": false, "permission": "maintain", "invitation_id": absent},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if p, _ := f.Collaborator("octocat", "hello-world", "hubot"); p != "maintain" {
					t.Errorf("permission %q", p)
				}
			}},
		{name: "remove collaborator", id: "remove_collaborator", input: `{` + hw + `,"username":"hubot"}`,
			want: map[string]any{"username": "hubot", "removed": true},
			check: func(t *testing.T, f *fakecodehost.Server, _ map[string]any) {
				if p, _ := f.Collaborator("octocat", "hello-world", "hubot"); p != "" {
					t.Errorf("permission %q", p)
				}
			}},
	}
}

// TestSteps runs every named step against the fake and checks its output
// against the fake's state and against the step's output schema.
func TestSteps(t *testing.T) {
	t.Parallel()
	schemas := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	covered := map[string]bool{}
	for _, tc := range stepCases() {
		covered["codehost."+tc.id] = true
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
			for _, s := range tc.setup {
				h.mustRun(t, s[0], s[1])
			}
			step := h.steps["codehost."+tc.id]
			if err := validate(t, connectortest.CompileSchema(t, step.ID+" input", step.Input), []byte(tc.input)); err != nil {
				t.Fatalf("the example input does not match the input schema: %v", err)
			}
			out := h.mustRun(t, tc.id, tc.input)
			raw, _ := json.Marshal(out)
			if err := validate(t, connectortest.CompileSchema(t, step.ID+" output", step.Output), raw); err != nil {
				t.Errorf("output %s does not match the output schema: %v", raw, err)
			}
			matches(t, out, tc.want)
			if tc.check != nil {
				tc.check(t, h.fake, out)
			}
		})
	}
	for id := range schemas.steps {
		if !covered[id] {
			t.Errorf("step %s has no case", id)
		}
	}
}

// TestCatalogue checks the step list: 39 steps, ids, names, descriptions
// and schemas that compile and are strict.
func TestCatalogue(t *testing.T) {
	t.Parallel()
	tk := codehost.NewToolkit(codehost.ToolkitOptions{})
	if tk.Connector != "codehost" || tk.Wrap == nil {
		t.Fatalf("toolkit %q, wrap %v", tk.Connector, tk.Wrap != nil)
	}
	specNames := []string{"Create Repository", "Get Repository Info", "Get Repository Content", "Star Repo", "Create Branch",
		"Get Commit", "List Commits", "Create or Update File Contents", "Create Issue", "Create Issue Comment", "Update Issue",
		"Get Issue Assignees", "Search Issues and Pull Requests", "Create Pull Request", "Get Reviewers",
		"Update Project (V2) Item Status", "Create Workflow Dispatch", "Enable Workflow", "Disable Workflow", "Get Workflow Run",
		"List Workflow Runs", "Create Gist", "Update Gist", "List Gists for a User", "List Releases"}
	names := map[string]bool{}
	ids := map[string]bool{}
	for _, s := range tk.Steps {
		if ids[s.ID] || names[s.Name] {
			t.Errorf("duplicate %s / %s", s.ID, s.Name)
		}
		ids[s.ID], names[s.Name] = true, true
		if !strings.HasPrefix(s.ID, "codehost.") || s.Connector != "codehost" || s.Run == nil {
			t.Errorf("step %+v", s.ID)
		}
		if d := s.Description; d == "" || !strings.HasSuffix(d, ".") || strings.Count(d, ". ") > 0 {
			t.Errorf("%s: description %q is not one sentence", s.ID, d)
		}
		in := connectortest.CompileSchema(t, s.ID+" input", s.Input)
		connectortest.CompileSchema(t, s.ID+" output", s.Output)
		var root map[string]any
		_ = json.Unmarshal(s.Input, &root)
		if root["additionalProperties"] != false || root["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: input schema is not strict 2020-12: %s", s.ID, s.Input)
		}
		var extra map[string]any
		_ = json.Unmarshal([]byte(`{"owner":"octocat","repo":"hello-world","unexpected":1}`), &extra)
		b, _ := json.Marshal(extra)
		if validate(t, in, b) == nil {
			t.Errorf("%s: input schema accepts an unknown property", s.ID)
		}
	}
	for _, n := range specNames {
		if !names[n] {
			t.Errorf("no step named %q", n)
		}
	}
	if len(tk.Steps) != 40 {
		t.Errorf("%d steps, want 40", len(tk.Steps))
	}
}

func TestNewPolicyValidates(t *testing.T) {
	t.Parallel()
	if _, err := codehost.NewPolicy(codehost.ToolkitOptions{APIBaseURL: "not a url"}); err == nil || !strings.Contains(err.Error(), "APIBaseURL") {
		t.Errorf("NewPolicy with a bad URL: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewToolkit with a bad URL did not panic")
		}
	}()
	codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: "ftp://x"})
}
