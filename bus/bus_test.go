package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

type testServer struct {
	t       testing.TB
	dir     string
	listen  string
	maxPay  int32
	emb     *Embedded
	clients []*Bus
}

// startServer runs an embedded NATS with JetStream on a random port and a
// temporary store, as nats-server's own tests do.
func startServer(t testing.TB, maxPayload int32) *testServer {
	t.Helper()
	ts := &testServer{t: t, dir: t.TempDir(), maxPay: maxPayload}
	ts.listen = freeAddr(t)
	ts.start()
	t.Cleanup(func() {
		for _, c := range ts.clients {
			c.Close()
		}
		if ts.emb != nil {
			ts.emb.Shutdown()
		}
	})
	return ts
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (ts *testServer) start() {
	ts.t.Helper()
	emb, err := StartEmbedded(EmbeddedOptions{Listen: ts.listen, DataDir: ts.dir, MaxPayload: ts.maxPay})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.emb = emb
}

func (ts *testServer) restart() {
	ts.emb.Shutdown()
	ts.start()
}

func (ts *testServer) connect(o Options) *Bus {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Connect(ctx, ts.emb.ClientURL(), o)
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.clients = append(ts.clients, b)
	return b
}

// eventMsgs returns how many events the events stream holds.
func eventMsgs(t *testing.T, b *Bus) uint64 {
	t.Helper()
	n, err := b.EventCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// records returns how many deliveries the archive holds: records of their
// own, and distinct deliveries in the delivery index.
func records(t *testing.T, b *Bus) uint64 {
	t.Helper()
	ctx := context.Background()
	n, err := subjectMsgs(ctx, b.deliveries, DeliveriesPrefix+".*.*")
	if err != nil {
		t.Fatal(err)
	}
	if b.index == nil {
		return n
	}
	indexed := map[string]bool{}
	for _, e := range indexEntries(t, b) {
		indexed[string(e.Connector)+" "+e.Key] = true
	}
	return n + uint64(len(indexed))
}

// indexEntries returns every entry of the delivery index, in order.
func indexEntries(t *testing.T, b *Bus) []indexEntry {
	t.Helper()
	ctx := context.Background()
	var all []indexEntry
	var seq uint64
	for {
		msg, err := b.indexStream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(IndexSubject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return all
		} else if err != nil {
			t.Fatal(err)
		}
		var entries []indexEntry
		if err := json.Unmarshal(msg.Data, &entries); err != nil {
			t.Fatalf("index message %d: %v", msg.Sequence, err)
		}
		all = append(all, entries...)
		seq = msg.Sequence
	}
}

// layouts runs fn once per archive layout, with the options that choose it
// on a fresh server.
func layouts(t *testing.T, fn func(t *testing.T, o Options)) {
	for _, l := range []struct {
		name string
		o    Options
	}{{"shared", Options{}}, {"separate", Options{SeparateArchive: true}}} {
		t.Run(l.name, func(t *testing.T) { fn(t, l.o) })
	}
}

func testDelivery(id string, n int, payload []byte) (triggers.Capture, []triggers.Event) {
	c := triggers.Capture{
		Connector:  triggers.CodeHost,
		DeliveryID: id,
		// Now, not a fixed date: the index forgets deliveries older than
		// the archive's retention (a fixed date here broke these tests
		// seven days after it was written).
		ReceivedAt: time.Now().UTC().Truncate(time.Second),
		Header: map[string][]string{
			"X-Github-Event":    {"push"},
			"X-Github-Delivery": {id},
			"Authorization":     {"Bearer must-not-be-archived"},
			"X-Api-Key":         {"must-not-be-archived"},
		},
		Body: payload,
	}
	events := make([]triggers.Event, n)
	for i := range events {
		events[i] = triggers.Event{
			ID:         triggers.EventID(triggers.CodeHost, id, triggers.NewCommit, i),
			Kind:       triggers.NewCommit,
			Connector:  triggers.CodeHost,
			DeliveryID: id,
			ReceivedAt: c.ReceivedAt,
			Repository: &triggers.Repository{Owner: "Octo-Org", Name: "socket.io", FullName: "Octo-Org/socket.io"},
			Resource:   triggers.Resource{Type: "commit", SHA: fmt.Sprint(i)},
			Payload:    payload,
		}
	}
	return c, events
}

func commit(t *testing.T, b *Bus, c triggers.Capture, events []triggers.Event) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dup, err := b.Commit(ctx, c, events)
	if err != nil {
		t.Fatal(err)
	}
	return dup
}

func TestCommitPublishesEventsOnceAndArchives(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		payload := []byte(`{"ref":"refs/heads/main"}`)
		c, events := testDelivery("d-1", 3, payload)

		if dup := commit(t, b, c, events); dup {
			t.Fatal("first commit reported a duplicate")
		}
		if got := eventMsgs(t, b); got != 3 {
			t.Fatalf("events stream holds %d messages, want 3", got)
		}
		// The same delivery again, also with freshly mapped events.
		c2, events2 := testDelivery("d-1", 3, payload)
		if dup := commit(t, b, c2, events2); !dup {
			t.Fatal("second commit of d-1 was not recognised as a duplicate")
		}
		if got := eventMsgs(t, b); got != 3 {
			t.Fatalf("events stream holds %d messages after a duplicate, want 3", got)
		}

		// The event is on its subject, with the payload unchanged.
		s, _ := b.js.Stream(context.Background(), EventsStream)
		msg, err := s.GetLastMsgForSubject(context.Background(), "triggers.codehost.new_commit.octo-org.socket%2Eio")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(msg.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != events[2].ID || !bytes.Equal(got.Payload, payload) {
			t.Fatalf("last event = %s %s, want %s with the payload unchanged", got.ID, got.Payload, events[2].ID)
		}
		if msg.Header.Get("Nats-Msg-Id") != events[2].ID {
			t.Fatalf("Nats-Msg-Id = %q, want the event id", msg.Header.Get("Nats-Msg-Id"))
		}

		// The archive holds headers and body, minus credentials.
		arch, err := b.Delivery(context.Background(), triggers.CodeHost, "d-1")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(arch.Body, payload) || arch.DeliveryID != "d-1" || !arch.ReceivedAt.Equal(c.ReceivedAt) {
			t.Fatalf("archived = %+v", arch)
		}
		if arch.Header["X-Github-Event"][0] != "push" {
			t.Fatalf("archived headers = %v, want X-Github-Event", arch.Header)
		}
		for _, name := range []string{"Authorization", "X-Api-Key"} {
			if _, ok := arch.Header[name]; ok {
				t.Fatalf("the archive kept the %s header", name)
			}
		}
		c0, events0 := testDelivery("d-0", 0, payload) // ignored: a record of its own
		commit(t, b, c0, events0)
		for _, d := range []string{"d-1", "d-0"} {
			arch, err := b.Delivery(context.Background(), triggers.CodeHost, d)
			if err != nil {
				t.Fatal(err)
			}
			for name := range arch.Header {
				if strings.HasPrefix(name, "Nats-") || strings.HasPrefix(name, "Triggerd-") {
					t.Errorf("delivery %s reads back with %s, which the sender did not send", d, name)
				}
			}
		}
		if _, err := b.Delivery(context.Background(), triggers.CodeHost, "never"); !errors.Is(err, ErrNotArchived) {
			t.Fatalf("Delivery(never) = %v, want ErrNotArchived", err)
		}
	})
}

func TestCommitAfterInterruptedAttemptPublishesNothingTwice(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		c, events := testDelivery("d-crash", 5, []byte(`{}`))
		// The interrupted attempt got the first three events out, then died
		// before writing the archive record.
		if _, err := b.PublishEvents(context.Background(), events[:3], ArchiveSubject(c.Connector, c.DeliveryID)); err != nil {
			t.Fatal(err)
		}
		// The server restarts too; the sender retries.
		ts.restart()
		b2 := ts.connect(o)
		c, events = testDelivery("d-crash", 5, []byte(`{}`))
		if dup := commit(t, b2, c, events); dup {
			t.Fatal("the retry of an unfinished delivery was called a duplicate")
		}
		if got := eventMsgs(t, b2); got != 5 {
			t.Fatalf("events stream holds %d messages, want exactly 5", got)
		}
	})
}

func TestDuplicateRecognisedAfterRestart(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		c, events := testDelivery("d-restart", 1, []byte(`{}`))
		commit(t, b, c, events)
		ts.restart()
		b2 := ts.connect(o)
		c, events = testDelivery("d-restart", 1, []byte(`{}`))
		if dup := commit(t, b2, c, events); !dup {
			t.Fatal("a delivery accepted before the restart was not a duplicate after it")
		}
		if got := eventMsgs(t, b2); got != 1 {
			t.Fatalf("events stream holds %d messages, want 1", got)
		}
	})
}

func TestConcurrentCommitsOfOneDelivery(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		// Several processes share one NATS.
		buses := []*Bus{ts.connect(o), ts.connect(o), ts.connect(o)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		accepted := 0
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, events := testDelivery("d-race", 4, []byte(`{}`))
				dup, err := buses[i%len(buses)].Commit(context.Background(), c, events)
				if err != nil {
					t.Error(err)
					return
				}
				if !dup {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// In the separate layout the record decides: exactly one attempt
		// wins. In the shared layout an attempt that finds every event
		// stored by another is a duplicate only once that other attempt
		// has archived the delivery; until then it archives it too. Either
		// way no event is stored twice and the archive holds the delivery
		// once.
		if accepted < 1 || (o.SeparateArchive && accepted != 1) {
			t.Fatalf("%d concurrent commits were accepted as new", accepted)
		}
		if got := eventMsgs(t, buses[0]); got != 4 {
			t.Fatalf("events stream holds %d messages, want 4", got)
		}
		if got := records(t, buses[0]); got != 1 {
			t.Fatalf("archive holds %d records, want 1", got)
		}
	})
}

func TestLargePayloadsGoByReference(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 64<<10) // a server with a 64 KiB max payload
		o.MaxInlineBytes = 40 << 10
		b := ts.connect(o)

		big := []byte(`{"blob":"` + strings.Repeat("x", 200<<10) + `"}`)
		c, events := testDelivery("d-big", 2, big)
		commit(t, b, c, events)
		ref := ArchiveSubject(triggers.CodeHost, "d-big")
		for _, e := range events {
			if e.Payload != nil || e.PayloadRef != ref {
				t.Fatalf("event %s: payload %d bytes, ref %q; want null payload and ref %q", e.ID, len(e.Payload), e.PayloadRef, ref)
			}
		}
		// A subscriber sees the same: payload null, payload_ref set.
		s, err := b.js.Stream(context.Background(), EventsStream)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := s.GetLastMsgForSubject(context.Background(), events[1].Subject())
		if err != nil {
			t.Fatal(err)
		}
		var wire map[string]json.RawMessage
		if err := json.Unmarshal(msg.Data, &wire); err != nil {
			t.Fatal(err)
		}
		if string(wire["id"]) != `"`+events[1].ID+`"` || string(wire["payload"]) != "null" || string(wire["payload_ref"]) != `"`+ref+`"` {
			t.Fatalf("published event id %s payload %.40s payload_ref %s; want %s, null, %q", wire["id"], wire["payload"], wire["payload_ref"], events[1].ID, ref)
		}
		// payload_ref names the delivery: it reads back as the body.
		rc, rkey, ok := ParseArchiveSubject(events[0].PayloadRef)
		if !ok || rc != triggers.CodeHost || rkey != "d-big" {
			t.Fatalf("ParseArchiveSubject(%q) = %q, %q, %v", events[0].PayloadRef, rc, rkey, ok)
		}
		arch, err := b.Delivery(context.Background(), rc, rkey)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(arch.Body, big) {
			t.Fatalf("archived body is %d bytes, want the %d sent", len(arch.Body), len(big))
		}

		// Small payloads go inline until the delivery's inline budget is spent.
		mid := []byte(`{"blob":"` + strings.Repeat("y", 15<<10) + `"}`)
		c, events = testDelivery("d-fanout", 4, mid)
		commit(t, b, c, events)
		inline := 0
		for _, e := range events {
			if e.Payload != nil {
				inline++
			} else if e.PayloadRef == "" {
				t.Fatalf("event %s has neither payload nor payload_ref", e.ID)
			}
		}
		if inline != 2 {
			t.Fatalf("%d events carry the payload inline, want 2 (40 KiB budget, 15 KiB payload)", inline)
		}
		rc, rkey, ok = ParseArchiveSubject(events[3].PayloadRef)
		if !ok {
			t.Fatalf("ParseArchiveSubject(%q) failed", events[3].PayloadRef)
		}
		if arch, err = b.Delivery(context.Background(), rc, rkey); err != nil {
			t.Fatal(err)
		} else if !bytes.Equal(arch.Body, mid) {
			t.Fatalf("fan-out payload_ref reads back %d bytes, want the %d sent", len(arch.Body), len(mid))
		}
	})
}

func TestParseArchiveSubject(t *testing.T) {
	for _, tc := range []struct {
		c   triggers.Connector
		key string
	}{
		{triggers.CodeHost, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{triggers.Deploy, "uev_ZfbZKA3Ts2aEa2Cic6t6wSZ3"},
		{triggers.CodeHost, "hook_1/a.b c%d"}, // a tenant hook's key, with bytes to encode
	} {
		subject := ArchiveSubject(tc.c, tc.key)
		c, key, ok := ParseArchiveSubject(subject)
		if !ok || c != tc.c || key != tc.key {
			t.Errorf("ParseArchiveSubject(%q) = %q, %q, %v; want %q, %q", subject, c, key, ok, tc.c, tc.key)
		}
	}
	for _, bad := range []string{
		"", "deliveries", "deliveries.codehost", "deliveries.codehost.", "deliveries.mail.x",
		"deliveries.codehost.a.b", "deliveries.codehost.a%2", "triggers.codehost.new_issue.o.r", IndexSubject,
	} {
		if c, key, ok := ParseArchiveSubject(bad); ok {
			t.Errorf("ParseArchiveSubject(%q) = %q, %q, true; want false", bad, c, key)
		}
	}
}

func TestCommitFailsFastWhenNATSIsDown(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	ts.emb.Shutdown()
	ts.emb = nil
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, events := testDelivery("d-down", 1, []byte(`{}`))
	if _, err := b.Commit(ctx, c, events); err == nil {
		t.Fatal("Commit succeeded with NATS down")
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("Commit took %s with NATS down, want it bounded by its context", time.Since(start))
	}
	// Ready follows nats.go's connection callbacks, which run on their own.
	testenv.Eventually(t, 5*time.Second, "Ready() to turn false with NATS down", func() bool { return !b.Ready() })
}

func TestOptionsValidation(t *testing.T) {
	o := Options{ArchiveRetention: 24 * time.Hour}
	if err := o.setDefaults(); err == nil || !strings.Contains(err.Error(), "72h") {
		t.Fatalf("setDefaults with 24h archive = %v, want an error naming the 72h promise", err)
	}
	o = Options{DedupWindow: 30 * 24 * time.Hour}
	if err := o.setDefaults(); err == nil {
		t.Fatal("a dedup window longer than the event retention was accepted")
	}
}

func TestEmbeddedBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = StartEmbedded(EmbeddedOptions{Listen: ln.Addr().String(), DataDir: t.TempDir(), ListenFlag: "--nats-listen"})
	if !errors.Is(err, ErrListenBusy) || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("StartEmbedded on a busy port = %v, want ErrListenBusy naming --nats-listen", err)
	}
}

// TestConnectWithoutJetStream checks that a NATS started without -js is
// named as such, not as the "no responders" of its first request.
func TestConnectWithoutJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	for _, o := range []Options{{}, {SkipProvision: true}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := Connect(ctx, srv.ClientURL(), o)
		cancel()
		if err == nil {
			b.Close()
			t.Fatalf("Connect(%+v) to a NATS without JetStream succeeded", o)
		}
		if !errors.Is(err, ErrNoJetStream) || !strings.Contains(err.Error(), "-js") {
			t.Fatalf("Connect(%+v) to a NATS without JetStream = %v, want ErrNoJetStream saying to start it with -js", o, err)
		}
	}
}

func TestTail(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	c, events := testDelivery("d-tail", 2, []byte(`{}`))
	commit(t, b, c, events)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []string
	errStop := errors.New("enough")
	err := b.Tail(ctx, "triggers.codehost.>", FromAll, func(subject string, data []byte) error {
		got = append(got, subject)
		if len(got) == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("Tail = %v", err)
	}
	if got[0] != "triggers.codehost.new_commit.octo-org.socket%2Eio" {
		t.Fatalf("tailed subjects %v", got)
	}
}

func TestArchiveStoresTheBodyOnce(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		for _, tc := range []struct {
			name     string
			opts     Options
			inRecord bool
		}{
			{"events outlive the archive: body referenced", Options{}, false},
			{"events expire first: body stored", Options{EventRetention: 73 * time.Hour, ArchiveRetention: 96 * time.Hour, DedupWindow: time.Hour}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.opts.SeparateArchive = o.SeparateArchive
				b := ts.connect(tc.opts)
				id := "d-once-" + fmt.Sprint(tc.inRecord)
				body := []byte(`{"action":"opened"}`)
				c, events := testDelivery(id, 1, body)
				commit(t, b, c, events)
				raw, err := b.deliveries.GetLastMsgForSubject(context.Background(), ArchiveSubject(triggers.CodeHost, id))
				switch {
				case b.shared && !tc.inRecord:
					// Indexed: no record, and the index entry names the event.
					if !errors.Is(err, jetstream.ErrMsgNotFound) {
						t.Fatalf("an indexed delivery got a record too (%v)", err)
					}
					entries := indexEntries(t, b)
					if e := entries[len(entries)-1]; e.Key != id || e.BodySeq == 0 {
						t.Fatalf("last index entry %+v, want %s naming the event with its body", e, id)
					}
				case err != nil:
					t.Fatal(err)
				case (len(raw.Data) > 0) != tc.inRecord:
					t.Fatalf("record holds %d body bytes (header %s=%q)", len(raw.Data), HeaderBodyEvent, raw.Header.Get(HeaderBodyEvent))
				}
				arch, err := b.Delivery(context.Background(), triggers.CodeHost, id)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(arch.Body, body) {
					t.Fatalf("archived body %q, want %q", arch.Body, body)
				}
			})
		}
	})
}

// TestDuplicateBeyondDedupWindow redelivers an accepted delivery whose
// event ids JetStream no longer remembers (as after the dedup window): the
// archive alone must stop its events.
func TestDuplicateBeyondDedupWindow(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		c, events := testDelivery("d-old", 3, []byte(`{}`))
		commit(t, b, c, events)
		c, events = testDelivery("d-old", 3, []byte(`{}`))
		for i := range events {
			events[i].ID += "-forgotten"
		}
		if dup := commit(t, b, c, events); !dup {
			t.Fatal("a delivery in the archive was accepted again once its event ids were forgotten")
		}
		if got := eventMsgs(t, b); got != 3 {
			t.Fatalf("events stream holds %d events, want 3", got)
		}
		if got := records(t, b); got != 1 {
			t.Fatalf("archive holds %d records, want 1", got)
		}
	})
}

func TestArchiveLayout(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	if !b.shared || b.deliveries != b.events {
		t.Fatal("a fresh NATS 2.11+ did not get the shared layout")
	}
	if _, err := b.js.Stream(context.Background(), DeliveriesStream); err == nil {
		t.Fatalf("the shared layout created %s", DeliveriesStream)
	}
	// Later processes, asking or not, keep the layout the NATS has.
	if again := ts.connect(Options{SeparateArchive: true}); !again.shared {
		t.Fatal("a second process changed the shared layout")
	}
	if r := ts.connect(Options{SkipProvision: true}); !r.shared {
		t.Fatal("a reader did not see the shared layout")
	}

	old := startServer(t, 0)
	sep := old.connect(Options{SeparateArchive: true})
	if sep.shared {
		t.Fatal("SeparateArchive was ignored on a fresh NATS")
	}
	for _, o := range []Options{{}, {SkipProvision: true}} {
		if b := old.connect(o); b.shared {
			t.Fatalf("a process with %+v moved the archive out of %s", o, DeliveriesStream)
		}
	}
}

func TestArchiveRetentionInSharedStream(t *testing.T) {
	for _, tc := range []struct {
		name                string
		opts                Options
		eventTTL, recordTTL string
	}{
		{"same retention", Options{}, "", ""},
		{"events shorter", Options{EventRetention: 73 * time.Hour, ArchiveRetention: 96 * time.Hour, DedupWindow: time.Hour}, "73h0m0s", ""},
		{"archive shorter", Options{EventRetention: 96 * time.Hour, ArchiveRetention: 73 * time.Hour}, "", "73h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, 0)
			b := ts.connect(tc.opts)
			info, err := b.events.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if want := max(b.opts.EventRetention, b.opts.ArchiveRetention); info.Config.MaxAge != want {
				t.Fatalf("stream keeps messages %s, want the longer retention %s", info.Config.MaxAge, want)
			}
			c, events := testDelivery("d-ttl", 1, []byte(`{}`))
			commit(t, b, c, events)
			ev, err := b.events.GetLastMsgForSubject(context.Background(), events[0].Subject())
			if err != nil {
				t.Fatal(err)
			}
			if got := ttl(ev.Header.Get("Nats-TTL")); got != tc.eventTTL {
				t.Fatalf("event TTL %q, want %q", got, tc.eventTTL)
			}
			// Events outliving the archive carry the body, and the delivery
			// is indexed, in a stream of the archive's retention; otherwise
			// it has a record.
			indexed := tc.opts.EventRetention == 0 || tc.opts.EventRetention >= tc.opts.ArchiveRetention
			if got := len(indexEntries(t, b)); indexed != (got == 1) {
				t.Fatalf("%d index entries; indexed %v", got, indexed)
			}
			if got := b.indexStream.CachedInfo().Config.MaxAge; got != b.opts.ArchiveRetention {
				t.Fatalf("index stream keeps messages %s, want the archive's %s", got, b.opts.ArchiveRetention)
			}
			// A delivery without events always gets a record.
			c, _ = testDelivery("d-ttl-record", 0, []byte(`{}`))
			commit(t, b, c, nil)
			records := []string{"d-ttl-record"}
			if !indexed {
				records = append(records, "d-ttl")
			}
			for _, id := range records {
				rec, err := b.events.GetLastMsgForSubject(context.Background(), ArchiveSubject(triggers.CodeHost, id))
				if err != nil {
					t.Fatalf("record of %s: %v", id, err)
				}
				if got := ttl(rec.Header.Get("Nats-TTL")); got != tc.recordTTL {
					t.Fatalf("record TTL %q, want %q", got, tc.recordTTL)
				}
			}
		})
	}
}

// ttl normalises a Nats-TTL header ("262800s" or "73h") for comparison.
func ttl(h string) string {
	if h == "" {
		return ""
	}
	if d, err := time.ParseDuration(h); err == nil {
		return d.String()
	}
	return h
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"2.11.0", true}, {"2.15.2", true}, {"3.0.0", true}, {"2.12.0-RC.1", true},
		{"2.10.22", false}, {"2.9.10", false}, {"1.99.0", false}, {"", false}, {"2", false}, {"two.eleven", false},
	} {
		if got := versionAtLeast(tc.version, sharedArchiveSince); got != tc.want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
}

func TestConnectErrorsHideCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Connect(ctx, "nats://triggerd:s3cr3t-pass@"+freeAddr(t), Options{})
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if strings.Contains(err.Error(), "s3cr3t-pass") {
		t.Fatalf("the error shows the password: %v", err)
	}
	if got := RedactURL("nats://u:p@h:4222"); strings.Contains(got, ":p@") || !strings.Contains(got, "h:4222") {
		t.Fatalf("RedactURL = %q", got)
	}
	// Nor when the URL does not parse: nats.go quotes it, password and
	// all, in its error.
	for _, raw := range []string{
		"nats://triggerd:s3cr3t%zz-pass@127.0.0.1:4222",
		"nats://triggerd:s3cr3t-pass@[::1",
		`nats://triggerd:s3cr3t"-pass@[::1`,
		"nats://a:4222,nats://triggerd:s3cr3t-pass@[::1",
	} {
		_, err := Connect(ctx, raw, Options{})
		if err == nil {
			t.Fatalf("connected with %q", raw)
		}
		if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("the error shows the password of %q: %v", raw, err)
		}
		if got := RedactURL(raw); strings.Contains(got, "s3cr3t") {
			t.Errorf("RedactURL(%q) = %q", raw, got)
		}
	}
	if got := RedactURL("nats://a:4222,nats://u:p@b:4222"); got != "nats://a:4222,nats://REDACTED@b:4222" {
		t.Errorf("RedactURL of a list = %q", got)
	}
}

func TestInProcessConnection(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		o.Embedded = ts.emb
		b := ts.connect(o)
		c, events := testDelivery("d-inproc", 2, []byte(`{}`))
		if dup := commit(t, b, c, events); dup {
			t.Fatal("first commit over the in-process connection was a duplicate")
		}
		n, err := b.EventCount(context.Background())
		if err != nil || n != 2 {
			t.Fatalf("EventCount = %d, %v; want 2", n, err)
		}
		// Readers that must not change the streams connect without provisioning.
		r := ts.connect(Options{SkipProvision: true})
		if _, err := r.Delivery(context.Background(), triggers.CodeHost, "d-inproc"); err != nil {
			t.Fatalf("a non-provisioning reader cannot read the archive: %v", err)
		}
	})
}

// A sender cannot plant the archive's own headers: a forged body pointer or
// scope on a record would make a replay read another delivery's body or
// run under another tenant.
func TestArchiveIgnoresForgedTriggerdHeaders(t *testing.T) {
	layouts(t, func(t *testing.T, o Options) {
		ts := startServer(t, 0)
		b := ts.connect(o)
		// Another delivery whose body sits in event 1.
		secret := []byte(`{"secret":"another tenant's payload"}`)
		other, events := testDelivery("d-other", 1, secret)
		commit(t, b, other, events)

		body := []byte(`{"zen":"ping"}`)
		c, _ := testDelivery("d-forged", 0, body)
		c.Header[HeaderBodyEvent] = []string{"1"}
		c.Header[HeaderBodyObject] = []string{"codehost.d-other"}
		c.Header[HeaderScope] = []string{`{"tenant":"victim","hook":"h1"}`}
		c.Header["triggerd-delivery-id"] = []string{"d-other"}
		commit(t, b, c, nil)

		arch, err := b.Delivery(context.Background(), triggers.CodeHost, "d-forged")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(arch.Body, body) {
			t.Fatalf("replayed body = %s, want the delivery's own %s", arch.Body, body)
		}
		if arch.Scope != nil || arch.DeliveryID != "d-forged" {
			t.Fatalf("replayed scope %+v, delivery id %q: forged headers were trusted", arch.Scope, arch.DeliveryID)
		}
		for k := range arch.Header {
			if strings.HasPrefix(strings.ToLower(k), "triggerd-") {
				t.Fatalf("archive kept the sender's %s header", k)
			}
		}
	})
}

// The delivery index is shared: a delivery one process accepted is a
// duplicate for every process on the same NATS, beyond the dedup window
// (event ids forgotten), for processes started later, and after the NATS
// restarts under a running process.
func TestIndexSharedAcrossProcesses(t *testing.T) {
	ts := startServer(t, 0)
	a, b := ts.connect(Options{}), ts.connect(Options{})
	known := func(bus *Bus, id string) func() bool {
		return func() bool {
			_, found, err := bus.index.lookup(context.Background(), triggers.CodeHost, id)
			return err == nil && found
		}
	}
	forgotten := func(id string) (triggers.Capture, []triggers.Event) {
		c, events := testDelivery(id, 2, []byte(`{"id":"`+id+`"}`))
		for i := range events {
			events[i].ID += "-forgotten"
		}
		return c, events
	}
	c, events := testDelivery("d-a", 2, []byte(`{"id":"d-a"}`))
	if commit(t, a, c, events) {
		t.Fatal("first commit reported a duplicate")
	}
	testenv.Eventually(t, 5*time.Second, "the other process learning of d-a", known(b, "d-a"))
	if c, events := forgotten("d-a"); !commit(t, b, c, events) {
		t.Fatal("another process accepted d-a again once its event ids were forgotten")
	}
	if later := ts.connect(Options{SkipProvision: true}); !known(later, "d-a")() {
		t.Fatal("a process started later does not know d-a")
	}

	ts.restart()
	c, events = testDelivery("d-after-restart", 1, []byte(`{"id":"d-after-restart"}`))
	testenv.Eventually(t, 10*time.Second, "a commit after the NATS restart", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := a.Commit(ctx, c, events)
		return err == nil
	})
	testenv.Eventually(t, 15*time.Second, "the other process following the index after the restart", known(b, "d-after-restart"))
	if got := eventMsgs(t, a); got != 3 {
		t.Fatalf("events stream holds %d events, want 3", got)
	}
	arch, err := b.Delivery(context.Background(), triggers.CodeHost, "d-a")
	if err != nil {
		t.Fatal(err)
	}
	if string(arch.Body) != `{"id":"d-a"}` || arch.Header["X-Github-Event"][0] != "push" {
		t.Fatalf("indexed delivery read back as %+v", arch)
	}
}

// TestCommitLargestPush commits the largest push a payload describes, 2,048
// distinct commits (the testdata item): its 2,049 events reach the
// stream once each, within the commit's deadline, those past the inline
// budget by payload_ref, and the delivery again is a duplicate.
func TestCommitLargestPush(t *testing.T) {
	const n = 2048
	body := testenv.Push(n)
	d := triggers.Delivery{Connector: triggers.CodeHost, ID: "d-push-2048", Event: "push", ReceivedAt: time.Now().UTC(), Payload: body}
	res, err := triggers.Map(d)
	if err != nil || len(res.Events) != n+1 {
		t.Fatalf("Map: %v, %d events", err, len(res.Events))
	}
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	c := triggers.Capture{Connector: triggers.CodeHost, DeliveryID: d.ID, ReceivedAt: d.ReceivedAt,
		Header: map[string][]string{"X-Github-Event": {"push"}}, Body: body}
	if dup := commit(t, b, c, res.Events); dup {
		t.Fatal("first commit reported a duplicate")
	}
	if got := eventMsgs(t, b); got != n+1 {
		t.Fatalf("events stream holds %d messages, want %d", got, n+1)
	}
	inline := 0
	for _, e := range res.Events {
		switch {
		case e.Payload != nil:
			inline++
		case e.PayloadRef == "":
			t.Fatalf("event %s has neither payload nor payload_ref", e.ID)
		}
	}
	if inline == 0 || inline == len(res.Events) || inline*len(body) > b.opts.MaxInlineBytes {
		t.Errorf("%d of %d events carry the %d-byte payload inline; want as many as %d bytes allow", inline, len(res.Events), len(body), b.opts.MaxInlineBytes)
	}
	again, err := triggers.Map(d)
	if err != nil {
		t.Fatal(err)
	}
	if dup := commit(t, b, c, again.Events); !dup {
		t.Fatal("the push delivered again was not a duplicate")
	}
	if got := eventMsgs(t, b); got != n+1 {
		t.Fatalf("events stream holds %d messages after the duplicate, want %d", got, n+1)
	}
}
