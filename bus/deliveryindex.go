package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

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
// Which deliveries the index holds is kept in the server, once for every
// process, in the bucket DedupBucket: a fixed 2^18 keys, each the sorted
// (hash, index message, expiry) of the deliveries whose hash falls in its
// range. Commit reads the delivery's key (one direct get), confirms a hash
// found against the index message it names, and once the index message
// is durable adds the delivery's entry with a compare-and-set on the
// key's revision: that write is the commit point. No process holds
// anything per delivery, and Connect reads nothing per delivery. Within
// the dedup window the events' Nats-Msg-Id stops concurrent attempts
// (each event is stored once); beyond it, the bucket answers.
//
// The index has a stream of its own, kept as long as the archive, rather
// than a subject in EventsStream. The file store keeps the cache of a block
// that was read while it was being written for 10 s past the last read,
// instead of reusing its buffer for the next block. Earlier versions
// followed the index as it was written, which in EventsStream kept every
// events block of the last 10 s in the server's heap; in a stream of its
// own only the index's blocks were. (Nothing follows it now; it stays
// where it is, and earlier versions running beside this one during an
// upgrade still follow it.)
const (
	IndexStream  = "TRIGGERD_INDEX"
	IndexSubject = "index.deliveries"
)

// legacyIndexSubject is where index messages lived, in EventsStream,
// before IndexStream. The bucket's first fill (deliveryIndex.fill) still
// reads them, so that a delivery accepted before an upgrade is still
// recognised; nothing writes there.
const legacyIndexSubject = DeliveriesPrefix + ".index"

// legacySeq marks, in a dedupEntry's seq, a message of legacyIndexSubject
// (an EventsStream sequence) rather than of IndexStream.
const legacySeq = uint64(1) << 63

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

// indexWait is an entry waiting for an index message.
type indexWait struct {
	data []byte
	// seq is the index message's sequence, set before done is sent nil.
	seq  uint64
	done chan error
}

// deliveryIndex is the Bus's writer of index messages and its reader and
// writer of DedupBucket.
type deliveryIndex struct {
	b *Bus
	// kv is DedupBucket; nil for a reader (SkipProvision) on a NATS where
	// no version with the bucket has run: it then finds nothing indexed.
	kv jetstream.KeyValue
	// now is time.Now, but in tests.
	now func() time.Time

	startOnce sync.Once
	started   bool // set within startOnce: the writer runs

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
		now:           time.Now,
		kick:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
	}
}

// start starts the writer, once.
func (x *deliveryIndex) start() {
	x.startOnce.Do(func() {
		x.started = true
		go x.write()
	})
}

// expires returns when an entry indexed at t leaves the bucket (unix
// seconds): with the archive.
func (x *deliveryIndex) expires(t time.Time) uint32 {
	return expiresAt(t.Add(x.b.opts.ArchiveRetention).Unix())
}

// lookup returns a delivery's entry, read back from its index message,
// and whether the index holds the delivery.
func (x *deliveryIndex) lookup(ctx context.Context, c triggers.Connector, key string) (indexEntry, bool, error) {
	e, found, _, err := x.find(ctx, c, key)
	return e, found, err
}

// find is lookup, also returning the delivery's key as read, for add.
func (x *deliveryIndex) find(ctx context.Context, c triggers.Connector, key string) (indexEntry, bool, dedupSlot, error) {
	hash := deliveryHash(c, hashKey, key)
	slot, err := x.read(ctx, dedupKey(hash))
	if err != nil {
		return indexEntry{}, false, slot, err
	}
	found, err := x.confirm(ctx, slot, hash, 0, func(e *indexEntry) bool { return e.Connector == c && e.Key == key })
	if err != nil || len(found) == 0 {
		return indexEntry{}, false, slot, err
	}
	return found[0], true, slot, nil
}

// confirm returns the entries of the index messages that slot names for
// hash (but skip) that match: a hash found counts only once its index
// message confirms the delivery, so a collision cannot refuse a new one.
func (x *deliveryIndex) confirm(ctx context.Context, slot dedupSlot, hash, skip uint64, match func(*indexEntry) bool) ([]indexEntry, error) {
	var found []indexEntry
	for _, seq := range matching(slot.entries, hash, x.now().Unix()) {
		if seq == skip {
			continue
		}
		entries, err := x.message(ctx, seq)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if match(&e) {
				found = append(found, e)
			}
		}
	}
	return found, nil
}

// lookupID returns the entries of deliveries on tenants' hooks (key
// "<hook>/<id>") whose delivery id, not key, is id, so that an operator
// holding only the sender's delivery id finds them. Each such delivery
// has a second entry in the bucket, under the hash of its bare id.
func (x *deliveryIndex) lookupID(ctx context.Context, c triggers.Connector, id string) ([]indexEntry, error) {
	hash := deliveryHash(c, hashID, id)
	slot, err := x.read(ctx, dedupKey(hash))
	if err != nil {
		return nil, err
	}
	return x.confirm(ctx, slot, hash, 0, func(e *indexEntry) bool {
		return e.Connector == c && e.DeliveryID == id && e.Key != id
	})
}

// message reads back the entries of the index message at seq (legacySeq
// set: of legacyIndexSubject); none once it expired with the archive.
func (x *deliveryIndex) message(ctx context.Context, seq uint64) ([]indexEntry, error) {
	stream := x.b.indexStream
	if seq&legacySeq != 0 {
		stream, seq = x.b.events, seq&^legacySeq
	}
	if stream == nil {
		return nil, nil
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

// add writes an entry to the index, then to the bucket, and returns once
// both are durable. slot is the delivery's key as find read it before the
// events were published: the bucket is written on condition that it did
// not change since. When another attempt at the same delivery indexed it
// meanwhile, add returns duplicate true.
func (x *deliveryIndex) add(ctx context.Context, e indexEntry, slot dedupSlot) (duplicate bool, err error) {
	if x.kv == nil {
		return false, fmt.Errorf("index delivery %s: bucket %s is missing", e.DeliveryID, DedupBucket)
	}
	x.start()
	// Most entries (a delivery's headers and ids) fit in 640 bytes.
	data := e.appendJSON(make([]byte, 0, 640))
	if limit := x.b.MaxPayload() - headroom; len(data)+2 > limit {
		return false, fmt.Errorf("index delivery %s: its %d-byte entry exceeds the server's max payload", e.DeliveryID, len(data))
	}
	w := &indexWait{data: data, done: make(chan error, 1)}
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
			return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, err)
		}
	case <-ctx.Done():
		return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, ctx.Err())
	case <-x.stop:
		return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, nats.ErrConnectionClosed)
	}
	// The entry lasts as long as its index message, which the stream keeps
	// for the archive's retention from now, whenever the delivery says it
	// was received (a spooled one, or a clock of a test's own).
	expires := x.expires(x.now())
	if e.Key != e.DeliveryID {
		// The bare id's entry first: the key's entry is the commit point.
		hash := deliveryHash(e.Connector, hashID, e.DeliveryID)
		idSlot, err := x.read(ctx, dedupKey(hash))
		if err == nil {
			_, err = x.insert(ctx, idSlot, []dedupEntry{{hash: hash, seq: w.seq, expires: expires}}, nil)
		}
		if err != nil {
			return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, err)
		}
	}
	hash := deliveryHash(e.Connector, hashKey, e.Key)
	if slot.key != dedupKey(hash) {
		if slot, err = x.read(ctx, dedupKey(hash)); err != nil {
			return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, err)
		}
	}
	duplicate, err = x.insert(ctx, slot, []dedupEntry{{hash: hash, seq: w.seq, expires: expires}},
		func(ctx context.Context, s dedupSlot) (bool, error) {
			found, err := x.confirm(ctx, s, hash, w.seq, func(f *indexEntry) bool { return f.Connector == e.Connector && f.Key == e.Key })
			return len(found) > 0, err
		})
	if err != nil {
		return false, fmt.Errorf("index delivery %s: %w", e.DeliveryID, err)
	}
	return duplicate, nil
}

// write is the index's only writer: it gathers the waiting entries into
// one message, publishes it and tells the waiters, until close.
func (x *deliveryIndex) write() {
	defer close(x.done)
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
	ack, err := x.b.js.PublishMsg(ctx, &nats.Msg{Subject: IndexSubject, Data: data})
	cancel()
	for _, w := range batch {
		if err == nil {
			w.seq = ack.Sequence
		}
		w.done <- err
	}
	return left
}

// indexPublishTimeout bounds one index message's wait for JetStream;
// the deliveries waiting on it give up earlier, with their own contexts.
const indexPublishTimeout = 30 * time.Second

// close stops the writer, failing entries still waiting.
func (x *deliveryIndex) close() {
	x.closeOnce.Do(x.stopAll)
}

func (x *deliveryIndex) stopAll() {
	close(x.stop)
	x.cancelClosing()
	x.startOnce.Do(func() {}) // an index never started stays so
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
