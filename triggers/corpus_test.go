package triggers

import (
	"testing"
)

// corpusCases names every file of the shared webhook corpus with the kinds
// it must map to. A corpus file missing from this table fails the test, so
// new corpus files are noticed.
var corpusCases = []fileCase{
	{name: "github/create.branch.json", kinds: ks(NewBranch), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "branch", Title: "feature-branch", Ref: "feature-branch", RefType: "branch", Author: "bradrydzewski"})
	}},
	{name: "github/create.tag.json", kinds: ks(NewTag), subject: "triggers.codehost.new_tag.codertocat.hello-world",
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "tag", Title: "simple-tag", Ref: "simple-tag", RefType: "tag", Author: "Codertocat"})
		}},
	{name: "github/discussion.created.json", kinds: ks(NewDiscussion), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "discussion", ID: "3299614", Number: 4, Title: "TEST edit",
			URL: "https://github.com/Codertocat/Hello-World/discussions/4", State: "converting", Author: "Codertocat"})
	}},
	{name: "github/discussion_comment.created.json", kinds: ks(NewDiscussionComment), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "discussion_comment", ID: "550062", Number: 4, Title: "TEST edit",
			URL: "https://github.com/Codertocat/Hello-World/discussions/4#discussioncomment-550062", Author: "Codertocat"})
	}},
	{name: "github/fork.json", kinds: ks(NewFork), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "fork", ID: "186853261", Title: "Octocoders/Hello-World",
			URL: "https://github.com/Octocoders/Hello-World", Author: "Octocoders"})
		if e := res.Events[0]; e.Account != "Codertocat" || e.Sender != "Octocoders" || e.Action != "" {
			t.Errorf("account %q sender %q action %q", e.Account, e.Sender, e.Action)
		}
	}},
	{name: "github/issue_comment.created.json", kinds: ks(NewComment)},
	// The commenter mentions only themself: no new_mention.
	{name: "github/issue_comment.created.mention.json", kinds: ks(NewComment), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "comment", ID: "945092714", Number: 7, Title: "test",
			URL: "https://github.com/abeyuya/github-actions-test/issues/7#issuecomment-945092714", Author: "abeyuya"})
	}},
	{name: "github/issue_comment.created.on-pull-request.json", kinds: ks(NewComment)},
	{name: "github/issues.assigned.json", kinds: ks(UpdatedIssue)},
	{name: "github/issues.edited.json", kinds: ks(UpdatedIssue)},
	{name: "github/issues.labeled.json", kinds: ks(UpdatedIssue, NewIssueLabel), check: func(t *testing.T, res Result) {
		issue := Resource{Type: "issue", ID: "444500041", Number: 1, Title: "Spelling error in the README file",
			URL: "https://github.com/Codertocat/Hello-World/issues/1", State: "open", Label: "bug", Labels: []string{"bug"}, Author: "Codertocat"}
		// Both say which label was added: an update is otherwise told
		// from any other only by the labels after it.
		wantResource(t, res.Events[0], issue)
		wantResource(t, res.Events[1], issue)
	}},
	{name: "github/issues.opened.json", kinds: ks(NewIssue), subject: "triggers.codehost.new_issue.codertocat.hello-world",
		check: func(t *testing.T, res Result) {
			e := res.Events[0]
			wantResource(t, e, Resource{Type: "issue", ID: "444500041", Number: 1, Title: "Spelling error in the README file",
				URL: "https://github.com/Codertocat/Hello-World/issues/1", State: "open", Labels: []string{"bug"}, Author: "Codertocat"})
			if *e.Repository != (Repository{Owner: "Codertocat", Name: "Hello-World", FullName: "Codertocat/Hello-World"}) {
				t.Errorf("repository %+v", *e.Repository)
			}
			if e.Account != "Codertocat" || e.Sender != "Codertocat" || e.Action != "opened" || e.SourceEvent != "issues" {
				t.Errorf("account %q sender %q action %q source %q", e.Account, e.Sender, e.Action, e.SourceEvent)
			}
		}},
	{name: "github/issues.reopened.json", kinds: ks(UpdatedIssue)},
	{name: "github/member.added.json", kinds: ks(NewCollaborator), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "collaborator", ID: "39652351", Title: "hacktocat",
			URL: "https://github.com/hacktocat", Author: "hacktocat"})
	}},
	{name: "github/ping.app.json", ignored: "ping"},
	{name: "github/ping.json", ignored: "ping"},
	{name: "github/ping.organization.json", ignored: "ping"},
	{name: "github/project_card.created.json", kinds: ks(NewProjectCard), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "project_card", ID: "21567453", ColumnID: 5368157,
			Title: "Work that can be completed in one hour or less.", Author: "Codertocat"})
	}},
	{name: "github/projects_v2_item.created.json", ignored: `event "projects_v2_item" action "created" maps to no trigger kind`},
	// The old payload shape: no field_name, so Field stays empty.
	{name: "github/projects_v2_item.edited.json", kinds: ks(ProjectItemStatusChanged),
		subject: "triggers.codehost.project_item_status_changed.octocoders.~",
		check: func(t *testing.T, res Result) {
			e := res.Events[0]
			wantResource(t, e, Resource{Type: "project_item", ID: "5678510", Title: "DraftIssue", FieldID: "PVTF_lADOAWcTxs07G84AAali"})
			if e.Repository != nil || e.Account != "Octocoders" || e.Sender != "wolfy1339" {
				t.Errorf("repository %v account %q sender %q", e.Repository, e.Account, e.Sender)
			}
		}},
	{name: "github/pull_request.closed.json", kinds: ks(UpdatedPullRequest)},
	{name: "github/pull_request.converted_to_draft.json", kinds: ks(UpdatedPullRequest)},
	{name: "github/pull_request.edited.json", kinds: ks(UpdatedPullRequest)},
	{name: "github/pull_request.opened.json", kinds: ks(NewPullRequest), subject: "triggers.codehost.new_pull_request.codertocat.hello-world",
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "pull_request", ID: "279147437", Number: 2,
				Title: "Update the README with new information.", URL: "https://github.com/Codertocat/Hello-World/pull/2",
				State: "open", Labels: []string{"bug"}, Author: "Codertocat", Ref: "changes", SHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821"})
		}},
	{name: "github/pull_request.ready_for_review.json", kinds: ks(NewPullRequest, UpdatedPullRequest)},
	{name: "github/pull_request.reopened.json", kinds: ks(UpdatedPullRequest)},
	{name: "github/pull_request.review_requested.json", kinds: ks(NewReviewRequest), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "review_request", ID: "279147437", Number: 2,
			Title: "Update the README with new information.", URL: "https://github.com/Codertocat/Hello-World/pull/2",
			Author: "Codertocat", Ref: "changes", SHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821", Reviewer: "octocat"})
	}},
	{name: "github/pull_request.synchronize.json", kinds: ks(UpdatedPullRequest)},
	{name: "github/pull_request_review.submitted.approved.docs-sample.json", kinds: ks(NewPullRequestReview)},
	{name: "github/pull_request_review.submitted.approved.json", kinds: ks(NewPullRequestReview), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "review", ID: "787479727", Number: 11, Title: "Update mention-to-slack.yml",
			URL: "https://github.com/abeyuya/github-actions-test/pull/11#pullrequestreview-787479727", ReviewState: "approved",
			Author: "abeyuya", SHA: "2472de25f1e768b39dd67f6ac7458e06a3989638", Ref: "pr-approve-debug-1"})
	}},
	{name: "github/pull_request_review.submitted.commented.json", kinds: ks(NewPullRequestReview), check: func(t *testing.T, res Result) {
		if got := res.Events[0].Resource.ReviewState; got != "commented" {
			t.Errorf("review state %q", got)
		}
	}},
	// Three of the four commits are not distinct.
	{name: "github/push.multiple-commits.json", kinds: ks(NewPush, NewCommit), subject: "triggers.codehost.new_push.amplify-security.sl-repro-5941",
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "push", Ref: "main", RefType: "branch", SHA: "cc62b30b91677b695d3929d6352e7bb541e5ed8c",
				URL: "https://github.com/amplify-security/sl-repro-5941/compare/dc27afaa1f4d...cc62b30b9167", Author: "lae"})
			wantResource(t, res.Events[1], Resource{Type: "commit", ID: "cc62b30b91677b695d3929d6352e7bb541e5ed8c",
				SHA: "cc62b30b91677b695d3929d6352e7bb541e5ed8c", Title: "Merge pull request #1 from amplify-security/feature/readme",
				URL:    "https://github.com/amplify-security/sl-repro-5941/commit/cc62b30b91677b695d3929d6352e7bb541e5ed8c",
				Author: "lae", Ref: "main", RefType: "branch"})
		}},
	{name: "github/push.new-branch.json", kinds: ks(NewPush, NewCommit)},
	{name: "github/push.single-commit.json", kinds: ks(NewPush, NewCommit)},
	// Tag pushes are pushes; tags come from "create" only.
	{name: "github/push.tag-created.ghes.json", kinds: ks(NewPush)},
	{name: "github/push.tag-created.json", kinds: ks(NewPush), check: func(t *testing.T, res Result) {
		if r := res.Events[0].Resource; r.Ref != "v0.0.1" || r.RefType != "tag" {
			t.Errorf("ref %q, ref_type %q; want the bare tag name, and that it is a tag", r.Ref, r.RefType)
		}
	}},
	{name: "github/push.tag-deleted.json", ignored: `event "push" deleting "refs/tags/simple-tag" maps to no trigger kind`},
	{name: "github/release.created.json", ignored: `event "release" action "created" maps to no trigger kind`},
	{name: "github/release.published.json", kinds: ks(NewRelease), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "release", ID: "17372790", Ref: "0.0.1",
			URL: "https://github.com/Codertocat/Hello-World/releases/tag/0.0.1", Author: "Codertocat"})
	}},
	{name: "github/repository.created.json", kinds: ks(NewRepository), subject: "triggers.codehost.new_repository.octocoders.hello-world"},
	{name: "github/star.created.json", kinds: ks(NewStar), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "star", ID: "186853002", Title: "Codertocat/Hello-World",
			URL: "https://github.com/Codertocat/Hello-World", Author: "Codertocat"})
	}},
	{name: "github/star.deleted.json", ignored: `event "star" action "deleted" maps to no trigger kind`},
	{name: "github/watch.started.json", kinds: ks(NewWatcher)},
	{name: "github/workflow_job.completed.failure.json", kinds: ks(WorkflowJobCompleted), check: func(t *testing.T, res Result) {
		wantResource(t, res.Events[0], Resource{Type: "workflow_job", ID: "289782451", Title: "linters",
			URL: "https://github.com/octo-org/octo-repo/runs/1291536064", State: "completed", Conclusion: "failure",
			Ref: "main", SHA: "3484a3fb816e0859fd6e1cea078d76385ff50625"})
		if e := res.Events[0]; e.Account != "Octocoders" {
			t.Errorf("account %q", e.Account)
		}
	}},
	{name: "github/workflow_job.completed.success.json", kinds: ks(WorkflowJobCompleted)},
	// The sample's name is empty: the title falls back to display_title.
	{name: "github/workflow_run.completed.json", kinds: ks(WorkflowRunCompleted), subject: "triggers.codehost.workflow_run_completed.octo-org.octo-repo",
		check: func(t *testing.T, res Result) {
			wantResource(t, res.Events[0], Resource{Type: "workflow_run", ID: "289782451",
				Title: "ci(action): update actions/setup-node digest to 8c91899",
				URL:   "https://github.com/octo-org/octo-repo/actions/runs/289782451", State: "completed", Conclusion: "success",
				Ref: "master", SHA: "3484a3fb816e0859fd6e1cea078d76385ff50625", Author: "Codertocat"})
		}},
	{name: "github/workflow_run.requested.json", ignored: `event "workflow_run" action "requested" maps to no trigger kind`},

	// vercel/
	{name: "vercel/deployment.created.sentry-fixture.json", kinds: ks(DeploymentStarted),
		subject: "triggers.deploy.deployment_started.cstd1xKmLGVMed0z0f3SHlD2.QmQPfU4xn5APjEsSje4ccPcSJCmVAByA8CDKfZRhYyVPAg",
		check: func(t *testing.T, res Result) {
			if res.DeliveryID != "uev_ZfbZKA3Ts2aEa2Cic6t6wSZ3" || res.SourceEvent != "deployment.created" || res.Action != "" {
				t.Errorf("result %q %q %q", res.DeliveryID, res.SourceEvent, res.Action)
			}
			e := res.Events[0]
			wantResource(t, e, Resource{Type: "deployment", ID: "dpl_2p92SueSKLagubfcRtheS3Cvmcj3",
				URL:           "https://vercel.com/nextjsblog-demo-new/dpl_2p92SueSKLagubfcRtheS3Cvmcj3",
				DeploymentURL: "https://nextjsblog-demo-new-gogovbsz1.vercel.app", Target: "production",
				Project: "QmQPfU4xn5APjEsSje4ccPcSJCmVAByA8CDKfZRhYyVPAg", ProjectName: "nextjsblog-demo-new",
				State: "building", SHA: "7488658dfcf24d9b735e015992b316e2a8340d93", Ref: "master", Title: "update index.js"})
			if e.Repository == nil || *e.Repository != (Repository{Owner: "MeredithAnya", Name: "nextjsblog-demo-new", FullName: "MeredithAnya/nextjsblog-demo-new"}) {
				t.Errorf("repository %v", e.Repository)
			}
			if e.Account != "cstd1xKmLGVMed0z0f3SHlD2" || e.Sender != "cstd1xKmLGVMed0z0f3SHlD2" {
				t.Errorf("account %q sender %q", e.Account, e.Sender)
			}
		}},
	{name: "vercel/deployment.legacy-v1.sentry-fixture.json", ignored: `type "deployment" maps to no trigger kind`},
}

// TestMapCorpus maps every file of the shared webhook corpus.
func TestMapCorpus(t *testing.T) {
	runFileTable(t, corpusDir(t), corpusCases)
}
