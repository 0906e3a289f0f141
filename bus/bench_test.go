package bus

import (
	"github.com/triggerd/triggerd/internal/testenv"

	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
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
