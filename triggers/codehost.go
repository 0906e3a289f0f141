package triggers

import (
	"fmt"
	"strings"
)

// This file maps code-hosting deliveries (GitHub's webhook format): the
// table codeHostEvents says which event and action go to which function,
// and each function emits the events of its deliveries. See Map for the
// contract, and kinds.go for the catalogue of kinds and the webhook events
// they come from (TestKindSourcesMapped holds the two together).

// mapFunc emits the events of one code-hosting delivery and returns the
// result, or a *PayloadError when the delivery lacks the object its event
// is about. It takes the emitter by value: a pointer passed through a
// function value would move the emitter to the heap, one more allocation
// for every delivery.
type mapFunc func(e emitter, p *ghPayload) (Result, error)

// codeHostEvent maps the deliveries of one webhook event: all of them with
// all, for the events whose deliveries have no action (fork, create, push,
// ping); otherwise those of the actions in actions. A delivery of another
// action maps to no kind.
type codeHostEvent struct {
	all     mapFunc
	actions map[string]mapFunc
}

// codeHostEvents maps a webhook event (X-GitHub-Event) to its functions;
// an event it does not hold maps to no kind.
var codeHostEvents = map[string]codeHostEvent{
	"ping":       {all: mapPing},
	"repository": {actions: map[string]mapFunc{"created": mapRepository}},
	"fork":       {all: mapFork},
	"star":       {actions: map[string]mapFunc{"created": mapStar}},
	"watch":      {actions: map[string]mapFunc{"started": mapWatch}},
	"create":     {all: mapCreate},
	"issues": {actions: map[string]mapFunc{
		"opened":     mapIssueOpened,
		"labeled":    mapIssueLabeled,
		"unlabeled":  mapIssueUnlabeled,
		"edited":     mapIssueUpdated,
		"assigned":   mapIssueUpdated,
		"unassigned": mapIssueUpdated,
		"closed":     mapIssueUpdated,
		"reopened":   mapIssueUpdated,
	}},
	"pull_request": {actions: map[string]mapFunc{
		"opened":             mapPullRequestOpened,
		"ready_for_review":   mapPullRequestReady,
		"review_requested":   mapReviewRequested,
		"labeled":            mapPullRequestLabel,
		"unlabeled":          mapPullRequestLabel,
		"edited":             mapPullRequestUpdated,
		"synchronize":        mapPullRequestUpdated,
		"converted_to_draft": mapPullRequestUpdated,
		"closed":             mapPullRequestUpdated,
		"reopened":           mapPullRequestUpdated,
		"assigned":           mapPullRequestUpdated,
		"unassigned":         mapPullRequestUpdated,
	}},
	"issue_comment":               {actions: map[string]mapFunc{"created": mapIssueComment}},
	"pull_request_review_comment": {actions: map[string]mapFunc{"created": mapReviewComment}},
	"pull_request_review":         {actions: map[string]mapFunc{"submitted": mapReview}},
	"discussion":                  {actions: map[string]mapFunc{"created": mapDiscussion}},
	"discussion_comment":          {actions: map[string]mapFunc{"created": mapDiscussionComment}},
	"commit_comment":              {actions: map[string]mapFunc{"created": mapCommitComment}},
	"push":                        {all: mapPush},
	"workflow_run":                {actions: map[string]mapFunc{"completed": mapWorkflowRun}},
	"workflow_job":                {actions: map[string]mapFunc{"completed": mapWorkflowJob}},
	"member":                      {actions: map[string]mapFunc{"added": mapMember}},
	"projects_v2_item":            {actions: map[string]mapFunc{"edited": mapProjectItem}},
	"project_card":                {actions: map[string]mapFunc{"created": mapProjectCard}},
	"release":                     {actions: map[string]mapFunc{"published": mapRelease}},
}

// mapCodeHost maps a code-hosting delivery; see Map for the rules.
func mapCodeHost(d Delivery) (Result, error) {
	var p ghPayload
	if err := decodeObject(d.Payload, &p); err != nil {
		return Result{DeliveryID: d.ID, SourceEvent: d.Event}, err
	}
	e := emitter{
		res:      Result{DeliveryID: d.ID, SourceEvent: d.Event, Action: p.Action},
		conn:     CodeHost,
		received: d.ReceivedAt,
		sender:   login(p.Sender),
		payload:  d.Payload,
		scope:    d.Scope,
	}
	if r := p.Repository; r != nil {
		e.repo = repository(r)
		if e.repo != nil {
			e.account = e.repo.Owner
		}
	}
	if e.account == "" {
		e.account = login(p.Organization)
	}
	ev := codeHostEvents[d.Event]
	f := ev.all
	if f == nil {
		f = ev.actions[p.Action]
	}
	if f == nil {
		return e.finish()
	}
	return f(e, &p)
}

// finish returns the result of a delivery; one that emitted no event maps
// to no kind.
func (e *emitter) finish() (Result, error) {
	if len(e.res.Events) > 0 {
		// Most deliveries end here: the reason is only formatted when
		// there is none.
		return e.res, nil
	}
	return e.done(noKind(e.res.SourceEvent, e.res.Action))
}

// lacks returns the *PayloadError of a mapped delivery without field, the
// object it is about.
func (e *emitter) lacks(field string) (Result, error) {
	return e.res, &PayloadError{Reason: fmt.Sprintf("event %q lacks %q", e.res.SourceEvent, field)}
}

// mapPing ignores the ping GitHub sends when a hook is created.
func mapPing(e emitter, _ *ghPayload) (Result, error) { return e.done("ping") }

// mapRepository maps repository.created to new_repository.
func mapRepository(e emitter, p *ghPayload) (Result, error) {
	r := p.Repository
	if r == nil {
		return e.lacks("repository")
	}
	e.emit(NewRepository, Resource{Type: "repository", ID: decimalID(r.ID), Title: r.FullName, URL: r.HTMLURL, Author: login(r.Owner)})
	return e.finish()
}

// mapFork maps fork to new_fork, about the new fork.
func mapFork(e emitter, p *ghPayload) (Result, error) {
	f := p.Forkee
	if f == nil {
		return e.lacks("forkee")
	}
	e.emit(NewFork, Resource{Type: "fork", ID: decimalID(f.ID), Title: f.FullName, URL: f.HTMLURL, Author: login(f.Owner)})
	return e.finish()
}

// mapStar maps star.created to new_star.
func mapStar(e emitter, p *ghPayload) (Result, error) {
	return e.repositoryBy(p, NewStar, "star")
}

// mapWatch maps watch.started to new_watcher.
func mapWatch(e emitter, p *ghPayload) (Result, error) {
	return e.repositoryBy(p, NewWatcher, "watcher")
}

// repositoryBy emits an event of kind k, of resource type typ, about the
// repository, by the sender.
func (e *emitter) repositoryBy(p *ghPayload, k Kind, typ string) (Result, error) {
	r := p.Repository
	if r == nil {
		return e.lacks("repository")
	}
	e.emit(k, Resource{Type: typ, ID: decimalID(r.ID), Title: r.FullName, URL: r.HTMLURL, Author: e.sender})
	return e.finish()
}

// mapCreate maps create to new_tag or new_branch, by its ref_type.
func mapCreate(e emitter, p *ghPayload) (Result, error) {
	var k Kind
	switch p.RefType {
	case "tag":
		k = NewTag
	case "branch":
		k = NewBranch
	default:
		return e.done(fmt.Sprintf("event %q ref_type %q maps to no trigger kind", e.res.SourceEvent, p.RefType))
	}
	if p.Ref == "" {
		return e.lacks("ref")
	}
	ref, _ := bareRef(p.Ref)
	e.emit(k, Resource{Type: p.RefType, Title: ref, Ref: ref, RefType: p.RefType, Author: e.sender})
	return e.finish()
}

// mapIssueOpened maps issues.opened to new_issue, then new_mention.
func mapIssueOpened(e emitter, p *ghPayload) (Result, error) {
	is := p.Issue
	if is == nil {
		return e.lacks("issue")
	}
	e.emit(NewIssue, issueResource("issue", is))
	// A transferred issue arrives "opened" with its old body: nothing in it
	// is newly written.
	if p.Changes == nil || p.Changes.OldIssue == nil {
		e.emitMentions(is.Body, textResource(is.ID, is.Number, is.Title, is.HTMLURL, is.User))
	}
	return e.finish()
}

// mapIssueLabeled maps issues.labeled to updated_issue, then
// new_issue_label, both naming the label added.
func mapIssueLabeled(e emitter, p *ghPayload) (Result, error) {
	if p.Issue == nil {
		return e.lacks("issue")
	}
	r := labelChange(issueResource("issue", p.Issue), p)
	e.emit(UpdatedIssue, r)
	e.emit(NewIssueLabel, r)
	return e.finish()
}

// mapIssueUnlabeled maps issues.unlabeled to updated_issue, naming the
// label removed.
func mapIssueUnlabeled(e emitter, p *ghPayload) (Result, error) {
	if p.Issue == nil {
		return e.lacks("issue")
	}
	e.emit(UpdatedIssue, labelChange(issueResource("issue", p.Issue), p))
	return e.finish()
}

// mapIssueUpdated maps the other changes to an issue to updated_issue.
func mapIssueUpdated(e emitter, p *ghPayload) (Result, error) {
	if p.Issue == nil {
		return e.lacks("issue")
	}
	e.emit(UpdatedIssue, issueResource("issue", p.Issue))
	return e.finish()
}

// labelChange returns r naming the label a labeled or unlabeled delivery
// added or removed, if it names one.
func labelChange(r Resource, p *ghPayload) Resource {
	if p.Label != nil {
		r.Label = p.Label.Name
	}
	return r
}

// mapPullRequestOpened maps pull_request.opened to new_pull_request,
// unless the pull request is a draft, then new_mention.
func mapPullRequestOpened(e emitter, p *ghPayload) (Result, error) {
	pr := p.PullRequest
	if pr == nil {
		return e.lacks("pull_request")
	}
	if !pr.Draft {
		e.emit(NewPullRequest, issueResource("pull_request", pr))
	}
	e.emitMentions(pr.Body, textResource(pr.ID, pr.Number, pr.Title, pr.HTMLURL, pr.User))
	if pr.Draft {
		return e.done(fmt.Sprintf("event %q action %q on a draft, without new mentions, maps to no trigger kind", e.res.SourceEvent, e.res.Action))
	}
	return e.finish()
}

// mapPullRequestReady maps pull_request.ready_for_review to
// new_pull_request (a draft becomes one), then updated_pull_request.
func mapPullRequestReady(e emitter, p *ghPayload) (Result, error) {
	if p.PullRequest == nil {
		return e.lacks("pull_request")
	}
	r := issueResource("pull_request", p.PullRequest)
	e.emit(NewPullRequest, r)
	e.emit(UpdatedPullRequest, r)
	return e.finish()
}

// mapPullRequestLabel maps pull_request.labeled and unlabeled to
// updated_pull_request, naming the label added or removed.
func mapPullRequestLabel(e emitter, p *ghPayload) (Result, error) {
	if p.PullRequest == nil {
		return e.lacks("pull_request")
	}
	e.emit(UpdatedPullRequest, labelChange(issueResource("pull_request", p.PullRequest), p))
	return e.finish()
}

// mapPullRequestUpdated maps the other changes to a pull request to
// updated_pull_request.
func mapPullRequestUpdated(e emitter, p *ghPayload) (Result, error) {
	if p.PullRequest == nil {
		return e.lacks("pull_request")
	}
	e.emit(UpdatedPullRequest, issueResource("pull_request", p.PullRequest))
	return e.finish()
}

// mapReviewRequested maps pull_request.review_requested to
// new_review_request, naming the reviewer: a login, or "org/team" for a
// team.
func mapReviewRequested(e emitter, p *ghPayload) (Result, error) {
	pr := p.PullRequest
	if pr == nil {
		return e.lacks("pull_request")
	}
	r := Resource{Type: "review_request", ID: decimalID(pr.ID), Number: pr.Number, Title: pr.Title, URL: pr.HTMLURL, Author: login(pr.User)}
	if pr.Head != nil {
		r.Ref, r.SHA = pr.Head.Ref, pr.Head.SHA
	}
	switch {
	case p.RequestedReviewer != nil && p.RequestedReviewer.Login != "":
		r.Reviewer = p.RequestedReviewer.Login
	case p.RequestedTeam != nil && p.RequestedTeam.Slug != "":
		org := login(p.Organization)
		if org == "" {
			org = e.account
		}
		r.Reviewer = p.RequestedTeam.Slug
		if org != "" {
			r.Reviewer = org + "/" + r.Reviewer
		}
	}
	e.emit(NewReviewRequest, r)
	return e.finish()
}

// mapIssueComment maps issue_comment.created to new_comment, then
// new_mention.
func mapIssueComment(e emitter, p *ghPayload) (Result, error) {
	return e.comment(p.Issue, "issue", p.Comment)
}

// mapReviewComment maps pull_request_review_comment.created to
// new_comment, then new_mention.
func mapReviewComment(e emitter, p *ghPayload) (Result, error) {
	return e.comment(p.PullRequest, "pull_request", p.Comment)
}

// comment emits new_comment, then new_mention, for comment c on parent,
// the issue or pull request of payload field parentField.
func (e *emitter) comment(parent *ghIssue, parentField string, c *ghComment) (Result, error) {
	if parent == nil {
		return e.lacks(parentField)
	}
	if c == nil {
		return e.lacks("comment")
	}
	r := textResource(c.ID, parent.Number, parent.Title, c.HTMLURL, c.User)
	r.Type = "comment"
	e.emit(NewComment, r)
	e.emitMentions(c.Body, r)
	return e.finish()
}

// mapReview maps pull_request_review.submitted to
// new_pull_request_review, then new_mention.
func mapReview(e emitter, p *ghPayload) (Result, error) {
	pr, rv := p.PullRequest, p.Review
	if pr == nil {
		return e.lacks("pull_request")
	}
	if rv == nil {
		return e.lacks("review")
	}
	base := textResource(rv.ID, pr.Number, pr.Title, rv.HTMLURL, rv.User)
	r := base
	r.Type = "review"
	r.ReviewState = strings.ToLower(rv.State)
	r.SHA = rv.CommitID
	if pr.Head != nil {
		r.Ref = pr.Head.Ref
	}
	e.emit(NewPullRequestReview, r)
	e.emitMentions(rv.Body, base)
	return e.finish()
}

// mapDiscussion maps discussion.created to new_discussion, then
// new_mention.
func mapDiscussion(e emitter, p *ghPayload) (Result, error) {
	di := p.Discussion
	if di == nil {
		return e.lacks("discussion")
	}
	e.emit(NewDiscussion, issueResource("discussion", di))
	e.emitMentions(di.Body, textResource(di.ID, di.Number, di.Title, di.HTMLURL, di.User))
	return e.finish()
}

// mapDiscussionComment maps discussion_comment.created to
// new_discussion_comment, then new_mention.
func mapDiscussionComment(e emitter, p *ghPayload) (Result, error) {
	di, c := p.Discussion, p.Comment
	if di == nil {
		return e.lacks("discussion")
	}
	if c == nil {
		return e.lacks("comment")
	}
	r := textResource(c.ID, di.Number, di.Title, c.HTMLURL, c.User)
	r.Type = "discussion_comment"
	e.emit(NewDiscussionComment, r)
	e.emitMentions(c.Body, r)
	return e.finish()
}

// mapCommitComment maps commit_comment.created to new_mention only.
func mapCommitComment(e emitter, p *ghPayload) (Result, error) {
	c := p.Comment
	if c == nil {
		return e.lacks("comment")
	}
	r := textResource(c.ID, 0, "", c.HTMLURL, c.User)
	r.SHA = c.CommitID
	e.emitMentions(c.Body, r)
	return e.done(fmt.Sprintf("event %q action %q has no new mention", e.res.SourceEvent, e.res.Action))
}

// mapPush maps push to new_push, unless the push deletes the ref, then
// new_commit for each distinct commit in commits[] order.
func mapPush(e emitter, p *ghPayload) (Result, error) {
	if p.Ref == "" {
		return e.lacks("ref")
	}
	ref, refType := bareRef(p.Ref)
	if !p.Deleted || len(p.Commits) > 0 {
		e.res.Events = make([]Event, 0, 1+len(p.Commits))
	}
	if !p.Deleted {
		e.emit(NewPush, Resource{Type: "push", Ref: ref, RefType: refType, SHA: p.After, URL: p.Compare, Author: e.sender})
	}
	for i := range p.Commits {
		c := &p.Commits[i]
		if !c.Distinct {
			continue
		}
		author := c.Author.Username
		if author == "" {
			author = c.Author.Name
		}
		e.emit(NewCommit, Resource{Type: "commit", ID: c.ID, SHA: c.ID, Title: firstLine(c.Message), URL: c.URL, Author: author, Ref: ref, RefType: refType})
	}
	return e.done(fmt.Sprintf("event %q deleting %q maps to no trigger kind", e.res.SourceEvent, p.Ref))
}

// mapWorkflowRun maps workflow_run.completed to workflow_run_completed.
func mapWorkflowRun(e emitter, p *ghPayload) (Result, error) {
	return e.workflow(WorkflowRunCompleted, p.WorkflowRun)
}

// mapWorkflowJob maps workflow_job.completed to workflow_job_completed.
func mapWorkflowJob(e emitter, p *ghPayload) (Result, error) {
	return e.workflow(WorkflowJobCompleted, p.WorkflowJob)
}

// workflow emits an event of kind k about w, the workflow run or job the
// delivery's event names (its payload field has the event's name).
func (e *emitter) workflow(k Kind, w *ghWorkflow) (Result, error) {
	ev := e.res.SourceEvent
	if w == nil {
		return e.lacks(ev)
	}
	title := w.Name
	if title == "" {
		title = w.DisplayTitle
	}
	e.emit(k, Resource{Type: ev, ID: decimalID(w.ID), Title: title, URL: w.HTMLURL, State: w.Status,
		Conclusion: w.Conclusion, Ref: w.HeadBranch, SHA: w.HeadSHA, Author: login(w.Actor)})
	return e.finish()
}

// mapMember maps member.added to new_collaborator.
func mapMember(e emitter, p *ghPayload) (Result, error) {
	m := p.Member
	if m == nil {
		return e.lacks("member")
	}
	e.emit(NewCollaborator, Resource{Type: "collaborator", ID: decimalID(m.ID), Title: m.Login, URL: m.HTMLURL, Author: m.Login})
	return e.finish()
}

// mapProjectItem maps projects_v2_item.edited to
// project_item_status_changed when the edit changes a single-select field
// named Status, or a single-select field the payload does not name.
func mapProjectItem(e emitter, p *ghPayload) (Result, error) {
	it := p.ProjectsV2Item
	if it == nil {
		return e.lacks("projects_v2_item")
	}
	var fv *ghFieldValue
	if p.Changes != nil {
		fv = p.Changes.FieldValue
	}
	if fv == nil || fv.FieldType != "single_select" {
		return e.done(fmt.Sprintf("event %q action %q changes no single-select field", e.res.SourceEvent, e.res.Action))
	}
	r := Resource{Type: "project_item", ID: decimalID(it.ID), Title: it.ContentType, FieldID: fv.FieldNodeID}
	// The newer payload shape names the field and carries the old and new
	// options. The older one (no field_name at all) only has the field's
	// node id, whose name needs a GraphQL lookup this pure mapper cannot
	// make: such an edit is emitted too, with Field, From and To left empty
	// and FieldID set, and the dispatcher resolves the name before a
	// trigger starts (package dispatch).
	if fv.FieldName != nil {
		if !strings.EqualFold(*fv.FieldName, "Status") {
			return e.done(fmt.Sprintf("event %q action %q changes field %q, not Status", e.res.SourceEvent, e.res.Action, *fv.FieldName))
		}
		r.Field = "Status"
		r.From = optionName(fv.From)
		r.To = optionName(fv.To)
	}
	e.emit(ProjectItemStatusChanged, r)
	return e.finish()
}

// mapProjectCard maps project_card.created to new_project_card.
func mapProjectCard(e emitter, p *ghPayload) (Result, error) {
	c := p.ProjectCard
	if c == nil {
		return e.lacks("project_card")
	}
	e.emit(NewProjectCard, Resource{Type: "project_card", ID: decimalID(c.ID), ColumnID: c.ColumnID, Title: c.Note, Author: login(c.Creator)})
	return e.finish()
}

// mapRelease maps release.published to new_release.
func mapRelease(e emitter, p *ghPayload) (Result, error) {
	rl := p.Release
	if rl == nil {
		return e.lacks("release")
	}
	e.emit(NewRelease, Resource{Type: "release", ID: decimalID(rl.ID), Ref: rl.TagName, Title: rl.Name, URL: rl.HTMLURL,
		Draft: rl.Draft, Author: login(rl.Author)})
	return e.finish()
}
