package triggers

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PayloadError reports a malformed payload; ingest answers 400 with its
// message.
type PayloadError struct {
	// Reason says what is wrong with the payload, in lower case.
	Reason string
}

// Error returns "malformed payload: " followed by the reason.
func (e *PayloadError) Error() string { return "malformed payload: " + e.Reason }

// Map turns one verified delivery into trigger events. It never performs
// I/O, and it parses the payload once.
//
// A payload that is not a JSON object returns a *PayloadError; so does a
// deployment envelope without a string "id" and "type", and a delivery whose
// event and action map to a kind but which lacks the object that kind
// describes (an "issues" "opened" delivery without "issue"). A JSON value of
// an unexpected type inside the object is not an error: the field is read as
// absent, or, where an object was expected, as an empty object.
//
// An event or action that maps to no kind returns a Result with no events
// and Ignored set to a short reason, such as
// `event "star" action "deleted" maps to no trigger kind`; a "ping" returns
// Ignored "ping".
//
// The events of one delivery come in a fixed order: the delivery's primary
// kinds first, then its fan-outs, then its new_mention events in order of
// the mentions' first appearance. In detail:
//
//   - push: new_push (unless the push deletes the ref), then new_commit for
//     each distinct commit in commits[] order;
//   - issues labeled: updated_issue, then new_issue_label;
//   - issues opened: new_issue, then new_mention;
//   - pull_request ready_for_review: new_pull_request, then
//     updated_pull_request;
//   - pull_request opened: new_pull_request (unless a draft), then
//     new_mention;
//   - issue_comment and pull_request_review_comment created: new_comment,
//     then new_mention; pull_request_review submitted:
//     new_pull_request_review, then new_mention; discussion and
//     discussion_comment created: new_discussion or new_discussion_comment,
//     then new_mention; commit_comment created: new_mention only.
//
// A new_mention is one distinct login @-mentioned in the newly written text
// (not in code, not quoted, not an e-mail address or a team, not the sender
// itself); see mentions for the exact rules. Every other delivery yields at
// most one event. The events share their Repository and Resource.Labels
// values and their Payload, which is d.Payload itself; treat them as
// read-only.
//
// A delivery whose Connector is neither CodeHost nor Deploy is a caller's
// mistake and returns an error that is not a *PayloadError.
func Map(d Delivery) (Result, error) {
	switch d.Connector {
	case CodeHost:
		return mapCodeHost(d)
	case Deploy:
		return mapDeploy(d)
	}
	return Result{}, fmt.Errorf("triggers: unknown connector %q", d.Connector)
}

// kindCount counts the events of one kind emitted so far.
type kindCount struct {
	kind Kind
	n    int
}

// emitter accumulates the events of one delivery.
type emitter struct {
	res      Result
	conn     Connector
	received time.Time
	repo     *Repository
	account  string
	sender   string
	payload  []byte
	scope    *Scope
	counts   [4]kindCount
	ncounts  int
}

// index returns the index the next event of kind k gets: the number of
// events of kind k emitted before it.
func (e *emitter) index(k Kind) int {
	for i := 0; i < e.ncounts; i++ {
		if e.counts[i].kind == k {
			e.counts[i].n++
			return e.counts[i].n - 1
		}
	}
	if e.ncounts < len(e.counts) {
		e.counts[e.ncounts] = kindCount{kind: k, n: 1}
		e.ncounts++
		return 0
	}
	// More distinct kinds than the table holds (no mapping does this): count
	// the earlier events.
	n := 0
	for i := range e.res.Events {
		if e.res.Events[i].Kind == k {
			n++
		}
	}
	return n
}

// emit appends an event of kind k about r.
func (e *emitter) emit(k Kind, r Resource) {
	e.res.Events = append(e.res.Events, Event{
		ID:          EventID(e.conn, DeliveryKey(e.scope, e.res.DeliveryID), k, e.index(k)),
		Kind:        k,
		Connector:   e.conn,
		DeliveryID:  e.res.DeliveryID,
		SourceEvent: e.res.SourceEvent,
		Action:      e.res.Action,
		ReceivedAt:  e.received,
		Repository:  e.repo,
		Account:     e.account,
		Sender:      e.sender,
		Resource:    r,
		Payload:     e.payload,
		Scope:       e.scope,
	})
}

// emitMentions appends one new_mention event per login mentioned in the
// newly written parts of text, other than the sender. base describes the
// object that holds the text.
func (e *emitter) emitMentions(text string, base Resource) {
	for _, login := range mentions(text, e.sender) {
		r := base
		r.Type = "mention"
		r.Mentioned = login
		e.emit(NewMention, r)
	}
}

// done returns the result, with Ignored set to reason when no event was
// emitted.
func (e *emitter) done(reason string) (Result, error) {
	if len(e.res.Events) == 0 {
		e.res.Events = nil
		e.res.Ignored = reason
	}
	return e.res, nil
}

// noKind is the Ignored reason for an event and action that map to no kind.
func noKind(event, action string) string {
	return fmt.Sprintf("event %q action %q maps to no trigger kind", event, action)
}

// lacks is the error for a mapped delivery without the object it is about.
func lacks(event, field string) error {
	return &PayloadError{Reason: fmt.Sprintf("event %q lacks %q", event, field)}
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

	ev, action := d.Event, p.Action
	switch ev {
	case "ping":
		e.res.Ignored = "ping"
		return e.res, nil

	case "repository":
		if action != "created" {
			break
		}
		r := p.Repository
		if r == nil {
			return e.res, lacks(ev, "repository")
		}
		e.emit(NewRepository, Resource{Type: "repository", ID: decimalID(r.ID), Title: r.FullName, URL: r.HTMLURL, Author: login(r.Owner)})

	case "fork":
		f := p.Forkee
		if f == nil {
			return e.res, lacks(ev, "forkee")
		}
		e.emit(NewFork, Resource{Type: "fork", ID: decimalID(f.ID), Title: f.FullName, URL: f.HTMLURL, Author: login(f.Owner)})

	case "star", "watch":
		k, typ, want := NewStar, "star", "created"
		if ev == "watch" {
			k, typ, want = NewWatcher, "watcher", "started"
		}
		if action != want {
			break
		}
		r := p.Repository
		if r == nil {
			return e.res, lacks(ev, "repository")
		}
		e.emit(k, Resource{Type: typ, ID: decimalID(r.ID), Title: r.FullName, URL: r.HTMLURL, Author: e.sender})

	case "create":
		var k Kind
		switch p.RefType {
		case "tag":
			k = NewTag
		case "branch":
			k = NewBranch
		default:
			return e.done(fmt.Sprintf("event %q ref_type %q maps to no trigger kind", ev, p.RefType))
		}
		if p.Ref == "" {
			return e.res, lacks(ev, "ref")
		}
		ref, _ := bareRef(p.Ref)
		e.emit(k, Resource{Type: p.RefType, Title: ref, Ref: ref, RefType: p.RefType, Author: e.sender})

	case "issues":
		is := p.Issue
		switch action {
		case "opened", "edited", "labeled", "unlabeled", "assigned", "unassigned", "closed", "reopened":
			if is == nil {
				return e.res, lacks(ev, "issue")
			}
		default:
			return e.done(noKind(ev, action))
		}
		r := issueResource("issue", is)
		if (action == "labeled" || action == "unlabeled") && p.Label != nil {
			r.Label = p.Label.Name // the label added or removed
		}
		switch action {
		case "opened":
			e.emit(NewIssue, r)
			// A transferred issue arrives "opened" with its old body:
			// nothing in it is newly written.
			if p.Changes == nil || p.Changes.OldIssue == nil {
				e.emitMentions(is.Body, textResource(is.ID, is.Number, is.Title, is.HTMLURL, is.User))
			}
		case "labeled":
			e.emit(UpdatedIssue, r)
			e.emit(NewIssueLabel, r)
		default:
			e.emit(UpdatedIssue, r)
		}

	case "pull_request":
		pr := p.PullRequest
		switch action {
		case "opened", "ready_for_review", "review_requested",
			"edited", "synchronize", "converted_to_draft", "closed", "reopened",
			"labeled", "unlabeled", "assigned", "unassigned":
			if pr == nil {
				return e.res, lacks(ev, "pull_request")
			}
		default:
			return e.done(noKind(ev, action))
		}
		switch action {
		case "opened":
			if !pr.Draft {
				e.emit(NewPullRequest, issueResource("pull_request", pr))
			}
			e.emitMentions(pr.Body, textResource(pr.ID, pr.Number, pr.Title, pr.HTMLURL, pr.User))
			if pr.Draft {
				return e.done(fmt.Sprintf("event %q action %q on a draft, without new mentions, maps to no trigger kind", ev, action))
			}
		case "ready_for_review":
			r := issueResource("pull_request", pr)
			e.emit(NewPullRequest, r)
			e.emit(UpdatedPullRequest, r)
		case "review_requested":
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
		default:
			r := issueResource("pull_request", pr)
			if (action == "labeled" || action == "unlabeled") && p.Label != nil {
				r.Label = p.Label.Name // the label added or removed
			}
			e.emit(UpdatedPullRequest, r)
		}

	case "issue_comment", "pull_request_review_comment":
		if action != "created" {
			break
		}
		parent, parentField := p.Issue, "issue"
		if ev == "pull_request_review_comment" {
			parent, parentField = p.PullRequest, "pull_request"
		}
		c := p.Comment
		if parent == nil {
			return e.res, lacks(ev, parentField)
		}
		if c == nil {
			return e.res, lacks(ev, "comment")
		}
		r := textResource(c.ID, parent.Number, parent.Title, c.HTMLURL, c.User)
		r.Type = "comment"
		e.emit(NewComment, r)
		e.emitMentions(c.Body, r)

	case "pull_request_review":
		if action != "submitted" {
			break
		}
		pr, rv := p.PullRequest, p.Review
		if pr == nil {
			return e.res, lacks(ev, "pull_request")
		}
		if rv == nil {
			return e.res, lacks(ev, "review")
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

	case "discussion":
		if action != "created" {
			break
		}
		di := p.Discussion
		if di == nil {
			return e.res, lacks(ev, "discussion")
		}
		e.emit(NewDiscussion, issueResource("discussion", di))
		e.emitMentions(di.Body, textResource(di.ID, di.Number, di.Title, di.HTMLURL, di.User))

	case "discussion_comment":
		if action != "created" {
			break
		}
		di, c := p.Discussion, p.Comment
		if di == nil {
			return e.res, lacks(ev, "discussion")
		}
		if c == nil {
			return e.res, lacks(ev, "comment")
		}
		r := textResource(c.ID, di.Number, di.Title, c.HTMLURL, c.User)
		r.Type = "discussion_comment"
		e.emit(NewDiscussionComment, r)
		e.emitMentions(c.Body, r)

	case "commit_comment":
		if action != "created" {
			break
		}
		c := p.Comment
		if c == nil {
			return e.res, lacks(ev, "comment")
		}
		r := textResource(c.ID, 0, "", c.HTMLURL, c.User)
		r.SHA = c.CommitID
		e.emitMentions(c.Body, r)
		return e.done(fmt.Sprintf("event %q action %q has no new mention", ev, action))

	case "push":
		if p.Ref == "" {
			return e.res, lacks(ev, "ref")
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
		return e.done(fmt.Sprintf("event %q deleting %q maps to no trigger kind", ev, p.Ref))

	case "workflow_run", "workflow_job":
		if action != "completed" {
			break
		}
		k, w := WorkflowRunCompleted, p.WorkflowRun
		if ev == "workflow_job" {
			k, w = WorkflowJobCompleted, p.WorkflowJob
		}
		if w == nil {
			return e.res, lacks(ev, ev)
		}
		title := w.Name
		if title == "" {
			title = w.DisplayTitle
		}
		e.emit(k, Resource{Type: ev, ID: decimalID(w.ID), Title: title, URL: w.HTMLURL, State: w.Status,
			Conclusion: w.Conclusion, Ref: w.HeadBranch, SHA: w.HeadSHA, Author: login(w.Actor)})

	case "member":
		if action != "added" {
			break
		}
		m := p.Member
		if m == nil {
			return e.res, lacks(ev, "member")
		}
		e.emit(NewCollaborator, Resource{Type: "collaborator", ID: decimalID(m.ID), Title: m.Login, URL: m.HTMLURL, Author: m.Login})

	case "projects_v2_item":
		if action != "edited" {
			break
		}
		it := p.ProjectsV2Item
		if it == nil {
			return e.res, lacks(ev, "projects_v2_item")
		}
		var fv *ghFieldValue
		if p.Changes != nil {
			fv = p.Changes.FieldValue
		}
		if fv == nil || fv.FieldType != "single_select" {
			return e.done(fmt.Sprintf("event %q action %q changes no single-select field", ev, action))
		}
		r := Resource{Type: "project_item", ID: decimalID(it.ID), Title: it.ContentType, FieldID: fv.FieldNodeID}
		// The newer payload shape names the field and carries the old and
		// new options. The older one (no field_name at all) only has the
		// field's node id, whose name needs a GraphQL lookup this pure
		// mapper cannot make: such an edit is emitted too, with Field, From
		// and To left empty and FieldID set, and the dispatcher resolves
		// the name before a trigger starts (package dispatch).
		if fv.FieldName != nil {
			if !strings.EqualFold(*fv.FieldName, "Status") {
				return e.done(fmt.Sprintf("event %q action %q changes field %q, not Status", ev, action, *fv.FieldName))
			}
			r.Field = "Status"
			r.From = optionName(fv.From)
			r.To = optionName(fv.To)
		}
		e.emit(ProjectItemStatusChanged, r)

	case "project_card":
		if action != "created" {
			break
		}
		c := p.ProjectCard
		if c == nil {
			return e.res, lacks(ev, "project_card")
		}
		e.emit(NewProjectCard, Resource{Type: "project_card", ID: decimalID(c.ID), ColumnID: c.ColumnID, Title: c.Note, Author: login(c.Creator)})

	case "release":
		if action != "published" {
			break
		}
		rl := p.Release
		if rl == nil {
			return e.res, lacks(ev, "release")
		}
		e.emit(NewRelease, Resource{Type: "release", ID: decimalID(rl.ID), Ref: rl.TagName, Title: rl.Name, URL: rl.HTMLURL,
			Draft: rl.Draft, Author: login(rl.Author)})
	}
	if len(e.res.Events) > 0 {
		// Most deliveries end here: the reason is only formatted when
		// there is none.
		return e.res, nil
	}
	return e.done(noKind(ev, action))
}

// mapDeploy maps a deployment-platform delivery; see Map for the rules.
func mapDeploy(d Delivery) (Result, error) {
	var env vEnvelope
	if err := decodeObject(d.Payload, &env); err != nil {
		return Result{}, err
	}
	if env.ID == "" {
		return Result{SourceEvent: env.Type}, &PayloadError{Reason: `deployment envelope lacks a string "id"`}
	}
	if env.Type == "" {
		return Result{DeliveryID: env.ID}, &PayloadError{Reason: `deployment envelope lacks a string "type"`}
	}
	e := emitter{
		res:      Result{DeliveryID: env.ID, SourceEvent: env.Type},
		conn:     Deploy,
		received: d.ReceivedAt,
		payload:  d.Payload,
		scope:    d.Scope,
	}
	var k Kind
	var state string
	switch env.Type {
	case "deployment.created":
		k, state = DeploymentStarted, "building"
	case "deployment.succeeded", "deployment.ready":
		k, state = DeploymentCompleted, "ready"
	case "deployment.error":
		k, state = DeploymentFailed, "error"
	case "deployment.canceled":
		k, state = DeploymentCanceled, "canceled"
	default:
		return e.done(fmt.Sprintf("type %q maps to no trigger kind", env.Type))
	}
	p := env.Payload
	if p == nil {
		return e.res, &PayloadError{Reason: fmt.Sprintf("type %q lacks %q", env.Type, "payload")}
	}
	if p.Team != nil && p.Team.ID != "" {
		e.account = p.Team.ID
	} else if p.User != nil {
		e.account = p.User.ID
	}
	if p.User != nil {
		e.sender = p.User.ID
	}
	r := Resource{Type: "deployment", ID: p.DeploymentID, DeploymentURL: p.URL, ProjectName: p.Name,
		Target: p.Target, Project: p.ProjectID, State: state}
	if r.Target == "" {
		r.Target = PreviewTarget
	}
	if p.Project != nil && p.Project.ID != "" {
		r.Project = p.Project.ID
	}
	if p.Links != nil {
		r.URL = p.Links.Deployment
	}
	if dp := p.Deployment; dp != nil {
		if dp.ID != "" {
			r.ID = dp.ID
		}
		if dp.URL != "" {
			r.DeploymentURL = dp.URL
		}
		if dp.Name != "" {
			r.ProjectName = dp.Name
		}
		if m := dp.Meta; m != nil {
			r.SHA, r.Ref, r.Title = m.GithubCommitSha, m.GithubCommitRef, m.GithubCommitMessage
			owner, name := m.GithubOrg, m.GithubRepo
			if owner == "" || name == "" {
				owner, name = m.GithubCommitOrg, m.GithubCommitRepo
			}
			if owner != "" && name != "" {
				e.repo = &Repository{Owner: owner, Name: name, FullName: owner + "/" + name}
			}
		}
	}
	if r.DeploymentURL != "" && !strings.Contains(r.DeploymentURL, "://") {
		// Vercel sends the host name alone ("app-abc123.vercel.app").
		r.DeploymentURL = "https://" + r.DeploymentURL
	}
	e.emit(k, r)
	return e.res, nil
}

// repository returns the Repository of a payload's repository object,
// completing a missing owner or name from full_name; nil when the object
// names nothing (an empty object, or a value of another JSON type).
func repository(r *ghRepo) *Repository {
	out := Repository{Owner: login(r.Owner), Name: r.Name, FullName: r.FullName}
	if owner, name, ok := strings.Cut(r.FullName, "/"); ok {
		if out.Owner == "" {
			out.Owner = owner
		}
		if out.Name == "" {
			out.Name = name
		}
	}
	if out.Owner == "" && out.Name == "" && out.FullName == "" {
		return nil
	}
	if out.FullName == "" && out.Owner != "" && out.Name != "" {
		out.FullName = out.Owner + "/" + out.Name
	}
	return &out
}

// issueResource describes an issue, pull request or discussion.
func issueResource(typ string, is *ghIssue) Resource {
	r := Resource{Type: typ, ID: decimalID(is.ID), Number: is.Number, Title: is.Title, URL: is.HTMLURL,
		State: is.State, Author: login(is.User), Draft: is.Draft, Merged: is.Merged}
	if len(is.Labels) > 0 {
		r.Labels = make([]string, len(is.Labels))
		for i := range is.Labels {
			r.Labels[i] = is.Labels[i].Name
		}
	}
	if is.Head != nil {
		r.Ref, r.SHA = is.Head.Ref, is.Head.SHA
	}
	return r
}

// textResource describes a piece of written text (an issue body, a comment,
// a review): objID is the text's object, number and title those of the
// issue, pull request or discussion it belongs to.
func textResource(objID, number int64, title, url string, author *ghLogin) Resource {
	return Resource{ID: decimalID(objID), Number: number, Title: title, URL: url, Author: login(author)}
}

// optionName returns the name of a single-select option given as an object
// ({"id","name",...}), or the string itself; "" for null or anything else.
func optionName(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		var o ghOption
		if json.Unmarshal(raw, &o) == nil {
			return o.Name
		}
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return ""
}

// login returns u's login, or "" when u is nil.
func login(u *ghLogin) string {
	if u == nil {
		return ""
	}
	return u.Login
}

// decimalID writes a numeric id in decimal; 0 (absent) gives "".
func decimalID(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// bareRef strips "refs/heads/" or "refs/tags/" from a Git ref and says
// which it was: "branch", "tag", or "" for neither.
func bareRef(ref string) (bare, refType string) {
	if s, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
		return s, "branch"
	}
	if s, ok := strings.CutPrefix(ref, "refs/tags/"); ok {
		return s, "tag"
	}
	return ref, ""
}

// firstLine returns the first line of a commit message, without a trailing
// carriage return.
func firstLine(msg string) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return strings.TrimSuffix(msg, "\r")
}
