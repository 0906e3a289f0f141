package triggers

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/triggers/mention"
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
// itself); package mention states the exact rules. Every other delivery
// yields at most one event. The events share their Repository and
// Resource.Labels values and their Payload, which is d.Payload itself;
// treat them as read-only.
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
	for _, login := range mention.Logins(text, e.sender) {
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
