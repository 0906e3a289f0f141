package bus

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// TestArchiveSizing measures what the duplicate check costs at scale, in
// one run, for a NATS holding n accepted deliveries kept
//
//   - in the delivery index (index: n entries in IndexStream, 64 to a
//     message as under load, which every process reads whole at Connect
//     and keeps in memory), against
//   - as one archive record per delivery (records: what the server would
//     hold were it to keep the per-delivery state by subject, the design
//     the index replaced), and
//   - an empty NATS, the baseline.
//
// For each it reports the server's start on the filled store and the heap
// it then holds (against the heap before the store was filled, less the
// empty NATS's), and a new process's Connect and the heap it then adds.
// Server and process share this test's heap, measured after a collection
// between steps, so each figure is live memory, not what the runtime has
// yet to return. It is heavy (n = 1,000,000 takes minutes and a gigabyte
// of disk a layout), so it runs only with TRIGGERD_SIZING=n
// (TRIGGERD_SIZING_ROUNDS, default 3). docs/scaling.md reports it.
func TestArchiveSizing(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRIGGERD_SIZING"))
	if n <= 0 {
		t.Skip("set TRIGGERD_SIZING=<deliveries> (e.g. 1000000) to measure the duplicate check at scale")
	}
	rounds, _ := strconv.Atoi(os.Getenv("TRIGGERD_SIZING_ROUNDS"))
	if rounds <= 0 {
		rounds = 3
	}
	type figures struct {
		serverStart, connect    time.Duration
		serverHeap, processHeap int64
	}
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	results := map[string][]figures{}
	for round := range rounds {
		for _, layout := range []string{"empty", "index", "records"} {
			dir := t.TempDir()
			h0 := heap()
			emb, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			w, err := Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			switch layout {
			case "index":
				fillIndex(t, w, n)
			case "records":
				fillRecords(t, w, n)
			}
			fill := time.Since(start)
			w.Close()
			emb.Shutdown()

			var f figures
			start = time.Now()
			emb, err = StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			f.serverStart = time.Since(start)
			h1 := heap()
			start = time.Now()
			r, err := Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb})
			if err != nil {
				t.Fatal(err)
			}
			f.connect = time.Since(start)
			h2 := heap()
			f.serverHeap, f.processHeap = h1-h0, h2-h1
			if layout != "empty" {
				// The last delivery filled is a duplicate for the new process.
				c, events := testDelivery(sizingKey(n-1), 1, []byte(`{}`))
				if dup, err := r.Commit(context.Background(), c, events); err != nil || !dup {
					t.Fatalf("%s: the last delivery filled committed again: duplicate %v, %v", layout, dup, err)
				}
			}
			r.Close()
			emb.Shutdown()
			results[layout] = append(results[layout], f)
			t.Logf("round %d %-7s filled in %s; server started in %s holding %d MB; Connect %s, process +%d MB",
				round+1, layout, fill.Round(time.Millisecond), f.serverStart.Round(time.Millisecond), f.serverHeap>>20,
				f.connect.Round(time.Millisecond), f.processHeap>>20)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	median := func(layout string, of func(figures) float64) float64 {
		var v []float64
		for _, f := range results[layout] {
			v = append(v, of(f))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	empty := median("empty", func(f figures) float64 { return f.connect.Seconds() })
	emptyServer := median("empty", func(f figures) float64 { return float64(f.serverHeap) })
	for _, layout := range []string{"index", "records"} {
		t.Logf("%s at %d deliveries (median of %d): server start %.2f s, server %.1f B/delivery; Connect %.2f s (%.0f times an empty NATS's), process %.1f B/delivery",
			layout, n, rounds,
			median(layout, func(f figures) float64 { return f.serverStart.Seconds() }),
			(median(layout, func(f figures) float64 { return float64(f.serverHeap) })-emptyServer)/float64(n),
			median(layout, func(f figures) float64 { return f.connect.Seconds() }),
			median(layout, func(f figures) float64 { return f.connect.Seconds() })/empty,
			median(layout, func(f figures) float64 { return float64(f.processHeap) / float64(n) }))
	}
}

// sizingKey is the i-th delivery id of TestArchiveSizing: a GUID's shape.
func sizingKey(i int) string { return fmt.Sprintf("%08x-cc78-11e3-81ab-4c9367dc0958", i) }

// sizingHeader is a GitHub delivery's archived headers.
func sizingHeader(id string) map[string][]string {
	return map[string][]string{
		"Accept": {"*/*"}, "Content-Type": {"application/json"}, "User-Agent": {"GitHub-Hookshot/044aadd"},
		"X-Github-Delivery": {id}, "X-Github-Event": {"issues"}, "X-Github-Hook-Id": {"292430182"},
		"X-Github-Hook-Installation-Target-Id": {"79929171"}, "X-Github-Hook-Installation-Target-Type": {"repository"},
		"X-Hub-Signature-256": {"sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c"},
	}
}

// fillIndex writes n deliveries to the delivery index as Commit does under
// load: 64 entries to a message.
func fillIndex(t *testing.T, b *Bus, n int) {
	t.Helper()
	now := time.Now().UTC()
	data := make([]byte, 0, 64<<10)
	for i := range n {
		id := sizingKey(i)
		e := indexEntry{Connector: triggers.CodeHost, Key: id, DeliveryID: id, ReceivedAt: now,
			Header: sizingHeader(id), Events: 1, BodySeq: uint64(i + 1)}
		if i%64 == 0 {
			data = append(data[:0], '[')
		} else {
			data = append(data, ',')
		}
		data = e.appendJSON(data)
		if i%64 == 63 || i == n-1 {
			publishAsync(t, b, &nats.Msg{Subject: IndexSubject, Data: slices.Clone(append(data, ']'))})
		}
	}
	publishDone(t, b)
}

// fillRecords writes n deliveries' archive records as Commit writes one
// for a delivery whose event holds its body: the archived headers, no
// data.
func fillRecords(t *testing.T, b *Bus, n int) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range n {
		id := sizingKey(i)
		h := nats.Header(sizingHeader(id))
		h.Set(HeaderConnector, string(triggers.CodeHost))
		h.Set(HeaderDeliveryID, id)
		h.Set(HeaderReceivedAt, now)
		h.Set(HeaderEvents, "1")
		h.Set(HeaderBodyEvent, strconv.Itoa(i+1))
		publishAsync(t, b, &nats.Msg{Subject: ArchiveSubject(triggers.CodeHost, id), Header: h})
	}
	publishDone(t, b)
}

// publishAsync publishes msg without waiting for its acknowledgement,
// waiting only while too many are unacknowledged.
func publishAsync(t *testing.T, b *Bus, msg *nats.Msg) {
	t.Helper()
	for tries := 0; ; tries++ {
		_, err := b.js.PublishMsgAsync(msg)
		if err == nil {
			return
		}
		if err != jetstream.ErrTooManyStalledMsgs || tries > 100 {
			t.Fatal(err)
		}
	}
}

func publishDone(t *testing.T, b *Bus) {
	t.Helper()
	select {
	case <-b.js.PublishAsyncComplete():
	case <-time.After(10 * time.Minute):
		t.Fatal("filled messages not acknowledged within 10 minutes")
	}
}
