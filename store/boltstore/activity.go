package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// bucketActivity keeps the activity counters (store.Activity): tenant id
// \0 "m" or "h" \0 the bucket's start (8 bytes, big-endian Unix seconds,
// sign bit flipped) -> JSON store.ActivityCounts. They are written in the
// transaction of the records they count; whenever a write starts a new
// bucket it deletes that tenant's buckets of the same granularity older
// than their retention, so the bucket stays small without a goroutine.
var bucketActivity = []byte("activity")

// activityPrefix is the part of a counter key before the bucket start.
func activityPrefix(tenantID string, step time.Duration) []byte {
	g := "m"
	if step == store.ActivityHour {
		g = "h"
	}
	return []byte(tenantID + sep + g + sep)
}

func activityKey(tenantID string, step time.Duration, start time.Time) []byte {
	k := activityPrefix(tenantID, step)
	return binary.BigEndian.AppendUint64(k, uint64(start.Unix())^(1<<63))
}

// mergeActivity sums the deltas of the same tenant, name and minute: a
// write of 500 deliveries then looks up a few counters, not 1,000.
func mergeActivity(ds []store.ActivityDelta) []store.ActivityDelta {
	type minuteKey struct {
		tenant, name string
		minute       int64
	}
	at := map[minuteKey]int{}
	out := make([]store.ActivityDelta, 0, 4)
	for _, d := range ds {
		if d.N == 0 || d.TenantID == "" || d.Name == "" {
			continue
		}
		start := d.At.Truncate(store.ActivityMinute)
		k := minuteKey{d.TenantID, d.Name, start.Unix()}
		if i, ok := at[k]; ok {
			out[i].N += d.N
			continue
		}
		at[k] = len(out)
		out = append(out, store.ActivityDelta{TenantID: d.TenantID, Name: d.Name, At: start, N: d.N})
	}
	return out
}

// addActivity adds ds to the counters in tx.
func (s *Store) addActivity(tx *bolt.Tx, ds []store.ActivityDelta) error {
	b := tx.Bucket(bucketActivity)
	now := s.now()
	ds = mergeActivity(ds)
	type bucketKey struct {
		key  string
		step time.Duration
	}
	sums := map[bucketKey]store.ActivityCounts{}
	var order []bucketKey
	tenants := map[bucketKey]string{}
	for _, d := range ds {
		if d.N == 0 || d.TenantID == "" || d.Name == "" {
			continue
		}
		for _, step := range []time.Duration{store.ActivityMinute, store.ActivityHour} {
			keep, _ := store.ActivityRetention(step)
			start := d.At.Truncate(step)
			if !start.Add(keep).After(now) {
				continue // older than its retention: not counted
			}
			k := bucketKey{string(activityKey(d.TenantID, step, start)), step}
			if sums[k] == nil {
				sums[k] = store.ActivityCounts{}
				order = append(order, k)
				tenants[k] = d.TenantID
			}
			sums[k][d.Name] += d.N
		}
	}
	for _, k := range order {
		c := store.ActivityCounts{}
		v := b.Get([]byte(k.key))
		if v == nil {
			keep, _ := store.ActivityRetention(k.step)
			if err := pruneActivity(b, tenants[k], k.step, now.Add(-keep)); err != nil {
				return err
			}
		} else if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("decode activity counters: %w", err)
		}
		for name, n := range sums[k] {
			c[name] += n
		}
		data, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(k.key), data); err != nil {
			return err
		}
	}
	return nil
}

// pruneActivity deletes the tenant's counters of step whose bucket
// started before cutoff.
func pruneActivity(b *bolt.Bucket, tenantID string, step time.Duration, cutoff time.Time) error {
	prefix := activityPrefix(tenantID, step)
	end := activityKey(tenantID, step, cutoff.Truncate(step))
	var doomed [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// ReadActivity reads every bucket of every span in one read transaction.
func (s *Store) ReadActivity(ctx context.Context, tenantID string, spans []store.ActivitySpan) ([][]store.ActivityCounts, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("boltstore: read activity: %w", err)
	}
	for _, sp := range spans {
		if _, err := store.ActivityRetention(sp.Step); err != nil {
			return nil, err
		}
	}
	out := make([][]store.ActivityCounts, len(spans))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketActivity)
		for j, sp := range spans {
			out[j] = make([]store.ActivityCounts, sp.N)
			for i := range sp.N {
				v := b.Get(activityKey(tenantID, sp.Step, sp.Start(i)))
				if v == nil {
					continue
				}
				if err := json.Unmarshal(v, &out[j][i]); err != nil {
					return fmt.Errorf("decode activity counters of %s: %w", sp.Start(i), err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boltstore: read activity: %w", err)
	}
	return out, nil
}
