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
	payload, err := os.ReadFile(filepath.Join(testenv.Corpus(b), "github", "issues.opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	for _, layout := range []struct {
		name string
		o    Options
	}{{"shared", Options{}}, {"separate", Options{SeparateArchive: true}}} {
		b.Run(layout.name, func(b *testing.B) {
			t := &testing.T{}
			ts := &testServer{t: t, dir: b.TempDir(), listen: "127.0.0.1:0"}
			ts.start()
			defer ts.emb.Shutdown()
			o := layout.o
			o.Embedded = ts.emb
			bus := ts.connect(o)
			defer bus.Close()
			var n atomic.Int64
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("bench-%d", n.Add(1))
					c, events := testDelivery(id, 1, payload)
					if _, err := bus.Commit(context.Background(), c, events); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
		})
	}
}

// BenchmarkPublishOnly is the floor under BenchmarkCommit: one JetStream
// publish per delivery, awaiting its ack, of the same payload to the same
// embedded server over the same in-process connection, with nothing else
// (no archive record, no envelope, no duplicate check). What a delivery
// costs beyond this is triggerd's own.
func BenchmarkPublishOnly(b *testing.B) {
	payload, err := os.ReadFile(filepath.Join(testenv.Corpus(b), "github", "issues.opened.json"))
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	ts := &testServer{t: t, dir: b.TempDir(), listen: "127.0.0.1:0"}
	ts.start()
	defer ts.emb.Shutdown()
	bus := ts.connect(Options{Embedded: ts.emb})
	defer bus.Close()
	var n atomic.Int64
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("bench-%d", n.Add(1))
			if err := bus.Publish(context.Background(), "triggers.codehost.new_issue.octo.bench", id, payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "publishes/s")
}
