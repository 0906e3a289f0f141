package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// The activity counters (store.Activity): a hash per tenant and bucket,
// activity:{tenant}:{m|h}:{bucket start, unix seconds}, of counter name
// -> count, expiring store.ActivityMinuteRetention (or HourRetention)
// after its bucket starts.
func (s *Store) activityKey(tenantID string, step time.Duration, start time.Time) string {
	g := "m"
	if step == store.ActivityHour {
		g = "h"
	}
	return s.prefix + "activity:" + tenantID + ":" + g + ":" + strconv.FormatInt(start.Unix(), 10)
}

// counterIncr is one HINCRBY by n of field at key, which then expires in
// ttl seconds.
type counterIncr struct {
	key, field string
	n          int64
	ttl        int64
}

// activityIncrs turns deltas into increments of the minute and hour
// buckets, summed per key and field, in the order first met.
func (s *Store) activityIncrs(ds []store.ActivityDelta) []counterIncr {
	var out []counterIncr
	at := map[[2]string]int{}
	for _, d := range ds {
		if d.N == 0 || d.TenantID == "" || d.Name == "" {
			continue
		}
		for _, step := range []time.Duration{store.ActivityMinute, store.ActivityHour} {
			keep, _ := store.ActivityRetention(step)
			start := d.At.Truncate(step)
			key := s.activityKey(d.TenantID, step, start)
			if i, ok := at[[2]string{key, d.Name}]; ok {
				out[i].n += d.N
				continue
			}
			ttl := int64(start.Add(keep).Sub(s.now()).Seconds())
			if ttl <= 0 {
				continue // older than its retention: not counted
			}
			at[[2]string{key, d.Name}] = len(out)
			out = append(out, counterIncr{key: key, field: d.Name, n: d.N, ttl: ttl})
		}
	}
	return out
}

// queueIncrs adds the increments to a pipeline.
func queueIncrs(ctx context.Context, p redis.Pipeliner, incrs []counterIncr) {
	for _, c := range incrs {
		p.HIncrBy(ctx, c.key, c.field, c.n)
		p.Expire(ctx, c.key, time.Duration(c.ttl)*time.Second)
	}
}

// scriptCounters returns the keys and the arguments that hand incrs to
// createRecordScript or updateRecordScript: the keys go last in KEYS;
// ARGV takes their number, then field, increment and TTL of each.
func scriptCounters(incrs []counterIncr) (keys []string, args []any) {
	args = []any{len(incrs)}
	for _, c := range incrs {
		keys = append(keys, c.key)
		args = append(args, c.field, c.n, c.ttl)
	}
	return keys, args
}

// ReadActivity reads every bucket of every span with one pipeline of
// HGETALLs.
func (s *Store) ReadActivity(ctx context.Context, tenantID string, spans []store.ActivitySpan) ([][]store.ActivityCounts, error) {
	for _, sp := range spans {
		if _, err := store.ActivityRetention(sp.Step); err != nil {
			return nil, err
		}
	}
	var cmds []*redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, sp := range spans {
			for i := range sp.N {
				cmds = append(cmds, p.HGetAll(ctx, s.activityKey(tenantID, sp.Step, sp.Start(i))))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: read activity: %w", err)
	}
	out := make([][]store.ActivityCounts, len(spans))
	next := 0
	for j, sp := range spans {
		out[j] = make([]store.ActivityCounts, sp.N)
		for i := range sp.N {
			m := cmds[next].Val()
			next++
			if len(m) == 0 {
				continue
			}
			c := make(store.ActivityCounts, len(m))
			for k, v := range m {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("redisstore: read activity: counter %s of %s: %w", k, sp.Start(i), err)
				}
				c[k] = n
			}
			out[j][i] = c
		}
	}
	return out, nil
}
