package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackMux publishes messages to JetStream and hands each one's
// acknowledgement to whoever waits for it: the events of every delivery go
// through it.
//
// It does what jetstream's PublishMsgAsync does, for less: that one arms a
// timer per message to expire a future nobody may wait for, and decodes
// every acknowledgement with encoding/json under its lock; together about
// 3 % of ingest's CPU under load. Here the waiter's own context bounds the
// wait and removes the entry when it ends, and an acknowledgement of the
// usual shape is read by hand (parseAck).
type ackMux struct {
	nc *nats.Conn
	// prefix is the reply subjects' prefix, "<inbox>."; the subscription
	// to prefix+"*" lasts as long as the connection.
	prefix string

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan ackResult
}

// ackResult is what a published message's acknowledgement says.
type ackResult struct {
	ack Published
	err error
}

func newAckMux(nc *nats.Conn) (*ackMux, error) {
	m := &ackMux{nc: nc, prefix: nc.NewInbox() + ".", waiting: map[uint64]chan ackResult{}}
	sub, err := nc.Subscribe(m.prefix+"*", m.deliver)
	if err != nil {
		return nil, fmt.Errorf("subscribe to acknowledgements: %w", err)
	}
	// An acknowledgement left waiting behind a burst is still one a
	// delivery waits for: never drop one as a slow consumer.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to acknowledgements: %w", err)
	}
	return m, nil
}

// publish sends msg (its Reply is set here) and returns its id and the
// channel that will receive its acknowledgement. The caller must wait or
// call forget(id).
func (m *ackMux) publish(msg *nats.Msg) (uint64, <-chan ackResult, error) {
	ch := make(chan ackResult, 1)
	m.mu.Lock()
	m.next++
	id := m.next
	m.waiting[id] = ch
	m.mu.Unlock()
	var reply [64]byte
	msg.Reply = string(strconv.AppendUint(append(reply[:0], m.prefix...), id, 36))
	if err := m.nc.PublishMsg(msg); err != nil {
		m.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

// forget drops a waiter that stopped waiting; its acknowledgement, if it
// ever comes, is ignored.
func (m *ackMux) forget(id uint64) {
	m.mu.Lock()
	delete(m.waiting, id)
	m.mu.Unlock()
}

// deliver is the subscription's handler: it hands an acknowledgement to its
// waiter.
func (m *ackMux) deliver(msg *nats.Msg) {
	if len(msg.Subject) <= len(m.prefix) {
		return
	}
	id, err := strconv.ParseUint(msg.Subject[len(m.prefix):], 36, 64)
	if err != nil {
		return
	}
	m.mu.Lock()
	ch, ok := m.waiting[id]
	delete(m.waiting, id)
	m.mu.Unlock()
	if !ok {
		return
	}
	ch <- readAck(msg)
}

// wait waits for the acknowledgement of a message published with publish,
// republishing it (at most twice, 250 ms apart, within ctx) when no stream
// took it: in a cluster a stream is briefly without a leader.
func (m *ackMux) wait(ctx context.Context, msg *nats.Msg, id uint64, ch <-chan ackResult) (Published, error) {
	for retries := 0; ; retries++ {
		var r ackResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			m.forget(id)
			return Published{}, ctx.Err()
		}
		if !errors.Is(r.err, jetstream.ErrNoStreamResponse) || retries == 2 {
			return r.ack, r.err
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return Published{}, ctx.Err()
		}
		var err error
		if id, ch, err = m.publish(msg); err != nil {
			return Published{}, err
		}
	}
}

// readAck reads a JetStream acknowledgement.
func readAck(msg *nats.Msg) ackResult {
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		// No stream took the message: none is bound to its subject, or
		// (in a cluster) the stream has no leader right now.
		return ackResult{err: jetstream.ErrNoStreamResponse}
	}
	if seq, dup, ok := parseAck(msg.Data); ok {
		return ackResult{ack: Published{Sequence: seq, Duplicate: dup}}
	}
	// jetstream's own acknowledgement, with the error it may carry instead.
	var a struct {
		Error *jetstream.APIError `json:"error"`
		jetstream.PubAck
	}
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return ackResult{err: fmt.Errorf("%w: %q", jetstream.ErrInvalidJSAck, msg.Data)}
	}
	if a.Error != nil {
		return ackResult{err: a.Error}
	}
	if a.Stream == "" {
		return ackResult{err: fmt.Errorf("%w: %q", jetstream.ErrInvalidJSAck, msg.Data)}
	}
	return ackResult{ack: Published{Sequence: a.Sequence, Duplicate: a.Duplicate}}
}

// parseAck reads the usual acknowledgement by hand:
// {"stream":"NAME","seq":N} with, optionally, "domain":"D" before seq and
// "duplicate":true after it; names and domains hold no quotes,
// backslashes or control characters. Anything else (an error, another field, an escape) is left
// to encoding/json: ok is false.
func parseAck(data []byte) (seq uint64, duplicate, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(`{"stream":"`))
	if !found {
		return 0, false, false
	}
	if rest, found = skipPlainString(rest); !found || len(rest) == 0 || rest[0] == '}' {
		return 0, false, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"domain":"`)); found {
		if rest, found = skipPlainString(r); !found {
			return 0, false, false
		}
	}
	if rest, found = bytes.CutPrefix(rest, []byte(`,"seq":`)); !found {
		return 0, false, false
	}
	n := 0
	for ; n < len(rest) && rest[n] >= '0' && rest[n] <= '9'; n++ {
		seq = seq*10 + uint64(rest[n]-'0')
	}
	// 19 digits cannot overflow; longer sequences are left to the decoder.
	if n == 0 || n > 19 || (n > 1 && rest[0] == '0') {
		return 0, false, false
	}
	switch string(rest[n:]) {
	case "}":
		return seq, false, true
	case `,"duplicate":true}`:
		return seq, true, true
	}
	return 0, false, false
}

// skipPlainString returns what follows the closing quote of a non-empty
// string without escapes or control characters, whose opening quote was
// already read.
func skipPlainString(b []byte) ([]byte, bool) {
	i := bytes.IndexByte(b, '"')
	if i <= 0 {
		return nil, false
	}
	for _, c := range b[:i] {
		if c < 0x20 || c == '\\' {
			return nil, false
		}
	}
	return b[i+1:], true
}
