// Package ingest is the webhook edge of triggerd: an echo HTTP server that
// takes signed code-hosting (GitHub format) and deployment-platform (Vercel
// format) deliveries, verifies them on the raw bytes before anything parses
// them, maps them onto trigger events and hands delivery and events to a
// Committer. It answers 2xx only once the Committer says both are durable,
// or, when the Committer cannot in time, once a Spooler has them on local
// disk.
package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/internal/jsonx"
	"github.com/triggerd/triggerd/triggers"
)

// Committer makes a delivery and its events durable, once per delivery id.
// It reports duplicate true for a delivery it had already accepted, and
// may set each event's Payload to nil and PayloadRef when the payload is
// too large to travel inline.
type Committer interface {
	Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate bool, err error)
}

// ErrUnknownHook is what a Hooks resolver returns for an id it does not
// know.
var ErrUnknownHook = errors.New("ingest: unknown hook")

// Hooks resolves the hooks triggerd registered for tenants, which deliver
// to /webhooks/<connector>/<hook-id> signed with their own secret.
type Hooks interface {
	// Hook returns the scope of hook id of connector c and the verifier of
	// its secret, or an error wrapping ErrUnknownHook.
	Hook(ctx context.Context, c triggers.Connector, id string) (triggers.Scope, *Verifier, error)
}

// Activity hears what became of each delivery to a tenant's hook (a
// per-hook endpoint, /webhooks/<connector>/<hook-id>), so that the hook's
// owner can see that deliveries arrive, or why they are refused. Its
// methods are called on the delivery's path and must not block.
type Activity interface {
	// Accepted: taken, or a duplicate of a delivery that was.
	Accepted(c triggers.Connector, hook string, at time.Time)
	// Refused: answered status with the error code and message.
	Refused(c triggers.Connector, hook string, at time.Time, status int, code, message string)
}

// DeliveryLog hears every delivery to a tenant's hook or to a shared
// endpoint with the answer it got, for the console's delivery log. Record is called on the
// delivery's path and must not block (see deliverylog.Log).
type DeliveryLog interface {
	Record(o DeliveryOutcome)
}

// DeliveryOutcome is one delivery to a hook and its answer.
type DeliveryOutcome struct {
	Connector triggers.Connector
	// Hook is the hook id in the path ("" for a shared endpoint); Scope
	// is nil for a shared endpoint, and when the delivery was refused
	// before the hook was resolved.
	Hook  string
	Scope *triggers.Scope
	// DeliveryID and Key are empty when it was refused before they were
	// read.
	DeliveryID, Key string
	Event, Action   string
	// Answer is "accepted", "duplicate", "ignored" or "refused".
	Answer        string
	Status        int
	Code, Message string
	// Events are the events published (read only).
	Events     []triggers.Event
	ReceivedAt time.Time
}

// Rechecker is a Hooks whose answers may be older than a hook's secrets
// (HookCache). When a delivery's signature fails against them, the server
// asks Recheck, which resolves the hook again (fresh true) unless it did
// so moments ago.
type Rechecker interface {
	Recheck(ctx context.Context, c triggers.Connector, id string) (scope triggers.Scope, v *Verifier, fresh bool, err error)
}

// Defaults for Options.
const (
	// DefaultMaxBodyBytes is GitHub's payload cap, 25 MiB.
	DefaultMaxBodyBytes = 25 << 20
	// DefaultMaxBodyBytesInFlight is ten bodies of the largest size, and
	// thousands of ordinary ones.
	DefaultMaxBodyBytesInFlight = 10 * DefaultMaxBodyBytes
	// DefaultCommitTimeout bounds the wait for durability, well inside
	// GitHub's 10 s delivery timeout.
	DefaultCommitTimeout = 5 * time.Second
	// maxDeliveryIDLen bounds delivery ids, which become subject tokens.
	maxDeliveryIDLen = 200
	// retryAfterSeconds is what a 503 asks the sender to wait.
	retryAfterSeconds = 5
	// ClockSkew is how far the sender's clock may be ahead of triggerd's:
	// a delivery created further in the future is not taken (see
	// Options.MaxDeliveryAge).
	ClockSkew = 15 * time.Minute
)

// Options configures a Server.
type Options struct {
	Committer Committer
	// CodeHost and Deploy verify the two endpoints' signatures; both are
	// required, so no endpoint ever accepts an unsigned delivery.
	CodeHost *Verifier
	Deploy   *Verifier
	// Hooks resolves per-hook endpoints; nil serves only the shared ones.
	Hooks Hooks
	// Activity, when set, hears what became of each delivery to a hook,
	// by the hook id in its path: all but those answered unknown_hook. A
	// refusal made before the hook is looked up (a missing header, a
	// wrong content type) names an id that may not exist.
	Activity Activity
	// Deliveries, when set, hears every delivery to a hook and its answer.
	Deliveries DeliveryLog
	// Ready reports whether the Committer can currently make deliveries
	// durable; /readyz answers from it, and while it is false a delivery
	// goes to the Spool without trying the Committer (a commit would only
	// wait out its deadline).
	Ready func() bool
	// NotReadyReason, when set, says why Ready is false, for /readyz and
	// the log ("NATS is unreachable" when unset).
	NotReadyReason func() string
	// MaxBodyBytes caps a delivery's body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxBodyBytesInFlight caps the bytes of all the bodies held at once
	// (default DefaultMaxBodyBytesInFlight). A body is read before its
	// signature can be checked, so without it anyone could have triggerd
	// hold 25 MiB per connection; past it a delivery is answered 503 with
	// Retry-After.
	MaxBodyBytesInFlight int64
	// CommitTimeout bounds the wait for durability (default
	// DefaultCommitTimeout).
	CommitTimeout time.Duration
	// MaxDeliveryAge refuses a delivery that says (triggers.Result's
	// CreatedAt: a deployment delivery's signed createdAt) it was created
	// longer ago: once the Committer may have forgotten its first
	// acceptance (the archive's retention), it could not be told apart
	// from a replay and would start agents again. It is answered 400
	// stale_delivery before anything is published. A delivery created
	// more than ClockSkew ahead of Now is answered 503 clock_skew (not
	// accepted; the sender retries). Zero takes deliveries of any age.
	MaxDeliveryAge time.Duration
	// Spool, when set, takes the deliveries the Committer cannot make
	// durable in time (answered 202 with "spooled": true); without it
	// they are answered 503.
	Spool  *Spooler
	Logger zerolog.Logger
	// Registerer receives the ingest metrics; nil registers nowhere.
	Registerer prometheus.Registerer
	// Now and Map default to time.Now and triggers.Map; tests replace them.
	Now func() time.Time
	Map func(triggers.Delivery) (triggers.Result, error)
}

func (o *Options) validate() error {
	switch {
	case o.Committer == nil:
		return errors.New("ingest: nil Committer")
	case o.CodeHost == nil || o.Deploy == nil:
		return errors.New("ingest: both webhook verifiers are required")
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxBodyBytesInFlight <= 0 {
		o.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Map == nil {
		o.Map = triggers.Map
	}
	return nil
}

// Server serves the webhook endpoints and the health and readiness probes.
type Server struct {
	o       Options
	log     zerolog.Logger
	metrics *metrics
	bufs    sync.Pool
	// bodyBytes is the bytes of the bodies read and not yet released
	// (readBody, release), against MaxBodyBytesInFlight.
	bodyBytes atomic.Int64
	dates     dateCache
	// commits bounds each delivery's commit by CommitTimeout.
	commits deadlines
	// flights are the deliveries being committed now (commitOnce).
	flights flights
}

// dateCache holds the Date header of the current second. net/http formats
// one for every answer that lacks it, about 1 % of ingest's CPU under
// load; webhook answers take this one instead.
type dateCache struct {
	cur atomic.Pointer[dateValue]
}

type dateValue struct {
	unix  int64
	value string
}

// header returns the Date header for now, in a slice of its own.
func (d *dateCache) header(now time.Time) []string {
	unix := now.Unix()
	v := d.cur.Load()
	if v == nil || v.unix != unix {
		v = &dateValue{unix: unix, value: now.UTC().Format(http.TimeFormat)}
		d.cur.Store(v)
	}
	return []string{v.value}
}

// New returns a Server.
func New(o Options) (*Server, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &Server{
		o:       o,
		log:     o.Logger.With().Str("component", "ingest").Logger(),
		metrics: m,
		bufs:    sync.Pool{New: func() any { return new(bytes.Buffer) }},
		commits: deadlines{tick: commitTick},
		flights: flights{m: map[flightKey]*flight{}},
	}, nil
}

// Register adds the server's routes to e.
func (s *Server) Register(e *echo.Echo) {
	e.POST("/webhooks/codehost", s.codeHost)
	e.POST("/webhooks/deploy", s.deploy)
	if s.o.Hooks != nil {
		e.POST("/webhooks/codehost/:hook", s.codeHost)
		e.POST("/webhooks/deploy/:hook", s.deploy)
	}
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		if !s.o.Ready() {
			return c.JSON(http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": s.notReadyReason()})
		}
		return c.JSON(http.StatusOK, map[string]any{"ready": true})
	})
}

// appendAnswer encodes the answer to an accepted delivery: its id, its
// events (id, kind, subject), when it mapped to none, why, and whether it
// was spooled. It is written for every delivery, so it is encoded by hand:
// echo's JSON encoding by reflection cost about 2% of ingest's CPU under
// load.
func appendAnswer(dst []byte, deliveryID string, events []triggers.Event, ignored string, spooled bool) []byte {
	dst = append(dst, `{"delivery_id":`...)
	dst = jsonx.AppendString(dst, deliveryID)
	dst = append(dst, `,"events":[`...)
	for i := range events {
		e := &events[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonx.AppendString(dst, e.ID)
		dst = append(dst, `,"kind":`...)
		dst = jsonx.AppendString(dst, string(e.Kind))
		dst = append(dst, `,"subject":`...)
		dst = jsonx.AppendString(dst, e.Subject())
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if ignored != "" {
		dst = append(dst, `,"ignored":`...)
		dst = jsonx.AppendString(dst, ignored)
	}
	if spooled {
		dst = append(dst, `,"spooled":true`...)
	}
	return append(dst, "}\n"...)
}

type duplicateAnswer struct {
	DeliveryID string `json:"delivery_id"`
	Duplicate  bool   `json:"duplicate"`
	// Message tells whoever pressed "Redeliver" (GitHub's delivery page)
	// hoping to start an agent again how to do that.
	Message string `json:"message"`
}

// duplicateMessage is duplicateAnswer's Message.
const duplicateMessage = "this delivery was accepted before and its events were published then; nothing was published again. " +
	"To run a trigger on it again, replay one of its events: POST /v1/events/{event id}/replay " +
	"(triggerctl triggers events TRIGGER_ID lists them; triggerctl replay-event EVENT_ID)"

// apiError is the body of every error answer.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// reject writes an error answer and counts it.
func (s *Server) reject(c echo.Context, src triggers.Connector, status int, code, msg string) error {
	s.metrics.delivery(src, "unverified", code)
	if hook := c.Param("hook"); code != "unknown_hook" {
		now := s.o.Now()
		if s.o.Activity != nil && hook != "" {
			s.o.Activity.Refused(src, hook, now, status, code, msg)
		}
		if s.o.Deliveries != nil {
			o := DeliveryOutcome{Connector: src, Hook: hook, Answer: "refused", Status: status, Code: code, Message: msg, ReceivedAt: now}
			if src == triggers.CodeHost {
				o.DeliveryID, o.Event = c.Request().Header.Get("X-GitHub-Delivery"), c.Request().Header.Get("X-GitHub-Event")
			}
			s.o.Deliveries.Record(o)
		}
	}
	var body apiError
	body.Error.Code, body.Error.Message = code, msg
	return c.JSON(status, body)
}

func (s *Server) codeHost(c echo.Context) error {
	start := s.o.Now()
	c.Response().Header()["Date"] = s.dates.header(start)
	r := c.Request()
	event := r.Header.Get("X-GitHub-Event")
	id := r.Header.Get("X-GitHub-Delivery")
	switch {
	case event == "" && id == "":
		return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "missing_header",
			misdirected(c, triggers.CodeHost, "headers X-GitHub-Event and X-GitHub-Delivery are required"))
	case event == "":
		return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "missing_header", "header X-GitHub-Event is required: it names the event (issues, push, ...)")
	case id == "":
		return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "missing_header", "header X-GitHub-Delivery is required: it is the delivery's unique id")
	case !validDeliveryID(id):
		return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "invalid_header", fmt.Sprintf("header X-GitHub-Delivery must be 1 to %d characters, without spaces or control characters", maxDeliveryIDLen))
	case len(event) > 100:
		return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "invalid_header", "header X-GitHub-Event is too long")
	}
	form := false
	switch mediaType(r) {
	case "application/json":
	case "application/x-www-form-urlencoded":
		form = true
	default:
		return s.reject(c, triggers.CodeHost, http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Content-Type must be application/json or application/x-www-form-urlencoded (the webhook's content type setting)")
	}
	verifier, scope, ok, err := s.verifier(c, triggers.CodeHost)
	if !ok {
		return err
	}
	sig := r.Header.Get(CodeHostScheme.Header)
	if sig == "" {
		return s.reject(c, triggers.CodeHost, http.StatusUnauthorized, "missing_signature",
			"header X-Hub-Signature-256 is missing: set the webhook's secret to "+secretName(triggers.CodeHost, scope))
	}
	buf, status, err := s.readBody(r)
	if err != nil {
		return s.rejectBody(c, triggers.CodeHost, status, err)
	}
	defer s.release(buf)
	body := buf.Bytes()
	verifier, scope, verified := s.verify(c, triggers.CodeHost, verifier, scope, sig, body)
	if !verified {
		msg, malformed := verifier.mismatch(sig, secretName(triggers.CodeHost, scope))
		s.log.Warn().Str("delivery_id", id).Str("hook", c.Param("hook")).Str("remote", c.RealIP()).Bool("malformed", malformed).
			Msg("code-hosting delivery with an invalid signature")
		return s.reject(c, triggers.CodeHost, http.StatusUnauthorized, "invalid_signature", msg)
	}
	payload := body
	if form {
		if payload, err = triggers.FormPayload(body); err != nil {
			return s.reject(c, triggers.CodeHost, http.StatusBadRequest, "malformed_payload", err.Error())
		}
	}
	return s.accept(c, start, triggers.Delivery{
		Connector: triggers.CodeHost, ID: id, Event: event, ReceivedAt: start, Payload: payload, Scope: scope,
	}, body)
}

func (s *Server) deploy(c echo.Context) error {
	start := s.o.Now()
	c.Response().Header()["Date"] = s.dates.header(start)
	r := c.Request()
	if mediaType(r) != "application/json" {
		return s.reject(c, triggers.Deploy, http.StatusUnsupportedMediaType, "unsupported_media_type",
			misdirected(c, triggers.Deploy, "Content-Type must be application/json"))
	}
	verifier, scope, ok, err := s.verifier(c, triggers.Deploy)
	if !ok {
		return err
	}
	sig := r.Header.Get(DeployScheme.Header)
	if sig == "" {
		return s.reject(c, triggers.Deploy, http.StatusUnauthorized, "missing_signature",
			misdirected(c, triggers.Deploy, "header x-vercel-signature is missing: set the webhook's secret to "+secretName(triggers.Deploy, scope)))
	}
	buf, status, err := s.readBody(r)
	if err != nil {
		return s.rejectBody(c, triggers.Deploy, status, err)
	}
	defer s.release(buf)
	body := buf.Bytes()
	verifier, scope, verified := s.verify(c, triggers.Deploy, verifier, scope, sig, body)
	if !verified {
		msg, malformed := verifier.mismatch(sig, secretName(triggers.Deploy, scope))
		s.log.Warn().Str("hook", c.Param("hook")).Str("remote", c.RealIP()).Bool("malformed", malformed).
			Msg("deployment delivery with an invalid signature")
		return s.reject(c, triggers.Deploy, http.StatusUnauthorized, "invalid_signature", msg)
	}
	return s.accept(c, start, triggers.Delivery{Connector: triggers.Deploy, ReceivedAt: start, Payload: body, Scope: scope}, body)
}

// verifier returns the verifier for the request's endpoint: the shared
// one, or the hook's. For an unknown hook it writes the answer and returns
// ok false with the write's result.
func (s *Server) verifier(c echo.Context, src triggers.Connector) (v *Verifier, scope *triggers.Scope, ok bool, err error) {
	id := c.Param("hook")
	if id == "" {
		if src == triggers.CodeHost {
			return s.o.CodeHost, nil, true, nil
		}
		return s.o.Deploy, nil, true, nil
	}
	sc, v, err := s.o.Hooks.Hook(c.Request().Context(), src, id)
	switch {
	case errors.Is(err, ErrUnknownHook):
		return nil, nil, false, s.reject(c, src, http.StatusNotFound, "unknown_hook", misdirected(c, src,
			fmt.Sprintf("no %s hook %q: it was removed (its last trigger was deleted) or the URL is mistyped; copy the URL from the trigger's or agent's page", src, id)))
	case err != nil:
		s.log.Error().Err(err).Str("hook", id).Msg("hook lookup failed; answered 503")
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		return nil, nil, false, s.reject(c, src, http.StatusServiceUnavailable, "unavailable", "the hook could not be looked up right now; nothing was accepted, retry later")
	}
	return v, &sc, true, nil
}

// verify reports whether sig signs body under v. For a hook's endpoint
// whose secrets were cached (a Rechecker), a failed check is tried once
// more against the hook as the store has it now, so that secrets just
// replaced take effect at their first delivery in every process; it then
// returns the verifier and scope the store answered.
func (s *Server) verify(c echo.Context, src triggers.Connector, v *Verifier, scope *triggers.Scope, sig string, body []byte) (*Verifier, *triggers.Scope, bool) {
	if v.Verify(sig, body) {
		return v, scope, true
	}
	rc, ok := s.o.Hooks.(Rechecker)
	if scope == nil || !ok {
		return v, scope, false
	}
	sc, nv, fresh, err := rc.Recheck(c.Request().Context(), src, scope.Hook)
	if err != nil {
		s.log.Warn().Err(err).Str("hook", scope.Hook).Msg("rechecking a hook's secrets after a signature mismatch failed; verified with the cached ones")
		return v, scope, false
	}
	if !fresh {
		return v, scope, false
	}
	return nv, &sc, nv.Verify(sig, body)
}

// misdirected returns, for a delivery in the other provider's format (its
// headers present, this endpoint's absent), a message that says so and
// names the endpoint to send it to; otherwise the rejection's own message,
// otherwise. Only rejection paths call it.
func misdirected(c echo.Context, src triggers.Connector, otherwise string) string {
	h := c.Request().Header
	hook := c.Param("hook") != ""
	if src == triggers.CodeHost {
		if h.Get(DeployScheme.Header) == "" || hasCodeHostHeader(h) {
			return otherwise
		}
		msg := "this is a deployment (Vercel-format) delivery: it has header x-vercel-signature and no X-GitHub-* headers, " +
			"and this endpoint takes code-hosting (GitHub-format) deliveries; "
		if hook {
			return msg + "use the agent's deployment endpoint URL, /webhooks/deploy/{endpoint-id} (triggerctl agents endpoint {agent-id} shows it), " +
				"instead of this code-hosting hook URL"
		}
		return msg + "send it to /webhooks/deploy, not /webhooks/codehost"
	}
	if h.Get(DeployScheme.Header) != "" {
		return otherwise
	}
	var seen string
	switch {
	case h.Get("X-GitHub-Event") != "":
		seen = "X-GitHub-Event"
	case h.Get(CodeHostScheme.Header) != "":
		seen = "X-Hub-Signature-256"
	default:
		return otherwise
	}
	msg := "this is a code-hosting (GitHub-format) delivery: it has header " + seen + " and no x-vercel-signature, " +
		"and this endpoint takes deployment (Vercel-format) deliveries; "
	if hook {
		return msg + "use the code-hosting hook URL, /webhooks/codehost/{hook-id}, which triggerd registers on the repository itself " +
			"when a trigger is created, instead of this deployment endpoint URL"
	}
	return msg + "send it to /webhooks/codehost, not /webhooks/deploy"
}

// hasCodeHostHeader reports whether h has any of the code-hosting format's
// headers: X-GitHub-* or X-Hub-Signature(-256).
func hasCodeHostHeader(h http.Header) bool {
	for k := range h {
		if len(k) >= len("X-GitHub-") && strings.EqualFold(k[:len("X-GitHub-")], "X-GitHub-") ||
			strings.EqualFold(k, "X-Hub-Signature") || strings.EqualFold(k, CodeHostScheme.Header) {
			return true
		}
	}
	return false
}

// secretName names the secret a delivery must be signed with, for error
// messages.
func secretName(src triggers.Connector, scope *triggers.Scope) string {
	switch {
	case scope != nil && scope.Agent != "":
		return "the endpoint's secrets (set the one the deployment platform showed when its webhook was created, " +
			"with triggerctl agents set-secrets " + scope.Agent + " or PUT /v1/agents/" + scope.Agent + "/endpoint/secrets)"
	case scope != nil:
		return "the hook's own secret, which triggerd set when it registered the hook (if it was changed in the " +
			"repository's or organisation's webhook settings, delete that webhook there: triggerd's next reconcile registers it again)"
	case src == triggers.CodeHost:
		return "triggerd's code-hosting webhook secret"
	}
	return "triggerd's deployment webhook secret"
}

// accept maps a verified delivery, commits it and answers.
func (s *Server) accept(c echo.Context, start time.Time, d triggers.Delivery, raw []byte) error {
	res, err := s.o.Map(d)
	if err != nil {
		var pe *triggers.PayloadError
		if errors.As(err, &pe) {
			return s.reject(c, d.Connector, http.StatusBadRequest, "malformed_payload", pe.Error())
		}
		return s.reject(c, d.Connector, http.StatusBadRequest, "malformed_payload", "the payload could not be mapped: "+err.Error())
	}
	if !validDeliveryID(res.DeliveryID) {
		what := "the delivery id"
		if d.Connector == triggers.Deploy {
			what = `the envelope's "id" (the delivery id)`
		}
		return s.reject(c, d.Connector, http.StatusBadRequest, "malformed_payload",
			fmt.Sprintf("%s must be 1 to %d characters, without spaces or control characters", what, maxDeliveryIDLen))
	}
	if refused, err := s.checkAge(c, d, res); refused {
		return err
	}
	event := s.metrics.eventLabel(d.Connector, res.SourceEvent)
	r := c.Request()
	capture := triggers.Capture{
		Connector:  d.Connector,
		DeliveryID: res.DeliveryID,
		ReceivedAt: start,
		Header:     r.Header,
		Body:       raw,
		Scope:      d.Scope,
	}
	duplicate, spooled, err := s.commitOnce(r.Context(), capture, res.Events)
	if err != nil {
		s.metrics.delivery(d.Connector, event, "unavailable")
		s.log.Error().Err(err).Str("delivery_id", res.DeliveryID).Str("connector", string(d.Connector)).
			Msg("delivery could not be made durable; answered 503")
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		var body apiError
		body.Error.Code = "unavailable"
		body.Error.Message = "the delivery could not be stored durably right now; nothing was accepted, retry later"
		if d.Scope != nil && s.o.Activity != nil {
			s.o.Activity.Refused(d.Connector, d.Scope.Hook, start, http.StatusServiceUnavailable, body.Error.Code, body.Error.Message)
		}
		s.recordDelivery(d, capture, res, "refused", http.StatusServiceUnavailable, body.Error.Code, body.Error.Message)
		return c.JSON(http.StatusServiceUnavailable, body)
	}
	s.metrics.latency(d.Connector, s.o.Now().Sub(start))
	if d.Scope != nil && s.o.Activity != nil {
		s.o.Activity.Accepted(d.Connector, d.Scope.Hook, start)
	}
	if duplicate {
		s.metrics.delivery(d.Connector, event, "duplicate")
		s.logDelivery(d, res, "duplicate")
		s.recordDelivery(d, capture, res, "duplicate", http.StatusOK, "", "")
		return c.JSON(http.StatusOK, duplicateAnswer{DeliveryID: res.DeliveryID, Duplicate: true, Message: duplicateMessage})
	}
	if !spooled { // the Spooler counts them once they reach NATS
		for i := range res.Events {
			s.metrics.published(res.Events[i].Kind)
		}
	}
	ans := appendAnswer(make([]byte, 0, 256), res.DeliveryID, res.Events, res.Ignored, spooled)
	if d.Connector == triggers.CodeHost && d.Event == "ping" {
		s.metrics.delivery(d.Connector, event, "ping")
		s.logDelivery(d, res, "ping")
		s.recordDelivery(d, capture, res, "ignored", http.StatusOK, "ping", res.Ignored)
		return c.JSONBlob(http.StatusOK, ans)
	}
	if len(res.Events) == 0 {
		s.recordDelivery(d, capture, res, "ignored", http.StatusAccepted, "no_event", res.Ignored)
	} else {
		s.recordDelivery(d, capture, res, "accepted", http.StatusAccepted, "", "")
	}
	outcome := "accepted"
	switch {
	case spooled:
		outcome = "spooled"
	case len(res.Events) == 0:
		outcome = "ignored"
	}
	s.metrics.delivery(d.Connector, event, outcome)
	s.logDelivery(d, res, outcome)
	return c.JSONBlob(http.StatusAccepted, ans)
}

// checkAge refuses a delivery created too long ago or too far ahead (see
// Options.MaxDeliveryAge), and reports whether it did, with the answer's
// write error.
func (s *Server) checkAge(c echo.Context, d triggers.Delivery, res triggers.Result) (bool, error) {
	if s.o.MaxDeliveryAge <= 0 || res.CreatedAt.IsZero() {
		return false, nil
	}
	now := s.o.Now()
	created := res.CreatedAt.UTC().Format(time.RFC3339)
	switch age := now.Sub(res.CreatedAt); {
	case age > s.o.MaxDeliveryAge:
		s.log.Warn().Str("delivery_id", res.DeliveryID).Str("connector", string(d.Connector)).Str("hook", c.Param("hook")).
			Time("created_at", res.CreatedAt).Dur("max_age", s.o.MaxDeliveryAge).Msg("delivery older than the archive's retention refused: it could be a replay")
		return true, s.reject(c, d.Connector, http.StatusBadRequest, "stale_delivery", fmt.Sprintf(
			"delivery %s was created at %s (its createdAt), %s ago: longer ago than the %s triggerd remembers deliveries to recognise one accepted before, "+
				"so it cannot be told apart from a replay; it was refused and nothing was started. "+
				"If it was never processed, have the platform send a new event (redeploy); if it was, replay its event instead (POST /v1/events/{event id}/replay)",
			res.DeliveryID, created, shortDuration(age.Round(time.Minute)), shortDuration(s.o.MaxDeliveryAge)))
	case -age > ClockSkew:
		s.log.Warn().Str("delivery_id", res.DeliveryID).Str("connector", string(d.Connector)).Time("created_at", res.CreatedAt).
			Msg("delivery created in the future refused: check the server's clock")
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		return true, s.reject(c, d.Connector, http.StatusServiceUnavailable, "clock_skew", fmt.Sprintf(
			"delivery %s was created at %s (its createdAt), %s ahead of this server's clock, more than the %s allowed for clocks that differ: "+
				"nothing was accepted; retry later. Check the clock of the server running triggerd (NTP)",
			res.DeliveryID, created, shortDuration((-age).Round(time.Second)), shortDuration(ClockSkew)))
	}
	return false, nil
}

// shortDuration writes d without zero trailing units: 167h45m, 192h, 15m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// logDelivery writes one line per delivery taken, at debug only: at info
// a busy hook would flood the log, and the metrics and the console's
// delivery log already count them. Refusals are logged where they happen.
func (s *Server) logDelivery(d triggers.Delivery, res triggers.Result, outcome string) {
	if e := s.log.Debug(); e.Enabled() {
		e.Str("delivery_id", res.DeliveryID).Str("connector", string(d.Connector)).Str("event", d.Event).
			Int("events", len(res.Events)).Str("outcome", outcome).Msg("delivery")
	}
}

// recordDelivery tells Deliveries what became of a delivery to a hook or
// a shared endpoint.
func (s *Server) recordDelivery(d triggers.Delivery, c triggers.Capture, res triggers.Result, answer string, status int, code, msg string) {
	if s.o.Deliveries == nil {
		return
	}
	hook := ""
	if d.Scope != nil {
		hook = d.Scope.Hook
	}
	s.o.Deliveries.Record(DeliveryOutcome{
		Connector: d.Connector, Hook: hook, Scope: d.Scope, DeliveryID: res.DeliveryID, Key: c.Key(),
		Event: res.SourceEvent, Action: res.Action, Answer: answer, Status: status, Code: code, Message: msg,
		Events: res.Events, ReceivedAt: c.ReceivedAt,
	})
}

// commitOnce is commit, for one attempt at a delivery at a time in this
// process: an attempt that finds another under way for the same delivery
// (the same delivery posted twice at once, or a sender's retry racing an
// attempt it gave up on) waits for it, and is a duplicate when that one
// was accepted; when it failed, the waiter tries itself. Without it both
// could be answered 202 with the same events, and their events counted
// twice: the Committer stores each event once, but which attempt stored
// it cannot tell the other's answer apart from its own in every case.
func (s *Server) commitOnce(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate, spooled bool, err error) {
	key := flightKey{c.Connector, c.Key()}
	for {
		f, done := s.flights.begin(key)
		if done == nil {
			duplicate, spooled, err = s.commit(ctx, c, events)
			s.flights.end(key, f, err == nil)
			return duplicate, spooled, err
		}
		select {
		case <-done:
			if f.accepted {
				return true, false, nil
			}
		case <-ctx.Done():
			return false, false, fmt.Errorf("waiting for another attempt at the same delivery: %w", ctx.Err())
		}
	}
}

// flights tracks the deliveries being committed, by connector and
// delivery key.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
}

type flightKey struct {
	c   triggers.Connector
	key string
}

// flight is one attempt at committing a delivery. Its fields are the
// flights' to guard; accepted is set before done is closed, and read by
// waiters only after.
type flight struct {
	// done is made for the first waiter: nearly every attempt has none.
	done     chan struct{}
	waiters  int
	accepted bool
}

// begin starts an attempt at key and returns it with done nil, or, when
// one is under way, returns that one and a channel closed when it ends.
func (fs *flights) begin(key flightKey) (f *flight, done <-chan struct{}) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.m[key]; ok {
		if f.done == nil {
			f.done = make(chan struct{})
		}
		f.waiters++
		return f, f.done
	}
	f = &flight{}
	fs.m[key] = f
	return f, nil
}

// end ends the attempt f at key and wakes those waiting for it.
func (fs *flights) end(key flightKey, f *flight, accepted bool) {
	fs.mu.Lock()
	delete(fs.m, key)
	f.accepted = accepted
	done := f.done
	fs.mu.Unlock()
	if done != nil {
		close(done)
	}
}

// commit makes a delivery durable: through the Committer, or, when it
// cannot in time and a Spool is configured, on the spool (spooled true).
// While Ready says NATS is unreachable it goes to the spool at once.
func (s *Server) commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate, spooled bool, err error) {
	sp := s.o.Spool
	if sp != nil && !s.o.Ready() {
		err = errors.New(s.notReadyReason())
	} else {
		// The deadline is the wall clock's, whatever clock Now reads.
		ctx = s.commits.after(time.Now(), s.o.CommitTimeout).context(ctx)
		duplicate, err = s.o.Committer.Commit(ctx, c, events)
		if err == nil || sp == nil {
			return duplicate, false, err
		}
	}
	if serr := sp.Spool(c, events); serr != nil {
		return false, false, fmt.Errorf("%w; and the spool refused it: %w", err, serr)
	}
	s.log.Warn().AnErr("cause", err).Str("delivery_id", c.DeliveryID).Str("connector", string(c.Connector)).
		Msg("delivery spooled to local disk: it will be published to NATS when NATS takes it; answered 202")
	return false, true, nil
}

// notReadyReason says why the Committer is not ready.
func (s *Server) notReadyReason() string {
	if s.o.NotReadyReason != nil {
		if r := s.o.NotReadyReason(); r != "" {
			return r
		}
	}
	return "NATS is unreachable"
}

// preallocBytes is the most readBody sets aside for a body before it
// arrives: more than nearly every webhook delivery (GitHub's are mostly
// 5–30 KB).
const preallocBytes = 64 << 10

// readBody reads the request body into a pooled buffer, refusing (without
// reading it all) a body larger than MaxBodyBytes, or one that would take
// the bodies held at once past MaxBodyBytesInFlight. On error it returns
// the status to answer. The caller releases the body.
func (s *Server) readBody(r *http.Request) (heldBody, int, error) {
	max := s.o.MaxBodyBytes
	if r.ContentLength > max {
		return heldBody{}, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is %d bytes; the limit is %d (--max-body-bytes)", r.ContentLength, max)
	}
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	// Room for the declared length, up to preallocBytes: the length is
	// the sender's word, given before the signature is checked, and a
	// client declaring 25 MiB and sending one byte must not hold 25 MiB.
	// A larger body grows the buffer as it arrives.
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, preallocBytes)))
	}
	br := budgetReader{r: io.LimitReader(r.Body, max+1), used: &s.bodyBytes, max: s.o.MaxBodyBytesInFlight}
	n, err := buf.ReadFrom(&br)
	b := heldBody{Buffer: buf, held: br.held}
	switch {
	case errors.Is(err, errBodyBudget):
		s.release(b)
		return heldBody{}, http.StatusServiceUnavailable, fmt.Errorf("triggerd holds %d bytes of webhook bodies already (--max-body-bytes-in-flight); nothing was accepted, retry later", s.o.MaxBodyBytesInFlight)
	case err != nil:
		s.release(b)
		return heldBody{}, http.StatusBadRequest, fmt.Errorf("reading the body: %v", err)
	case n > max:
		s.release(b)
		return heldBody{}, http.StatusRequestEntityTooLarge, fmt.Errorf("the body is over the %d-byte limit (--max-body-bytes)", max)
	}
	return b, 0, nil
}

// heldBody is a body read into a pooled buffer, holding its share of
// MaxBodyBytesInFlight until released.
type heldBody struct {
	*bytes.Buffer
	held int64
}

// release gives b's share of the budget back and its buffer to the pool.
func (s *Server) release(b heldBody) {
	s.bodyBytes.Add(-b.held)
	s.putBuf(b.Buffer)
}

// errBodyBudget reports a body that would take the bodies held at once
// past MaxBodyBytesInFlight.
var errBodyBudget = errors.New("over the in-flight body budget")

// budgetReader counts the bytes it reads against a budget shared by every
// request, and fails a read that would take the total past max.
type budgetReader struct {
	r    io.Reader
	used *atomic.Int64
	max  int64
	held int64 // taken from the budget by this reader
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		if b.used.Add(int64(n)) > b.max {
			b.used.Add(-int64(n))
			return 0, errBodyBudget
		}
		b.held += int64(n)
	}
	return n, err
}

// rejectBody answers a body readBody refused.
func (s *Server) rejectBody(c echo.Context, src triggers.Connector, status int, err error) error {
	code := "bad_request"
	switch status {
	case http.StatusRequestEntityTooLarge:
		code = "payload_too_large"
	case http.StatusServiceUnavailable:
		code = "unavailable"
		c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	return s.reject(c, src, status, code, err.Error())
}

// putBuf returns a body buffer to the pool, unless it grew past 1 MiB: a
// rare huge delivery must not pin its memory for good.
func (s *Server) putBuf(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		s.bufs.Put(b)
	}
}

func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return ct // what nearly every sender sends, without a parse
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

func validDeliveryID(id string) bool {
	if id == "" || len(id) > maxDeliveryIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] == 0x7f {
			return false
		}
	}
	return true
}
