package fakecodehost

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Installation target types, as X-GitHub-Hook-Installation-Target-Type
// names them.
const (
	TargetRepository   = "repository"
	TargetOrganization = "organization"
)

// HookshotUserAgent is the User-Agent of the fake's deliveries.
const HookshotUserAgent = "GitHub-Hookshot/fake"

// Delivery is one webhook delivery the fake made (or could not make).
type Delivery struct {
	// ID is the X-GitHub-Delivery header, a fresh UUID (the original's
	// for a redelivery).
	ID string
	// AttemptID is the attempt's id in the deliveries API, and Redelivery
	// whether it was asked for there.
	AttemptID  int64
	Redelivery bool
	// HookID is the hook delivered to; TargetType (TargetRepository or
	// TargetOrganization) and TargetID say what the hook belongs to.
	HookID     int64
	TargetType string
	TargetID   int64
	// Event is the X-GitHub-Event header; Action is the payload's
	// top-level "action", when it has one.
	Event, Action string
	// URL is where it was sent and Header what was sent with it.
	URL    string
	Header http.Header
	// Payload is the JSON payload; Body the bytes sent (the same JSON, or
	// payload=... for a hook whose content type is form).
	Payload, Body []byte
	// StatusCode is the receiver's answer, 0 when there was none; Error
	// says why ("" when the receiver answered).
	StatusCode int
	Error      string
	// At is when it was sent, on the fake's clock; Duration how long the
	// receiver took (real time).
	At       time.Time
	Duration time.Duration
}

// outgoing is a delivery decided under the lock and sent later.
type outgoing struct {
	id                 string
	attempt            int64
	redelivery         bool
	hookID             int64
	targetType         string
	targetID           int64
	event, action, url string
	contentType        string
	secret             string
	payload            []byte
	at                 time.Time
}

// hooksFor returns the active hooks that receive event for repository r:
// its own and, when an organisation owns it, the organisation's.
func (st *state) hooksFor(r *repo, event string) []hookAt {
	out := hookScope{repo: r}.wanting(event)
	if o := st.orgOf(r); o != nil {
		out = append(out, hookScope{org: o}.wanting(event)...)
	}
	return out
}

// wanting returns sc's own active hooks that receive event.
func (sc hookScope) wanting(event string) []hookAt {
	var out []hookAt
	for _, h := range *sc.list() {
		if h.active && h.wants(event) {
			out = append(out, hookAt{sc, h})
		}
	}
	return out
}

// hookAt is a hook and where it lives.
type hookAt struct {
	sc hookScope
	h  *hook
}

func (h *hook) wants(event string) bool {
	return slices.Contains(h.events, event) || slices.Contains(h.events, "*")
}

// newOutgoing prepares one delivery of payload to h.
func newOutgoing(at hookAt, event string, payload []byte, now time.Time) outgoing {
	var probe struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(payload, &probe)
	typ, id := at.sc.target()
	return outgoing{
		id: uuid.NewString(), hookID: at.h.id, targetType: typ, targetID: id,
		event: event, action: probe.Action, url: at.h.url, contentType: at.h.contentType, secret: at.h.secret,
		payload: payload, at: now,
	}
}

// emitLocked delivers payload for event to each of hooks and returns the
// delivery ids.
func (s *Server) emitLocked(hooks []hookAt, event string, payload []byte, now time.Time) []string {
	var ids []string
	for _, at := range hooks {
		o := newOutgoing(at, event, payload, now)
		s.launchLocked(o)
		ids = append(ids, o.id)
	}
	return ids
}

// launchLocked starts one delivery on a goroutine the Server owns; after
// Close it records the delivery as refused instead.
func (s *Server) launchLocked(o outgoing) {
	o.attempt = s.st.id()
	if s.closed {
		d := o.delivery()
		d.Error = "fakecodehost: server closed"
		s.recordDeliveryLocked(d)
		return
	}
	if s.inflight == 0 {
		s.idle = make(chan struct{})
	}
	s.inflight++
	go s.send(o)
}

// delivery is what the log records of o before it is sent.
func (o outgoing) delivery() Delivery {
	return Delivery{ID: o.id, AttemptID: o.attempt, Redelivery: o.redelivery, HookID: o.hookID,
		TargetType: o.targetType, TargetID: o.targetID, Event: o.event, Action: o.action, URL: o.url,
		Payload: o.payload, At: o.at}
}

// send POSTs one delivery, then records it and the hook's last response.
func (s *Server) send(o outgoing) {
	d := o.delivery()
	body, ctype := o.payload, "application/json"
	if o.contentType == "form" {
		body, ctype = []byte("payload="+url.QueryEscape(string(o.payload))), "application/x-www-form-urlencoded"
	}
	d.Body = body
	h := http.Header{}
	h.Set("Accept", "*/*")
	h.Set("Content-Type", ctype)
	h.Set("User-Agent", HookshotUserAgent)
	h.Set("X-GitHub-Event", o.event)
	h.Set("X-GitHub-Delivery", o.id)
	h.Set("X-GitHub-Hook-ID", strconv.FormatInt(o.hookID, 10))
	h.Set("X-GitHub-Hook-Installation-Target-Type", o.targetType)
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(o.targetID, 10))
	if o.secret != "" {
		h.Set("X-Hub-Signature-256", Sign(o.secret, body))
		m := hmac.New(sha1.New, []byte(o.secret))
		m.Write(body)
		h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m.Sum(nil)))
	}
	d.Header = h
	start := time.Now()
	d.StatusCode, d.Error = s.post(o.url, h, body)
	d.Duration = time.Since(start)

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, hk := s.st.hookByID(o.hookID); hk != nil {
		switch {
		case d.StatusCode/100 == 2:
			hk.lastCode, hk.lastStatus, hk.lastMessage = d.StatusCode, "active", deliveryStatus(d)
		case d.StatusCode != 0:
			hk.lastCode, hk.lastStatus, hk.lastMessage = d.StatusCode, "misconfigured", deliveryStatus(d)
		default:
			hk.lastCode, hk.lastStatus, hk.lastMessage = 0, "timeout", "We couldn't deliver this payload: "+d.Error
		}
	}
	s.recordDeliveryLocked(d)
	s.inflight--
	if s.inflight == 0 {
		close(s.idle)
	}
}

// post sends one delivery and returns the receiver's status or why there
// was none.
func (s *Server) post(target string, h http.Header, body []byte) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header = h.Clone()
	resp, err := s.o.DeliveryClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, ""
}

func (s *Server) recordDeliveryLocked(d Delivery) {
	if len(s.deliveries) >= s.o.LogLimit {
		s.deliveries = slices.Delete(s.deliveries, 0, len(s.deliveries)-s.o.LogLimit+1)
	}
	s.deliveries = append(s.deliveries, d)
}

// Sign is the X-Hub-Signature-256 of body under secret: "sha256=" and the
// hex HMAC-SHA256.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// WaitDeliveries waits until no webhook delivery is in flight, or ctx
// ends. Deliveries are asynchronous, as GitHub's are: the API call that
// causes one answers before it is sent.
func (s *Server) WaitDeliveries(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, idle := s.inflight, s.idle
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle:
		}
	}
}

// Deliveries returns the finished deliveries, oldest first (at most
// Options.LogLimit). After WaitDeliveries every id Deliver returned is
// among them.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Delivery, len(s.deliveries))
	for i, d := range s.deliveries {
		d.Header = d.Header.Clone()
		d.Payload, d.Body = slices.Clone(d.Payload), slices.Clone(d.Body)
		out[i] = d
	}
	return out
}

// Deliver sends payload as event to every active hook of owner/repo (and
// of its owning organisation) whose events include event or "*", the way
// GitHub delivers: signed with each hook's secret, form-encoded for a hook
// whose content type is form. It returns the delivery ids at once; the
// deliveries run on the Server's goroutines with their own timeout (ctx is
// only checked before they start), so wait for them with WaitDeliveries.
// No matching hook means no ids and no error.
func (s *Server) Deliver(ctx context.Context, owner, repo, event string, payload []byte) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.repos[repoKey(owner, repo)]
	if r == nil {
		return nil, fmt.Errorf("fakecodehost: no repository %s/%s", owner, repo)
	}
	return s.emitLocked(s.st.hooksFor(r, event), event, slices.Clone(payload), s.o.Now()), nil
}

// DeliverOrg is Deliver for an organisation's own hooks, for events that
// are not about one repository.
func (s *Server) DeliverOrg(ctx context.Context, org, event string, payload []byte) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.st.users[strings.ToLower(org)]
	if o == nil || !o.org {
		return nil, fmt.Errorf("fakecodehost: no organisation %s", org)
	}
	return s.emitLocked(hookScope{org: o}.wanting(event), event, slices.Clone(payload), s.o.Now()), nil
}
