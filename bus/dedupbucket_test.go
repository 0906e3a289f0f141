package bus

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// A bucket value decodes to what was encoded; merging drops expired
// entries, keeps the list sorted and each entry once, and matching finds
// every unexpired entry of a hash.
func TestDedupValue(t *testing.T) {
	now := int64(1_000_000)
	entries := mergeDedup(nil, now,
		dedupEntry{hash: 30, seq: 2, expires: 2_000_000},
		dedupEntry{hash: 10, seq: 1, expires: 2_000_000},
		dedupEntry{hash: 30, seq: 1 | legacySeq, expires: 2_000_000},
		dedupEntry{hash: 20, seq: 3, expires: 999_999}, // expired
		dedupEntry{hash: 10, seq: 1, expires: 2_000_000},
	)
	want := []dedupEntry{{10, 1, 2_000_000}, {30, 2, 2_000_000}, {30, 1 | legacySeq, 2_000_000}}
	if !reflect.DeepEqual(entries, want) {
		t.Fatalf("merged %+v, want %+v", entries, want)
	}
	data := encodeDedup(entries)
	if len(data) != 1+3*dedupEntrySize {
		t.Fatalf("encoded %d bytes, want %d", len(data), 1+3*dedupEntrySize)
	}
	got, err := decodeDedup(data)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, entries)
	}
	if _, err := decodeDedup(data[:len(data)-1]); err == nil {
		t.Fatal("a truncated value decoded")
	}
	if seqs := matching(entries, 30, now); !reflect.DeepEqual(seqs, []uint64{2, 1 | legacySeq}) {
		t.Fatalf("matching(30) = %v", seqs)
	}
	if seqs := matching(entries, 30, 2_000_000); len(seqs) != 0 {
		t.Fatalf("matching(30) once expired = %v, want none", seqs)
	}
	if merged := mergeDedup(entries, 2_000_000); len(merged) != 0 {
		t.Fatalf("merging once all expired kept %+v", merged)
	}
}

// The hash is stable (every process must agree: no random seed), and
// spreads delivery ids that differ only in their last characters over
// the keys.
func TestDeliveryHashSpreads(t *testing.T) {
	if got := deliveryHash(triggers.CodeHost, hashKey, "72d3162e-cc78-11e3-81ab-4c9367dc0958"); got != deliveryHash(triggers.CodeHost, hashKey, "72d3162e-cc78-11e3-81ab-4c9367dc0958") {
		t.Fatal("the hash is not stable")
	}
	if deliveryHash(triggers.CodeHost, hashKey, "x") == deliveryHash(triggers.CodeHost, hashID, "x") {
		t.Fatal("a key and an id hash alike")
	}
	const n = 1 << 20
	perKey := map[string]int{}
	for i := range n {
		perKey[dedupKey(deliveryHash(triggers.CodeHost, hashKey, fmt.Sprintf("bench-%d", i)))]++
	}
	most := 0
	for _, c := range perKey {
		most = max(most, c)
	}
	// 4 a key on average; a uniform hash fills nearly every key and puts
	// at most about 20 in one.
	if len(perKey) < (1<<dedupBits)*95/100 || most > 30 {
		t.Fatalf("%d deliveries over %d keys, at most %d in one: the hash does not spread", n, len(perKey), most)
	}
}

// Writers that all read a key before any wrote it each get their entry
// in: those that lose the compare-and-set read the key again.
func TestDedupConcurrentWriters(t *testing.T) {
	ts := startServer(t, 0)
	a, b := ts.connect(Options{}), ts.connect(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const key, writers = "00000", 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		x := []*Bus{a, b}[i%2].index
		slot, err := x.read(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = x.insert(ctx, slot, []dedupEntry{{hash: uint64(i + 1), seq: uint64(i + 1), expires: x.expires(time.Now())}}, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	slot, err := a.index.read(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(slot.entries) != writers {
		t.Fatalf("key holds %d entries, want %d: %+v", len(slot.entries), writers, slot.entries)
	}
}

// Processes starting at once on a NATS an earlier version left (an index,
// no bucket) both fill the bucket; their writes merge, and each knows
// every delivery the index held.
func TestConcurrentUpgradeFills(t *testing.T) {
	const n = 3000
	ts := startServer(t, 0)
	w := ts.connect(Options{})
	fillIndex(t, w, n)
	if err := w.js.DeleteKeyValue(context.Background(), DedupBucket); err != nil {
		t.Fatal(err)
	}
	buses := make([]*Bus, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range buses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			buses[i], errs[i] = Connect(ctx, ts.emb.ClientURL(), Options{})
		}()
	}
	wg.Wait()
	for i, b := range buses {
		if errs[i] != nil {
			t.Fatalf("process %d: %v", i, errs[i])
		}
		defer b.Close()
	}
	ctx := context.Background()
	for i := 0; i < n; i += 7 {
		for p, b := range buses {
			if _, found, err := b.index.lookup(ctx, triggers.CodeHost, sizingKey(i)); err != nil || !found {
				t.Fatalf("process %d: delivery %d of the earlier index: found %v, %v", p, i, found, err)
			}
		}
	}
	if _, found, err := buses[0].index.lookup(ctx, triggers.CodeHost, sizingKey(n)); err != nil || found {
		t.Fatalf("a delivery never indexed: found %v, %v", found, err)
	}
}

// A read the bucket's stream left unanswered marks the Bus not ready at
// once, naming the stream, so that the deliveries that follow are spooled
// instead of each waiting.
func TestUnansweredReadMarksNotReady(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	err := fmt.Errorf("check index: %w", &unansweredError{stream: dedupStream, err: context.DeadlineExceeded})
	b.noteCommitError(err)
	if reason := b.NotReadyReason(); !strings.Contains(reason, dedupStream) {
		t.Fatalf("not-ready reason %q; want it to name %s", reason, dedupStream)
	}
	testenv.Eventually(t, 5*time.Second, "the watcher to find the stream led again", func() bool { return b.Ready() })
}
