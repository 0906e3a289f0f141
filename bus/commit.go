package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// Archive record headers, besides the delivery's own HTTP headers.
const (
	HeaderConnector  = "Triggerd-Connector"
	HeaderDeliveryID = "Triggerd-Delivery-Id"
	HeaderReceivedAt = "Triggerd-Received-At"
	HeaderEvents     = "Triggerd-Event-Count"
	// HeaderBodyObject names the object in BodiesBucket holding the body
	// when it was too large for the record itself.
	HeaderBodyObject = "Triggerd-Body-Object"
	// HeaderBodyEvent is the EventsStream sequence of an event whose
	// payload is the delivery's body byte for byte; the record then does
	// not store the body a second time.
	HeaderBodyEvent = "Triggerd-Body-Event-Seq"
	// HeaderScope holds the JSON scope of a delivery that arrived on a
	// tenant's hook, and of its events.
	HeaderScope = "Triggerd-Scope"
	// HeaderRepository is set on every event: its repository's full name,
	// lower-cased and encoded with triggers.EncodeToken ("~" for none).
	// With the subject's connector and kind it tells the dispatcher
	// whether any trigger could match, without reading the event.
	HeaderRepository = "Triggerd-Repository"
)

// headroom is what a message needs besides its data (subject, reply,
// headers), kept free below the server's max payload.
const headroom = 4 << 10

// ArchiveSubject returns the subject of a delivery's archive record, given
// its key (triggers.DeliveryKey: the delivery id, prefixed by the hook for
// deliveries on a tenant's hook). It is also what events carry as
// payload_ref when their payload was left out.
func ArchiveSubject(c triggers.Connector, key string) string {
	return DeliveriesPrefix + "." + triggers.EncodeToken(string(c)) + "." + triggers.EncodeToken(key)
}

// ParseArchiveSubject returns the connector and delivery key of an archive
// subject (ArchiveSubject), such as an event's payload_ref; ok is false for
// any other subject.
func ParseArchiveSubject(subject string) (c triggers.Connector, key string, ok bool) {
	rest, found := strings.CutPrefix(subject, DeliveriesPrefix+".")
	if !found {
		return "", "", false
	}
	ctok, ktok, found := strings.Cut(rest, ".")
	if !found || strings.Contains(ktok, ".") {
		return "", "", false
	}
	conn, ok1 := triggers.DecodeToken(ctok)
	key, ok2 := triggers.DecodeToken(ktok)
	c = triggers.Connector(conn)
	if !ok1 || !ok2 || !c.Valid() || key == "" {
		return "", "", false
	}
	return c, key, true
}

// Commit makes one delivery and its events durable, exactly once per
// delivery id, and reports whether the delivery had already been accepted.
//
// It proceeds in two steps:
//
//  1. It publishes the events (pipelined) with their ids as Nats-Msg-Id and
//     waits for every acknowledgement. In the shared layout Commit first
//     asks the delivery index, and each event is conditional on the
//     delivery having no archive record: the server refuses the events of
//     a delivery archived before, and Commit returns duplicate true. In
//     the separate layout Commit looks the record up first instead (one
//     more round trip).
//  2. It archives the delivery: in the shared layout, when every event
//     carries the payload inline and one of them is the body byte for
//     byte, by adding it to the delivery index (see IndexSubject), which
//     concurrent deliveries share, and then its entry to DedupBucket,
//     conditional on the delivery's key being unchanged since Commit read
//     it; otherwise by writing its archive record, conditional on the
//     subject having no record yet. That last write is the commit point:
//     once it is durable, the delivery counts as accepted.
//
// An attempt interrupted between steps 1 and 2 (a crash, a NATS outage)
// is not archived, so the sender's retry runs again; its events carry the
// same ids and JetStream drops those it already holds, provided the retry
// comes within the dedup window. Of concurrent attempts at one delivery,
// each event is stored once; an attempt that stored none of them returns
// duplicate true if another has archived the delivery by then.
//
// Commit decides, per event, whether the payload travels inline: an event
// whose encoding would exceed the server's max payload, or that would take
// the delivery's inline bytes past MaxInlineBytes, gets Payload nil and
// PayloadRef set to the archive subject (and the delivery then gets its
// record there). It updates events in place.
//
// Commit returns an error when durability cannot be confirmed before ctx
// ends; the caller must then not acknowledge the delivery.
func (b *Bus) Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate bool, err error) {
	defer func() {
		if err != nil {
			b.noteCommitError(err)
		}
	}()
	key := c.Key()
	subject := ArchiveSubject(c.Connector, key)
	unlessArchived := ""
	// slot is the delivery's key of DedupBucket as read before the events
	// were published: indexing it is conditional on its being unchanged.
	var slot dedupSlot
	if b.shared {
		unlessArchived = subject
		_, found, s, err := b.index.find(ctx, c.Connector, key)
		slot = s
		if err != nil {
			return false, fmt.Errorf("check index for delivery %s: %w", c.DeliveryID, err)
		} else if found {
			return true, nil
		}
	} else if _, err := b.deliveries.GetLastMsgForSubject(ctx, subject); err == nil {
		return true, nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("check archive for delivery %s: %w", c.DeliveryID, err)
	}
	published, err := b.publishEvents(ctx, events, subject, unlessArchived, b.replicatedEvents())
	for tries := 0; err != nil && unlessArchived != "" && isCASConflict(err) && tries < 3; tries++ {
		// The check could not be made now: another attempt at this
		// delivery has one in flight (replicated streams). Try again
		// checking the first event only; its events are stored once
		// whichever attempt stores them.
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("publish the events of delivery %s: %w", c.DeliveryID, ctx.Err())
		case <-t.C:
		}
		published, err = b.publishEvents(ctx, events, subject, unlessArchived, true)
	}
	if err != nil {
		if unlessArchived != "" && isWrongLastSequence(err) {
			return true, nil
		}
		return false, err
	}
	// The body need not be written twice when an event carries it inline
	// and events are kept at least as long as the archive.
	var bodySeq uint64
	inline := true
	if b.opts.EventRetention >= b.opts.ArchiveRetention {
		for i := range events {
			if events[i].Payload == nil {
				inline = false
			} else if bodySeq == 0 && bytes.Equal(events[i].Payload, c.Body) {
				bodySeq = published[i].Sequence
			}
		}
	}
	if b.shared && bodySeq != 0 && inline {
		stored := slices.ContainsFunc(published, func(p Published) bool { return !p.Duplicate })
		if !stored {
			// Another attempt stored the events. If it has indexed them by
			// now, the delivery is accepted; if it was interrupted (or is
			// still running), this attempt accepts it.
			if _, found, s, err := b.index.find(ctx, c.Connector, key); err == nil && found {
				return true, nil
			} else if err == nil {
				slot = s
			}
		}
		return b.index.add(ctx, indexEntry{
			Connector:  c.Connector,
			Key:        key,
			DeliveryID: c.DeliveryID,
			ReceivedAt: c.ReceivedAt.UTC(),
			Header:     c.Header, // appendJSON keeps what ArchivedHeader would
			Scope:      c.Scope,
			Events:     len(events),
			BodySeq:    bodySeq,
		}, slot)
	}
	if err := b.archive(ctx, subject, c, len(events), bodySeq); err != nil {
		if isWrongLastSequence(err) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// Published is JetStream's acknowledgement of one event.
type Published struct {
	// Sequence is the event's position in EventsStream.
	Sequence uint64
	// Duplicate is true when the stream already held the event (same id,
	// within the dedup window), so nothing new reached subscribers.
	Duplicate bool
}

// PublishEvents publishes events with their ids as Nats-Msg-Id and waits
// until JetStream has stored (or recognised as duplicate) every one.
// payloadRef is what events whose payload is left out point at.
func (b *Bus) PublishEvents(ctx context.Context, events []triggers.Event, payloadRef string) ([]Published, error) {
	return b.publishEvents(ctx, events, payloadRef, "", false)
}

// replicatedEvents reports whether EventsStream had more than one replica
// when Connect provisioned it.
func (b *Bus) replicatedEvents() bool { return b.events.CachedInfo().Config.Replicas > 1 }

// publishEvents is PublishEvents, each event conditional on the archive
// subject unlessArchived holding no record when it is set (shared layout).
//
// With checkFirstOnly only the first event carries the condition, and it
// is acknowledged before the others are sent. A replicated stream refuses
// a condition on a subject while another one on it is being replicated
// (10164, "wrong last sequence" though nothing was written), so pipelined
// conditional events would have all but the first refused. Once the first
// passed, the delivery had no record, and the others need none: a
// concurrent attempt's copies of them are dropped by their Nats-Msg-Id.
func (b *Bus) publishEvents(ctx context.Context, events []triggers.Event, payloadRef, unlessArchived string, checkFirstOnly bool) ([]Published, error) {
	if len(events) == 0 {
		return nil, nil
	}
	limit := b.MaxPayload() - headroom
	budget := b.opts.MaxInlineBytes
	ttl := ""
	if b.eventTTL > 0 {
		ttl = b.eventTTL.String()
	}
	type pending struct {
		msg *nats.Msg
		id  uint64
		ack <-chan ackResult
	}
	sent := make([]pending, 0, len(events))
	acks := make([]Published, len(events))
	// Waiters not waited for (an error below) stop waiting.
	defer func() {
		for _, p := range sent {
			if p.ack != nil {
				b.acks.forget(p.id)
			}
		}
	}()
	// Encoding buffers go back to the pool only once every event is
	// acknowledged: until then the client may resend a message's data.
	bufs := make([]*[]byte, 0, len(events))
	// A delivery's events share one scope: it is encoded once.
	var scoped scopeHeader
	for i := range events {
		e := &events[i]
		if len(e.Payload) > budget || len(e.Payload) > limit {
			e.Payload, e.PayloadRef = nil, payloadRef
		}
		buf := b.encodeBufs.Get().(*[]byte)
		bufs = append(bufs, buf)
		data, err := e.AppendJSON((*buf)[:0])
		*buf = data
		if err != nil {
			return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
		}
		if len(data) > limit && e.Payload != nil {
			e.Payload, e.PayloadRef = nil, payloadRef
			if data, err = e.AppendJSON(data[:0]); err != nil {
				return nil, fmt.Errorf("encode event %s: %w", e.ID, err)
			}
			*buf = data
		}
		budget -= len(e.Payload)
		repo := ""
		if e.Repository != nil {
			repo = strings.ToLower(e.Repository.FullName)
		}
		h := nats.Header{
			jetstream.MsgIDHeader: []string{e.ID},
			HeaderRepository:      []string{triggers.EncodeToken(repo)},
		}
		if scope, err := scoped.value(e.Scope); err != nil {
			return nil, fmt.Errorf("encode scope of event %s: %w", e.ID, err)
		} else if scope != "" {
			h[HeaderScope] = []string{scope}
		}
		if unlessArchived != "" && (i == 0 || !checkFirstOnly) {
			h[jetstream.ExpectedLastSubjSeqHeader] = []string{"0"}
			h[jetstream.ExpectedLastSubjSeqSubjHeader] = []string{unlessArchived}
		}
		if ttl != "" {
			h[jetstream.MsgTTLHeader] = []string{ttl}
		}
		msg := &nats.Msg{Subject: e.Subject(), Header: h, Data: data}
		id, ack, err := b.acks.publish(msg)
		if err != nil {
			return nil, fmt.Errorf("publish event %s: %w", e.ID, err)
		}
		sent = append(sent, pending{msg, id, ack})
		if i == 0 && checkFirstOnly && unlessArchived != "" && len(events) > 1 {
			// The condition passes or fails before the rest are sent.
			acks[0], err = b.acks.wait(ctx, msg, id, ack)
			sent[0].ack = nil // waited for
			if err != nil {
				return nil, fmt.Errorf("publish event %s: %w", e.ID, err)
			}
		}
	}
	for i := range sent {
		p := &sent[i]
		if p.ack == nil {
			continue // the first, waited for above
		}
		ack, err := b.acks.wait(ctx, p.msg, p.id, p.ack)
		p.ack = nil // waited for: wait forgets it if it gave up
		if err != nil {
			return nil, fmt.Errorf("publish event %s: %w", events[i].ID, err)
		}
		acks[i] = ack
	}
	for _, buf := range bufs {
		if cap(*buf) <= 1<<20 {
			b.encodeBufs.Put(buf)
		}
	}
	return acks, nil
}

// scopeHeader is the value of HeaderScope for a scope, remembered for the
// last scope it encoded.
type scopeHeader struct {
	of   *triggers.Scope
	json string
}

// value returns s encoded as JSON, "" for nil.
func (sh *scopeHeader) value(s *triggers.Scope) (string, error) {
	if s == nil {
		return "", nil
	}
	if s != sh.of {
		b, err := json.Marshal(s)
		if err != nil {
			return "", err
		}
		sh.of, sh.json = s, string(b)
	}
	return sh.json, nil
}

// archive writes the delivery's record, only if the subject has none yet.
func (b *Bus) archive(ctx context.Context, subject string, c triggers.Capture, nEvents int, bodySeq uint64) error {
	h := nats.Header(ArchivedHeader(c.Header))
	h.Set(HeaderConnector, string(c.Connector))
	h.Set(HeaderDeliveryID, c.DeliveryID)
	h.Set(HeaderReceivedAt, c.ReceivedAt.UTC().Format(time.RFC3339Nano))
	h.Set(HeaderEvents, strconv.Itoa(nEvents))
	var scoped scopeHeader
	if scope, err := scoped.value(c.Scope); err != nil {
		return fmt.Errorf("archive delivery %s: encode scope: %w", c.DeliveryID, err)
	} else if scope != "" {
		h.Set(HeaderScope, scope)
	}
	data := c.Body
	if bodySeq != 0 {
		h.Set(HeaderBodyEvent, strconv.FormatUint(bodySeq, 10))
		data = nil
	} else if len(c.Body) > b.MaxPayload()-headroom-headerSize(h) {
		name := strings.TrimPrefix(subject, DeliveriesPrefix+".")
		chunk := uint32(min(128<<10, b.MaxPayload()-headroom))
		meta := jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: chunk}}
		if _, err := b.bodies.Put(ctx, meta, bytes.NewReader(c.Body)); err != nil {
			return fmt.Errorf("archive body of delivery %s: %w", c.DeliveryID, err)
		}
		h.Set(HeaderBodyObject, name)
		data = nil
	}
	msg := &nats.Msg{Subject: subject, Header: h, Data: data}
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(0)}
	if b.recordTTL > 0 {
		opts = append(opts, jetstream.WithMsgTTL(b.recordTTL))
	}
	if _, err := b.js.PublishMsg(ctx, msg, opts...); err != nil {
		return fmt.Errorf("archive delivery %s: %w", c.DeliveryID, err)
	}
	return nil
}

func headerSize(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// ArchivedHeader returns the HTTP headers of a delivery that the archive
// keeps (see archivedName), with canonical names: no credentials, no
// hop-by-hop headers, none of NATS's or triggerd's own. Whatever keeps a
// delivery elsewhere (the ingest spool) keeps these.
func ArchivedHeader(header map[string][]string) map[string][]string {
	h := make(map[string][]string, len(header))
	for k, vs := range header {
		if name, ok := archivedName(k); ok {
			h[name] = vs
		}
	}
	return h
}

// archivedName returns the canonical name under which an HTTP header of a
// delivery is archived, and whether it is: everything but credentials,
// hop-by-hop headers, NATS's own and the archive's own (Triggerd-*). A
// sender must not be able to plant those: a forged Triggerd-Body-Event-Seq
// or Triggerd-Scope on a record would make a replay read another
// delivery's body or run under another tenant.
func archivedName(key string) (string, bool) {
	// Free for the canonical names net/http already gives.
	name := textproto.CanonicalMIMEHeaderKey(key)
	switch name {
	case "Connection", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer", "Upgrade",
		"Content-Length", "Proxy-Connection":
		return name, false
	}
	if strings.HasPrefix(name, "Nats-") || strings.HasPrefix(name, "Triggerd-") {
		return name, false
	}
	// Credentials: Authorization, Proxy-Authorization and Cookie, and those
	// a proxy in front of triggerd, or a sender, may add under other names
	// (X-Api-Key, X-Auth-Token, Set-Cookie and the like). Signatures
	// (X-Hub-Signature-256) are digests, not secrets: kept.
	return name, !credentialName(name)
}

// credentialName reports whether a word of the canonical header name
// (words start after '-') begins one of Auth, Token, Secret, Password,
// Session, Cookie, Api-Key or Apikey. It runs for every header of every
// accepted delivery, so it looks only at the start of each word: an
// unconditional substring search for each part doubled the cost of the
// delivery index's entry.
func credentialName(name string) bool {
	for rest := name; rest != ""; {
		switch rest[0] {
		case 'A':
			if strings.HasPrefix(rest, "Auth") || strings.HasPrefix(rest, "Api-Key") || strings.HasPrefix(rest, "Apikey") {
				return true
			}
		case 'T':
			if strings.HasPrefix(rest, "Token") {
				return true
			}
		case 'S':
			if strings.HasPrefix(rest, "Secret") || strings.HasPrefix(rest, "Session") {
				return true
			}
		case 'P':
			if strings.HasPrefix(rest, "Password") {
				return true
			}
		case 'C':
			if strings.HasPrefix(rest, "Cookie") {
				return true
			}
		}
		i := strings.IndexByte(rest, '-')
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
	return false
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// isCASConflict reports a condition a replicated stream could not check
// because another on the same subject was being replicated: not a record
// found, a check to make again.
func isCASConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
