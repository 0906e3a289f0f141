package bus

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

// The index entry's hand-written encoding decodes to the same entry as
// encoding/json's of the headers the archive keeps, whatever they hold.
func TestIndexEntryEncoding(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	for _, e := range []indexEntry{
		{Connector: triggers.CodeHost, Key: "d-1", DeliveryID: "d-1", ReceivedAt: at, Events: 1, BodySeq: 7},
		{
			Connector: triggers.CodeHost, Key: "d-3", DeliveryID: "d-3", ReceivedAt: at, Events: 1, BodySeq: 8,
			Header: map[string][]string{"Cookie": {"only unarchived headers"}},
		},
		{
			Connector: triggers.Deploy, Key: "hook-1/d-2", DeliveryID: "d-2", ReceivedAt: at, Events: 2, BodySeq: 1 << 40,
			Header: map[string][]string{
				"X-Github-Event": {"issues"},
				"User-Agent":     {`quote " backslash \ tab` + "\t newline\n cr\r nul\x00 bell\x07"},
				"X-Unicode":      {"café ☕ \u2028", ""},
				"X-Invalid":      {"bad \xff\xfe utf-8"},
				"X-Empty":        {},
				// Not archived: credentials, NATS's and triggerd's own.
				"Authorization":           {"Bearer secret"},
				"Triggerd-Body-Event-Seq": {"1"},
				"Nats-Msg-Id":             {"forged"},
				// Canonicalised, as ArchivedHeader does.
				"x-lower-case": {"kept"},
			},
			Scope: &triggers.Scope{Hook: "hook-1", Tenant: "t-1", Account: "a \"1\""},
		},
	} {
		got := e.appendJSON(nil)
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		kept := e
		kept.Header = ArchivedHeader(e.Header)
		want, err := json.Marshal(kept)
		if err != nil {
			t.Fatal(err)
		}
		var a, b indexEntry
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("appendJSON decodes to\n%+v\nencoding/json to\n%+v", a, b)
		}
	}
}

func BenchmarkIndexEntryEncoding(b *testing.B) {
	e := indexEntry{
		Connector: triggers.CodeHost, Key: "72d3162e-cc78-11e3-81ab-4c9367dc0958", DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		ReceivedAt: time.Now().UTC(), Events: 1, BodySeq: 123456,
		Header: map[string][]string{
			"Accept": {"*/*"}, "Content-Type": {"application/json"}, "User-Agent": {"GitHub-Hookshot/044aadd"},
			"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"issues"},
			"X-Github-Hook-Id": {"292430182"}, "X-Github-Hook-Installation-Target-Id": {"79929171"},
			"X-Github-Hook-Installation-Target-Type": {"repository"},
			"X-Hub-Signature-256":                    {"sha256=d57c68ca6f92289e6987922ff26938930f6e66a2d161ef06abdf1859230aa23c"},
		},
	}
	b.Run("appendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = e.appendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A hash found in the index counts only once the index message confirms
// the delivery: a collision never refuses a new delivery.
func TestIndexLookupConfirmsHashes(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	c, events := testDelivery("d-indexed", 1, []byte(`{}`))
	commit(t, b, c, events)
	ctx := context.Background()
	if _, found, err := b.index.lookup(ctx, triggers.CodeHost, "d-indexed"); err != nil || !found {
		t.Fatalf("lookup(d-indexed) = %v, %v; want found", found, err)
	}
	// Make "d-new" collide with d-indexed: an entry under d-new's hash
	// naming d-indexed's index message.
	indexed, err := b.index.read(ctx, dedupKey(deliveryHash(triggers.CodeHost, hashKey, "d-indexed")))
	if err != nil {
		t.Fatal(err)
	}
	seqs := matching(indexed.entries, deliveryHash(triggers.CodeHost, hashKey, "d-indexed"), time.Now().Unix())
	if len(seqs) != 1 {
		t.Fatalf("d-indexed has %d entries in its key, want 1", len(seqs))
	}
	hash := deliveryHash(triggers.CodeHost, hashKey, "d-new")
	slot, err := b.index.read(ctx, dedupKey(hash))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.index.insert(ctx, slot, []dedupEntry{{hash: hash, seq: seqs[0], expires: b.index.expires(time.Now())}}, nil); err != nil {
		t.Fatal(err)
	}
	c, events = testDelivery("d-new", 1, []byte(`{"new":true}`))
	if commit(t, b, c, events) {
		t.Fatal("a new delivery whose hash collided was refused as a duplicate")
	}
	if !commit(t, b, c, events) {
		t.Fatal("the delivery that collided was accepted twice")
	}
}

// Close does not wait out an index message JetStream cannot take, and the
// delivery waiting on it learns it was not archived.
func TestCloseDoesNotWaitForAnIndexMessage(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	ts.emb.Shutdown()
	ts.emb = nil
	added := make(chan error, 1)
	go func() {
		_, err := b.index.add(context.Background(), indexEntry{Connector: triggers.CodeHost, Key: "d-down", DeliveryID: "d-down", ReceivedAt: time.Now()}, dedupSlot{})
		added <- err
	}()
	testenv.Eventually(t, 5*time.Second, "the writer to take the entry", func() bool {
		b.index.qmu.Lock()
		defer b.index.qmu.Unlock()
		return len(b.index.queue) == 0
	})
	start := time.Now()
	b.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %s with an index message in flight", took)
	}
	if err := <-added; err == nil {
		t.Fatal("an entry whose index message never reached JetStream was reported durable")
	}
}

// The index lives in a stream of its own, not in EventsStream, and the
// deliveries an earlier version indexed (in IndexStream, or on
// deliveries.index in EventsStream before it), without the bucket, are
// put in the bucket when it is new: they stay duplicates, and
// replayable, after the upgrade. Once filled, Connect reads the index no
// more.
func TestIndexStreamAndLegacyIndex(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	ctx := context.Background()

	c, events := testDelivery("d-new-index", 1, []byte(`{"new":true}`))
	commit(t, b, c, events)
	if n, err := subjectMsgs(ctx, b.events, DeliveriesPrefix+".>"); err != nil || n != 0 {
		t.Fatalf("EventsStream holds %d messages on %s.> (%v); want the index elsewhere", n, DeliveriesPrefix, err)
	}
	if entries := indexEntries(t, b); len(entries) != 1 || entries[0].Key != "d-new-index" {
		t.Fatalf("index stream holds %+v, want the one delivery", entries)
	}

	// What earlier versions wrote: the event carrying the body, then an
	// index entry naming it, in EventsStream (the oldest) or IndexStream.
	earlier := func(id, subject string) (triggers.Capture, []triggers.Event) {
		old, oldEvents := testDelivery(id, 1, []byte(`{"old":"`+id+`"}`))
		old.Scope = &triggers.Scope{Tenant: "t_1", Hook: "h_1"}
		published, err := b.PublishEvents(ctx, oldEvents, ArchiveSubject(triggers.CodeHost, old.Key()))
		if err != nil {
			t.Fatal(err)
		}
		e := indexEntry{
			Connector: triggers.CodeHost, Key: old.Key(), DeliveryID: old.DeliveryID, ReceivedAt: old.ReceivedAt,
			Header: ArchivedHeader(old.Header), Scope: old.Scope, Events: 1, BodySeq: published[0].Sequence,
		}
		data := append(append([]byte{'['}, e.appendJSON(nil)...), ']')
		if _, err := b.js.Publish(ctx, subject, data); err != nil {
			t.Fatal(err)
		}
		return old, oldEvents
	}
	legacy, legacyEvents := earlier("d-legacy-index", legacyIndexSubject)
	old, oldEvents := earlier("d-old-index", IndexSubject)
	// A process started now does not read the index: its bucket is
	// filled already.
	if r := ts.connect(Options{}); commit(t, r, old, oldEvents) {
		t.Fatal("Connect read the index although the bucket was filled")
	}
	// A NATS only earlier versions ran against: no bucket.
	if err := b.js.DeleteKeyValue(ctx, DedupBucket); err != nil {
		t.Fatal(err)
	}

	r := ts.connect(Options{})
	for _, d := range []struct {
		c      triggers.Capture
		events []triggers.Event
	}{{legacy, legacyEvents}, {old, oldEvents}, {c, events}} {
		if !commit(t, r, d.c, d.events) {
			t.Fatalf("%s, in the index before the upgrade, was accepted again after it", d.c.Key())
		}
	}
	got, err := r.Delivery(ctx, triggers.CodeHost, legacy.Key())
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Body) != `{"old":"d-legacy-index"}` || got.Header["X-Github-Event"][0] != "push" {
		t.Fatalf("replayed the earlier index's delivery as %s %v", got.Body, got.Header)
	}
	if found, err := r.HookDeliveries(ctx, triggers.CodeHost, "d-old-index"); err != nil || len(found) != 1 {
		t.Fatalf("HookDeliveries(d-old-index) after the upgrade = %+v, %v; want it", found, err)
	}
	filled, err := r.index.kv.Get(ctx, dedupFilledKey)
	if err != nil {
		t.Fatal(err)
	}
	var f dedupFilled
	// Every entry of IndexStream (d-old-index twice: the process above
	// indexed it again), and the legacy one.
	if want := len(indexEntries(t, r)) + 1; json.Unmarshal(filled.Value(), &f) != nil || f.Deliveries != want {
		t.Fatalf("fill marker %s; want %d deliveries", filled.Value(), want)
	}
}

func TestArchivedName(t *testing.T) {
	for name, kept := range map[string]bool{
		"X-GitHub-Event": true, "X-Hub-Signature-256": true, "x-vercel-signature": true, "User-Agent": true,
		"Content-Type": true, "X-GitHub-Hook-Installation-Target-ID": true,
		"Authorization": false, "Proxy-Authorization": false, "Cookie": false, "Set-Cookie": false,
		"X-Api-Key": false, "x-apikey": false, "X-Auth-Token": false, "X-Gitlab-Token": false, "Private-Token": false,
		"X-Webhook-Secret": false, "X-Amz-Security-Token": false, "X-Session-Id": false, "X-Password": false,
		"Connection": false, "Content-Length": false, "Nats-Msg-Id": false, "Triggerd-Scope": false,
	} {
		if _, got := archivedName(name); got != kept {
			t.Errorf("archivedName(%q) keeps it: %v, want %v", name, got, kept)
		}
	}
}

// TestHookDeliveriesByID: a delivery on a tenant's hook is found by its
// delivery id alone, through its second entry in the bucket (another
// process's reading is triggerctl's test), until the entry expires with
// the archive.
func TestHookDeliveriesByID(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	c, events := testDelivery("guid-1", 1, []byte(`{}`))
	c.Scope = &triggers.Scope{Tenant: "t_1", Hook: "h_1"}
	commit(t, b, c, events)
	ctx := context.Background()
	if _, err := b.Delivery(ctx, triggers.CodeHost, "guid-1"); !errors.Is(err, ErrNotArchived) {
		t.Fatalf("Delivery by the bare id = %v; want ErrNotArchived: its key is h_1/guid-1", err)
	}
	found, err := b.HookDeliveries(ctx, triggers.CodeHost, "guid-1")
	if err != nil || len(found) != 1 || found[0].Key() != "h_1/guid-1" || found[0].Scope.Hook != "h_1" {
		t.Fatalf("HookDeliveries = %+v, %v; want h_1/guid-1", found, err)
	}
	if found, err := b.HookDeliveries(ctx, triggers.Deploy, "guid-1"); err != nil || len(found) != 0 {
		t.Fatalf("HookDeliveries of the other connector = %+v, %v; want none", found, err)
	}
	b.index.now = func() time.Time { return time.Now().Add(b.opts.ArchiveRetention + time.Minute) }
	if found, err := b.HookDeliveries(ctx, triggers.CodeHost, "guid-1"); err != nil || len(found) != 0 {
		t.Fatalf("HookDeliveries past the archive's retention = %+v, %v; want none", found, err)
	}
}

// A delivery's entry lasts as long as its index message, counted from
// when it was indexed: a delivery that says it was received long ago (a
// spooled one, or a test's clock) is still a duplicate when sent again.
func TestIndexedDeliveryOutlivesItsReceivedAt(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	c, events := testDelivery("received-long-ago", 1, []byte(`{"n":1}`))
	c.ReceivedAt = time.Now().Add(-2 * b.opts.ArchiveRetention).UTC().Truncate(time.Second)
	if commit(t, b, c, events) {
		t.Fatal("the first commit was answered duplicate")
	}
	if !commit(t, b, c, events) {
		t.Fatal("the delivery sent again was not answered duplicate")
	}
	got, err := b.Delivery(context.Background(), triggers.CodeHost, c.DeliveryID)
	if err != nil || !got.ReceivedAt.Equal(c.ReceivedAt) {
		t.Fatalf("Delivery = %+v, %v; want it, received at %s", got, err, c.ReceivedAt)
	}
}
