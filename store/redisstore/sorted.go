package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// pruneRecordScript deletes a record if the stored one is still the
// one the caller read, and removes it from sorted sets. KEYS: record,
// sorted sets. ARGV: SHA-1 (hex) of the JSON read, "" for a record
// already gone (whose stale members are removed); then the record's
// member of each sorted set, in order. Returns 1 when deleted (or
// removed), 0 when the stored record changed.
var pruneRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local sum = ''
if cur then sum = redis.sha1hex(cur) end
if sum ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[i]) end
return 1`)

// sortedRecord is a record read through a sorted set by scanSorted: its
// member of the set, its value, its JSON as read, and its score.
type sortedRecord[T any] struct {
	member string
	v      T
	raw    string
	score  float64
}

// sortedScan says which records scanSorted reads and how it orders them.
type sortedScan[T any] struct {
	// zkey is the sorted set, scored by times in unix nanos; recordKey
	// gives the key of a member's record.
	zkey      string
	recordKey func(member string) string
	// oldest reads from the lowest score up to max (a score, as ZRANGEBYSCORE
	// takes it); otherwise from the highest score down, from max when it
	// is set.
	oldest bool
	max    string
	// keep chooses records; order sorts them, first first.
	keep  func(T) bool
	order func(a, b T) int
	limit int
}

// scanSorted returns at most sc.limit records that sc.keep accepts, in
// sc.order, and the members whose records are gone. It reads the set from
// one end, in growing pages, with the records of each page, and stops once
// limit accepted records have scores before the first unread one. Scores
// are float64, too coarse for nanoseconds, but they never order two times
// the wrong way round, so records whose scores tie are all read and sorted
// exactly. Writes between two pages shift the set: a member read twice is
// used once, and a record that moves while the set is read may be missed,
// as with any paged read.
func scanSorted[T any](ctx context.Context, rdb *redis.Client, sc sortedScan[T]) (found []sortedRecord[T], gone []string, err error) {
	// before reports whether score a comes before score b in the reading.
	before := func(a, b float64) bool { return a > b }
	if sc.oldest {
		before = func(a, b float64) bool { return a < b }
	}
	seen := make(map[string]bool)
	for start, page := 0, min(sc.limit, 1000); ; start, page = start+page, min(2*page, 1000) {
		// One more than the page: the last is a look at the next page.
		var zs []redis.Z
		switch {
		case sc.oldest:
			zs, err = rdb.ZRangeByScoreWithScores(ctx, sc.zkey, &redis.ZRangeBy{Min: "-inf", Max: sc.max, Offset: int64(start), Count: int64(page + 1)}).Result()
		case sc.max != "":
			zs, err = rdb.ZRevRangeByScoreWithScores(ctx, sc.zkey, &redis.ZRangeBy{Min: "-inf", Max: sc.max, Offset: int64(start), Count: int64(page + 1)}).Result()
		default:
			zs, err = rdb.ZRevRangeWithScores(ctx, sc.zkey, int64(start), int64(start+page)).Result()
		}
		if err != nil {
			return nil, nil, err
		}
		more := len(zs) > page
		var next float64
		if more {
			next, zs = zs[page].Score, zs[:page]
		}
		var members, keys []string
		var scores []float64
		for _, z := range zs {
			if m := fmt.Sprint(z.Member); !seen[m] {
				seen[m] = true
				members = append(members, m)
				keys = append(keys, sc.recordKey(m))
				scores = append(scores, z.Score)
			}
		}
		if len(keys) > 0 {
			vals, err := rdb.MGet(ctx, keys...).Result()
			if err != nil {
				return nil, nil, err
			}
			for i, val := range vals {
				raw, ok := val.(string)
				if !ok {
					gone = append(gone, members[i]) // deleted since the set was read
					continue
				}
				var v T
				if err := json.Unmarshal([]byte(raw), &v); err != nil {
					return nil, nil, fmt.Errorf("decode %s: %w", keys[i], err)
				}
				if sc.keep(v) {
					found = append(found, sortedRecord[T]{members[i], v, raw, scores[i]})
				}
			}
		}
		if !more {
			break
		}
		settled := 0
		for _, r := range found {
			if before(r.score, next) {
				settled++
			}
		}
		if settled >= sc.limit {
			break
		}
	}
	slices.SortStableFunc(found, func(a, b sortedRecord[T]) int { return sc.order(a.v, b.v) })
	return found[:min(sc.limit, len(found))], gone, nil
}

// newestFirst returns at most limit records that keep accepts among those
// whose ids the sorted set zkey holds, with a score up to max ("": any),
// newest first as order sorts them (see scanSorted).
func newestFirst[T any](ctx context.Context, rdb *redis.Client, zkey, max string, recordKey func(id string) string,
	keep func(T) bool, order func(a, b T) int, limit int) ([]T, error) {
	found, _, err := scanSorted(ctx, rdb, sortedScan[T]{zkey: zkey, max: max, recordKey: recordKey, keep: keep, order: order, limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]T, len(found))
	for i, r := range found {
		out[i] = r.v
	}
	return out, nil
}

// pruneOldest deletes, oldest first as order sorts them, at most limit
// records that keep accepts among those whose members the sorted set zkey
// holds with a score up to before's, and removes from zkey the members
// whose record is gone. Each record goes with its members of sets(r)
// (the sets, and its member of each), by a script that checks it is
// still the one read: a record written meanwhile is left for a later call.
// It returns how many records it deleted.
func pruneOldest[T any](ctx context.Context, rdb *redis.Client, zkey string, recordKey func(member string) string,
	keep func(T) bool, order func(a, b T) int, before time.Time, limit int,
	sets func(r sortedRecord[T]) (keys, members []string)) (int, error) {
	found, gone, err := scanSorted(ctx, rdb, sortedScan[T]{zkey: zkey, recordKey: recordKey, oldest: true, max: score(before),
		keep: keep, order: order, limit: limit})
	if err != nil {
		return 0, err
	}
	for _, m := range gone {
		if _, err := pruneRecord(ctx, rdb, recordKey(m), "", []string{zkey}, []string{m}); err != nil {
			return 0, err
		}
	}
	deleted := 0
	for _, r := range found {
		// The script deletes the record only if its SHA-1 is still this.
		sum := sha1.Sum([]byte(r.raw))
		keys, members := sets(r)
		ok, err := pruneRecord(ctx, rdb, recordKey(r.member), hex.EncodeToString(sum[:]), keys, members)
		if err != nil {
			return deleted, err
		}
		if ok {
			deleted++
		}
	}
	return deleted, nil
}

// pruneRecord runs pruneRecordScript on the record at key with the SHA-1
// sum of the JSON read ("" for a record gone) and the sorted sets that
// list it, where its member is members[i] in sets[i], and reports whether
// it deleted it.
func pruneRecord(ctx context.Context, rdb *redis.Client, key, sum string, sets, members []string) (bool, error) {
	// KEYS: record, sorted sets. ARGV: SHA-1 of the record read, its
	// member of each set.
	args := []any{sum}
	for _, m := range members {
		args = append(args, m)
	}
	n, err := pruneRecordScript.Run(ctx, rdb, append([]string{key}, sets...), args...).Int()
	return n == 1, err
}
