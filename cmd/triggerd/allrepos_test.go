package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// ghPost sends body to path on the fake as octocat and fails the test
// unless it answers 201.
func ghPost(t *testing.T, gh *fakecodehost.Server, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, gh.URL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("User-Agent", "e2e-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &out) != nil {
		t.Fatalf("POST %s on the fake: %d %s", path, resp.StatusCode, b)
	}
	return out
}

// repositoryOf is the repository of a run's event, once its record is
// written (after the run is).
func (v *e2e) repositoryOf(run map[string]any) string {
	v.t.Helper()
	var ev map[string]any
	testenv.Eventually(v.t, 10*time.Second, "the record of event "+fmt.Sprint(run["event_id"]), func() bool {
		code, body := v.api(http.MethodGet, "/v1/events/"+run["event_id"].(string), "", 0)
		ev = body
		return code == http.StatusOK
	})
	return fmt.Sprint(ev["repository"])
}

// lacking lists the targets of a coverage's lacking entries.
func lacking(cov map[string]any) []string {
	var out []string
	for _, g := range cov["lacking"].([]any) {
		out = append(out, g.(map[string]any)["target"].(string))
	}
	slices.Sort(out)
	return out
}

// A trigger given no repositories takes the events of every repository
// the account reaches: its own repository's, an organisation's through
// the organisation hook (a repository created there later too), and a
// repository the account creates later once the poller has read its
// reach again. Its answer says how many hooks it holds and where the
// account lacks the rights to one.
func TestEndToEndTriggerOnAllRepositories(t *testing.T) {
	v := newE2EWith(t, []string{"--poll-interval", "200ms"}, nil)
	if err := v.gh.SetCollaborator(fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo, "octocat", "push"); err != nil {
		t.Fatal(err)
	}
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "everywhere"}`, http.StatusCreated)
	v.natsAgent(ag)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q}`, v.account, ag["id"]), http.StatusCreated)
	id := tr["id"].(string)
	cov, _ := tr["coverage"].(map[string]any)
	if cov == nil || cov["hooks"] != float64(2) || fmt.Sprint(cov["organizations"]) != "[octo-org]" || cov["repositories"] != float64(1) {
		t.Fatalf("coverage = %v; want 2 hooks: octo-org's and octocat/hello-world's", cov)
	}
	if got := lacking(cov); !slices.Equal(got, []string{"monalisa/octo-app"}) {
		t.Errorf("lacking = %v, want monalisa/octo-app, where octocat has push rights only", got)
	}
	if hs := v.gh.Hooks(fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo); len(hs) != 0 {
		t.Errorf("hooks on a repository octocat does not administer: %+v", hs)
	}

	runs := func(n int, what string) {
		t.Helper()
		testenv.Eventually(t, 20*time.Second, what, func() bool { return len(v.runs("trigger="+id)) == n })
	}
	createIssue(t, v.gh, "on hello-world")
	runs(1, "the run of an issue on octocat/hello-world")

	// A repository created in the organisation is served by its hook at
	// once, without a hook of its own.
	ghPost(t, v.gh, "/orgs/"+fakecodehost.SeedOrg+"/repos", `{"name": "tools"}`)
	ghPost(t, v.gh, "/repos/octo-org/tools/issues", `{"title": "on tools"}`)
	runs(2, "the run of an issue on octo-org/tools, a repository created after the trigger")
	if hs := v.gh.Hooks(fakecodehost.SeedOrg, "tools"); len(hs) != 0 {
		t.Errorf("octo-org/tools has hooks of its own beside the organisation's: %+v", hs)
	}

	// A repository the account creates later gets its hook within a few
	// poll passes.
	ghPost(t, v.gh, "/user/repos", `{"name": "later"}`)
	testenv.Eventually(t, 20*time.Second, "a hook on octocat/later", func() bool { return len(v.gh.Hooks("octocat", "later")) == 1 })
	ghPost(t, v.gh, "/repos/octocat/later/issues", `{"title": "on later"}`)
	runs(3, "the run of an issue on octocat/later")

	_, got := v.api(http.MethodGet, "/v1/triggers/"+id, "", http.StatusOK)
	cov = got["coverage"].(map[string]any)
	if cov["hooks"] != float64(3) || cov["repositories"] != float64(2) {
		t.Errorf("coverage after the new repository = %v; want 3 hooks, 2 repositories", cov)
	}
	var repos []string
	for _, r := range v.runs("trigger=" + id) {
		repos = append(repos, v.repositoryOf(r))
		if c := countOf(&v.natsRuns, r["id"].(string)); c != 1 {
			t.Errorf("run %s reached the agent %d times, want 1", r["id"], c)
		}
	}
	slices.Sort(repos)
	if want := []string{"octo-org/tools", "octocat/hello-world", "octocat/later"}; !slices.Equal(repos, want) {
		t.Errorf("runs' repositories = %v, want %v", repos, want)
	}
}

// new_repository without an organisation is polled from the account's
// own repositories: GitHub sends no webhook for a personal account.
func TestEndToEndPolledNewRepositoryOfAPersonalAccount(t *testing.T) {
	v := newE2EWith(t, []string{"--poll-interval", "200ms"}, nil)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "repos"}`, http.StatusCreated)
	v.natsAgent(ag)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_repository", "account": %q, "agent": %q}`, v.account, ag["id"]), http.StatusCreated)
	if hooks := tr["hooks"].([]any); len(hooks) != 0 {
		t.Fatalf("a polled new_repository registered hooks: %v", hooks)
	}
	id := tr["id"].(string)
	ghPost(t, v.gh, "/user/repos", `{"name": "fresh"}`)
	testenv.Eventually(t, 20*time.Second, "the polled repository's run", func() bool { return len(v.runs("trigger="+id)) == 1 })
	run := v.runs("trigger=" + id)[0]
	if run["kind"] != "new_repository" || v.repositoryOf(run) != "octocat/fresh" {
		t.Errorf("run = %v, want new_repository of octocat/fresh", run)
	}
	// A repository of an organisation is not the account's own.
	ghPost(t, v.gh, "/orgs/"+fakecodehost.SeedOrg+"/repos", `{"name": "theirs"}`)
	ghPost(t, v.gh, "/user/repos", `{"name": "fresh-2"}`)
	testenv.Eventually(t, 20*time.Second, "the second polled repository's run", func() bool { return len(v.runs("trigger="+id)) >= 2 })
	rs := v.runs("trigger=" + id)
	if len(rs) != 2 {
		t.Errorf("%d runs, want one per repository octocat created", len(rs))
	}
	for _, r := range rs {
		if v.repositoryOf(r) == "octo-org/theirs" {
			t.Errorf("an organisation's new repository started the personal trigger: %v", r)
		}
	}
}
