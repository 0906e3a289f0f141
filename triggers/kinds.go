// Package triggers holds the trigger engine's domain: the trigger kinds, the
// event envelope published for each of them, the mapping from a verified
// webhook delivery onto events, and the NATS subject naming.
//
// The package is pure: it performs no I/O and imports no NATS, HTTP or
// storage library, so every other package can depend on it.
package triggers

import (
	"slices"
	"strings"
)

// Connector names an external service whose deliveries become events.
type Connector string

// The connectors that produce trigger events.
const (
	// CodeHost is the code-hosting service (GitHub's webhook format).
	CodeHost Connector = "codehost"
	// Deploy is the deployment platform (Vercel's webhook format).
	Deploy Connector = "deploy"
)

// Valid reports whether c is a known connector.
func (c Connector) Valid() bool { return c == CodeHost || c == Deploy }

// Kind is a trigger kind, such as "new_issue".
type Kind string

// The 26 code-hosting kinds.
const (
	NewRepository            Kind = "new_repository"
	NewFork                  Kind = "new_fork"
	NewStar                  Kind = "new_star"
	NewWatcher               Kind = "new_watcher"
	NewTag                   Kind = "new_tag"
	NewIssue                 Kind = "new_issue"
	UpdatedIssue             Kind = "updated_issue"
	NewIssueLabel            Kind = "new_issue_label"
	NewPullRequest           Kind = "new_pull_request"
	UpdatedPullRequest       Kind = "updated_pull_request"
	NewComment               Kind = "new_comment"
	NewReviewRequest         Kind = "new_review_request"
	NewPullRequestReview     Kind = "new_pull_request_review"
	NewCommit                Kind = "new_commit"
	NewPush                  Kind = "new_push"
	NewBranch                Kind = "new_branch"
	WorkflowRunCompleted     Kind = "workflow_run_completed"
	WorkflowJobCompleted     Kind = "workflow_job_completed"
	NewCollaborator          Kind = "new_collaborator"
	NewMention               Kind = "new_mention"
	ProjectItemStatusChanged Kind = "project_item_status_changed"
	NewProjectCard           Kind = "new_project_card"
	NewRelease               Kind = "new_release"
	NewGist                  Kind = "new_gist"
	NewDiscussion            Kind = "new_discussion"
	NewDiscussionComment     Kind = "new_discussion_comment"
)

// The 4 deployment-platform kinds.
const (
	DeploymentStarted   Kind = "deployment_started"
	DeploymentCompleted Kind = "deployment_completed"
	DeploymentFailed    Kind = "deployment_failed"
	DeploymentCanceled  Kind = "deployment_canceled"
)

// KindInfo describes one trigger kind for catalogues and documentation.
type KindInfo struct {
	Kind      Kind      `json:"kind"`
	Connector Connector `json:"connector"`
	// Name is the human name the product shows.
	Name string `json:"name"`
	// Sources lists the webhook "event.action" pairs the kind is mapped from;
	// empty for a kind produced by polling.
	Sources []string `json:"sources"`
	// Webhook is false for kinds no webhook can deliver (new_gist).
	Webhook bool `json:"webhook"`
	// Note warns of what limits the kind where it applies: a trigger of
	// it may never fire.
	Note string `json:"note,omitempty"`
}

// kinds is the catalogue, in the order the product spec lists them.
var kinds = []KindInfo{
	{NewRepository, CodeHost, "New repository", []string{"repository.created"}, true, ""},
	{NewFork, CodeHost, "New fork", []string{"fork"}, true, ""},
	{NewStar, CodeHost, "New star", []string{"star.created"}, true, ""},
	{NewWatcher, CodeHost, "New watcher", []string{"watch.started"}, true, ""},
	{NewTag, CodeHost, "New tag", []string{"create (ref_type tag)"}, true, ""},
	{NewIssue, CodeHost, "New issue", []string{"issues.opened"}, true, ""},
	{UpdatedIssue, CodeHost, "Updated issue", []string{"issues.edited", "issues.labeled", "issues.unlabeled", "issues.assigned", "issues.unassigned", "issues.closed", "issues.reopened"}, true, ""},
	{NewIssueLabel, CodeHost, "New label on issue", []string{"issues.labeled"}, true, ""},
	{NewPullRequest, CodeHost, "New pull request", []string{"pull_request.opened (not draft)", "pull_request.ready_for_review"}, true, ""},
	{UpdatedPullRequest, CodeHost, "Updated pull request", []string{"pull_request.edited", "pull_request.synchronize", "pull_request.converted_to_draft", "pull_request.ready_for_review", "pull_request.closed", "pull_request.reopened", "pull_request.labeled", "pull_request.unlabeled", "pull_request.assigned", "pull_request.unassigned"}, true, ""},
	{NewComment, CodeHost, "New comment", []string{"issue_comment.created", "pull_request_review_comment.created"}, true, ""},
	{NewReviewRequest, CodeHost, "New review request", []string{"pull_request.review_requested"}, true, ""},
	{NewPullRequestReview, CodeHost, "New pull request review", []string{"pull_request_review.submitted"}, true, ""},
	{NewCommit, CodeHost, "New commit", []string{"push (one per distinct commit)"}, true, ""},
	{NewPush, CodeHost, "New push", []string{"push (not a ref deletion)"}, true, ""},
	{NewBranch, CodeHost, "New branch", []string{"create (ref_type branch)"}, true, ""},
	{WorkflowRunCompleted, CodeHost, "Workflow run completed", []string{"workflow_run.completed"}, true, ""},
	{WorkflowJobCompleted, CodeHost, "Workflow job completed", []string{"workflow_job.completed"}, true, ""},
	{NewCollaborator, CodeHost, "New collaborator", []string{"member.added"}, true, ""},
	{NewMention, CodeHost, "New mention", []string{"issues.opened", "issue_comment.created", "pull_request.opened", "pull_request_review.submitted", "pull_request_review_comment.created", "discussion.created", "discussion_comment.created", "commit_comment.created"}, true, ""},
	{ProjectItemStatusChanged, CodeHost, "Project item status changed", []string{"projects_v2_item.edited (Status field)"}, true, ""},
	{NewProjectCard, CodeHost, "New card in column", []string{"project_card.created"}, true,
		"Projects (classic) were sunset on github.com in August 2024 (new projects are Projects v2: use project_item_status_changed); this kind fires only on GitHub Enterprise Server instances that still have classic projects"},
	{NewRelease, CodeHost, "New release", []string{"release.published"}, true, ""},
	{NewGist, CodeHost, "New gist", nil, false, ""},
	{NewDiscussion, CodeHost, "New discussion", []string{"discussion.created"}, true, ""},
	{NewDiscussionComment, CodeHost, "New discussion comment", []string{"discussion_comment.created"}, true, ""},
	{DeploymentStarted, Deploy, "Deployment started", []string{"deployment.created"}, true, ""},
	{DeploymentCompleted, Deploy, "Deployment completed", []string{"deployment.succeeded", "deployment.ready"}, true, ""},
	{DeploymentFailed, Deploy, "Deployment failed", []string{"deployment.error"}, true, ""},
	{DeploymentCanceled, Deploy, "Deployment canceled", []string{"deployment.canceled"}, true, ""},
}

var kindIndex = func() map[Kind]int {
	m := make(map[Kind]int, len(kinds))
	for i, k := range kinds {
		m[k.Kind] = i
	}
	return m
}()

// Kinds returns the catalogue of all trigger kinds, in the product's order.
// The caller may modify the returned slice, including each entry's Sources.
func Kinds() []KindInfo {
	out := make([]KindInfo, len(kinds))
	copy(out, kinds)
	for i := range out {
		if out[i].Sources != nil {
			out[i].Sources = append([]string(nil), out[i].Sources...)
		}
	}
	return out
}

// Valid reports whether k is a known trigger kind.
func (k Kind) Valid() bool {
	_, ok := kindIndex[k]
	return ok
}

// Connector returns the connector that produces k, or "" for an unknown kind.
func (k Kind) Connector() Connector {
	i, ok := kindIndex[k]
	if !ok {
		return ""
	}
	return kinds[i].Connector
}

// HookEvents returns the webhook events (X-GitHub-Event values, or the
// deployment platform's event types) a hook must subscribe to for k's
// events to arrive, sorted; nil for kinds no webhook delivers.
func (k Kind) HookEvents() []string {
	i, ok := kindIndex[k]
	if !ok || !kinds[i].Webhook {
		return nil
	}
	var out []string
	for _, src := range kinds[i].Sources {
		name := src
		if k.Connector() == CodeHost {
			// "issues.opened", "push (not a ref deletion)" → the event.
			if j := strings.IndexAny(name, ". "); j >= 0 {
				name = name[:j]
			}
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
