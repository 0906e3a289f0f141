package triggers

import (
	"encoding/json"
	"fmt"
	"testing"
)

// actionPayload is a code-hosting payload that holds every object a mapped
// event is about, with no text that mentions anyone, so that the kinds an
// event and action give come from the rules alone.
func actionPayload(action string, extra map[string]any) []byte {
	obj := map[string]any{"id": 11, "number": 3, "title": "t", "body": "no mentions here", "html_url": "https://example.test/x",
		"state": "open", "draft": false, "user": map[string]any{"login": "alice"}}
	p := map[string]any{
		"repository":         map[string]any{"id": 1, "name": "Hello-World", "full_name": "Octo/Hello-World", "owner": map[string]any{"login": "Octo"}},
		"sender":             map[string]any{"login": "alice"},
		"issue":              obj,
		"pull_request":       obj,
		"discussion":         obj,
		"comment":            map[string]any{"id": 12, "body": "no mentions here", "user": map[string]any{"login": "alice"}},
		"review":             map[string]any{"id": 13, "state": "changes_requested", "body": "no mentions here"},
		"forkee":             map[string]any{"id": 14, "full_name": "fork/Hello-World", "owner": map[string]any{"login": "fork"}},
		"workflow_run":       map[string]any{"id": 15, "status": "completed", "conclusion": "success"},
		"workflow_job":       map[string]any{"id": 16, "status": "completed", "conclusion": "failure"},
		"member":             map[string]any{"id": 17, "login": "new-hire"},
		"projects_v2_item":   map[string]any{"id": 18, "content_type": "Issue"},
		"project_card":       map[string]any{"id": 19, "column_id": 20, "note": "n"},
		"release":            map[string]any{"id": 21, "tag_name": "v1"},
		"label":              map[string]any{"name": "bug"},
		"requested_reviewer": map[string]any{"login": "bob"},
		"changes": map[string]any{"field_value": map[string]any{"field_type": "single_select", "field_name": "Status",
			"from": map[string]any{"name": "Todo"}, "to": map[string]any{"name": "Done"}}},
	}
	if action != "" {
		p["action"] = action
	}
	for k, v := range extra {
		p[k] = v
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMapEventActionRules checks the issue's table of trigger kinds rule by
// rule: every event and action it names gives exactly its kinds, in order,
// and the neighbouring actions GitHub and Vercel send give none.
func TestMapEventActionRules(t *testing.T) {
	none := []Kind(nil)
	type rule struct {
		event, action string
		extra         map[string]any
		kinds         []Kind
	}
	rules := []rule{
		{"repository", "created", nil, ks(NewRepository)},
		{"fork", "", nil, ks(NewFork)},
		{"star", "created", nil, ks(NewStar)},
		{"watch", "started", nil, ks(NewWatcher)},
		{"create", "", map[string]any{"ref": "v1.0", "ref_type": "tag"}, ks(NewTag)},
		{"create", "", map[string]any{"ref": "topic", "ref_type": "branch"}, ks(NewBranch)},
		{"issues", "opened", nil, ks(NewIssue)},
		{"issues", "labeled", nil, ks(UpdatedIssue, NewIssueLabel)},
		{"pull_request", "opened", nil, ks(NewPullRequest)},
		{"pull_request", "opened", map[string]any{"pull_request": map[string]any{"id": 1, "draft": true}}, none},
		{"pull_request", "ready_for_review", nil, ks(NewPullRequest, UpdatedPullRequest)},
		{"pull_request", "review_requested", nil, ks(NewReviewRequest)},
		{"issue_comment", "created", nil, ks(NewComment)},
		{"pull_request_review_comment", "created", nil, ks(NewComment)},
		{"pull_request_review", "submitted", nil, ks(NewPullRequestReview)},
		{"push", "", map[string]any{"ref": "refs/heads/main", "after": "b", "commits": []any{
			map[string]any{"id": "a1", "distinct": true}, map[string]any{"id": "a2", "distinct": false}, map[string]any{"id": "a3", "distinct": true},
		}}, ks(NewPush, NewCommit, NewCommit)},
		{"push", "", map[string]any{"ref": "refs/heads/gone", "deleted": true, "commits": []any{}}, none},
		{"workflow_run", "completed", nil, ks(WorkflowRunCompleted)},
		{"workflow_job", "completed", nil, ks(WorkflowJobCompleted)},
		{"member", "added", nil, ks(NewCollaborator)},
		{"commit_comment", "created", map[string]any{"comment": map[string]any{"id": 1, "body": "cc @bob"}}, ks(NewMention)},
		{"projects_v2_item", "edited", nil, ks(ProjectItemStatusChanged)},
		{"project_card", "created", nil, ks(NewProjectCard)},
		{"release", "published", nil, ks(NewRelease)},
		{"discussion", "created", nil, ks(NewDiscussion)},
		{"discussion_comment", "created", nil, ks(NewDiscussionComment)},
	}
	for _, a := range []string{"edited", "unlabeled", "assigned", "unassigned", "closed", "reopened"} {
		rules = append(rules, rule{"issues", a, nil, ks(UpdatedIssue)})
	}
	for _, a := range []string{"edited", "synchronize", "converted_to_draft", "closed", "reopened", "labeled", "unlabeled", "assigned", "unassigned"} {
		rules = append(rules, rule{"pull_request", a, nil, ks(UpdatedPullRequest)})
	}
	// Actions the rules leave out map to no kind.
	for event, actions := range map[string][]string{
		"repository":                  {"deleted", "archived", "renamed", "publicized", "edited"},
		"star":                        {"deleted"},
		"issues":                      {"deleted", "transferred", "pinned", "unpinned", "locked", "unlocked", "milestoned", "demilestoned"},
		"pull_request":                {"review_request_removed", "locked", "unlocked", "auto_merge_enabled", "auto_merge_disabled", "enqueued", "dequeued", "milestoned"},
		"issue_comment":               {"edited", "deleted"},
		"pull_request_review_comment": {"edited", "deleted"},
		"pull_request_review":         {"edited", "dismissed"},
		"workflow_run":                {"requested", "in_progress"},
		"workflow_job":                {"queued", "in_progress", "waiting"},
		"member":                      {"removed", "edited"},
		"projects_v2_item":            {"created", "archived", "deleted", "converted", "reordered", "restored"},
		"project_card":                {"moved", "edited", "converted", "deleted"},
		"release":                     {"created", "released", "prereleased", "edited", "unpublished", "deleted"},
		"discussion":                  {"edited", "answered", "deleted", "labeled"},
		"discussion_comment":          {"edited", "deleted"},
		"commit_comment":              {"edited"},
	} {
		for _, a := range actions {
			rules = append(rules, rule{event, a, nil, none})
		}
	}
	rules = append(rules, rule{"create", "", map[string]any{"ref": "x", "ref_type": "repository"}, none})
	for _, r := range rules {
		t.Run(fmt.Sprintf("%s/%s/%v", r.event, r.action, r.extra["ref_type"]), func(t *testing.T) {
			d := Delivery{Connector: CodeHost, ID: "rule-delivery", Event: r.event, ReceivedAt: testReceivedAt, Payload: actionPayload(r.action, r.extra)}
			checkKinds(t, mapChecked(t, d), r.kinds)
		})
	}

	deploy := map[string][]Kind{
		"deployment.created":   ks(DeploymentStarted),
		"deployment.succeeded": ks(DeploymentCompleted),
		"deployment.ready":     ks(DeploymentCompleted),
		"deployment.error":     ks(DeploymentFailed),
		"deployment.canceled":  ks(DeploymentCanceled),
		"deployment.promoted":  none,
		"deployment":           none,
		"project.created":      none,
		"domain.created":       none,
	}
	for typ, want := range deploy {
		t.Run("deploy/"+typ, func(t *testing.T) {
			body := fmt.Sprintf(`{"id":"uev_1","type":%q,"createdAt":1,"payload":{"team":{"id":"team_1"},"user":{"id":"u1"},"project":{"id":"prj_1"},"deployment":{"id":"dpl_1"}}}`, typ)
			d := Delivery{Connector: Deploy, ReceivedAt: testReceivedAt, Payload: []byte(body)}
			checkKinds(t, mapChecked(t, d), want)
		})
	}
}
