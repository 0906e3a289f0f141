package triggers

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// Delivery is one verified webhook delivery, as the mapper reads it.
type Delivery struct {
	Connector Connector
	// ID is the sender's delivery id: X-GitHub-Delivery for code hosting.
	// For the deployment platform it is empty on input; the mapper reads it
	// from the envelope's "id".
	ID string
	// Event is X-GitHub-Event for code hosting; ignored for deployments,
	// whose type is in the body.
	Event      string
	ReceivedAt time.Time
	// Payload is the webhook JSON exactly as received (for form-encoded
	// code-hosting deliveries, the decoded "payload" field).
	Payload []byte
	// Scope is set for deliveries that arrived on a hook of one tenant
	// (/webhooks/<connector>/<hook-id>); nil on the shared endpoints.
	Scope *Scope
}

// Scope says whom an event is for. Events that arrive on a hook triggerd
// registered for a tenant (or on a deployment endpoint it gave an agent)
// carry the hook's scope, and only that tenant's triggers of that account
// (or agent) are candidates for them. Events of the shared endpoints carry
// none.
type Scope struct {
	// Hook is the id of the hook the delivery arrived on.
	Hook   string `json:"hook"`
	Tenant string `json:"tenant"`
	// Account is the connected account that registered the hook; empty for
	// deployment endpoints.
	Account string `json:"account,omitempty"`
	// Agent is the agent a deployment endpoint belongs to.
	Agent string `json:"agent,omitempty"`
}

// PolledHookPrefix starts the Hook of the scope of events a poller made
// (new_gist, account-wide new_mention): "poll-<account-id>".
const PolledHookPrefix = "poll-"

// Polled reports whether the scope is a poller's rather than a webhook's.
func (s *Scope) Polled() bool { return s != nil && strings.HasPrefix(s.Hook, PolledHookPrefix) }

// DeliveryKey returns what makes a delivery unique: its id, prefixed with
// the hook's id for scoped deliveries ("<hook>/<id>"), since a provider's
// delivery ids are only unique per hook. Event ids and the archive are
// keyed by it.
func DeliveryKey(s *Scope, deliveryID string) string {
	if s == nil || s.Hook == "" {
		return deliveryID
	}
	return s.Hook + "/" + deliveryID
}

// Result is what one delivery maps to.
type Result struct {
	// DeliveryID is the delivery id the events carry.
	DeliveryID string
	// SourceEvent and Action name what the sender reported ("issues",
	// "labeled"; "deployment.created", "").
	SourceEvent string
	Action      string
	// Events are the events to publish, in a stable order.
	Events []Event
	// Ignored says why the delivery maps to no event; empty when Events is
	// not empty.
	Ignored string
	// CreatedAt is when the sender says it created the delivery (a
	// deployment delivery's "createdAt"); zero when the delivery does not
	// say. It is part of the signed body: ingest refuses a delivery too
	// old to be told apart from a replay.
	CreatedAt time.Time
}

// Repository identifies a code-hosting repository.
type Repository struct {
	Owner    string `json:"owner"`
	Name     string `json:"name"`
	FullName string `json:"full_name"`
}

// Resource is a small kind-specific summary of what the event is about, so
// an agent can act without reading the payload. Fields that do not apply to
// a kind are omitted.
type Resource struct {
	// Type is the object kind: repository, fork, star, watcher, tag,
	// branch, issue, pull_request, comment, review_request, review, commit,
	// push, workflow_run, workflow_job, collaborator, mention, project_item,
	// project_card, release, gist, discussion, discussion_comment,
	// deployment.
	Type string `json:"type"`
	// ID is the object's id at the provider, as a string (numeric ids are
	// written in decimal; commit ids are SHAs; deployment ids are dpl_…).
	ID     string `json:"id,omitempty"`
	Number int64  `json:"number,omitempty"`
	Title  string `json:"title,omitempty"`
	URL    string `json:"url,omitempty"`
	State  string `json:"state,omitempty"`
	// Ref is a bare branch or tag name ("main", "v1.0"), never "refs/…";
	// RefType says which ("branch" or "tag") where the event tells.
	Ref         string   `json:"ref,omitempty"`
	RefType     string   `json:"ref_type,omitempty"`
	SHA         string   `json:"sha,omitempty"`
	Conclusion  string   `json:"conclusion,omitempty"`
	ReviewState string   `json:"review_state,omitempty"`
	Label       string   `json:"label,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	Mentioned   string   `json:"mentioned,omitempty"`
	// Reviewer is whose review a review request asks for: a login, or
	// "org/team-slug" for a team.
	Reviewer string `json:"reviewer,omitempty"`
	Author   string `json:"author,omitempty"`
	Draft    bool   `json:"draft,omitempty"`
	Merged   bool   `json:"merged,omitempty"`
	// ColumnID is the classic project board column of a card.
	ColumnID int64 `json:"column_id,omitempty"`
	// Field, From and To describe a project item field change; FieldID is
	// the field's node id (PVTSSF_...), the only part of it the older
	// projects_v2_item payload shape carries.
	Field   string `json:"field,omitempty"`
	FieldID string `json:"field_id,omitempty"`
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	// Project is the deployment platform's project id; ProjectName its name.
	Project     string `json:"project,omitempty"`
	ProjectName string `json:"project_name,omitempty"`
	// DeploymentURL and Target describe a deployment: its https URL, and
	// "production", PreviewTarget (Vercel's null target) or a custom
	// environment's name such as "staging".
	DeploymentURL string `json:"deployment_url,omitempty"`
	Target        string `json:"target,omitempty"`
}

// PreviewTarget is a preview deployment's target, which Vercel sends as
// null.
const PreviewTarget = "preview"

// Event is one trigger event: the JSON message published on the kind's
// subject.
type Event struct {
	// ID is deterministic: the same delivery, kind and index always give the
	// same id (see EventID). It is the JetStream Nats-Msg-Id.
	ID          string    `json:"id"`
	Kind        Kind      `json:"kind"`
	Connector   Connector `json:"connector"`
	DeliveryID  string    `json:"delivery_id"`
	SourceEvent string    `json:"source_event"`
	Action      string    `json:"action"`
	ReceivedAt  time.Time `json:"received_at"`
	// Repository is nil for events that belong to no repository
	// (organisation-level events, deployments without Git metadata).
	Repository *Repository `json:"repository"`
	// Account is the login (code hosting) or team or user id (deployments)
	// the event belongs to.
	Account  string   `json:"account"`
	Sender   string   `json:"sender"`
	Resource Resource `json:"resource"`
	// Payload is the original webhook JSON, unchanged. It is nil when the
	// event would be too large to carry it; PayloadRef then names where the
	// archived delivery can be read.
	Payload    json.RawMessage `json:"payload"`
	PayloadRef string          `json:"payload_ref,omitempty"`
	// Scope is the hook's scope for deliveries on a tenant's hook; nil for
	// the shared endpoints.
	Scope *Scope `json:"scope,omitempty"`
}

// DecodeEvent decodes an event's JSON encoding into e. It gives what
// encoding/json gives, with the mapper's decoder (goccy/go-json), which
// skips the payload while validating it several times faster: consumers
// decode every event the stream carries.
func DecodeEvent(data []byte, e *Event) error {
	return fastjson.Unmarshal(data, e)
}

// eventNamespace scopes the name-based (version 5) event ids.
var eventNamespace = uuid.MustParse("6f0c3c2e-6a59-4f5b-9a8e-0d5b7c7f1a21")

// EventID returns the deterministic id of the index-th event of kind k
// (counting from 0 among that kind's events) of a delivery: the name-based
// (version 5, SHA-1) UUID, in eventNamespace, of the connector, delivery id,
// kind and decimal index joined by NUL bytes. It is what uuid.NewSHA1 gives
// for that name, computed without its allocations.
func EventID(c Connector, deliveryID string, k Kind, index int) string {
	var buf [192]byte
	name := append(buf[:0], eventNamespace[:]...)
	name = append(name, c...)
	name = append(name, 0)
	name = append(name, deliveryID...)
	name = append(name, 0)
	name = append(name, k...)
	name = append(name, 0)
	name = strconv.AppendInt(name, int64(index), 10)
	sum := sha1.Sum(name)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// eventHeader is Event without the payload, for encoding.
type eventHeader struct {
	ID          string      `json:"id"`
	Kind        Kind        `json:"kind"`
	Connector   Connector   `json:"connector"`
	DeliveryID  string      `json:"delivery_id"`
	SourceEvent string      `json:"source_event"`
	Action      string      `json:"action"`
	ReceivedAt  string      `json:"received_at"`
	Repository  *Repository `json:"repository"`
	Account     string      `json:"account"`
	Sender      string      `json:"sender"`
	Resource    *Resource   `json:"resource"`
	PayloadRef  string      `json:"payload_ref,omitempty"`
	Scope       *Scope      `json:"scope,omitempty"`
}

// MarshalJSON encodes the event with its payload spliced in as raw bytes:
// the payload is neither re-validated nor re-formatted, so it stays exactly
// as the provider sent it, except for white space around the JSON value,
// which is dropped (it is not part of the value, and a decoder would drop
// it too).
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil)
}

// header returns the event's fields but the payload, for encoding.
func (e *Event) header() eventHeader {
	return eventHeader{
		ID: e.ID, Kind: e.Kind, Connector: e.Connector, DeliveryID: e.DeliveryID,
		SourceEvent: e.SourceEvent, Action: e.Action,
		ReceivedAt: e.ReceivedAt.UTC().Format(time.RFC3339Nano),
		Repository: e.Repository, Account: e.Account, Sender: e.Sender,
		Resource: &e.Resource, PayloadRef: e.PayloadRef, Scope: e.Scope,
	}
}

// AppendJSON appends the event's JSON encoding to dst. The fields but the
// payload are encoded with goccy/go-json, which writes what encoding/json
// writes (TestHeaderEncodingMatchesEncodingJSON holds it to that) in half
// the time; every event is encoded once on the ingest path.
func (e *Event) AppendJSON(dst []byte) ([]byte, error) {
	h := e.header()
	head, err := fastjson.Marshal(&h)
	if err != nil {
		return dst, err
	}
	// head ends in '}'; reopen it to add the payload.
	dst = append(dst, head[:len(head)-1]...)
	dst = append(dst, `,"payload":`...)
	if p := trimJSONSpace(e.Payload); len(p) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, p...)
	}
	return append(dst, '}'), nil
}

// trimJSONSpace returns b without the JSON white space around it.
func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// EncodedSizeWithoutPayload returns the size of the event's encoding with a
// null payload; callers use it to decide whether the payload fits.
func (e *Event) EncodedSizeWithoutPayload() int {
	c := *e
	c.Payload = nil
	b, err := c.AppendJSON(nil)
	if err != nil {
		return 0
	}
	return len(b)
}

// Capture is a raw delivery as it was received: what the archive keeps so an
// operator can replay it. Header holds the request's HTTP headers (minus
// credentials and hop-by-hop ones); Body is the raw body, which for a
// form-encoded delivery is the form, not the extracted JSON.
type Capture struct {
	Connector  Connector
	DeliveryID string
	ReceivedAt time.Time
	Header     map[string][]string
	Body       []byte
	// Scope is the hook's scope for deliveries on a tenant's hook.
	Scope *Scope
}

// Key returns the capture's DeliveryKey.
func (c Capture) Key() string { return DeliveryKey(c.Scope, c.DeliveryID) }

// PayloadByReference returns the payload_ref of an event whose payload was
// left out, "" for an event that carries its payload (or has none to read).
func (ev *Event) PayloadByReference() string {
	if ev.PayloadRef == "" {
		return ""
	}
	if p := bytes.TrimSpace(ev.Payload); len(p) != 0 && !bytes.Equal(p, []byte("null")) {
		return ""
	}
	return ev.PayloadRef
}

// maxSummary bounds a Summary, in runes.
const maxSummary = 120

// Summary returns a short line that tells the event apart in a list: an
// issue's or pull request's number and title, a commit's first line, a
// deployment's project and target, a branch or tag. It is outside text
// (a title, a message), to be shown as text. "" when the event has
// nothing to say beyond its kind.
func (e Event) Summary() string {
	r := e.Resource
	var s string
	switch {
	case r.ProjectName != "":
		s = r.ProjectName
		if r.Target != "" {
			s += " (" + r.Target + ")"
		}
	case r.Number > 0 && r.Title != "":
		s = "#" + strconv.FormatInt(r.Number, 10) + " " + r.Title
	case r.Number > 0:
		s = "#" + strconv.FormatInt(r.Number, 10)
	case r.Title != "":
		s = r.Title
	case r.Ref != "":
		s = r.Ref
	case r.SHA != "":
		s = r.SHA[:min(len(r.SHA), 12)]
	}
	s = strings.Join(strings.Fields(s), " ")
	if n := 0; len(s) > maxSummary {
		for i := range s {
			if n == maxSummary-1 {
				return s[:i] + "…"
			}
			n++
		}
	}
	return s
}
