package bus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// BenchmarkCommit measures making one delivery of an 11-14 KB issue payload
// and its event durable, with 64 commits in flight as under webhook load, in
// each archive layout.
func BenchmarkCommit(b *testing.B) {
	payload := benchPayload(b)
	for _, layout := range []struct {
		name string
		o    Options
	}{{"shared", Options{}}, {"separate", Options{SeparateArchive: true}}} {
		b.Run(layout.name, func(b *testing.B) {
			bus, stop := benchBus(b, layout.o)
			defer stop()
			benchParallel(b, payload, "commits/s", func(id string) error {
				c, events := testDelivery(id, 1, payload)
				_, err := bus.Commit(context.Background(), c, events)
				return err
			})
		})
	}
}

// BenchmarkPublishOnly is the floor under BenchmarkCommit: one JetStream
// publish per delivery, awaiting its ack, of the same payload to the same
// embedded server over the same in-process connection, with nothing else
// (no archive record, no envelope, no duplicate check). What a delivery
// costs beyond this is triggerd's own.
func BenchmarkPublishOnly(b *testing.B) {
	payload := benchPayload(b)
	bus, stop := benchBus(b, Options{})
	defer stop()
	benchParallel(b, payload, "publishes/s", func(id string) error {
		return bus.Publish(context.Background(), "triggers.codehost.new_issue.octo.bench", id, payload)
	})
}

// BenchmarkMessageCost splits Commit into its two messages, each published
// alone and awaited: the event (its id as Nats-Msg-Id, conditional on the
// delivery having no record), the archive record (a delivery's headers, no
// body, conditional on its subject being empty), and a one-byte message
// with no header or condition, the per-message floor.
func BenchmarkMessageCost(b *testing.B) {
	payload := benchPayload(b)
	c, _ := testDelivery("d", 1, payload)
	for _, k := range []string{"Accept", "Content-Type", "User-Agent", "X-Github-Hook-Id", "X-Github-Hook-Installation-Target-Id",
		"X-Github-Hook-Installation-Target-Type", "X-Hub-Signature", "X-Hub-Signature-256"} {
		c.Header[k] = []string{"a-value-of-typical-length-0123456789abcdef"}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		op   func(bus *Bus, id string) error
	}{
		{"event", func(bus *Bus, id string) error {
			_, err := bus.js.PublishMsg(ctx, &nats.Msg{Subject: "triggers.codehost.new_issue.octo.bench", Data: payload},
				jetstream.WithMsgID(id), jetstream.WithExpectLastSequenceForSubject(0, ArchiveSubject(triggers.CodeHost, id)))
			return err
		}},
		{"record", func(bus *Bus, id string) error {
			c := c
			c.DeliveryID = id
			return bus.archive(ctx, ArchiveSubject(triggers.CodeHost, id), c, 1, 1)
		}},
		{"one-byte", func(bus *Bus, id string) error {
			_, err := bus.js.PublishMsg(ctx, &nats.Msg{Subject: ArchiveSubject(triggers.CodeHost, id), Data: []byte("x")})
			return err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bus, stop := benchBus(b, Options{})
			defer stop()
			benchParallel(b, payload, "messages/s", func(id string) error { return tc.op(bus, id) })
		})
	}
}

func benchPayload(b *testing.B) []byte {
	payload, err := os.ReadFile(filepath.Join(testenv.Corpus(b), "github", "issues.opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	return payload
}

// benchBus connects to a fresh embedded server on a temporary store; stop
// closes both. (The benchmark function runs several times, with growing
// b.N: each run gets its own.)
func benchBus(b *testing.B, o Options) (bus *Bus, stop func()) {
	ts := &testServer{t: &testing.T{}, dir: b.TempDir(), listen: "127.0.0.1:0"}
	ts.start()
	o.Embedded = ts.emb
	bus = ts.connect(o)
	return bus, func() { bus.Close(); ts.emb.Shutdown() }
}

// benchParallel runs op with a fresh delivery id from 64 goroutines, as
// under webhook load on 2 cores, and reports op's rate as unit.
func benchParallel(b *testing.B, payload []byte, unit string, op func(id string) error) {
	var n atomic.Int64
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(fmt.Sprintf("bench-%d", n.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), unit)
}
