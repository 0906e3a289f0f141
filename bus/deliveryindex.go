package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/internal/jsonx"
	"github.com/triggerd/triggerd/triggers"
)

// IndexStream holds the delivery index (shared layout), on IndexSubject.
//
// Most deliveries map to a few events that carry the body inline. Giving
// each of them an archive record of its own would cost JetStream a second
// message per delivery, which is half of what accepting it costs. Instead
// Commit adds the delivery to the index: concurrent deliveries share one
// index message (a JSON array of entries, each the delivery's key, its
// archived headers and the sequence of the event holding its body). One
// message is written at a time; deliveries arriving meanwhile wait for
// the next one, so under load many deliveries share each message and at a
// trickle each gets its own, as records did.
//
// Every process keeps the index in memory (a hash of each delivery key
// accepted within ArchiveRetention, about 40 bytes each) and follows IndexSubject,
// so a delivery accepted by any process sharing the NATS is known to all:
// Connect reads the whole index before it returns. Within the dedup window
// the events' Nats-Msg-Id stops concurrent attempts (each event is stored
// once); beyond it, the index answers.
//
// The index has a stream of its own, kept as long as the archive, rather
// than a subject in EventsStream. The file store keeps the cache of a block
// that was read while it was being written for 10 s past the last read,
// instead of reusing its buffer for the next block. The follower reads each
// index message as it lands, so in EventsStream it kept every events block
// of the last 10 s in the server's heap, whatever the load and whether or
// not a dispatcher ran (2.2 GB after 10 s of the bench, and a page fault
// for every fresh page). In a stream of its own it holds only the index's
// blocks. (A dispatcher that keeps up with ingest still does the same to
// EventsStream; one that runs behind, or none, no longer pays for it.)
const (
	IndexStream  = "TRIGGERD_INDEX"
	IndexSubject = "index.deliveries"
)

// legacyIndexSubject is where index messages lived, in EventsStream,
// before IndexStream. Connect still reads them, once, so that a delivery
// accepted before an upgrade is still recognised; nothing writes there.
const legacyIndexSubject = DeliveriesPrefix + ".index"

// legacySeq marks, in an indexRef's seq, a message of legacyIndexSubject
// (an EventsStream sequence) rather than of IndexStream.
const legacySeq = uint64(1) << 63

// HeaderIndexWriter names the process that wrote an index message.
const HeaderIndexWriter = "Triggerd-Index-Writer"

// indexSweepEvery is how often entries older than ArchiveRetention leave
// the in-memory index.
const indexSweepEvery = 10 * time.Minute

// indexEntry is one accepted delivery in an index message.
type indexEntry struct {
	Connector  triggers.Connector `json:"connector"`
	Key        string             `json:"key"`
	DeliveryID string             `json:"delivery_id"`
	ReceivedAt time.Time          `json:"received_at"`
	// Header holds the delivery's HTTP headers. appendJSON writes only
	// those the archive keeps (archivedName), so a writer may set the
	// request's own header map without copying it.
	Header map[string][]string `json:"header,omitempty"`
	Scope  *triggers.Scope     `json:"scope,omitempty"`
	Events int                 `json:"events"`
	// BodySeq is the EventsStream sequence of an event whose payload is the
	// delivery's body byte for byte.
	BodySeq uint64 `json:"body_seq"`
}

// indexRef locates an entry: the index message holding it, and when it
// leaves the index (unix seconds).
type indexRef struct {
	seq     uint64
	expires int64
}

// indexWait is an entry waiting for an index message.
type indexWait struct {
	hash uint64
	// idHash is the byID key of a delivery on a hook, else 0.
	idHash  uint64
	expires int64
	data    []byte
	done    chan error
}

// deliveryIndex is the Bus's view of IndexSubject and the writer of its
// messages.
type deliveryIndex struct {
	b *Bus
	// writer marks the index messages this Bus wrote (HeaderIndexWriter):
	// it applies them when they are acknowledged, so following skips them.
	writer string

	// refs maps a hash of each indexed delivery's connector and key to
	// its index message. A map of plain numbers costs the garbage
	// collector nothing to scan however large it grows, and about 40 bytes
	// an entry. A hash found is confirmed against the message before it
	// counts (see lookup), so a collision cannot refuse a new delivery.
	seed maphash.Seed
	mu   sync.RWMutex
	refs map[uint64]indexRef
	// byID maps a hash of the connector and bare delivery id of each
	// delivery on a tenant's hook (key "<hook>/<id>") to its index
	// message, so an operator holding only the sender's delivery id
	// finds it (lookupID). Senders' delivery ids are unique per
	// delivery, so an id reaches one hook; should two hooks have indexed
	// the same id (a replay with a fixed id), the last is found.
	byID    map[uint64]indexRef
	loaded  chan struct{} // closed once the index is read up to where it was at start
	loadErr error

	startOnce sync.Once
	started   bool // set within startOnce: the writer runs
	tailing   bool // set within startOnce: tail runs
	tailDone  chan struct{}

	qmu       sync.Mutex
	queue     []*indexWait
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	// closing ends an index message's wait for JetStream at close.
	closing       context.Context
	cancelClosing context.CancelFunc
}

func newDeliveryIndex(b *Bus) *deliveryIndex {
	closing, cancel := context.WithCancel(context.Background())
	return &deliveryIndex{
		closing:       closing,
		cancelClosing: cancel,
		b:             b,
		writer:        uuid.NewString(),
		seed:          maphash.MakeSeed(),
		refs:          map[uint64]indexRef{},
		byID:          map[uint64]indexRef{},
		loaded:        make(chan struct{}),
		kick:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
		tailDone:      make(chan struct{}),
	}
}

// hash returns the refs key of a delivery.
func (x *deliveryIndex) hash(c triggers.Connector, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(x.seed)
	h.WriteString(string(c))
	h.WriteByte(0)
	h.WriteString(key)
	return h.Sum64()
}

// ready starts following IndexSubject (once) and waits until the index
// holds every entry written before the call.
func (x *deliveryIndex) ready(ctx context.Context) error {
	x.startOnce.Do(func() {
		if err := x.follow(ctx); err != nil {
			x.loadErr = err
			close(x.loaded)
		}
		x.started = true
		go x.write()
	})
	select {
	case <-x.loaded:
		return x.loadErr
	case <-ctx.Done():
		return fmt.Errorf("read the delivery index: %w", ctx.Err())
	}
}

// follow reads the legacy index once, then IndexSubject from its start,
// closing x.loaded once it reached the last message present now, and
// keeps reading IndexSubject in the background (x.tail) until close.
func (x *deliveryIndex) follow(ctx context.Context) error {
	if err := x.loadLegacy(ctx); err != nil {
		return err
	}
	if x.b.indexStream == nil {
		// A reader connected to a NATS that has no index stream yet
		// (SkipProvision): nothing to follow.
		close(x.loaded)
		return nil
	}
	var last uint64
	switch msg, err := retryJS(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return x.b.indexStream.GetLastMsgForSubject(ctx, IndexSubject)
	}); {
	case err == nil:
		last = msg.Sequence
	case errors.Is(err, jetstream.ErrMsgNotFound):
		close(x.loaded)
	default:
		return fmt.Errorf("read the delivery index: %w", err)
	}
	cons, err := retryJS(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return x.consumer(ctx, 1) })
	if err != nil {
		return err
	}
	x.tailing = true
	go x.tail(cons, last)
	return nil
}

// loadLegacy applies the index messages of legacyIndexSubject, if
// EventsStream holds any.
func (x *deliveryIndex) loadLegacy(ctx context.Context) error {
	last, err := retryJS(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return x.b.events.GetLastMsgForSubject(ctx, legacyIndexSubject)
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read the earlier delivery index: %w", err)
	}
	cons, err := x.b.events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{legacyIndexSubject}})
	if err != nil {
		return fmt.Errorf("read the earlier delivery index: %w", err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("read the earlier delivery index: %w", err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("read the earlier delivery index: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read the earlier delivery index: %w", err)
		}
		x.apply(meta.Sequence.Stream|legacySeq, msg.Data())
		if meta.Sequence.Stream >= last.Sequence || meta.NumPending == 0 {
			return nil
		}
	}
}

// consumer creates an ephemeral consumer of IndexSubject from seq on.
func (x *deliveryIndex) consumer(ctx context.Context, seq uint64) (jetstream.Consumer, error) {
	cons, err := x.b.js.CreateConsumer(ctx, IndexStream, jetstream.ConsumerConfig{
		FilterSubject:     IndexSubject,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       seq,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("follow the delivery index: %w", err)
	}
	return cons, nil
}

// tail applies every index message as it arrives, until close. When the
// consumer is lost (a NATS restart), it makes a new one from the next
// sequence.
func (x *deliveryIndex) tail(cons jetstream.Consumer, last uint64) {
	defer close(x.tailDone)
	var next atomic.Uint64
	next.Store(1)
	var loadedOnce sync.Once
	for {
		lost := make(chan struct{})
		var lostOnce sync.Once
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			meta, err := msg.Metadata()
			if err != nil || meta.Sequence.Stream < next.Load() {
				return
			}
			if msg.Headers().Get(HeaderIndexWriter) != x.writer {
				x.apply(meta.Sequence.Stream, msg.Data())
			}
			next.Store(meta.Sequence.Stream + 1)
			// Loaded once past the last message present at start, or
			// caught up (should that message expire before it is read).
			if last != 0 && (meta.Sequence.Stream >= last || meta.NumPending == 0) {
				loadedOnce.Do(func() { close(x.loaded) })
			}
		}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			// A NATS restart loses the ephemeral consumer: pulls find no
			// responder, or heartbeats stop.
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
				errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, nats.ErrNoResponders) {
				lostOnce.Do(func() { close(lost) })
			}
		}), jetstream.PullExpiry(10*time.Second), jetstream.PullHeartbeat(2*time.Second))
		if err == nil {
			select {
			case <-x.stop:
				cc.Stop()
				return
			case <-lost:
				cc.Stop()
			}
		}
		for {
			select {
			case <-x.stop:
				return
			case <-time.After(time.Second):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cons, err = x.consumer(ctx, next.Load())
			cancel()
			if err == nil {
				break
			}
		}
	}
}

// apply records the entries of the index message at seq. Entries past
// the archive's retention are skipped: the message is about to expire.
func (x *deliveryIndex) apply(seq uint64, data []byte) {
	var entries []struct {
		Connector  triggers.Connector `json:"connector"`
		Key        string             `json:"key"`
		DeliveryID string             `json:"delivery_id"`
		ReceivedAt time.Time          `json:"received_at"`
	}
	if json.Unmarshal(data, &entries) != nil {
		return
	}
	now := time.Now().Unix()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range entries {
		if expires := x.expires(e.ReceivedAt); expires > now {
			ref := indexRef{seq: seq, expires: expires}
			x.refs[x.hash(e.Connector, e.Key)] = ref
			if e.Key != e.DeliveryID {
				x.byID[x.hash(e.Connector, e.DeliveryID)] = ref
			}
		}
	}
}

// expires returns when a delivery received at receivedAt leaves the index
// (unix seconds): with the archive.
func (x *deliveryIndex) expires(receivedAt time.Time) int64 {
	return receivedAt.Add(x.b.opts.ArchiveRetention).Unix()
}

// lookup returns a delivery's entry, read back from its index message,
// and whether the index holds the delivery.
func (x *deliveryIndex) lookup(ctx context.Context, c triggers.Connector, key string) (indexEntry, bool, error) {
	if err := x.ready(ctx); err != nil {
		return indexEntry{}, false, err
	}
	x.mu.RLock()
	ref, ok := x.refs[x.hash(c, key)]
	x.mu.RUnlock()
	if !ok {
		return indexEntry{}, false, nil
	}
	entries, err := x.message(ctx, ref)
	if err != nil {
		return indexEntry{}, false, err
	}
	for _, e := range entries {
		if e.Connector == c && e.Key == key {
			return e, true, nil
		}
	}
	return indexEntry{}, false, nil // another delivery with the same hash
}

// lookupID returns the entries of deliveries on tenants' hooks whose
// delivery id, not key, is id (see byID).
func (x *deliveryIndex) lookupID(ctx context.Context, c triggers.Connector, id string) ([]indexEntry, error) {
	if err := x.ready(ctx); err != nil {
		return nil, err
	}
	x.mu.RLock()
	ref, ok := x.byID[x.hash(c, id)]
	x.mu.RUnlock()
	if !ok {
		return nil, nil
	}
	entries, err := x.message(ctx, ref)
	if err != nil {
		return nil, err
	}
	var found []indexEntry
	for _, e := range entries {
		if e.Connector == c && e.DeliveryID == id && e.Key != id {
			found = append(found, e)
		}
	}
	return found, nil
}

// message reads back the entries of the index message ref names; none
// once it expired with the archive.
func (x *deliveryIndex) message(ctx context.Context, ref indexRef) ([]indexEntry, error) {
	stream, seq := x.b.indexStream, ref.seq
	if seq&legacySeq != 0 {
		stream, seq = x.b.events, seq&^legacySeq
	}
	msg, err := stream.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("index message %d: %w", seq, err)
	}
	var entries []indexEntry
	if err := json.Unmarshal(msg.Data, &entries); err != nil {
		return nil, fmt.Errorf("index message %d: %w", seq, err)
	}
	return entries, nil
}

// add writes an entry to the index and returns once it is durable.
func (x *deliveryIndex) add(ctx context.Context, e indexEntry) error {
	if err := x.ready(ctx); err != nil {
		return err
	}
	// Most entries (a delivery's headers and ids) fit in 640 bytes.
	data := e.appendJSON(make([]byte, 0, 640))
	if limit := x.b.MaxPayload() - headroom; len(data)+2 > limit {
		return fmt.Errorf("index delivery %s: its %d-byte entry exceeds the server's max payload", e.DeliveryID, len(data))
	}
	w := &indexWait{
		hash:    x.hash(e.Connector, e.Key),
		expires: x.expires(e.ReceivedAt),
		data:    data,
		done:    make(chan error, 1),
	}
	if e.Key != e.DeliveryID {
		w.idHash = x.hash(e.Connector, e.DeliveryID)
	}
	x.qmu.Lock()
	x.queue = append(x.queue, w)
	x.qmu.Unlock()
	select {
	case x.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-w.done:
		if err != nil {
			return fmt.Errorf("index delivery %s: %w", e.DeliveryID, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("index delivery %s: %w", e.DeliveryID, ctx.Err())
	case <-x.stop:
		return fmt.Errorf("index delivery %s: %w", e.DeliveryID, nats.ErrConnectionClosed)
	}
}

// write is the index's only writer: it gathers the waiting entries into
// one message, publishes it and tells the waiters, until close.
func (x *deliveryIndex) write() {
	defer close(x.done)
	sweep := time.NewTicker(indexSweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-x.stop:
			x.qmu.Lock()
			for _, w := range x.queue {
				w.done <- nats.ErrConnectionClosed
			}
			x.queue = nil
			x.qmu.Unlock()
			return
		case <-sweep.C:
			x.sweep(time.Now())
		case <-x.kick:
			for x.flush() {
			}
		}
	}
}

// flush publishes one message with as many waiting entries as fit, and
// reports whether entries are left waiting.
func (x *deliveryIndex) flush() bool {
	limit := x.b.MaxPayload() - headroom
	x.qmu.Lock()
	n, size := 0, 1
	for n < len(x.queue) && size+len(x.queue[n].data)+1 <= limit {
		size += len(x.queue[n].data) + 1
		n++
	}
	batch := x.queue[:n:n]
	x.queue = x.queue[n:]
	left := len(x.queue) > 0
	x.qmu.Unlock()
	if n == 0 {
		return false
	}
	data := make([]byte, 0, size+1)
	data = append(data, '[')
	for i, w := range batch {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, w.data...)
	}
	data = append(data, ']')
	ctx, cancel := context.WithTimeout(x.closing, indexPublishTimeout)
	msg := &nats.Msg{Subject: IndexSubject, Header: nats.Header{HeaderIndexWriter: []string{x.writer}}, Data: data}
	ack, err := x.b.js.PublishMsg(ctx, msg)
	cancel()
	if err == nil {
		x.mu.Lock()
		for _, w := range batch {
			ref := indexRef{seq: ack.Sequence, expires: w.expires}
			x.refs[w.hash] = ref
			if w.idHash != 0 {
				x.byID[w.idHash] = ref
			}
		}
		x.mu.Unlock()
	}
	for _, w := range batch {
		w.done <- err
	}
	return left
}

// indexPublishTimeout bounds one index message's wait for JetStream;
// the deliveries waiting on it give up earlier, with their own contexts.
const indexPublishTimeout = 30 * time.Second

// sweep drops entries past the archive's retention.
func (x *deliveryIndex) sweep(now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, refs := range []map[uint64]indexRef{x.refs, x.byID} {
		for k, ref := range refs {
			if ref.expires <= now.Unix() {
				delete(refs, k)
			}
		}
	}
}

// close stops the writer (failing entries still waiting) and the follower.
func (x *deliveryIndex) close() {
	x.closeOnce.Do(x.stopAll)
}

func (x *deliveryIndex) stopAll() {
	close(x.stop)
	x.cancelClosing()
	x.startOnce.Do(func() {}) // an index never started stays so
	if x.tailing {
		<-x.tailDone
	}
	if x.started {
		<-x.done
	}
}

// appendJSON appends the entry's JSON encoding to dst: what json.Marshal
// would write with Header replaced by ArchivedHeader(Header), but for the
// order of the header names, at a fraction of the cost: it runs once per
// delivery.
func (e *indexEntry) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"connector":`...)
	dst = jsonx.AppendString(dst, string(e.Connector))
	dst = append(dst, `,"key":`...)
	dst = jsonx.AppendString(dst, e.Key)
	dst = append(dst, `,"delivery_id":`...)
	dst = jsonx.AppendString(dst, e.DeliveryID)
	dst = append(dst, `,"received_at":"`...)
	dst = e.ReceivedAt.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if len(e.Header) > 0 {
		first := true
		for k, vs := range e.Header {
			name, ok := archivedName(k)
			if !ok {
				continue
			}
			if first {
				dst = append(dst, `,"header":{`...)
			} else {
				dst = append(dst, ',')
			}
			first = false
			dst = jsonx.AppendString(dst, name)
			dst = append(dst, ":["...)
			for i, v := range vs {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = jsonx.AppendString(dst, v)
			}
			dst = append(dst, ']')
		}
		if !first {
			dst = append(dst, '}')
		}
	}
	if e.Scope != nil {
		scope, _ := json.Marshal(e.Scope) // a struct of strings: cannot fail
		dst = append(dst, `,"scope":`...)
		dst = append(dst, scope...)
	}
	dst = append(dst, `,"events":`...)
	dst = strconv.AppendInt(dst, int64(e.Events), 10)
	dst = append(dst, `,"body_seq":`...)
	dst = strconv.AppendUint(dst, e.BodySeq, 10)
	return append(dst, '}')
}
