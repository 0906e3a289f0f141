package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// The delivery log: each record is a string at delivery:<tenant>:<id>;
// deliveries:<tenant> is a sorted set of the tenant's ids, all at score
// 0 so that ZREVRANGEBYLEX walks them in id (time) order; deliveries holds
// "<id>\x00<tenant>" for every tenant, to prune the oldest.
func (s *Store) deliveryKey(tenant, id string) string {
	return s.prefix + "delivery:" + tenant + ":" + id
}
func (s *Store) deliveriesKey(tenant string) string { return s.prefix + "deliveries:" + tenant }
func (s *Store) allDeliveriesKey() string           { return s.prefix + "deliveries" }

// deliveryPage is how many ids ListDeliveries reads per round trip.
const deliveryPage = 500

// PutDeliveries stores the records, indexes them and counts them in the
// activity counters in one pipeline (MULTI/EXEC: a reader sees a record
// with its index entries and counts or none of them). A record put again
// counts again: the delivery log puts each once.
func (s *Store) PutDeliveries(ctx context.Context, ds []store.DeliveryRecord) error {
	if len(ds) == 0 {
		return nil
	}
	vals := make([][]byte, len(ds))
	for i, d := range ds {
		if err := store.RequireIDs("redisstore: put delivery", "id", d.ID, "tenant id", d.TenantID); err != nil {
			return err
		}
		v, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("redisstore: put delivery %s: %w", d.ID, err)
		}
		vals[i] = v
	}
	incrs := s.activityIncrs(store.DeliveryActivity(ds))
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range ds {
			p.Set(ctx, s.deliveryKey(d.TenantID, d.ID), vals[i], 0)
			p.ZAdd(ctx, s.deliveriesKey(d.TenantID), redis.Z{Member: d.ID})
			p.ZAdd(ctx, s.allDeliveriesKey(), redis.Z{Member: d.ID + "\x00" + d.TenantID})
		}
		queueIncrs(ctx, p, incrs)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisstore: put deliveries: %w", err)
	}
	return nil
}

// GetDelivery returns the tenant's record, or store.ErrNotFound.
func (s *Store) GetDelivery(ctx context.Context, tenantID, id string) (store.DeliveryRecord, error) {
	var d store.DeliveryRecord
	err := s.getJSON(ctx, s.deliveryKey(tenantID, id), &d)
	if err == nil && (d.TenantID != tenantID || d.ID != id) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.DeliveryRecord{}, fmt.Errorf("redisstore: get delivery %s: %w", id, err)
	}
	return d, nil
}

// ListDeliveries walks the tenant's ids backwards from f.Before (or the
// newest) down to f.Since, deliveryPage at a time, reading at most
// store.MaxDeliveryScan records.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.DeliveryRecord, error) {
	limit := store.ListLimit(f.Limit)
	upper := "+"
	if f.Before != "" {
		upper = "(" + f.Before
	}
	lower := "-"
	if !f.Since.IsZero() {
		lower = "[" + store.DeliveryIDAt(f.Since)
	}
	out := []store.DeliveryRecord{}
	for scanned := 0; scanned < store.MaxDeliveryScan; {
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
			Key: s.deliveriesKey(f.TenantID), Start: upper, Stop: lower, ByLex: true, Rev: true, // Rev: from upper down
			Count: int64(min(deliveryPage, store.MaxDeliveryScan-scanned)),
		}).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list deliveries: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		scanned += len(ids)
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = s.deliveryKey(f.TenantID, id)
		}
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("redisstore: list deliveries: %w", err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // pruned meanwhile
			}
			var d store.DeliveryRecord
			if err := json.Unmarshal([]byte(str), &d); err != nil {
				return nil, fmt.Errorf("redisstore: list deliveries: decode %s: %w", keys[i], err)
			}
			if d.TenantID != f.TenantID || !f.Match(d) {
				continue
			}
			out = append(out, d)
			if len(out) == limit {
				return out, nil
			}
		}
		upper = "(" + ids[len(ids)-1]
	}
	return out, nil
}

// PruneDeliveries deletes every tenant's records with ids below
// store.DeliveryIDAt(before), oldest first.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	limit = store.PruneLimit(limit)
	total := 0
	for total < limit {
		members, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
			Key: s.allDeliveriesKey(), Start: "-", Stop: "(" + store.DeliveryIDAt(before), ByLex: true,
			Count: int64(min(limit-total, deliveryPage)),
		}).Result()
		if err != nil {
			return total, fmt.Errorf("redisstore: prune deliveries: %w", err)
		}
		if len(members) == 0 {
			break
		}
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range members {
				id, tenantID, ok := strings.Cut(m, "\x00")
				if ok {
					p.Del(ctx, s.deliveryKey(tenantID, id))
					p.ZRem(ctx, s.deliveriesKey(tenantID), id)
				}
				p.ZRem(ctx, s.allDeliveriesKey(), m)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return total, fmt.Errorf("redisstore: prune deliveries: %w", err)
		}
		total += len(members)
	}
	return total, nil
}
