package bus

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// TestArchiveSizing measures what the duplicate check costs at scale, in
// one run, for a NATS holding n accepted deliveries:
//
//   - index: n entries in IndexStream (64 to a message, as under load),
//     as an earlier version left them, without DedupBucket: the first new
//     process's Connect fills the bucket from it (the upgrade, once);
//   - seeded: the same n deliveries, in the index and the bucket, and the
//     bucket padded with synthetic entries to TRIGGERD_SIZING_SEED
//     deliveries (10 M or 70 M: the bucket's values are what grow);
//   - empty: an empty NATS, the baseline.
//
// For each it reports the server's start on the filled store and the heap
// it then holds (less the empty NATS's), a new process's Connect and the
// heap it then adds, and the time a commit of a new delivery takes (with
// 32 in flight) against the empty NATS's. Server and process share this
// test's heap, measured after a collection between steps, so each figure
// is live memory. It is heavy (n = 1,000,000 takes minutes and a gigabyte
// of disk a layout), so it runs only with TRIGGERD_SIZING=n
// (TRIGGERD_SIZING_ROUNDS, default 3; TRIGGERD_SIZING_LAYOUTS to pick
// some, always with empty). docs/scaling.md reports it.
func TestArchiveSizing(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRIGGERD_SIZING"))
	if n <= 0 {
		t.Skip("set TRIGGERD_SIZING=<deliveries> (e.g. 1000000) to measure the duplicate check at scale")
	}
	rounds, _ := strconv.Atoi(os.Getenv("TRIGGERD_SIZING_ROUNDS"))
	if rounds <= 0 {
		rounds = 3
	}
	seed, _ := strconv.Atoi(os.Getenv("TRIGGERD_SIZING_SEED"))
	layouts := []string{"empty", "index"}
	if seed > 0 {
		layouts = append(layouts, "seeded")
	}
	if only := os.Getenv("TRIGGERD_SIZING_LAYOUTS"); only != "" {
		layouts = strings.Split(only, ",") // e.g. "empty,seeded"; empty is the baseline
	}
	type figures struct {
		serverStart, upgrade, connect, commit time.Duration
		coldCommit                            time.Duration
		serverHeap, processHeap, serverBusy   int64
	}
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapInuse)
	}
	const commits = 2000
	results := map[string][]figures{}
	for round := range rounds {
		for _, layout := range layouts {
			dir := t.TempDir()
			// The last layout's server lets go of its memory over a few
			// seconds after its shutdown: wait for the heap to settle.
			h0 := heap()
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				time.Sleep(500 * time.Millisecond)
				h := heap()
				settled := h-h0 < 1<<20 && h0-h < 1<<20
				h0 = h
				if settled {
					break
				}
			}
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
				// What an earlier version leaves: no bucket.
				if err := w.js.DeleteKeyValue(context.Background(), DedupBucket); err != nil {
					t.Fatal(err)
				}
			case "seeded":
				fillIndex(t, w, n)
				seedBucket(t, w, n, seed)
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
			if layout == "index" {
				// The upgrade, once.
				start = time.Now()
				u, err := Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb})
				if err != nil {
					t.Fatal(err)
				}
				f.upgrade = time.Since(start)
				u.Close()
			}
			start = time.Now()
			r, err := Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb})
			if err != nil {
				t.Fatal(err)
			}
			f.connect = time.Since(start)
			r.Close()
			// What the next process holds, every allocation recorded.
			runtime.MemProfileRate = 1
			p1 := processHeap(t)
			if r, err = Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb}); err != nil {
				t.Fatal(err)
			}
			f.processHeap = processHeap(t) - p1
			runtime.MemProfileRate = 512 << 10
			r.Close()
			// What the server holds once the process is gone (Connect
			// makes the server load the streams it opens: the server's).
			f.serverHeap = heap() - h0
			if r, err = Connect(context.Background(), emb.ClientURL(), Options{Embedded: emb}); err != nil {
				t.Fatal(err)
			}
			if layout != "empty" {
				// The last delivery filled is a duplicate for the new process.
				c, events := testDelivery(sizingKey(n-1), 1, []byte(`{}`))
				if dup, err := r.Commit(context.Background(), c, events); err != nil || !dup {
					t.Fatalf("%s: the last delivery filled committed again: duplicate %v, %v", layout, dup, err)
				}
			}
			// The first commits load the bucket's blocks from disk (after
			// the server's start); those that follow find them cached.
			f.coldCommit = commitTime(t, r, commits, "cold")
			f.commit = commitTime(t, r, commits, "warm")
			// The server's heap once commits have read and written keys
			// all over the bucket: the blocks they loaded stay cached
			// for a while.
			f.serverBusy = heap() - h0
			r.Close()
			emb.Shutdown()
			results[layout] = append(results[layout], f)
			t.Logf("round %d %-6s filled in %s; server started in %s holding %d MB; upgrade fill %s; Connect %s, process +%d KB; commit %s cold, %s warm, server then %d MB",
				round+1, layout, fill.Round(time.Millisecond), f.serverStart.Round(time.Millisecond), f.serverHeap>>20,
				f.upgrade.Round(time.Millisecond), f.connect.Round(time.Millisecond), f.processHeap>>10, f.coldCommit.Round(time.Microsecond), f.commit.Round(time.Microsecond), f.serverBusy>>20)
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
	emptyCommit := median("empty", func(f figures) float64 { return f.commit.Seconds() })
	for _, layout := range layouts {
		held := n
		if layout == "seeded" {
			held = seed
		}
		t.Logf("%s, %d deliveries (median of %d): server start %.2f s, server +%.1f MB (%.1f B/delivery), +%.1f MB after %d commits; upgrade fill %.2f s; Connect %.3f s (%.1f times an empty NATS's), process %.1f KB (%.3f B/delivery); commit %.0f µs cold (%.2f times an empty NATS's), %.0f µs warm (%.2f times)",
			layout, held, rounds,
			median(layout, func(f figures) float64 { return f.serverStart.Seconds() }),
			(median(layout, func(f figures) float64 { return float64(f.serverHeap) })-emptyServer)/(1<<20),
			(median(layout, func(f figures) float64 { return float64(f.serverHeap) })-emptyServer)/float64(held),
			(median(layout, func(f figures) float64 { return float64(f.serverBusy) })-median("empty", func(f figures) float64 { return float64(f.serverBusy) }))/(1<<20),
			2*commits,
			median(layout, func(f figures) float64 { return f.upgrade.Seconds() }),
			median(layout, func(f figures) float64 { return f.connect.Seconds() }),
			median(layout, func(f figures) float64 { return f.connect.Seconds() })/empty,
			median(layout, func(f figures) float64 { return float64(f.processHeap) / 1024 }),
			median(layout, func(f figures) float64 { return float64(f.processHeap) / float64(held) }),
			median(layout, func(f figures) float64 { return f.coldCommit.Seconds() })*1e6,
			median(layout, func(f figures) float64 { return f.coldCommit.Seconds() })/median("empty", func(f figures) float64 { return f.coldCommit.Seconds() }),
			median(layout, func(f figures) float64 { return f.commit.Seconds() })*1e6,
			median(layout, func(f figures) float64 { return f.commit.Seconds() })/emptyCommit)
	}
}

// processHeap returns the live heap allocated outside the server's code:
// the process's, though both share this test's heap. It sums the heap
// profile's in-use bytes of the allocations without a nats-server frame
// (as recorded: the caller sets runtime.MemProfileRate to 1 first).
func processHeap(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	var total, inuse int64
	server := false
	flush := func() {
		if !server {
			total += inuse
		}
		inuse, server = 0, false
	}
	for line := range strings.Lines(buf.String()) {
		if strings.HasPrefix(line, "# runtime.MemStats") {
			break // the profile's records end here
		}
		if strings.HasPrefix(line, "#") {
			server = server || strings.Contains(line, "nats-server/")
		} else if strings.Contains(line, " @ ") {
			flush()
			// "<objects>: <bytes> [<allocs>: <bytes>] @ <stack>"
			if _, rest, ok := strings.Cut(line, ": "); ok {
				n, _, _ := strings.Cut(rest, " ")
				inuse, _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	flush()
	return total
}

// commitTime commits k new deliveries, 32 at a time, and returns the time
// a commit took on average (elapsed over k).
func commitTime(t *testing.T, b *Bus, k int, prefix string) time.Duration {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(k); i = next.Add(1) {
				c, events := testDelivery(fmt.Sprintf("sizing-%s-%d", prefix, i), 1, []byte(`{"new":true}`))
				if dup, err := b.Commit(context.Background(), c, events); err != nil || dup {
					errs <- fmt.Errorf("commit of a new delivery: duplicate %v, %v", dup, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start) / time.Duration(k)
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return took
}

// seedBucket writes DedupBucket as Commit would have for the n deliveries
// fillIndex wrote (whose index messages hold 64 each, from sequence 1),
// padded with synthetic entries (random hashes, naming message 1) to
// total deliveries.
func seedBucket(t *testing.T, b *Bus, n, total int) {
	t.Helper()
	real := make(map[string][]dedupEntry, 1<<dedupBits)
	expires := b.index.expires(time.Now())
	for i := range n {
		hash := deliveryHash(triggers.CodeHost, hashKey, sizingKey(i))
		k := dedupKey(hash)
		real[k] = append(real[k], dedupEntry{hash: hash, seq: uint64(i/64 + 1), expires: expires})
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	pad := max(total-n, 0)
	for key := range 1 << dedupBits {
		k := dedupKey(uint64(key) << (64 - dedupBits))
		m := pad >> dedupBits
		if key < pad&(1<<dedupBits-1) {
			m++
		}
		entries := real[k]
		for range m {
			hash := uint64(key)<<(64-dedupBits) | rnd.Uint64()>>dedupBits
			entries = append(entries, dedupEntry{hash: hash, seq: 1, expires: expires})
		}
		slices.SortFunc(entries, compareDedup)
		publishAsync(t, b, &nats.Msg{Subject: "$KV." + DedupBucket + "." + k, Data: encodeDedup(entries)})
	}
	publishDone(t, b)
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
