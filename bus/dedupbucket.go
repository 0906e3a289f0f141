package bus

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// DedupBucket is the key-value bucket (stream KV_triggerd_dedup) that
// tells which deliveries the index holds (shared layout), for every
// process at once: a fixed 2^dedupBits keys, whatever the traffic. A
// delivery's key is the top dedupBits bits of its 64-bit hash
// (deliveryHash); the key's value is the sorted list of the entries in
// that range, each a hash, the index message naming the delivery, and
// when the entry expires (with the archive). See docs/scaling.md, "The
// duplicate check at scale".
const DedupBucket = "triggerd_dedup"

// dedupBits is how many top bits of a hash name its key: 262,144 keys,
// about 270 entries (5 KB) each at 70 M deliveries.
const dedupBits = 18

// dedupFilledKey (outside the hex key space) is set once the bucket
// holds every delivery of the index written before it existed
// (deliveryIndex.fill).
const dedupFilledKey = "filled"

// dedupFormat is the first byte of every value: the encoding's version.
const dedupFormat = 1

// dedupEntrySize is one entry's encoding: hash, seq (8 bytes each, big
// endian), expiry (4 bytes, unix seconds).
const dedupEntrySize = 20

// dedupRetries bounds how often add re-reads a key another writer changed
// under it.
const dedupRetries = 8

// Hash domains: a delivery's key, and the bare delivery id of one on a
// tenant's hook (lookupID).
const (
	hashKey byte = 0
	hashID  byte = 1
)

// deliveryHash is a stable 64-bit hash of a connector and a delivery key
// (or id, by domain): FNV-1a, then murmur3's finaliser so that the top
// bits, which pick the key, depend on every byte (FNV-1a alone leaves
// keys that differ in their last byte in a few buckets). Every process
// must compute the same hash: no random seed.
func deliveryHash(c triggers.Connector, domain byte, key string) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < len(c); i++ {
		h = (h ^ uint64(c[i])) * prime
	}
	h = (h ^ uint64(domain)) * prime
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// dedupKey names the bucket key holding hash's entry.
func dedupKey(hash uint64) string {
	const digits = "0123456789abcdef"
	k := hash >> (64 - dedupBits)
	var b [5]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = digits[k&0xf]
		k >>= 4
	}
	return string(b[:])
}

// dedupEntry is one delivery in a bucket value.
type dedupEntry struct {
	hash uint64
	// seq is the index message naming the delivery (legacySeq set: a
	// message of legacyIndexSubject in EventsStream).
	seq     uint64
	expires uint32 // unix seconds
}

// dedupSlot is one key's value as read, with its revision (0: no value).
type dedupSlot struct {
	key     string
	rev     uint64
	entries []dedupEntry
}

// decodeDedup decodes a bucket value.
func decodeDedup(data []byte) ([]dedupEntry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if data[0] != dedupFormat || (len(data)-1)%dedupEntrySize != 0 {
		return nil, fmt.Errorf("bucket %s: a value of %d bytes in format %d, want format %d", DedupBucket, len(data), data[0], dedupFormat)
	}
	data = data[1:]
	entries := make([]dedupEntry, 0, len(data)/dedupEntrySize+1)
	for ; len(data) > 0; data = data[dedupEntrySize:] {
		entries = append(entries, dedupEntry{
			hash:    binary.BigEndian.Uint64(data),
			seq:     binary.BigEndian.Uint64(data[8:]),
			expires: binary.BigEndian.Uint32(data[16:]),
		})
	}
	return entries, nil
}

// encodeDedup encodes entries (sorted) as a bucket value.
func encodeDedup(entries []dedupEntry) []byte {
	data := make([]byte, 1, 1+len(entries)*dedupEntrySize)
	data[0] = dedupFormat
	for _, e := range entries {
		data = binary.BigEndian.AppendUint64(data, e.hash)
		data = binary.BigEndian.AppendUint64(data, e.seq)
		data = binary.BigEndian.AppendUint32(data, e.expires)
	}
	return data
}

func compareDedup(a, b dedupEntry) int {
	if a.hash != b.hash {
		if a.hash < b.hash {
			return -1
		}
		return 1
	}
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// matching returns the index messages of entries with hash that have not
// expired at now.
func matching(entries []dedupEntry, hash uint64, now int64) []uint64 {
	i, _ := slices.BinarySearchFunc(entries, hash, func(e dedupEntry, h uint64) int {
		switch {
		case e.hash < h:
			return -1
		case e.hash > h:
			return 1
		}
		return 0
	})
	var seqs []uint64
	for ; i < len(entries) && entries[i].hash == hash; i++ {
		if int64(entries[i].expires) > now {
			seqs = append(seqs, entries[i].seq)
		}
	}
	return seqs
}

// mergeDedup returns entries without those expired at now, plus add
// (sorted, each once).
func mergeDedup(entries []dedupEntry, now int64, add ...dedupEntry) []dedupEntry {
	merged := make([]dedupEntry, 0, len(entries)+len(add))
	for _, e := range entries {
		if int64(e.expires) > now {
			merged = append(merged, e)
		}
	}
	for _, e := range add {
		if int64(e.expires) <= now {
			continue
		}
		if i, found := slices.BinarySearchFunc(merged, e, compareDedup); found {
			merged[i].expires = max(merged[i].expires, e.expires)
		} else {
			merged = slices.Insert(merged, i, e)
		}
	}
	return merged
}

// expiresAt converts a unix time to an entry's expiry, saturated.
func expiresAt(unix int64) uint32 {
	return uint32(min(max(unix, 0), 1<<32-1))
}

// dedupReadTimeout bounds one read of a key. While the bucket's stream
// elects a leader its replicas may leave a direct get unanswered, which
// would hold each delivery for its whole commit deadline; a key is read in
// well under a millisecond otherwise.
const dedupReadTimeout = time.Second

// read returns a key's value.
func (x *deliveryIndex) read(ctx context.Context, key string) (dedupSlot, error) {
	slot := dedupSlot{key: key}
	if x.kv == nil {
		return slot, nil
	}
	rctx, cancel := context.WithTimeout(ctx, dedupReadTimeout)
	e, err := x.kv.Get(rctx, key)
	cancel()
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return slot, nil
	} else if err != nil && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
		return slot, &unansweredError{stream: dedupStream, err: fmt.Errorf("read key %s of bucket %s: no answer within %s: %w", key, DedupBucket, dedupReadTimeout, err)}
	} else if err != nil {
		return slot, fmt.Errorf("read key %s of bucket %s: %w", key, DedupBucket, err)
	}
	slot.rev = e.Revision()
	if slot.entries, err = decodeDedup(e.Value()); err != nil {
		return slot, fmt.Errorf("key %s: %w", key, err)
	}
	return slot, nil
}

// insert writes add into their key, whose value was last read as slot,
// with a compare-and-set on the key's revision, dropping expired entries.
// When another writer changed the key meanwhile it reads the key again
// and, if present is set and reports that the delivery is there now
// (another attempt indexed it first), returns duplicate true without
// writing.
func (x *deliveryIndex) insert(ctx context.Context, slot dedupSlot, add []dedupEntry, present func(context.Context, dedupSlot) (bool, error)) (duplicate bool, err error) {
	limit := x.b.MaxPayload() - headroom
	wait := 5 * time.Millisecond
	for tries := 0; ; tries++ {
		merged := mergeDedup(slot.entries, x.now().Unix(), add...)
		data := encodeDedup(merged)
		if len(data) > limit {
			return false, fmt.Errorf("key %s of bucket %s would hold %d entries, %d bytes, past the server's max payload (%d): raise max_payload", slot.key, DedupBucket, len(merged), len(data), limit+headroom)
		}
		if slot.rev == 0 {
			_, err = x.kv.Create(ctx, slot.key, data)
		} else {
			_, err = x.kv.Update(ctx, slot.key, data, slot.rev)
		}
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, fmt.Errorf("write key %s of bucket %s: %w", slot.key, DedupBucket, err)
		}
		if tries >= dedupRetries {
			return false, fmt.Errorf("write key %s of bucket %s: changed by others %d times in a row: %w", slot.key, DedupBucket, tries+1, err)
		}
		// Another writer got there first. A replica answering a direct
		// get may lag the leader by a moment: wait a little each time.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("write key %s of bucket %s: %w", slot.key, DedupBucket, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
		if slot, err = x.read(ctx, slot.key); err != nil {
			return false, err
		}
		if present != nil {
			if found, err := present(ctx, slot); err != nil {
				return false, err
			} else if found {
				return true, nil
			}
		}
	}
}

// dedupFilled is the value of dedupFilledKey.
type dedupFilled struct {
	// IndexSeq is the last IndexStream sequence the fill read (0: none).
	IndexSeq uint64 `json:"index_seq"`
	// Deliveries is how many unexpired deliveries it put in the bucket.
	Deliveries int       `json:"deliveries"`
	At         time.Time `json:"at"`
}

// dedupFillTimeout bounds the bucket's first fill (fill).
const dedupFillTimeout = 30 * time.Minute

// fill puts in the bucket, once, every unexpired delivery of the index
// written before the bucket existed (by earlier versions: IndexStream and
// legacyIndexSubject), so that they stay duplicates after the upgrade,
// and then sets dedupFilledKey. Once the key is set, Connect reads
// nothing else.
//
// A fill cut short is made again, whole, at the next Connect (its writes
// merge), so it is not bound by ctx's deadline, which is one connect
// attempt's and would cut every attempt short at a large index (the fill
// reads the whole index, as earlier versions did at every Connect, and
// writes up to 2^18 keys: about 25 s for 1 M deliveries on a loaded
// 2-core machine). It stops when ctx is cancelled, or after
// dedupFillTimeout.
func (x *deliveryIndex) fill(ctx context.Context) error {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupFillTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	defer stop()
	ctx = fctx
	if _, err := retryJS(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) {
		return x.kv.Get(ctx, dedupFilledKey)
	}); err == nil {
		return nil
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("bucket %s: %w", DedupBucket, err)
	}
	byKey := map[string][]dedupEntry{}
	now := x.now().Unix()
	n := 0
	collect := func(seq uint64, data []byte) {
		var entries []struct {
			Connector  triggers.Connector `json:"connector"`
			Key        string             `json:"key"`
			DeliveryID string             `json:"delivery_id"`
			ReceivedAt time.Time          `json:"received_at"`
		}
		if fastjson.Unmarshal(data, &entries) != nil {
			return
		}
		for _, e := range entries {
			expires := x.expires(e.ReceivedAt)
			if int64(expires) <= now {
				continue
			}
			n++
			hash := deliveryHash(e.Connector, hashKey, e.Key)
			k := dedupKey(hash)
			byKey[k] = append(byKey[k], dedupEntry{hash: hash, seq: seq, expires: expires})
			if e.Key != e.DeliveryID {
				hash := deliveryHash(e.Connector, hashID, e.DeliveryID)
				k := dedupKey(hash)
				byKey[k] = append(byKey[k], dedupEntry{hash: hash, seq: seq, expires: expires})
			}
		}
	}
	if _, err := readIndex(ctx, x.b.events, legacyIndexSubject, legacySeq, collect); err != nil {
		return fmt.Errorf("fill bucket %s from the earlier delivery index: %w", DedupBucket, err)
	}
	var last uint64
	if x.b.indexStream != nil {
		var err error
		if last, err = readIndex(ctx, x.b.indexStream, IndexSubject, 0, collect); err != nil {
			return fmt.Errorf("fill bucket %s from the delivery index: %w", DedupBucket, err)
		}
	}
	if err := x.writeAll(ctx, byKey); err != nil {
		return fmt.Errorf("fill bucket %s from the delivery index: %w", DedupBucket, err)
	}
	marker, _ := json.Marshal(dedupFilled{IndexSeq: last, Deliveries: n, At: x.now().UTC()})
	if _, err := retryJS(ctx, func(ctx context.Context) (uint64, error) { return x.kv.Put(ctx, dedupFilledKey, marker) }); err != nil {
		return fmt.Errorf("bucket %s: %w", DedupBucket, err)
	}
	return nil
}

// writeAll adds entries to their keys: each key first created at once,
// pipelined (on condition that it has no value), then, for keys another
// process wrote meanwhile, merged one by one.
func (x *deliveryIndex) writeAll(ctx context.Context, byKey map[string][]dedupEntry) error {
	js, err := jetstream.New(x.b.nc, jetstream.WithPublishAsyncMaxPending(1<<14))
	if err != nil {
		return err
	}
	futures := make(map[string]jetstream.PubAckFuture, len(byKey))
	for k, entries := range byKey {
		slices.SortFunc(entries, compareDedup)
		entries = slices.CompactFunc(entries, func(a, b dedupEntry) bool { return compareDedup(a, b) == 0 })
		byKey[k] = entries
		msg := &nats.Msg{Subject: "$KV." + DedupBucket + "." + k, Data: encodeDedup(entries)}
		for {
			f, err := js.PublishMsgAsync(msg, jetstream.WithExpectLastSequencePerSubject(0))
			if err == nil {
				futures[k] = f
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for k, f := range futures {
		select {
		case <-f.Ok():
			continue
		case err := <-f.Err():
			if !isWrongLastSequence(err) && !isCASConflict(err) {
				return fmt.Errorf("write key %s: %w", k, err)
			}
		}
		slot, err := x.read(ctx, k)
		if err == nil {
			_, err = x.insert(ctx, slot, byKey[k], nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readIndex calls fn with each message of subject in stream, from the
// first to the last present at the call, its sequence or'ed with flag,
// and returns the last one's sequence (0: none).
func readIndex(ctx context.Context, stream jetstream.Stream, subject string, flag uint64, fn func(seq uint64, data []byte)) (uint64, error) {
	last, err := retryJS(ctx, func(ctx context.Context) (*jetstream.RawStreamMsg, error) {
		return stream.GetLastMsgForSubject(ctx, subject)
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return 0, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		fn(meta.Sequence.Stream|flag, msg.Data())
		if meta.Sequence.Stream >= last.Sequence || meta.NumPending == 0 {
			return last.Sequence, nil
		}
	}
}
