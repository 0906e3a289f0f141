package store

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"
)

// Delivery answers, as a delivery log shows them.
const (
	AnswerAccepted  = "accepted"
	AnswerDuplicate = "duplicate"
	AnswerIgnored   = "ignored"
	AnswerRefused   = "refused"
)

// DeliveryEvent is one event a delivery produced.
type DeliveryEvent struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Summary is the event's line in lists (triggers.Event.Summary):
	// outside text.
	Summary string `json:"summary,omitempty"`
}

// DeliveryRecord is one attempt at a delivery to a tenant's hook or
// endpoint, as the sender's "Recent deliveries" page would list it: what
// came in and what triggerd answered. Each attempt (a sender's retry, a
// redelivery) is a record of its own. It holds no header and no body: the
// archive (bus) keeps those, under Key.
type DeliveryRecord struct {
	// ID is unique per attempt and orders the tenant's records by time.
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	// Connector is "codehost" or "deploy".
	Connector string `json:"connector"`
	// DeliveryID is the sender's id (X-GitHub-Delivery, the envelope's
	// id); empty when the delivery was refused before it was read.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Key is the delivery's archive key ("<hook>/<delivery id>").
	Key  string `json:"key,omitempty"`
	Hook string `json:"hook,omitempty"`
	// Event and Action are the sender's event ("issues") and action
	// ("opened").
	Event  string `json:"event,omitempty"`
	Action string `json:"action,omitempty"`
	// Summary is its first event's summary (an issue's number and
	// title, a deployment's project): outside text, for lists.
	Summary string `json:"summary,omitempty"`
	// Answer is one of the Answer* values; Status the HTTP status sent.
	Answer string `json:"answer"`
	Status int    `json:"status"`
	// Code and Message say why a delivery was refused or ignored.
	Code    string          `json:"code,omitempty"`
	Message string          `json:"message,omitempty"`
	Events  []DeliveryEvent `json:"events,omitempty"`
	// Redelivery is set for attempts made from the console or triggerctl.
	Redelivery bool      `json:"redelivery,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
}

// DeliveryFilter narrows ListDeliveries; empty fields do not narrow.
// Records come newest first (by ID, which NewDeliveryID makes start with
// the time), at most Limit (0: 100), and only those with an ID below
// Before when it is set (the last ID of the page before).
type DeliveryFilter struct {
	TenantID   string
	Answer     string
	Event      string
	DeliveryID string
	// Since and Until bound ReceivedAt: Since <= ReceivedAt < Until.
	Since, Until time.Time
	Before       string
	Limit        int
}

// Match reports whether f selects d (its Limit and TenantID aside).
func (f DeliveryFilter) Match(d DeliveryRecord) bool {
	return (f.Answer == "" || d.Answer == f.Answer) &&
		(f.Event == "" || d.Event == f.Event || d.Event+"."+d.Action == f.Event) &&
		(f.DeliveryID == "" || d.DeliveryID == f.DeliveryID) &&
		(f.Since.IsZero() || !d.ReceivedAt.Before(f.Since)) &&
		(f.Until.IsZero() || d.ReceivedAt.Before(f.Until)) &&
		(f.Before == "" || d.ID < f.Before)
}

// MaxDeliveryScan bounds the records one ListDeliveries reads to fill a
// page when filters (other than the time range, which bounds the walk)
// pass over most of them: a page of a rare answer among millions comes
// back short rather than late, and the next page goes on from the last
// record read (NextBefore).
const MaxDeliveryScan = 20000

// NewDeliveryID returns a record id for a delivery received at t: 16 hex
// digits of its Unix nanoseconds, then 8 random ones, so that ids sort as
// times do. The random part only tells apart deliveries of the same
// nanosecond: it comes from math/rand/v2 (no system call), and the
// delivery log makes an id for every delivery.
func NewDeliveryID(t time.Time) string {
	var raw [12]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(t.UnixNano()))
	binary.BigEndian.PutUint32(raw[8:], rand.Uint32())
	var id [24]byte
	hex.Encode(id[:], raw[:])
	return string(id[:])
}

// DeliveryIDAt returns the least id NewDeliveryID makes for t: ids below
// it were received before t.
func DeliveryIDAt(t time.Time) string {
	return fmt.Sprintf("%016x", uint64(t.UnixNano()))
}

// Deliveries stores the delivery log.
type Deliveries interface {
	// PutDeliveries stores records (a record with an ID already stored
	// replaces it). Records without a TenantID are an error.
	PutDeliveries(ctx context.Context, ds []DeliveryRecord) error
	// GetDelivery returns the tenant's record, or ErrNotFound (also for
	// another tenant's).
	GetDelivery(ctx context.Context, tenantID, id string) (DeliveryRecord, error)
	// ListDeliveries returns the records f selects, newest first. It
	// walks the tenant's records from f.Before (or the newest) down to
	// f.Since, and reads at most MaxDeliveryScan of them.
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]DeliveryRecord, error)
	// PruneDeliveries deletes the records of every tenant whose id is
	// below DeliveryIDAt(before), oldest first, at most limit (DefaultPruneLimit if not
	// positive), and returns how many it deleted.
	PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}
