package match

import (
	"github.com/triggerd/triggerd/internal/testenv"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/triggers"
)

func TestMatchRepositoryScoping(t *testing.T) {
	x := sharedIndex()
	mustPut(t, x,
		trig("t1", triggers.NewIssue, Params{Repositories: []string{"Octo-Org/API"}}),
		trig("t2", triggers.NewIssue, Params{Repositories: []string{"octo-org/other"}}),
		trig("t3", triggers.NewIssue, Params{}),
		trig("t4", triggers.NewStar, Params{Repositories: []string{"octo-org/api"}}),
		trig("t5", triggers.NewIssue, Params{Repositories: []string{"octo-org/other", "OCTO-ORG/api", "octo-org/API"}}),
		trig("t6", triggers.DeploymentFailed, Params{}),
	)
	cases := []struct {
		name string
		ev   *triggers.Event
		want map[string]string
	}{
		{"exact repo, other case", issueEvent("octo-org/Api"), map[string]string{"t1": Matched, "t3": Matched, "t5": Matched}},
		{"other repo", issueEvent("octo-org/other"), map[string]string{"t2": Matched, "t3": Matched, "t5": Matched}},
		{"unknown repo sees only wildcard", issueEvent("someone/else"), map[string]string{"t3": Matched}},
		{"no repository", issueEvent(""), map[string]string{"t3": Matched}},
		{"other kind", event(triggers.NewStar, "octo-org/api", triggers.Resource{Type: "star"}), map[string]string{"t4": Matched}},
		{"other connector", event(triggers.DeploymentFailed, "", triggers.Resource{Type: "deployment"}), map[string]string{"t6": Matched}},
		{"no triggers of kind", event(triggers.NewFork, "octo-org/api", triggers.Resource{}), map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := x.Match(tc.ev)
			wantResults(t, got, tc.want)
			// What the dispatcher asks before reading an event agrees.
			repo := ""
			if tc.ev.Repository != nil {
				repo = strings.ToLower(tc.ev.Repository.FullName)
			}
			if c := x.Candidates(tc.ev.Connector, tc.ev.Kind, repo); c != (len(tc.want) > 0) {
				t.Errorf("Candidates = %v with %d outcomes", c, len(tc.want))
			}
			for _, o := range got {
				if o.TenantID != "ten-1" || o.Agent != "agent-"+o.TriggerID {
					t.Errorf("outcome %+v: tenant or agent wrong", o)
				}
			}
		})
	}
}

func TestMatchParams(t *testing.T) {
	res := func(k triggers.Kind, r triggers.Resource) *triggers.Event { return event(k, "octo-org/api", r) }
	cases := []struct {
		name   string
		kind   triggers.Kind
		p      Params
		ev     *triggers.Event
		result string // "" is Matched
	}{
		{"branch exact", triggers.NewPush, Params{Branches: []string{"main"}}, res(triggers.NewPush, triggers.Resource{Ref: "main"}), ""},
		{"branch glob", triggers.NewPush, Params{Branches: []string{"main", "release/*"}}, res(triggers.NewPush, triggers.Resource{Ref: "release/1.2"}), ""},
		{"branch glob does not cross slash", triggers.NewPush, Params{Branches: []string{"release/*"}},
			res(triggers.NewPush, triggers.Resource{Ref: "release/1/hotfix"}), "branch release/1/hotfix not in [release/*]"},
		{"branch other", triggers.NewPush, Params{Branches: []string{"release"}}, res(triggers.NewPush, triggers.Resource{Ref: "main"}),
			"branch main not in [release]"},
		{"tag push is not a branch", triggers.NewPush, Params{Branches: []string{"release/*"}},
			res(triggers.NewPush, triggers.Resource{Ref: "release/1.0", RefType: "tag"}),
			"branch: the event is about tag release/1.0, not a branch; want [release/*]"},
		{"branch push", triggers.NewCommit, Params{Branches: []string{"release/*"}},
			res(triggers.NewCommit, triggers.Resource{Ref: "release/1.0", RefType: "branch"}), ""},
		{"mentioned, case-insensitive", triggers.NewMention, Params{Repositories: []string{"octo-org/api"}, Mentioned: []string{"Octocat"}},
			res(triggers.NewMention, triggers.Resource{Mentioned: "octocat"}), ""},
		{"someone else mentioned", triggers.NewMention, Params{Repositories: []string{"octo-org/api"}, Mentioned: []string{"octocat"}},
			res(triggers.NewMention, triggers.Resource{Mentioned: "hubot"}), "mentioned @hubot is not among [octocat]"},
		{"anyone mentioned", triggers.NewMention, Params{Repositories: []string{"octo-org/api"}, Mentioned: []string{"octocat", "*"}},
			res(triggers.NewMention, triggers.Resource{Mentioned: "hubot"}), ""},
		{"branch missing", triggers.NewPullRequest, Params{Branches: []string{"main"}}, res(triggers.NewPullRequest, triggers.Resource{}),
			"branch: the event has no branch; want [main]"},
		{"label any, case-insensitive", triggers.NewIssue, Params{Labels: []string{"security", "BUG"}}, issueEvent("octo-org/api", "docs", "bug"), ""},
		{"label none", triggers.NewIssue, Params{Labels: []string{"security"}}, issueEvent("octo-org/api", "docs", "bug"),
			"labels [docs bug] include none of [security]"},
		{"label event has none", triggers.NewIssue, Params{Labels: []string{"security"}}, issueEvent("octo-org/api"),
			"labels: the event has no labels; want any of [security]"},
		{"label from Label", triggers.UpdatedPullRequest, Params{Labels: []string{"ready"}},
			res(triggers.UpdatedPullRequest, triggers.Resource{Label: "Ready", Labels: []string{"wip"}}), ""},
		{"unlabeled: the removed label does not count", triggers.UpdatedIssue, Params{Labels: []string{"bug"}},
			func() *triggers.Event {
				e := res(triggers.UpdatedIssue, triggers.Resource{Label: "bug", Labels: []string{"docs"}})
				e.Action = "unlabeled"
				return e
			}(), "labels [docs] include none of [bug]"},
		{"new_issue_label: the added label", triggers.NewIssueLabel, Params{Labels: []string{"bug"}},
			res(triggers.NewIssueLabel, triggers.Resource{Label: "bug", Labels: []string{"bug", "docs"}}), ""},
		{"new_issue_label: an older label does not count", triggers.NewIssueLabel, Params{Labels: []string{"bug"}},
			res(triggers.NewIssueLabel, triggers.Resource{Label: "docs", Labels: []string{"bug", "docs"}}), "labels [docs] include none of [bug]"},
		{"column equal", triggers.NewProjectCard, Params{ColumnID: 12}, res(triggers.NewProjectCard, triggers.Resource{ColumnID: 12}), ""},
		{"column other", triggers.NewProjectCard, Params{ColumnID: 12}, res(triggers.NewProjectCard, triggers.Resource{ColumnID: 34}), "column 34 is not 12"},
		{"conclusion", triggers.WorkflowRunCompleted, Params{Conclusions: []string{"FAILURE", "timed_out"}},
			res(triggers.WorkflowRunCompleted, triggers.Resource{Conclusion: "failure"}), ""},
		{"conclusion other", triggers.WorkflowRunCompleted, Params{Conclusions: []string{"failure"}},
			res(triggers.WorkflowRunCompleted, triggers.Resource{Conclusion: "success"}), "conclusion success not in [failure]"},
		{"conclusion missing", triggers.WorkflowJobCompleted, Params{Conclusions: []string{"failure"}},
			res(triggers.WorkflowJobCompleted, triggers.Resource{}), "conclusion (none) not in [failure]"},
		{"review state", triggers.NewPullRequestReview, Params{ReviewStates: []string{"approved"}},
			res(triggers.NewPullRequestReview, triggers.Resource{ReviewState: "approved"}), ""},
		{"review state other", triggers.NewPullRequestReview, Params{ReviewStates: []string{"approved"}},
			res(triggers.NewPullRequestReview, triggers.Resource{ReviewState: "commented"}), "review state commented not in [approved]"},
		{"environment", triggers.DeploymentCompleted, Params{Environments: []string{"Production"}},
			event(triggers.DeploymentCompleted, "", triggers.Resource{Target: "production"}), ""},
		{"environment other", triggers.DeploymentCompleted, Params{Environments: []string{"production"}},
			event(triggers.DeploymentCompleted, "", triggers.Resource{Target: "preview"}), "environment preview not in [production]"},
		{"first failing parameter wins", triggers.WorkflowRunCompleted, Params{Branches: []string{"main"}, Conclusions: []string{"failure"}},
			res(triggers.WorkflowRunCompleted, triggers.Resource{Ref: "dev", Conclusion: "success"}), "branch dev not in [main]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := sharedIndex()
			mustPut(t, x, trig("t", tc.kind, tc.p))
			want := Matched
			if tc.result != "" {
				want = FilteredOut + ": " + tc.result
			}
			wantResults(t, x.Match(tc.ev), map[string]string{"t": want})
		})
	}
}

func TestMatchDisabled(t *testing.T) {
	x := sharedIndex()
	off := trig("b", triggers.NewIssue, Params{Labels: []string{"nope"}})
	off.Enabled = false
	off.Filter = "event.no.such.key"
	mustPut(t, x, trig("a", triggers.NewIssue, Params{}), off)
	wantResults(t, x.Match(issueEvent("octo-org/api")), map[string]string{"a": Matched, "b": Disabled + ": trigger is disabled"})
}

func TestPutReplaceAndRemove(t *testing.T) {
	x := sharedIndex()
	mustPut(t, x, trig("t", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}}))
	api, web := issueEvent("octo-org/api"), issueEvent("octo-org/web")
	wantResults(t, x.Match(api), map[string]string{"t": Matched})
	wantResults(t, x.Match(web), map[string]string{})

	// Replacing moves the trigger to another repository's bucket.
	mustPut(t, x, trig("t", triggers.NewIssue, Params{Repositories: []string{"octo-org/web"}}))
	wantResults(t, x.Match(api), map[string]string{})
	wantResults(t, x.Match(web), map[string]string{"t": Matched})
	// ... then to the wildcard bucket, then to another kind.
	mustPut(t, x, trig("t", triggers.NewIssue, Params{}))
	wantResults(t, x.Match(api), map[string]string{"t": Matched})
	mustPut(t, x, trig("t", triggers.NewStar, Params{}))
	wantResults(t, x.Match(api), map[string]string{})
	if x.Len() != 1 {
		t.Errorf("Len = %d, want 1", x.Len())
	}

	// A failed Put leaves the old trigger in place.
	bad := trig("t", triggers.NewIssue, Params{})
	bad.Filter = "1 +"
	if err := x.Put(bad); err == nil {
		t.Fatal("Put with a broken filter succeeded")
	}
	wantResults(t, x.Match(event(triggers.NewStar, "octo-org/api", triggers.Resource{})), map[string]string{"t": Matched})

	mustPut(t, x, trig("u", triggers.NewStar, Params{}))
	x.Remove("t")
	x.Remove("missing")
	wantResults(t, x.Match(event(triggers.NewStar, "a/b", triggers.Resource{})), map[string]string{"u": Matched})
	x.Remove("u")
	if x.Len() != 0 || len(x.buckets) != 0 {
		t.Errorf("after removing everything: Len %d, %d buckets left", x.Len(), len(x.buckets))
	}
}

func TestPutRefusesInvalid(t *testing.T) {
	x := sharedIndex()
	for name, tr := range map[string]Trigger{
		"no id":        {Kind: triggers.NewIssue},
		"unknown kind": {ID: "a", Kind: "nope"},
		"bad params":   trig("a", triggers.NewStar, Params{Labels: []string{"x"}}),
	} {
		if err := x.Put(tr); err == nil {
			t.Errorf("%s: Put succeeded", name)
		}
	}
	if x.Len() != 0 {
		t.Errorf("Len = %d after refused Puts", x.Len())
	}
}

func TestPutCopiesParams(t *testing.T) {
	x := sharedIndex()
	p := Params{Labels: []string{"bug"}}
	mustPut(t, x, trig("t", triggers.NewIssue, p))
	p.Labels[0] = "docs"
	wantResults(t, x.Match(issueEvent("a/b", "bug")), map[string]string{"t": Matched})
}

func TestMatchConcurrent(t *testing.T) {
	x := sharedIndex()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				tr := trig(fmt.Sprintf("g%d-%d", g, i), triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}})
				tr.Filter = "event.resource.number == 7"
				if err := x.Put(tr); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					x.Remove(tr.ID)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				for _, o := range x.Match(issueEvent("octo-org/api")) {
					if o.Result != Matched {
						t.Errorf("outcome %+v", o)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if got, want := len(x.Match(issueEvent("octo-org/api"))), x.Len(); got != want {
		t.Errorf("%d outcomes, %d triggers", got, want)
	}
}

// corpusDelivery reads a file of the shared webhook corpus, skipping the
// test loudly when the corpus is absent.
func corpusDelivery(t *testing.T, file string) triggers.Delivery {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Corpus(t), "github", file))
	if err != nil {
		t.Fatal(err)
	}
	ev, _, _ := strings.Cut(file, ".")
	return triggers.Delivery{Connector: triggers.CodeHost, ID: "corpus-1", Event: ev, ReceivedAt: time.Unix(1700000000, 0), Payload: data}
}

func TestMatchCorpus(t *testing.T) {
	x := sharedIndex()
	withFilter := func(tr Trigger, f string) Trigger { tr.Filter = f; return tr }
	mustPut(t, x,
		trig("issue-repo", triggers.NewIssue, Params{Repositories: []string{"codertocat/hello-world"}, Labels: []string{"BUG"}}),
		withFilter(trig("issue-author", triggers.NewIssue, Params{}), "event.payload.issue.user.login == 'Codertocat' && event.resource.number == 1"),
		withFilter(trig("issue-other-author", triggers.NewIssue, Params{}), "event.payload.issue.user.login == 'octocat'"),
		trig("issue-other-repo", triggers.NewIssue, Params{Repositories: []string{"codertocat/other"}}),
		trig("run-success", triggers.WorkflowRunCompleted, Params{Branches: []string{"master"}, Conclusions: []string{"success"}}),
		trig("run-failure", triggers.WorkflowRunCompleted, Params{Conclusions: []string{"failure"}}),
	)
	cases := []struct {
		file string
		want map[string]string
	}{
		{"issues.opened.json", map[string]string{
			"issue-repo": Matched, "issue-author": Matched,
			"issue-other-author": FilteredOut + ": filter: event.payload.issue.user.login == 'octocat' is false",
		}},
		{"workflow_run.completed.json", map[string]string{
			"run-success": Matched, "run-failure": FilteredOut + ": conclusion success not in [failure]",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			res, err := triggers.Map(corpusDelivery(t, tc.file))
			if err != nil || len(res.Events) != 1 {
				t.Fatalf("Map: %d events, %v", len(res.Events), err)
			}
			wantResults(t, x.Match(&res.Events[0]), tc.want)
		})
	}
}

// bigIndex fills an index with n triggers spread over 1,000 repositories and
// every code-hosting kind (with no repository restriction only for the kinds
// that take none); every 25th has a filter, every 7th a labels parameter.
func bigIndex(tb testing.TB, n int) *Index {
	tb.Helper()
	var kinds []triggers.Kind
	for _, info := range triggers.Kinds() {
		if info.Connector == triggers.CodeHost {
			kinds = append(kinds, info.Kind)
		}
	}
	x := sharedIndex()
	for i := 0; i < n; i++ {
		k := kinds[i%len(kinds)]
		tr := trig(fmt.Sprintf("t%07d", i), k, Params{})
		if appliesTo(paramRepositories, k, triggers.CodeHost) {
			tr.Params.Repositories = []string{fmt.Sprintf("org-%d/repo-%d", (i/len(kinds))%100, (i/len(kinds))%1000)}
		}
		if OrgKinds(k) {
			tr.Params.Organization = fmt.Sprintf("org-%d", (i/len(kinds))%100)
		}
		if i%25 == 0 {
			tr.Filter = "event.payload.issue.user.login == 'octocat'"
		}
		if i%7 == 0 && appliesTo(paramLabels, k, triggers.CodeHost) {
			tr.Params.Labels = []string{"bug"}
		}
		mustPut(tb, x, tr)
	}
	// A few unrestricted triggers of the matched kind, as real tenants have.
	for i := 0; i < 5; i++ {
		tr := trig(fmt.Sprintf("w%d", i), triggers.NewIssue, Params{})
		tr.Filter = "event.resource.labels.exists(l, l == 'bug')"
		mustPut(tb, x, tr)
	}
	return x
}

func TestMatchTouchesOnlyTheEventsBuckets(t *testing.T) {
	const n = 100_000
	x := bigIndex(t, n)
	var examined, decoded atomic.Int64
	x.onExamine = func() { examined.Add(1) }
	x.onDecode = func() { decoded.Add(1) }
	ev := issueEvent("ORG-0/repo-0", "bug")

	// The bucket sizes, counted independently of the index.
	want := 0
	x.mu.RLock()
	for _, e := range x.byID {
		if e.t.Kind != triggers.NewIssue {
			continue
		}
		if len(e.repos) == 0 {
			want++
		}
		for _, r := range e.repos {
			if r == "org-0/repo-0" {
				want++
			}
		}
	}
	x.mu.RUnlock()

	out := x.Match(ev)
	if got := examined.Load(); got != int64(want) || len(out) != want {
		t.Errorf("examined %d candidates, %d outcomes; the event's buckets hold %d", got, len(out), want)
	}
	if want > 20 {
		t.Errorf("the event's buckets hold %d of %d triggers; the test set-up spreads them wrongly", want, n)
	}
	if decoded.Load() != 1 {
		t.Errorf("event decoded %d times, want 1", decoded.Load())
	}
	matched := 0
	for _, o := range out {
		if o.Result == Matched {
			matched++
		}
	}
	if matched == 0 {
		t.Errorf("no trigger matched: %v", results(out))
	}
}

func TestScopeAndMentionSources(t *testing.T) {
	x := sharedIndex()
	other := trig("other-tenant", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}})
	other.TenantID = "ten-2"
	otherAccount := trig("other-account", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}})
	otherAccount.Account = "acct-2"
	mustPut(t, x, trig("mine", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}}), other, otherAccount,
		trig("m-wide", triggers.NewMention, Params{}),
		trig("m-repo", triggers.NewMention, Params{Repositories: []string{"octo-org/api"}}))

	ev := issueEvent("octo-org/api")
	if got := results(x.Match(ev)); len(got) != 2 || got["mine"] == "" || got["other-account"] == "" {
		t.Errorf("unscoped event: %v, want the shared tenant's triggers, of any account", got)
	}
	if x.Considers(ev) != true {
		t.Errorf("Considers(unscoped event) = false, want true: the shared tenant has candidates")
	}
	// Without a shared tenant, an unscoped event is no tenant's.
	none := NewIndex("")
	mustPut(t, none, trig("mine", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}}), other)
	if got := none.Match(ev); len(got) != 0 || none.Considers(ev) {
		t.Errorf("unscoped event without a shared tenant: %v, want no candidate", results(got))
	}
	// Nor is it, with one, another tenant's.
	ten2 := NewIndex("ten-2")
	mustPut(t, ten2, trig("mine", triggers.NewIssue, Params{Repositories: []string{"octo-org/api"}}), other)
	if got := results(ten2.Match(ev)); len(got) != 1 || got["other-tenant"] == "" {
		t.Errorf("unscoped event, shared tenant ten-2: %v, want ten-2's trigger only", got)
	}
	ev.Scope = &triggers.Scope{Hook: "h1", Tenant: "ten-1", Account: "acct-1"}
	if got := results(x.Match(ev)); len(got) != 1 || got["mine"] == "" {
		t.Errorf("scoped event: %v, want only the hook's tenant and account", got)
	}

	m := event(triggers.NewMention, "octo-org/api", triggers.Resource{Type: "mention", Mentioned: "octocat"})
	m.Scope = &triggers.Scope{Hook: "h1", Tenant: "ten-1", Account: "acct-1"}
	if got := results(x.Match(m)); len(got) != 1 || got["m-repo"] == "" {
		t.Errorf("webhook mention: %v, want the repository trigger only", got)
	}
	m.Scope = &triggers.Scope{Hook: triggers.PolledHookPrefix + "acct-1", Tenant: "ten-1", Account: "acct-1"}
	if got := results(x.Match(m)); len(got) != 1 || got["m-wide"] == "" {
		t.Errorf("polled mention: %v, want the account-wide trigger only", got)
	}
	// A replay widens the scope to the tenant and keeps the mention's
	// source.
	m.Scope = ReplayScope("ten-1", m.Scope)
	if got := results(x.Match(m)); len(got) != 1 || got["m-wide"] == "" {
		t.Errorf("replayed polled mention: %v, want the account-wide trigger only", got)
	}
}

func TestInactiveAndOrganization(t *testing.T) {
	x := sharedIndex()
	removed := trig("removed", triggers.NewRepository, Params{Organization: "octo-org"})
	removed.Inactive, removed.InactiveCode = "account acct-1 was removed", "account_removed"
	mustPut(t, x, removed, trig("org", triggers.NewRepository, Params{Organization: "Octo-Org"}),
		trig("elsewhere", triggers.NewRepository, Params{Organization: "other-org"}))
	got := results(x.Match(event(triggers.NewRepository, "octo-org/new", triggers.Resource{Type: "repository"})))
	if got["removed"] != "account_removed: account acct-1 was removed" || got["org"] != "matched" ||
		got["elsewhere"] != "filtered_out: organization octo-org is not other-org" {
		t.Errorf("outcomes = %v", got)
	}
}

// new_repository has two sources, kept apart like new_mention's: a
// trigger without an organisation takes the poller's events of the
// account's own repositories, one with an organisation its hook's.
func TestNewRepositorySources(t *testing.T) {
	x := NewIndex("")
	mustPut(t, x, trig("own", triggers.NewRepository, Params{}), trig("org", triggers.NewRepository, Params{Organization: "octo-org"}))
	hooked := event(triggers.NewRepository, "octo-org/new", triggers.Resource{Type: "repository"})
	hooked.Scope = &triggers.Scope{Hook: "h1", Tenant: "ten-1", Account: "acct-1"}
	if got := results(x.Match(hooked)); len(got) != 1 || got["org"] != Matched {
		t.Errorf("organisation hook's event: %v, want the organisation trigger only", got)
	}
	polled := event(triggers.NewRepository, "octocat/new", triggers.Resource{Type: "repository"})
	polled.Account = "octocat"
	polled.Scope = &triggers.Scope{Hook: triggers.PolledHookPrefix + "acct-1", Tenant: "ten-1", Account: "acct-1"}
	if got := results(x.Match(polled)); len(got) != 1 || got["own"] != Matched {
		t.Errorf("polled event: %v, want the personal trigger only", got)
	}
}

// A kind that takes repositories, given none, is on all of them; except
// new_mention, whose account-wide form is the account's own mentions.
func TestAllRepositories(t *testing.T) {
	for k, want := range map[triggers.Kind]bool{
		triggers.NewIssue: true, triggers.NewPush: true, triggers.WorkflowRunCompleted: true,
		triggers.NewMention: false, triggers.NewRepository: false, triggers.NewGist: false, triggers.DeploymentFailed: false,
	} {
		if got := AllRepositories(k, Params{}); got != want {
			t.Errorf("AllRepositories(%s, none) = %v, want %v", k, got, want)
		}
	}
	if AllRepositories(triggers.NewIssue, Params{Repositories: []string{"a/b"}}) {
		t.Error("a trigger with repositories is on all of them")
	}
	if err := ValidateParams(triggers.NewRepository, Params{}); err != nil {
		t.Errorf("new_repository without an organisation: %v, want valid (polled)", err)
	}
	if err := ValidateParams(triggers.ProjectItemStatusChanged, Params{}); err == nil || !strings.Contains(err.Error(), "organization") {
		t.Errorf("project_item_status_changed without an organisation: %v, want an error naming the parameter", err)
	}
}
