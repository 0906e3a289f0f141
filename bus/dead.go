package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Dead is one dead letter: a message a consumer gave up on, and why.
type Dead struct {
	// Seq is its sequence in DeadStream, which Requeue takes.
	Seq uint64
	// Source is the consumer that gave up (the subject is dead.<source>).
	Source string
	// Subject, Stream and StreamSeq say where the message was.
	Subject   string
	Stream    string
	StreamSeq uint64
	// Deliveries is how often it had been delivered.
	Deliveries int
	At         time.Time
	Reason     string
	// Header holds the message's headers as stored, the Triggerd-Dead-*
	// ones included; Data its data.
	Header nats.Header
	Data   []byte
}

// ErrNotDead reports that DeadStream holds no dead letter at a sequence.
var ErrNotDead = errors.New("no dead letter at that sequence")

// ListDead returns the dead letters of source (every source when "") from
// DeadStream sequence from on, oldest first, at most limit.
func (b *Bus) ListDead(ctx context.Context, source string, from uint64, limit int) ([]Dead, error) {
	filter := "dead.>"
	if source != "" {
		filter = "dead." + source
	}
	stream, err := b.js.Stream(ctx, DeadStream)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", DeadStream, err)
	}
	var out []Dead
	for seq := max(from, 1); len(out) < limit; {
		m, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read %s: %w", DeadStream, err)
		}
		out = append(out, deadOf(m))
		seq = m.Sequence + 1
	}
	return out, nil
}

func deadOf(m *jetstream.RawStreamMsg) Dead {
	h := m.Header
	d := Dead{
		Seq: m.Sequence, Source: strings.TrimPrefix(m.Subject, "dead."),
		Subject: h.Get(HeaderDeadSubject), Stream: h.Get(HeaderDeadStream), Reason: h.Get(HeaderDeadReason),
		Header: h, Data: m.Data,
	}
	d.StreamSeq, _ = strconv.ParseUint(h.Get(HeaderDeadSeq), 10, 64)
	d.Deliveries, _ = strconv.Atoi(h.Get(HeaderDeadTries))
	d.At, _ = time.Parse(time.RFC3339Nano, h.Get(HeaderDeadAt))
	return d
}

// Requeue gives the dead letter at DeadStream sequence seq back to the
// consumers of its stream: it publishes the message again on its subject,
// with its headers and data, and then deletes the dead letter. The copy is
// a new message (its Nats-Msg-Id names the dead letter, so requeueing one
// twice within the dedup window publishes it once); what its consumer
// already did for the original is not done again (run ids come from the
// event and the trigger). A sequence holding no dead letter is ErrNotDead.
func (b *Bus) Requeue(ctx context.Context, seq uint64) (Dead, error) {
	stream, err := b.js.Stream(ctx, DeadStream)
	if err != nil {
		return Dead{}, fmt.Errorf("read %s: %w", DeadStream, err)
	}
	m, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Dead{}, fmt.Errorf("requeue %d: %w", seq, ErrNotDead)
	}
	if err != nil {
		return Dead{}, fmt.Errorf("read %s: %w", DeadStream, err)
	}
	d := deadOf(m)
	if d.Subject == "" { // not written by DeadLetter: nowhere to requeue it
		return Dead{}, fmt.Errorf("requeue %d: %w", seq, ErrNotDead)
	}
	h := nats.Header{}
	for k, vs := range m.Header {
		if !strings.HasPrefix(k, "Triggerd-Dead-") {
			h[k] = vs
		}
	}
	msg := &nats.Msg{Subject: d.Subject, Header: h, Data: m.Data}
	if _, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID("requeue:"+DeadStream+":"+strconv.FormatUint(seq, 10))); err != nil {
		return Dead{}, fmt.Errorf("requeue %d on %s: %w", seq, d.Subject, err)
	}
	if err := stream.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return d, fmt.Errorf("requeued %d on %s, but deleting the dead letter failed (requeueing it again within the dedup window publishes nothing): %w", seq, d.Subject, err)
	}
	return d, nil
}
