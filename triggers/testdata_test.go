package triggers

import (
	"fmt"
	"testing"

	"github.com/triggerd/triggerd/internal/testenv"
)

// projectCases names every file of the project's own webhook testdata
// (../testdata/webhooks), which covers what the shared corpus lacks.
var projectCases = []fileCase{
	{name: "github/commit_comment.created.json", kinds: ks(NewMention), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "mention", ID: "141209876",
			URL: "https://github.com/octo-org/octo-repo/commit/9f1c2b7d3e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c#commitcomment-141209876",
			SHA: "9f1c2b7d3e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c", Author: "monalisa", Mentioned: "hubot"})
	}},
	{name: "github/issues.closed.json", kinds: ks(UpdatedIssue), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "issue", ID: "2279301245", Number: 42, Title: "Webhook retries flood the queue",
			URL: "https://github.com/octo-org/octo-repo/issues/42", State: "closed", Labels: []string{"bug", "area/ingest"}, Author: "hubot"})
	}},
	// The body mentions two people once each; everything else in it is an
	// exclusion (quote, code span, e-mail, team, URL, fence, the sender).
	{name: "github/issues.opened.dotted-repo.json", kinds: ks(NewIssue, NewMention, NewMention),
		subject: "triggers.codehost.new_issue.socketio.socket%2Eio",
		check: func(t *testing.T, res Result) {
			for i, want := range []string{"maintainer-one", "helper2"} {
				e := res.Events[1+i]
				wantResource(t, e, Resource{Type: "mention", ID: "2301122334", Number: 5123, Title: "Reconnect loop behind a proxy",
					URL: "https://github.com/socketio/socket.io/issues/5123", Author: "octo-reporter", Mentioned: want})
				if got := e.Subject(); got != "triggers.codehost.new_mention.socketio.socket%2Eio" {
					t.Errorf("subject %q", got)
				}
			}
		}},
	{name: "github/projects_v2_item.edited.priority.json",
		ignored: `event "projects_v2_item" action "edited" changes field "Priority", not Status`},
	{name: "github/projects_v2_item.edited.status.json", kinds: ks(ProjectItemStatusChanged),
		subject: "triggers.codehost.project_item_status_changed.octo-org.~",
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "project_item", ID: "91734588", Title: "Issue",
				Field: "Status", FieldID: "PVTSSF_lADOAGfTyM4AgW3xzgZSTA", From: "Todo", To: "In Progress"})
		}},
	{name: "github/pull_request.opened.draft.json",
		ignored: `event "pull_request" action "opened" on a draft, without new mentions, maps to no trigger kind`},
	{name: "github/pull_request.review_requested.team.json", kinds: ks(NewReviewRequest), check: func(t *testing.T, res Result) {
		if got := res.Events[0].Resource.Reviewer; got != "octo-org/reviewers" {
			t.Errorf("reviewer %q", got)
		}
	}},
	{name: "github/pull_request_review.submitted.changes_requested.json", kinds: ks(NewPullRequestReview, NewMention),
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "review", ID: "2031998877", Number: 7, Title: "Deduplicate retried deliveries",
				URL:         "https://github.com/octo-org/octo-repo/pull/7#pullrequestreview-2031998877",
				ReviewState: "changes_requested", Author: "hubot", SHA: "9f1c2b7d3e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c", Ref: "feature/retry-dedupe"})
			wantResource(t, res.Events[1], Resource{Type: "mention", ID: "2031998877", Number: 7, Title: "Deduplicate retried deliveries",
				URL: "https://github.com/octo-org/octo-repo/pull/7#pullrequestreview-2031998877", Author: "hubot", Mentioned: "merge-bot"})
		}},
	{name: "github/pull_request_review_comment.created.json", kinds: ks(NewComment, NewMention), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "comment", ID: "1590011223", Number: 7, Title: "Deduplicate retried deliveries",
			URL: "https://github.com/octo-org/octo-repo/pull/7#discussion_r1590011223", Author: "hubot"})
		if got := res.Events[1].Resource.Mentioned; got != "monalisa" {
			t.Errorf("mentioned %q", got)
		}
	}},
	{name: "github/push.branch-deleted.json", ignored: `event "push" deleting "refs/heads/feature/retry-dedupe" maps to no trigger kind`},

	// vercel/, the documented payload shape, from a team.
	{name: "vercel/deployment.canceled.json", kinds: ks(DeploymentCanceled), check: func(t *testing.T, res Result) {
		if r := res.Events[0].Resource; r.State != "canceled" || r.Target != PreviewTarget {
			t.Errorf("state %q target %q", r.State, r.Target)
		}
	}},
	// A deployment without Git metadata has no repository.
	{name: "vercel/deployment.error.json", kinds: ks(DeploymentFailed), check: func(t *testing.T, res Result) {
		e := res.Events[0]
		if e.Repository != nil || e.Resource.State != "error" || e.Resource.SHA != "" {
			t.Errorf("repository %v state %q sha %q", e.Repository, e.Resource.State, e.Resource.SHA)
		}
	}},
	{name: "vercel/deployment.promoted.json", ignored: `type "deployment.promoted" maps to no trigger kind`},
	{name: "vercel/deployment.ready.json", kinds: ks(DeploymentCompleted)},
	{name: "vercel/deployment.succeeded.json", kinds: ks(DeploymentCompleted),
		subject: "triggers.deploy.deployment_completed.team_4FWx4KQJcJ1kSNRMcSkPe9NZ.prj_8Qy2mVtZ4rWnXoFh3DkLcAp1",
		check: func(t *testing.T, res Result) {
			e := res.Events[0]
			if res.DeliveryID != "uev_dW1jcEtbnx6tYtLd3YWvQ8Jm" || e.DeliveryID != res.DeliveryID {
				t.Errorf("delivery id %q / %q", res.DeliveryID, e.DeliveryID)
			}
			wantResource(t, e, Resource{Type: "deployment", ID: "dpl_7Hk2PmQxW3rT9sVbN4cJ5eLa",
				URL:           "https://vercel.com/octo-org/triggerd-console/7Hk2PmQxW3rT9sVbN4cJ5eLa",
				DeploymentURL: "https://triggerd-console-7hk2pmqxw-octo-org.vercel.app", Target: "production",
				Project: "prj_8Qy2mVtZ4rWnXoFh3DkLcAp1", ProjectName: "triggerd-console", State: "ready",
				SHA: "c0ffee1234567890abcdef1234567890abcdef12", Ref: "main", Title: "Show delivery ids in the log view"})
			if e.Repository == nil || *e.Repository != (Repository{Owner: "octo-org", Name: "octo-console", FullName: "octo-org/octo-console"}) {
				t.Errorf("repository %v", e.Repository)
			}
			if e.Account != "team_4FWx4KQJcJ1kSNRMcSkPe9NZ" || e.Sender != "Mwhe9k2YJNvZ0HcvCfR7Kx3p" {
				t.Errorf("account %q sender %q", e.Account, e.Sender)
			}
		}},
}

// TestMapProjectTestdata maps every file of ../testdata/webhooks.
func TestMapProjectTestdata(t *testing.T) {
	runFileTable(t, projectDir, projectCases)
}

// TestMapBigPush checks the largest push a payload can describe: one
// new_push and 2,048 new_commit events, all with distinct ids.
func TestMapBigPush(t *testing.T) {
	const n = 2048
	res := mapChecked(t, Delivery{Connector: CodeHost, ID: testDeliveryID, Event: "push", ReceivedAt: testReceivedAt, Payload: testenv.Push(n)})
	if len(res.Events) != n+1 {
		t.Fatalf("%d events, want %d", len(res.Events), n+1)
	}
	if res.Events[0].Kind != NewPush {
		t.Errorf("first event %s, want new_push", res.Events[0].Kind)
	}
	ids := map[string]bool{}
	for i, e := range res.Events[1:] {
		if e.Kind != NewCommit {
			t.Fatalf("event %d is %s", i+1, e.Kind)
		}
		if want := fmt.Sprintf("%040x", i+1); e.Resource.SHA != want || e.Resource.Title != fmt.Sprintf("Import batch %d", i) {
			t.Fatalf("event %d: sha %s title %q: commits out of order", i+1, e.Resource.SHA, e.Resource.Title)
		}
		ids[e.ID] = true
	}
	if len(ids) != n {
		t.Errorf("%d distinct commit event ids, want %d", len(ids), n)
	}
}

// TestEveryWebhookKindProduced checks that the corpus and the project
// testdata together produce every kind a webhook can deliver, and never
// new_gist, which no webhook delivers.
func TestEveryWebhookKindProduced(t *testing.T) {
	corpusDir(t) // the test needs both sets of files
	produced := map[Kind]bool{}
	for name, d := range allFileDeliveries(t) {
		res, err := Map(d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, e := range res.Events {
			produced[e.Kind] = true
		}
	}
	for _, k := range Kinds() {
		if k.Webhook != produced[k.Kind] {
			t.Errorf("kind %s: webhook %v, produced by the test files %v", k.Kind, k.Webhook, produced[k.Kind])
		}
	}
}
