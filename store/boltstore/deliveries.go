package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// The delivery log: "deliveries" keeps each record at tenant NUL id, so
// the bucket itself lists a tenant's records in id (time) order;
// "delivery-ids" keeps id NUL tenant, to prune every tenant's oldest.
var (
	bucketDeliveries  = []byte("deliveries")
	bucketDeliveryIDs = []byte("delivery-ids")
)

func deliveryKey(tenantID, id string) []byte { return []byte(tenantID + sep + id) }

// PutDeliveries stores the records, and counts them in the activity
// counters, in one write transaction (shared with concurrent callers' by
// Batch). A record put again counts again: the delivery log puts each
// once.
func (s *Store) PutDeliveries(ctx context.Context, ds []store.DeliveryRecord) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("boltstore: put deliveries: %w", err)
	}
	type kv struct{ k, v, id []byte }
	kvs := make([]kv, 0, len(ds))
	for _, d := range ds {
		if err := store.RequireIDs("boltstore: put delivery", "id", d.ID, "tenant id", d.TenantID); err != nil {
			return err
		}
		v, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("boltstore: put delivery %s: %w", d.ID, err)
		}
		kvs = append(kvs, kv{deliveryKey(d.TenantID, d.ID), v, []byte(d.ID + sep + d.TenantID)})
	}
	counts := store.DeliveryActivity(ds)
	err := s.db.Batch(func(tx *bolt.Tx) error {
		if err := s.addActivity(tx, counts); err != nil {
			return err
		}
		recs, ids := tx.Bucket(bucketDeliveries), tx.Bucket(bucketDeliveryIDs)
		// Ids grow with time: new keys go at the end of a tenant's
		// range and of delivery-ids, so full pages are not split again.
		recs.FillPercent, ids.FillPercent = 0.95, 0.95
		for _, x := range kvs {
			if err := recs.Put(x.k, x.v); err != nil {
				return err
			}
			if err := ids.Put(x.id, nil); err != nil {
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

// GetDelivery returns the tenant's record, or store.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, tenantID, id string) (store.DeliveryRecord, error) {
	if err := ctx.Err(); err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("boltstore: get delivery: %w", err)
	}
	var d store.DeliveryRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		d, err = getJSON[store.DeliveryRecord](tx.Bucket(bucketDeliveries), deliveryKey(tenantID, id))
		if err == nil && (d.TenantID != tenantID || d.ID != id) {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("boltstore: get delivery %s: %w", id, err)
	}
	return d, nil
}

// ListDeliveries walks the tenant's records backwards from f.Before (or
// the newest) to f.Since, reading at most store.MaxDeliveryScan.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.DeliveryRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: list deliveries: %w", err)
	}
	limit := store.ListLimit(f.Limit)
	prefix := []byte(f.TenantID + sep)
	var lower []byte
	if !f.Since.IsZero() {
		lower = deliveryKey(f.TenantID, store.DeliveryIDAt(f.Since))
	}
	out := []store.DeliveryRecord{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketDeliveries).Cursor()
		// The first key past the range: the cursor, or the first key
		// after every key with the prefix (the tenant, then "\x01").
		upper := []byte(f.TenantID + "\x01")
		if f.Before != "" {
			upper = deliveryKey(f.TenantID, f.Before)
		}
		var v []byte
		k, _ := c.Seek(upper)
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for scanned := 0; k != nil && bytes.HasPrefix(k, prefix) && scanned < store.MaxDeliveryScan; k, v = c.Prev() {
			if lower != nil && bytes.Compare(k, lower) < 0 {
				break
			}
			scanned++
			var d store.DeliveryRecord
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			if d.TenantID != f.TenantID || !f.Match(d) {
				continue
			}
			out = append(out, d)
			if len(out) == limit {
				break
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
// store.DeliveryIDAt(before), oldest first, in write transactions of at
// most store.DefaultPruneLimit records.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	limit = store.PruneLimit(limit)
	end := []byte(store.DeliveryIDAt(before))
	total := 0
	for total < limit {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("boltstore: prune deliveries: %w", err)
		}
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			recs, ids := tx.Bucket(bucketDeliveries), tx.Bucket(bucketDeliveryIDs)
			c := ids.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0 && n < min(limit-total, store.DefaultPruneLimit); k, _ = c.First() {
				id, tenantID, ok := bytes.Cut(k, []byte(sep))
				if ok {
					if err := recs.Delete(deliveryKey(string(tenantID), string(id))); err != nil {
						return err
					}
				}
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
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
