package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// The delivery log keeps records in batches, not one key each: a write
// of 500 records then costs bbolt a few keys, not a thousand, and the
// records are encoded compactly (deliverycodec.go). A write splits its
// records by tenant and by id group (deliveryGroup: for the ids
// store.NewDeliveryID makes, about 16.8 ms of receipt time), and stores
// each part as one value:
//
//	delivery-log       tenant id \0 group \0 seq -> records (deliverycodec.go)
//	delivery-log-time  least record id \0 seq -> its delivery-log key
//
// seq is the bucket's next sequence (8 bytes, big-endian), so a tenant's
// batches sort by group, then in the order they were written. Every id of
// a group sorts after every id of the groups before it, so a listing walks
// the tenant's groups newest first and sorts the records of each; a
// lookup by id reads the batches of its group only. A record put again
// (same tenant and id) is stored again, in a later batch: reads take the
// latest copy. PruneDeliveries walks delivery-log-time from the oldest
// batch, and deletes a batch or writes what it keeps of it again.
var (
	bucketDeliveryLog  = []byte("delivery-log")
	bucketDeliveryTime = []byte("delivery-log-time")
	// The layout before batches, which Open moves into the buckets above:
	// deliveries: tenant id \0 record id -> JSON record;
	// delivery-ids: record id \0 tenant id -> empty.
	bucketDeliveriesV0  = []byte("deliveries")
	bucketDeliveryIDsV0 = []byte("delivery-ids")
)

// deliveryGroupLen is how many leading characters of a record id make its
// group: 10 hex digits of Unix nanoseconds are 2^24 ns, 16.8 ms. A read
// decodes a group's batches whole: at 5,000 deliveries a second a group
// holds some 80 records (groups of 2^28 ns held 1,340, and made the
// detail of a record cost 0.4 ms); a write of 500 then stores 6 values.
const deliveryGroupLen = 10

// deliveryGroup is the group of id: its first deliveryGroupLen
// characters. Groups sort as the ids in them do.
func deliveryGroup(id string) string { return id[:min(len(id), deliveryGroupLen)] }

// seqLen is the length of a sequence number in keys.
const seqLen = 8

// deliveryGroupPrefix is the start of the keys of a tenant's group: every
// one of its batches' keys is this prefix and a sequence number.
func deliveryGroupPrefix(tenantID, group string) []byte {
	return []byte(tenantID + sep + group + sep)
}

// afterPrefix is the least key after every key of a group that starts
// with prefix (a deliveryGroupPrefix): its last NUL made "\x01".
func afterPrefix(prefix []byte) []byte {
	k := slices.Clone(prefix)
	k[len(k)-1] = 1
	return k
}

// deliveryBatch is the part of a write that goes in one value.
type deliveryBatch struct {
	prefix []byte // deliveryGroupPrefix
	minID  string
	recs   []*store.DeliveryRecord
}

// batchDeliveries splits ds into their values, in the order of their
// first record.
func batchDeliveries(ds []store.DeliveryRecord) []*deliveryBatch {
	var out []*deliveryBatch
	byKey := map[string]*deliveryBatch{}
	for i := range ds {
		d := &ds[i]
		prefix := deliveryGroupPrefix(d.TenantID, deliveryGroup(d.ID))
		b := byKey[string(prefix)]
		if b == nil {
			b = &deliveryBatch{prefix: prefix, minID: d.ID}
			byKey[string(prefix)] = b
			out = append(out, b)
		}
		b.recs = append(b.recs, d)
		b.minID = min(b.minID, d.ID)
	}
	return out
}

// putDeliveryBatch writes one value of records (encoded: v) and its time
// index entry in tx.
func putDeliveryBatch(tx *bolt.Tx, prefix []byte, minID string, v []byte) error {
	b, tb := tx.Bucket(bucketDeliveryLog), tx.Bucket(bucketDeliveryTime)
	// Keys grow with time: new ones go at the end of a tenant's range
	// and of the time index, so full pages are not split again.
	b.FillPercent, tb.FillPercent = 0.95, 0.95
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	k := binary.BigEndian.AppendUint64(slices.Clip(prefix), seq)
	if err := b.Put(k, v); err != nil {
		return err
	}
	return tb.Put(deliveryTimeKey(minID, k[len(k)-seqLen:]), k)
}

// deliveryTimeKey is the time index key of a batch whose least id is
// minID and whose key ends with seq.
func deliveryTimeKey(minID string, seq []byte) []byte {
	k := make([]byte, 0, len(minID)+len(sep)+seqLen)
	k = append(k, minID...)
	k = append(k, sep...)
	return append(k, seq...)
}

// PutDeliveries stores the records, and counts them in the activity
// counters, in one write transaction (shared with concurrent callers' by
// Batch). A record put again counts again: the delivery log puts each
// once.
func (s *Store) PutDeliveries(ctx context.Context, ds []store.DeliveryRecord) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put deliveries: %w", err)
	}
	for _, d := range ds {
		if err := store.RequireIDs("boltstore: put delivery", "id", d.ID, "tenant id", d.TenantID); err != nil {
			return err
		}
	}
	if len(ds) == 0 {
		return nil
	}
	batches := batchDeliveries(ds)
	vals := make([][]byte, len(batches))
	for i, b := range batches {
		vals[i] = encodeDeliveries(b.recs)
	}
	counts := store.DeliveryActivity(ds)
	err := s.db.Batch(func(tx *bolt.Tx) error {
		if err := s.addActivity(tx, counts); err != nil {
			return err
		}
		for i, b := range batches {
			if err := putDeliveryBatch(tx, b.prefix, b.minID, vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltstore: put deliveries: %w", err)
	}
	return nil
}

// groupDeliveries returns the records of the batches of one group (values
// from the latest written), the latest copy of each id, in id order,
// newest first.
func groupDeliveries(vals [][]byte) ([]store.DeliveryRecord, error) {
	var out []store.DeliveryRecord
	for _, v := range vals {
		ds, err := decodeDeliveries(v)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	// Stable: of equal ids, the latest written comes first.
	slices.SortStableFunc(out, func(a, b store.DeliveryRecord) int { return strings.Compare(b.ID, a.ID) })
	return slices.CompactFunc(out, func(a, b store.DeliveryRecord) bool { return a.ID == b.ID }), nil
}

// GetDelivery returns the tenant's record, or store.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, tenantID, id string) (store.DeliveryRecord, error) {
	if err := ctx.Err(); err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("boltstore: get delivery: %w", err)
	}
	var d store.DeliveryRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := deliveryGroupPrefix(tenantID, deliveryGroup(id))
		c := tx.Bucket(bucketDeliveryLog).Cursor()
		// The group's batches from the latest written: the first copy
		// found is the one that counts.
		k, v := c.Seek(afterPrefix(prefix))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
			if len(k) != len(prefix)+seqLen {
				continue // a longer tenant id's or group's
			}
			ds, err := decodeDeliveries(v)
			if err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			for i := len(ds) - 1; i >= 0; i-- { // of one write, the last
				if ds[i].ID == id && ds[i].TenantID == tenantID {
					d = ds[i]
					return nil
				}
			}
		}
		return store.ErrNotFound
	})
	if err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("boltstore: get delivery %s: %w", id, err)
	}
	return d, nil
}

// ListDeliveries walks the tenant's groups backwards from f.Before's (or
// the newest) to f.Since's, reading at most store.MaxDeliveryScan
// records.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.DeliveryRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list deliveries: %w", err)
	}
	limit := store.ListLimit(f.Limit)
	tenant := []byte(f.TenantID + sep)
	lower := ""
	if !f.Since.IsZero() {
		lower = store.DeliveryIDAt(f.Since)
	}
	out := []store.DeliveryRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDeliveryLog).Cursor()
		// The first key past the range: the one after f.Before's group,
		// or the first after every key of the tenant (the tenant, then
		// "\x01").
		upper := []byte(f.TenantID + "\x01")
		if f.Before != "" {
			upper = afterPrefix(deliveryGroupPrefix(f.TenantID, deliveryGroup(f.Before)))
		}
		k, v := c.Seek(upper)
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		scanned := 0
		for k != nil && bytes.HasPrefix(k, tenant) && scanned < store.MaxDeliveryScan {
			if len(k) < len(tenant)+len(sep)+seqLen {
				k, v = c.Prev()
				continue
			}
			prefix := k[:len(k)-seqLen]
			group := string(prefix[len(tenant) : len(prefix)-len(sep)])
			if lower != "" && group < deliveryGroup(lower) {
				break
			}
			// The group's values, the latest written first.
			var vals [][]byte
			for ; k != nil && len(k) == len(prefix)+seqLen && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
				vals = append(vals, v)
			}
			ds, err := groupDeliveries(vals)
			if err != nil {
				return fmt.Errorf("decode the batches at %q: %w", prefix, err)
			}
			for _, d := range ds {
				if (f.Before != "" && d.ID >= f.Before) || d.TenantID != f.TenantID {
					continue
				}
				if d.ID < lower || scanned == store.MaxDeliveryScan {
					return nil
				}
				scanned++
				if !f.Match(d) {
					continue
				}
				out = append(out, d)
				if len(out) == limit {
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: list deliveries: %w", err)
	}
	return out, nil
}

// PruneDeliveries deletes every tenant's records with ids below
// store.DeliveryIDAt(before), from the batch with the oldest record on,
// the oldest of a batch first, in write transactions of at most
// store.DefaultPruneLimit records. A record stored twice counts twice.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	limit = store.PruneLimit(limit)
	end := store.DeliveryIDAt(before)
	total := 0
	for total < limit {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("boltstore: prune deliveries: %w", err)
		}
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			var err error
			n, err = pruneDeliveries(tx, end, min(limit-total, store.DefaultPruneLimit))
			return err
		})
		if err != nil {
			return total, fmt.Errorf("boltstore: prune deliveries: %w", err)
		}
		total += n
		if n == 0 {
			break
		}
	}
	return total, nil
}

// pruneDeliveries deletes at most limit records with ids below end in tx
// and returns how many it deleted.
func pruneDeliveries(tx *bolt.Tx, end string, limit int) (int, error) {
	b, tb := tx.Bucket(bucketDeliveryLog), tx.Bucket(bucketDeliveryTime)
	n := 0
	for n < limit {
		tk, key := tb.Cursor().First()
		if tk == nil || len(tk) < len(sep)+seqLen || string(tk[:len(tk)-len(sep)-seqLen]) >= end {
			return n, nil
		}
		tk, key = slices.Clone(tk), slices.Clone(key)
		if err := tb.Delete(tk); err != nil {
			return n, err
		}
		v := b.Get(key)
		if v == nil {
			continue // an index entry without its batch
		}
		ds, err := decodeDeliveries(v)
		if err != nil {
			return n, fmt.Errorf("decode %q: %w", key, err)
		}
		slices.SortStableFunc(ds, func(a, b store.DeliveryRecord) int { return strings.Compare(a.ID, b.ID) })
		doomed := 0
		for doomed < len(ds) && doomed < limit-n && ds[doomed].ID < end {
			doomed++
		}
		n += doomed
		if doomed == len(ds) {
			if err := b.Delete(key); err != nil {
				return n, err
			}
			continue
		}
		// Keep the rest under the same key; its index entry moves to
		// its new oldest record.
		keep := make([]*store.DeliveryRecord, 0, len(ds)-doomed)
		for i := doomed; i < len(ds); i++ {
			keep = append(keep, &ds[i])
		}
		if err := b.Put(key, encodeDeliveries(keep)); err != nil {
			return n, err
		}
		if err := tb.Put(deliveryTimeKey(keep[0].ID, key[len(key)-seqLen:]), key); err != nil {
			return n, err
		}
	}
	return n, nil
}

// migrateDeliveries moves the records of the layout before batches
// (bucketDeliveriesV0) into batches, a bounded number per transaction,
// and then deletes its buckets. Open calls it.
func migrateDeliveries(db *bolt.DB) error {
	const chunk = 5000
	// A file of this layout, the usual case, needs no write (and fsync).
	found := false
	if err := db.View(func(tx *bolt.Tx) error { found = tx.Bucket(bucketDeliveriesV0) != nil; return nil }); err != nil || !found {
		return err
	}
	for {
		done := false
		err := db.Update(func(tx *bolt.Tx) error {
			old := tx.Bucket(bucketDeliveriesV0)
			if old == nil {
				done = true
				return nil
			}
			var ds []store.DeliveryRecord
			var keys [][]byte
			c := old.Cursor()
			for k, v := c.First(); k != nil && len(ds) < chunk; k, v = c.Next() {
				var d store.DeliveryRecord
				if err := json.Unmarshal(v, &d); err != nil {
					return fmt.Errorf("decode %q: %w", k, err)
				}
				keys = append(keys, slices.Clone(k))
				if d.ID != "" && d.TenantID != "" {
					ds = append(ds, d)
				}
			}
			if len(keys) == 0 {
				done = true
				if err := tx.DeleteBucket(bucketDeliveriesV0); err != nil {
					return err
				}
				if tx.Bucket(bucketDeliveryIDsV0) != nil {
					return tx.DeleteBucket(bucketDeliveryIDsV0)
				}
				return nil
			}
			for _, b := range batchDeliveries(ds) {
				if err := putDeliveryBatch(tx, b.prefix, b.minID, encodeDeliveries(b.recs)); err != nil {
					return err
				}
			}
			for _, k := range keys {
				if err := old.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("move the delivery log into batches: %w", err)
		}
		if done {
			return nil
		}
	}
}
