package triggers

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestMapPayloadErrors(t *testing.T) {
	tests := []struct {
		name      string
		connector Connector
		event     string
		payload   string
		reason    string // substring of the error's reason
	}{
		{name: "empty body", connector: CodeHost, event: "issues", payload: "", reason: "empty body"},
		{name: "blank body", connector: CodeHost, event: "issues", payload: " \r\n\t", reason: "empty body"},
		{name: "null", connector: CodeHost, event: "issues", payload: "null", reason: "not a JSON object"},
		{name: "array", connector: CodeHost, event: "push", payload: `[{"ref":"refs/heads/main"}]`, reason: "not a JSON object"},
		{name: "string", connector: CodeHost, event: "ping", payload: `"zen"`, reason: "not a JSON object"},
		{name: "number", connector: Deploy, payload: `42`, reason: "not a JSON object"},
		{name: "truncated", connector: CodeHost, event: "issues", payload: `{"action":"opened"`, reason: "unexpected end of JSON input"},
		{name: "trailing garbage", connector: CodeHost, event: "issues", payload: `{"action":"opened"} x`, reason: "invalid character"},
		{name: "deploy without id", connector: Deploy, payload: `{"type":"deployment.created","payload":{}}`, reason: `lacks a string "id"`},
		{name: "deploy with numeric id", connector: Deploy, payload: `{"id":7,"type":"deployment.created","payload":{}}`, reason: `lacks a string "id"`},
		{name: "deploy without type", connector: Deploy, payload: `{"id":"uev_1","payload":{}}`, reason: `lacks a string "type"`},
		{name: "deploy without payload", connector: Deploy, payload: `{"id":"uev_1","type":"deployment.error"}`, reason: `lacks "payload"`},
		{name: "issue opened without issue", connector: CodeHost, event: "issues", payload: `{"action":"opened"}`, reason: `event "issues" lacks "issue"`},
		{name: "pull request without pull_request", connector: CodeHost, event: "pull_request", payload: `{"action":"closed"}`, reason: `lacks "pull_request"`},
		{name: "comment without comment", connector: CodeHost, event: "issue_comment", payload: `{"action":"created","issue":{}}`, reason: `lacks "comment"`},
		{name: "review without review", connector: CodeHost, event: "pull_request_review", payload: `{"action":"submitted","pull_request":{}}`, reason: `lacks "review"`},
		{name: "push without ref", connector: CodeHost, event: "push", payload: `{"commits":[]}`, reason: `lacks "ref"`},
		{name: "fork without forkee", connector: CodeHost, event: "fork", payload: `{}`, reason: `lacks "forkee"`},
		{name: "run without run", connector: CodeHost, event: "workflow_run", payload: `{"action":"completed"}`, reason: `lacks "workflow_run"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Map(Delivery{Connector: tc.connector, ID: "d1", Event: tc.event, Payload: []byte(tc.payload)})
			var pe *PayloadError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *PayloadError", err, err)
			}
			if !strings.Contains(pe.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", pe.Reason, tc.reason)
			}
			if got := err.Error(); got != "malformed payload: "+pe.Reason {
				t.Errorf("Error() = %q", got)
			}
			if len(res.Events) != 0 {
				t.Errorf("%d events with an error", len(res.Events))
			}
		})
	}
}

func TestMapUnknownConnector(t *testing.T) {
	_, err := Map(Delivery{Connector: "chat", Payload: []byte(`{}`)})
	var pe *PayloadError
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("error %v, want a non-payload error", err)
	}
}

// repo is a minimal repository object for inline payloads.
const repo = `"repository":{"id":1,"name":"Hello-World","full_name":"Octo/Hello-World","owner":{"login":"Octo"}},"sender":{"login":"mona"}`

func TestMapRules(t *testing.T) {
	tests := []struct {
		name    string
		event   string
		payload string
		kinds   []Kind
		ignored string
		check   func(t *testing.T, res Result)
	}{
		{name: "unknown event", event: "gollum", payload: `{"pages":[]}`,
			ignored: `event "gollum" action "" maps to no trigger kind`},
		{name: "issues action outside the list", event: "issues", payload: `{"action":"milestoned","issue":{"id":1}}`,
			ignored: `event "issues" action "milestoned" maps to no trigger kind`},
		{name: "ignored action needs no object", event: "pull_request", payload: `{"action":"auto_merge_enabled"}`,
			ignored: `event "pull_request" action "auto_merge_enabled" maps to no trigger kind`},
		{name: "issue_comment edited", event: "issue_comment", payload: `{"action":"edited","issue":{},"comment":{"body":"@a"}}`,
			ignored: `event "issue_comment" action "edited" maps to no trigger kind`},
		{name: "create of another ref type", event: "create", payload: `{"ref":"x","ref_type":"repository",` + repo + `}`,
			ignored: `event "create" ref_type "repository" maps to no trigger kind`},
		{name: "transferred issue: new here, but its text is not new", event: "issues",
			payload: `{"action":"opened","changes":{"old_issue":{"id":8,"body":"@a"},"old_repository":{"id":1}},` +
				`"issue":{"id":9,"number":3,"title":"T","html_url":"u","body":"@a"},` + repo + `}`,
			kinds: ks(NewIssue)},
		{name: "issue opened with mentions", event: "issues",
			payload: `{"action":"opened","issue":{"id":9,"number":3,"title":"T","html_url":"u","body":"@a @b\n> @c\n@A @mona @d"},` + repo + `}`,
			kinds:   ks(NewIssue, NewMention, NewMention, NewMention),
			check: func(t *testing.T, res Result) {
				var got []string
				for _, e := range res.Events[1:] {
					got = append(got, e.Resource.Mentioned)
				}
				if !slices.Equal(got, []string{"a", "b", "d"}) {
					t.Errorf("mentioned %q", got)
				}
			}},
		{name: "draft opened with a mention", event: "pull_request",
			payload: `{"action":"opened","pull_request":{"id":5,"number":2,"draft":true,"body":"cc @reviewer"},` + repo + `}`,
			kinds:   ks(NewMention)},
		{name: "pull request opened, draft false", event: "pull_request",
			payload: `{"action":"opened","pull_request":{"id":5,"number":2,"draft":false,"body":null},` + repo + `}`,
			kinds:   ks(NewPullRequest)},
		{name: "ready for review", event: "pull_request", payload: `{"action":"ready_for_review","pull_request":{"id":5},` + repo + `}`,
			kinds: ks(NewPullRequest, UpdatedPullRequest)},
		{name: "merged pull request", event: "pull_request",
			payload: `{"action":"closed","pull_request":{"id":5,"state":"closed","merged":true,"head":{"ref":"topic","sha":"abc"}},` + repo + `}`,
			kinds:   ks(UpdatedPullRequest),
			check: func(t *testing.T, res Result) {
				if r := res.Events[0].Resource; !r.Merged || r.Ref != "topic" || r.SHA != "abc" || r.State != "closed" {
					t.Errorf("resource %+v", r)
				}
			}},
		{name: "review with null body", event: "pull_request_review",
			payload: `{"action":"submitted","review":{"id":1,"state":"APPROVED","body":null},"pull_request":{"number":4},` + repo + `}`,
			kinds:   ks(NewPullRequestReview),
			check: func(t *testing.T, res Result) {
				if got := res.Events[0].Resource.ReviewState; got != "approved" {
					t.Errorf("review state %q, want lower case", got)
				}
			}},
		{name: "review dismissed", event: "pull_request_review", payload: `{"action":"dismissed"}`,
			ignored: `event "pull_request_review" action "dismissed" maps to no trigger kind`},
		{name: "commit comment without mention", event: "commit_comment",
			payload: `{"action":"created","comment":{"id":1,"body":"LGTM"},` + repo + `}`,
			ignored: `event "commit_comment" action "created" has no new mention`},
		{name: "discussion comment with mentions", event: "discussion_comment",
			payload: `{"action":"created","discussion":{"number":1,"title":"Q"},"comment":{"id":2,"body":"@x and @y"},` + repo + `}`,
			kinds:   ks(NewDiscussionComment, NewMention, NewMention)},
		{name: "push of non-distinct commits only", event: "push",
			payload: `{"ref":"refs/heads/main","after":"b","commits":[{"id":"a","distinct":false}],` + repo + `}`,
			kinds:   ks(NewPush)},
		{name: "push commit author without username", event: "push",
			payload: `{"ref":"refs/heads/main","commits":[{"id":"a","distinct":true,"message":"fix\r\n\r\nbody","author":{"name":"Mona Lisa"}}],` + repo + `}`,
			kinds:   ks(NewPush, NewCommit),
			check: func(t *testing.T, res Result) {
				if r := res.Events[1].Resource; r.Author != "Mona Lisa" || r.Title != "fix" || r.Ref != "main" {
					t.Errorf("resource %+v", r)
				}
			}},
		{name: "push of another ref kind keeps the ref", event: "push",
			payload: `{"ref":"refs/notes/commits","after":"b",` + repo + `}`,
			kinds:   ks(NewPush),
			check: func(t *testing.T, res Result) {
				if got := res.Events[0].Resource.Ref; got != "refs/notes/commits" {
					t.Errorf("ref %q", got)
				}
			}},
		{name: "status field in lower case", event: "projects_v2_item",
			payload: `{"action":"edited","projects_v2_item":{"id":3,"content_type":"PullRequest"},"changes":{"field_value":{"field_type":"single_select","field_name":"status","from":null,"to":{"id":"x","name":"Done"}}},"organization":{"login":"Org"}}`,
			kinds:   ks(ProjectItemStatusChanged),
			check: func(t *testing.T, res Result) {
				wantResource(t, res.Events[0], Resource{Type: "project_item", ID: "3", Title: "PullRequest", Field: "Status", To: "Done"})
				if got := res.Events[0].Subject(); got != "triggers.codehost.project_item_status_changed.org.~" {
					t.Errorf("subject %q", got)
				}
			}},
		{name: "text field edited", event: "projects_v2_item",
			payload: `{"action":"edited","projects_v2_item":{"id":3},"changes":{"field_value":{"field_type":"text","field_name":"Notes"}}}`,
			ignored: `event "projects_v2_item" action "edited" changes no single-select field`},
		{name: "item edited without changes", event: "projects_v2_item",
			payload: `{"action":"edited","projects_v2_item":{"id":3}}`,
			ignored: `event "projects_v2_item" action "edited" changes no single-select field`},
		{name: "values of unexpected types are absent", event: "issues",
			payload: `{"action":"opened","issue":{"id":"12","number":1.5,"title":7,"labels":"bug","user":{"login":"mona"}},"repository":"Octo/Hello-World","sender":[]}`,
			kinds:   ks(NewIssue),
			check: func(t *testing.T, res Result) {
				e := res.Events[0]
				wantResource(t, e, Resource{Type: "issue", Author: "mona"})
				if e.Repository != nil || e.Sender != "" {
					t.Errorf("repository %v sender %q", e.Repository, e.Sender)
				}
			}},
		{name: "an object of another type reads as empty", event: "issues", payload: `{"action":"closed","issue":"#1",` + repo + `}`,
			kinds: ks(UpdatedIssue),
			check: func(t *testing.T, res Result) {
				wantResource(t, res.Events[0], Resource{Type: "issue"})
			}},
		{name: "repository owner and name from full_name", event: "star",
			payload: `{"action":"created","repository":{"full_name":"Octo/Hello-World"}}`,
			kinds:   ks(NewStar),
			check: func(t *testing.T, res Result) {
				if r := res.Events[0].Repository; r == nil || *r != (Repository{Owner: "Octo", Name: "Hello-World", FullName: "Octo/Hello-World"}) {
					t.Errorf("repository %v", r)
				}
			}},
		{name: "large ids in decimal", event: "issues",
			payload: `{"action":"closed","issue":{"id":9007199254740993,"number":123456789012},` + repo + `}`,
			kinds:   ks(UpdatedIssue),
			check: func(t *testing.T, res Result) {
				if r := res.Events[0].Resource; r.ID != "9007199254740993" || r.Number != 123456789012 {
					t.Errorf("id %q number %d", r.ID, r.Number)
				}
			}},
		{name: "account falls back to the organization", event: "member",
			payload: `{"action":"added","member":{"login":"new-hire","id":4},"organization":{"login":"Octo-Org"},"sender":{"login":"admin"}}`,
			kinds:   ks(NewCollaborator),
			check: func(t *testing.T, res Result) {
				if e := res.Events[0]; e.Account != "Octo-Org" || e.Repository != nil {
					t.Errorf("account %q repository %v", e.Account, e.Repository)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mapChecked(t, Delivery{Connector: CodeHost, ID: "delivery-1", Event: tc.event, ReceivedAt: testReceivedAt, Payload: []byte(tc.payload)})
			checkKinds(t, res, tc.kinds)
			if tc.ignored != "" && res.Ignored != tc.ignored {
				t.Errorf("Ignored %q, want %q", res.Ignored, tc.ignored)
			}
			if tc.check != nil && !t.Failed() {
				tc.check(t, res)
			}
		})
	}
}

func TestMapDeployShapes(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		account string
		repo    *Repository
		want    Resource
	}{
		{name: "team null: the user's account; a null target is a preview, a bare host an https URL",
			payload: `{"id":"uev_1","type":"deployment.succeeded","payload":{"team":null,"user":{"id":"usr"},"project":{"id":"prj"},"deployment":{"id":"dpl_1","url":"a.vercel.app","name":"site"},"links":{"deployment":"https://v/d"},"target":null}}`,
			account: "usr",
			want:    Resource{Type: "deployment", ID: "dpl_1", URL: "https://v/d", DeploymentURL: "https://a.vercel.app", Project: "prj", ProjectName: "site", Target: "preview", State: "ready"},
		},
		{name: "empty team id: the user's account",
			payload: `{"id":"uev_1","type":"deployment.canceled","payload":{"team":{"id":""},"user":{"id":"usr"},"project":{"id":"prj"}}}`,
			account: "usr",
			want:    Resource{Type: "deployment", Project: "prj", Target: "preview", State: "canceled"},
		},
		{name: "old shape, top-level url, name and ids",
			payload: `{"id":"uev_1","type":"deployment.error","payload":{"deploymentId":"dpl_2","url":"b.now.sh","name":"old","project":"old","projectId":"Qm1","user":{"id":"usr"},"target":"production"}}`,
			account: "usr",
			want:    Resource{Type: "deployment", ID: "dpl_2", DeploymentURL: "https://b.now.sh", Project: "Qm1", ProjectName: "old", Target: "production", State: "error"},
		},
		{name: "repository from the commit org and repo",
			payload: `{"id":"uev_1","type":"deployment.created","payload":{"team":{"id":"team_1"},"project":{"id":"prj"},"deployment":{"id":"dpl_3","meta":{"githubCommitOrg":"Octo","githubCommitRepo":"site","githubCommitRef":"main"}}}}`,
			account: "team_1",
			repo:    &Repository{Owner: "Octo", Name: "site", FullName: "Octo/site"},
			want:    Resource{Type: "deployment", ID: "dpl_3", Project: "prj", Target: "preview", State: "building", Ref: "main"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mapChecked(t, Delivery{Connector: Deploy, ReceivedAt: testReceivedAt, Payload: []byte(tc.payload)})
			if len(res.Events) != 1 {
				t.Fatalf("%d events (ignored %q)", len(res.Events), res.Ignored)
			}
			e := res.Events[0]
			wantResource(t, e, tc.want)
			if e.Account != tc.account {
				t.Errorf("account %q, want %q", e.Account, tc.account)
			}
			if (e.Repository == nil) != (tc.repo == nil) || (e.Repository != nil && *e.Repository != *tc.repo) {
				t.Errorf("repository %v, want %v", e.Repository, tc.repo)
			}
		})
	}
}

// allFileDeliveries returns a delivery for every project testdata file and,
// when the corpus is present, every corpus file; an absent corpus is logged
// loudly (and fails with CI=true).
func allFileDeliveries(tb testing.TB) map[string]Delivery {
	tb.Helper()
	out := map[string]Delivery{}
	dirs := []string{projectDir}
	// The project's own files are enough here; the corpus adds more seeds.
	if _, err := os.Stat(corpusPath); err == nil {
		dirs = append(dirs, corpusPath)
	} else {
		tb.Logf("the shared corpus at %s is absent; using only the project's files", corpusPath)
	}
	for _, dir := range dirs {
		for _, sub := range []string{"github", "vercel"} {
			for _, n := range jsonFiles(tb, dir, sub) {
				out[dir+"/"+sub+"/"+n] = fileDelivery(tb, dir, sub, n)
			}
		}
	}
	return out
}

// TestMapDeterministic maps every file twice with the same delivery id and
// once with another: the same id gives the same event ids, another gives
// other ones.
func TestMapDeterministic(t *testing.T) {
	for name, d := range allFileDeliveries(t) {
		t.Run(name, func(t *testing.T) {
			a, err := Map(d)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Map(d)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Events) != len(b.Events) {
				t.Fatalf("%d then %d events", len(a.Events), len(b.Events))
			}
			for i := range a.Events {
				if a.Events[i].ID != b.Events[i].ID {
					t.Errorf("event %d: id %s then %s", i, a.Events[i].ID, b.Events[i].ID)
				}
			}
			other := d
			if d.Connector == Deploy {
				other.Payload = bytes.Replace(d.Payload, []byte(`"`+a.DeliveryID+`"`), []byte(`"uev_other"`), 1)
			} else {
				other.ID = "8e0c7a3c-0000-11ef-8000-000000000000"
			}
			c, err := Map(other)
			if err != nil {
				t.Fatal(err)
			}
			if c.DeliveryID == a.DeliveryID {
				t.Fatalf("delivery id unchanged: %q", c.DeliveryID)
			}
			seen := map[string]bool{}
			for _, e := range a.Events {
				seen[e.ID] = true
			}
			for i, e := range c.Events {
				if seen[e.ID] {
					t.Errorf("event %d: id %s also produced for another delivery", i, e.ID)
				}
			}
		})
	}
}

// TestLabelChangesSayWhichLabel: a labeled or unlabeled update carries the
// label added or removed, beside the labels after it.
func TestLabelChangesSayWhichLabel(t *testing.T) {
	for _, tc := range []struct{ event, payload string }{
		{"issues", `{"action":"unlabeled","label":{"name":"p1"},"issue":{"id":1,"number":2,"labels":[{"name":"bug"}]},"repository":{"name":"r","owner":{"login":"o"}}}`},
		{"pull_request", `{"action":"labeled","label":{"name":"p1"},"pull_request":{"id":1,"number":2,"labels":[{"name":"p1"}]},"repository":{"name":"r","owner":{"login":"o"}}}`},
		{"pull_request", `{"action":"unlabeled","label":{"name":"p1"},"pull_request":{"id":1,"number":2,"labels":[]},"repository":{"name":"r","owner":{"login":"o"}}}`},
	} {
		res, err := Map(Delivery{Connector: CodeHost, ID: "d", Event: tc.event, ReceivedAt: testReceivedAt, Payload: []byte(tc.payload)})
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("%s: %v %+v", tc.payload, err, res)
		}
		if got := res.Events[0].Resource.Label; got != "p1" {
			t.Errorf("%s: label %q, want p1", tc.payload, got)
		}
	}
}

// TestMapSelfMention maps the corpus comment in which the commenter
// mentions themself: a new_comment, and no new_mention of the sender.
func TestMapSelfMention(t *testing.T) {
	d := fileDelivery(t, corpusDir(t), "github", "issue_comment.created.mention.json")
	if got := kindsOf(mapChecked(t, d)); !slices.Equal(got, ks(NewComment)) {
		t.Errorf("kinds %v, want [new_comment]", got)
	}
}
