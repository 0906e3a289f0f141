package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// ErrNotArchived is returned for a delivery the archive does not hold
// (never accepted, or older than the archive's retention).
var ErrNotArchived = errors.New("delivery not in the archive")

// Delivery reads an archived delivery back: its HTTP headers and raw body as
// received, and its scope. deliveryID is the delivery's key
// (triggers.DeliveryKey: "<hook>/<id>" for deliveries on a tenant's hook).
// A delivery that is not archived is ErrNotArchived.
func (b *Bus) Delivery(ctx context.Context, c triggers.Connector, deliveryID string) (triggers.Capture, error) {
	subject := ArchiveSubject(c, deliveryID)
	msg, err := b.deliveries.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) && b.index != nil {
		return b.indexedDelivery(ctx, c, deliveryID)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return triggers.Capture{}, fmt.Errorf("%s delivery %s: %w", c, deliveryID, ErrNotArchived)
	}
	if err != nil {
		return triggers.Capture{}, fmt.Errorf("read %s delivery %s: %w", c, deliveryID, err)
	}
	capture := triggers.Capture{
		Connector:  c,
		DeliveryID: msg.Header.Get(HeaderDeliveryID),
		Header:     map[string][]string{},
		Body:       msg.Data,
	}
	capture.ReceivedAt, _ = time.Parse(time.RFC3339Nano, msg.Header.Get(HeaderReceivedAt))
	if raw := msg.Header.Get(HeaderScope); raw != "" {
		capture.Scope = new(triggers.Scope)
		if err := json.Unmarshal([]byte(raw), capture.Scope); err != nil {
			return triggers.Capture{}, fmt.Errorf("read %s delivery %s: bad %s header: %w", c, deliveryID, HeaderScope, err)
		}
	}
	for k, vs := range msg.Header {
		// triggerd's own headers, and those NATS adds to a message it
		// hands back (Nats-Stream, Nats-Sequence, ...): never a sender's,
		// since archivedName keeps no Nats- or Triggerd- header.
		if strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Triggerd-") {
			continue
		}
		capture.Header[k] = vs
	}
	if seq := msg.Header.Get(HeaderBodyEvent); seq != "" {
		body, err := b.bodyFromEvent(ctx, seq)
		if err != nil {
			return triggers.Capture{}, fmt.Errorf("read body of %s delivery %s: %w", c, deliveryID, err)
		}
		capture.Body = body
	}
	if name := msg.Header.Get(HeaderBodyObject); name != "" {
		if b.bodies == nil {
			return triggers.Capture{}, fmt.Errorf("read body of %s delivery %s: object store %s is missing", c, deliveryID, BodiesBucket)
		}
		body, err := b.bodies.GetBytes(ctx, name)
		if err != nil {
			return triggers.Capture{}, fmt.Errorf("read body of %s delivery %s: %w", c, deliveryID, err)
		}
		capture.Body = body
	}
	return capture, nil
}

// HookDeliveries returns the archived deliveries of connector c that came
// through tenants' hooks with delivery id id. Their keys are
// "<hook>/<id>" (triggers.DeliveryKey), so Delivery does not find them
// by the id alone, which is all an operator reading the sender's delivery
// log has. It looks in the delivery index and, for deliveries archived
// as records (no events, say), lists the archive's subjects: an operator's
// lookup, not for the delivery path.
func (b *Bus) HookDeliveries(ctx context.Context, c triggers.Connector, id string) ([]triggers.Capture, error) {
	keys := map[string]bool{}
	if b.index != nil {
		entries, err := b.index.lookupID(ctx, c, id)
		if err != nil {
			return nil, fmt.Errorf("look up %s delivery %s: %w", c, id, err)
		}
		for _, e := range entries {
			keys[e.Key] = true
		}
	}
	info, err := b.deliveries.Info(ctx, jetstream.WithSubjectFilter(DeliveriesPrefix+"."+triggers.EncodeToken(string(c))+".*"))
	if err != nil {
		return nil, fmt.Errorf("list the %s archive: %w", c, err)
	}
	for subject := range info.State.Subjects {
		if rc, key, ok := ParseArchiveSubject(subject); ok && rc == c && strings.HasSuffix(key, "/"+id) && !strings.Contains(strings.TrimSuffix(key, "/"+id), "/") {
			keys[key] = true
		}
	}
	var found []triggers.Capture
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		capture, err := b.Delivery(ctx, c, key)
		if errors.Is(err, ErrNotArchived) {
			continue // expired meanwhile
		} else if err != nil {
			return nil, err
		}
		found = append(found, capture)
	}
	return found, nil
}

// bodyFromEvent reads the payload of the event at sequence seq, which is the
// delivery's body byte for byte.
func (b *Bus) bodyFromEvent(ctx context.Context, seq string) ([]byte, error) {
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad %s header %q", HeaderBodyEvent, seq)
	}
	msg, err := b.events.GetMsg(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("event %d holding the body: %w", n, err)
	}
	var ev struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(msg.Data, &ev); err != nil || len(ev.Payload) == 0 {
		return nil, fmt.Errorf("event %d holding the body has no payload", n)
	}
	return ev.Payload, nil
}

// indexedDelivery reads a delivery archived in the delivery index.
func (b *Bus) indexedDelivery(ctx context.Context, c triggers.Connector, deliveryID string) (triggers.Capture, error) {
	e, found, err := b.index.lookup(ctx, c, deliveryID)
	if err != nil {
		return triggers.Capture{}, fmt.Errorf("read %s delivery %s: %w", c, deliveryID, err)
	}
	if !found {
		return triggers.Capture{}, fmt.Errorf("%s delivery %s: %w", c, deliveryID, ErrNotArchived)
	}
	body, err := b.bodyFromEvent(ctx, strconv.FormatUint(e.BodySeq, 10))
	if err != nil {
		return triggers.Capture{}, fmt.Errorf("read body of %s delivery %s: %w", c, deliveryID, err)
	}
	header := e.Header
	if header == nil {
		header = map[string][]string{}
	}
	return triggers.Capture{
		Connector:  c,
		DeliveryID: e.DeliveryID,
		ReceivedAt: e.ReceivedAt,
		Header:     header,
		Body:       body,
		Scope:      e.Scope,
	}, nil
}
