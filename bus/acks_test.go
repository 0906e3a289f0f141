package bus

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Acknowledgements of the usual shape are read by hand; every other one is
// left to encoding/json, and an error acknowledgement stays a
// *jetstream.APIError that callers can tell apart.
func TestReadAck(t *testing.T) {
	for _, tc := range []struct {
		data     string
		fast     bool
		seq      uint64
		dup      bool
		errCode  jetstream.ErrorCode // of an APIError
		errOther error
	}{
		{data: `{"stream":"TRIGGERD_EVENTS","seq":42}`, fast: true, seq: 42},
		{data: `{"stream":"TRIGGERD_EVENTS","seq":7,"duplicate":true}`, fast: true, seq: 7, dup: true},
		{data: `{"stream":"S","domain":"hub","seq":1}`, fast: true, seq: 1},
		{data: `{"stream":"S","seq":9999999999999999999}`, fast: true, seq: 9999999999999999999},
		// Past the hand-read shape: still read, by encoding/json.
		{data: `{"stream":"S","seq":18446744073709551615}`, seq: 18446744073709551615},
		{data: `{"stream":"S","seq":3,"duplicate":false}`, seq: 3},
		{data: `{"seq":5,"stream":"S"}`, seq: 5},
		{data: `{"stream":"S\"q","seq":6}`, seq: 6},
		{data: ` {"stream":"S","seq":8} `, seq: 8},
		{data: `{"stream":"S","seq":0}`, fast: true, seq: 0},
		{data: `{"stream":"S","seq":01}`, errOther: jetstream.ErrInvalidJSAck},
		{data: `{"stream":"S","seq":1`, errOther: jetstream.ErrInvalidJSAck},
		{data: `{"stream":"S","seq":1}x`, errOther: jetstream.ErrInvalidJSAck},
		{data: `{"seq":1}`, errOther: jetstream.ErrInvalidJSAck},
		{data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}`,
			errCode: jetstream.JSErrCodeStreamWrongLastSequence},
	} {
		seq, dup, ok := parseAck([]byte(tc.data))
		if ok != tc.fast || (ok && (seq != tc.seq || dup != tc.dup)) {
			t.Errorf("parseAck(%s) = %d, %t, %t; want fast %t", tc.data, seq, dup, ok, tc.fast)
		}
		r := readAck(&nats.Msg{Data: []byte(tc.data)})
		var apiErr *jetstream.APIError
		switch {
		case tc.errCode != 0:
			if !errors.As(r.err, &apiErr) || apiErr.ErrorCode != tc.errCode {
				t.Errorf("readAck(%s) = %+v; want API error %d", tc.data, r, tc.errCode)
			}
		case tc.errOther != nil:
			if !errors.Is(r.err, tc.errOther) {
				t.Errorf("readAck(%s) = %+v; want %v", tc.data, r, tc.errOther)
			}
		case r.err != nil || r.ack != (Published{Sequence: tc.seq, Duplicate: tc.dup}):
			t.Errorf("readAck(%s) = %+v; want seq %d duplicate %t", tc.data, r, tc.seq, tc.dup)
		}
	}
	noResponders := &nats.Msg{Header: nats.Header{"Status": []string{"503"}}}
	if r := readAck(noResponders); !errors.Is(r.err, jetstream.ErrNoStreamResponse) {
		t.Errorf("no responders read as %+v", r)
	}
}

// Whatever parseAck reads by hand, encoding/json reads the same way.
func FuzzParseAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"TRIGGERD_EVENTS","seq":42}`,
		`{"stream":"S","seq":7,"duplicate":true}`,
		`{"stream":"S","domain":"d","seq":1}`,
		`{"error":{"code":503,"description":"x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, dup, ok := parseAck(data)
		if !ok {
			return
		}
		var a jetstream.PubAck
		if err := json.Unmarshal(data, &a); err != nil || a.Stream == "" || a.Sequence != seq || a.Duplicate != dup {
			t.Fatalf("parseAck(%q) = %d, %t; encoding/json reads %+v, %v", data, seq, dup, a, err)
		}
	})
}

// A message no stream takes fails (after the retries a cluster's leader
// election needs), and a waiter that gives up leaves nothing behind.
func TestAckMuxNoStreamAndGivingUp(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})

	msg := &nats.Msg{Subject: "nostream.here", Data: []byte("x")}
	id, ch, err := b.acks.publish(msg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.acks.wait(ctx, msg, id, ch); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish to a subject without a stream: %v; want no responders", err)
	}

	// A subscriber that never answers stands in for a lost acknowledgement.
	sub, err := b.nc.SubscribeSync("silent.here")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	msg = &nats.Msg{Subject: "silent.here", Data: []byte("x")}
	if id, ch, err = b.acks.publish(msg); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if _, err := b.acks.wait(short, msg, id, ch); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait without an acknowledgement: %v; want the context's deadline", err)
	}
	b.acks.mu.Lock()
	left := len(b.acks.waiting)
	b.acks.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waiters left behind", left)
	}
}
