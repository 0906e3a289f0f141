package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// createRecordScript stores a new record, adds its id to sorted sets
// and increments activity counters. KEYS: record, sorted sets, counter
// hashes. ARGV: JSON, id, score, number of counters, then field,
// increment and TTL (seconds) of each (see scriptCounters). Returns 1
// when written, 0 when the record exists.
var createRecordScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
local nc = tonumber(ARGV[4] or '0')
local sets = #KEYS - nc
for i = 2, sets do redis.call('ZADD', KEYS[i], ARGV[3], ARGV[2]) end
for i = 1, nc do
  redis.call('HINCRBY', KEYS[sets + i], ARGV[2 + 3*i], ARGV[3 + 3*i])
  redis.call('EXPIRE', KEYS[sets + i], ARGV[4 + 3*i])
end
return 1`)

// createUniqueScript stores a new record and a second key that finds
// it (an account's external id, a hook's key, an API key's id), and
// adds ARGV[2] to sorted sets. KEYS: record, second key, sorted sets.
// ARGV: JSON, the second key's value (the record's id, or an API key's
// hash), score. Returns 1 when written, 0 when either key exists.
var createUniqueScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
for i = 3, #KEYS do redis.call('ZADD', KEYS[i], ARGV[3], ARGV[2]) end
return 1`)

// createResult turns the result of a create script (1: written, 0: a key
// was taken) into an error.
func createResult(n int, err error) error {
	if err == nil && n != 1 {
		return store.ErrConflict
	}
	return err
}

// getJSON decodes the value at key into v; store.ErrNotFound if absent.
func (s *Store) getJSON(ctx context.Context, key string, v any) error {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return store.ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

// mgetter is what mgetJSON needs: a client, or a transaction's
// connection.
type mgetter interface {
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
}

// mgetJSON reads the records of ids, at recordKey(id), with one MGET and
// calls found with the index in ids and the decoded value of each that
// exists.
func mgetJSON[T any](ctx context.Context, rdb mgetter, ids []string, recordKey func(id string) string, found func(i int, v T)) error {
	if len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = recordKey(id)
	}
	vals, err := rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return err
	}
	for i, val := range vals {
		str, ok := val.(string)
		if !ok {
			continue // absent (deleted since the ids were read)
		}
		var v T
		if err := json.Unmarshal([]byte(str), &v); err != nil {
			return fmt.Errorf("decode %s: %w", keys[i], err)
		}
		found(i, v)
	}
	return nil
}

// listSet returns the records whose ids the sorted set zkey holds, read
// at recordKey(id), that keep accepts.
func listSet[T any](ctx context.Context, s *Store, zkey string, recordKey func(id string) string, keep func(T) bool) ([]T, error) {
	ids, err := s.rdb.ZRange(ctx, zkey, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(ids))
	err = mgetJSON(ctx, s.rdb, ids, recordKey, func(_ int, x T) {
		if keep(x) {
			out = append(out, x)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateRecordScript replaces a tenant's record if its version field
// is the expected one, removes its id from the sorted sets it leaves,
// adds it (with its new score) to those it is in, and increments
// activity counters. KEYS: record, ARGV[6] sorted sets to leave, sorted
// sets to be in, counter hashes. ARGV: tenant, expected version, JSON,
// id, score, number of sets to leave, number of counters, then field,
// increment and TTL (seconds) of each (see scriptCounters). Returns 1
// when written, 0 on a version mismatch, -1 when the record does not
// exist or is another tenant's.
var updateRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local r = cjson.decode(cur)
if r.tenant_id ~= ARGV[1] then return -1 end
if r.version ~= tonumber(ARGV[2]) then return 0 end
local leave = tonumber(ARGV[6])
local nc = tonumber(ARGV[7] or '0')
local sets = #KEYS - nc
for i = 2, 1 + leave do redis.call('ZREM', KEYS[i], ARGV[4]) end
for i = 2 + leave, sets do redis.call('ZADD', KEYS[i], ARGV[5], ARGV[4]) end
for i = 1, nc do
  redis.call('HINCRBY', KEYS[sets + i], ARGV[5 + 3*i], ARGV[6 + 3*i])
  redis.call('EXPIRE', KEYS[sets + i], ARGV[7 + 3*i])
end
redis.call('SET', KEYS[1], ARGV[3])
return 1`)

// deleteRecordScript deletes a tenant's record and removes its id from
// sorted sets. KEYS: record, sorted sets. ARGV: tenant, id. Returns 1
// when deleted, 0 when the record does not exist or is another
// tenant's.
var deleteRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).tenant_id ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[2]) end
return 1`)

// ErrNotReplicated reports a write the master took that no replica
// acknowledged within ReplicaWait: a failover now could lose it. The
// caller must treat it as not written, and must not act on it (run a
// step, say) until a later write is acknowledged.
var ErrNotReplicated = errors.New("redisstore: no replica acknowledged the write")

// ReplicaWait bounds how long a replicated write waits for a replica.
const ReplicaWait = time.Second

// write runs a write script, returning its integer result. With
// replicated, on a store opened through Sentinel, the script is followed
// on the same connection by WAIT 1: Redis replicates asynchronously, so a
// write the master acknowledged can be lost when a replica is promoted,
// and WAIT returns once a replica holds every earlier write of the
// connection. A write (result 1) that no replica acknowledged within
// ReplicaWait is ErrNotReplicated. A master without replicas (the one
// promoted when the only replica took over) has nothing a failover could
// promote over it: its writes do not wait (WAIT would wait out its
// timeout), so dispatch goes on at its pace.
func (s *Store) write(ctx context.Context, replicated bool, script *redis.Script, keys []string, args ...any) (int, error) {
	if !replicated || !s.sentinel || s.masterReplicas(ctx) == 0 {
		return script.Run(ctx, s.rdb, keys, args...).Int()
	}
	pipe := s.rdb.Pipeline()
	// EVAL rather than EVALSHA: a pipeline cannot fall back on NOSCRIPT.
	res := script.Eval(ctx, pipe, keys, args...)
	acked := pipe.Do(ctx, "WAIT", 1, ReplicaWait.Milliseconds())
	_, _ = pipe.Exec(ctx) // each command's error is read below
	n, err := res.Int()
	if err != nil || n != 1 {
		return n, err
	}
	if replicas, err := acked.Int(); err != nil || replicas < 1 {
		s.replicasRead.Store(0) // read the master's replicas again
		if err != nil {
			return n, fmt.Errorf("%w: %w", ErrNotReplicated, err)
		}
		return n, fmt.Errorf("%w within %s", ErrNotReplicated, ReplicaWait)
	}
	return n, nil
}

// masterReplicas returns how many replicas the master has connected, as
// INFO replication read at most a second ago says; 1 when it cannot be
// read, so that a write waits rather than not.
func (s *Store) masterReplicas(ctx context.Context) int {
	now := time.Now().UnixNano()
	if now-s.replicasRead.Load() < int64(time.Second) {
		return int(s.replicas.Load())
	}
	n := 1
	if info, err := s.rdb.Info(ctx, "replication").Result(); err == nil {
		if c := connectedReplicas(info); c >= 0 {
			n = c
		}
	}
	s.replicas.Store(int64(n))
	s.replicasRead.Store(now)
	return n
}

// connectedReplicas reads connected_slaves from INFO replication; -1 if
// it is missing (so a failed INFO never waives the wait).
func connectedReplicas(info string) int {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// updateResult turns the result of updateRecordScript (1: written, 0: a
// version mismatch, -1: no such record) into an error.
func updateResult(n int, err error) error {
	switch {
	case err != nil || n == 1:
		return err
	case n == -1:
		return store.ErrNotFound
	default:
		return store.ErrConflict
	}
}

// leaving returns the sorted sets of old that now does not hold: those a
// record listed in old and about to be listed in now leaves.
func leaving(old, now []string) []string {
	return slices.DeleteFunc(slices.Clone(old), func(k string) bool { return slices.Contains(now, k) })
}

// globEscape escapes the characters that SCAN's MATCH patterns give a
// meaning, so that the pattern matches s itself.
func globEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// kind says how one kind of versioned record is kept: its key, which
// stored record a request reaches, the sorted sets that list it (scored
// by its CreatedAt) and the second key that finds it, if any. Its methods
// are the create, get, list, update (with a version check, in
// updateRecordScript) and delete (deleteRecordScript) that these records
// share; each entity's methods are thin calls to them. A Store makes its
// kinds (their keys carry its prefix).
type kind[T record.Versioned[T]] struct {
	s *Store
	// what names the kind in errors ("agent").
	what string
	// key is the key of the record tenantID and id name.
	key func(tenantID, id string) string
	// fields gives access to a record's common fields.
	fields func(*T) record.Fields
	// reaches reports whether stored, found at key(tenantID, id), is the
	// record asked for: of that tenant, where the kind's ids are per
	// tenant or the caller names one, and with that id (':' in ids can
	// make two keys one).
	reaches record.Reach
	// tenantSets returns the sorted sets that list the tenant's records,
	// for kinds whose sets depend on the tenant alone; sets returns those
	// that list a record, for the others. One of them is set.
	tenantSets func(tenantID string) []string
	sets       func(T) []string
	// unique returns the second key that finds a record (its value the
	// record's id), which no other record may hold; nil for none.
	unique func(T) string
	// replicated makes each create and update of the kind wait, on a
	// store opened through Sentinel, until a replica holds it (see
	// Store.write).
	replicated bool
	// counts returns what writing v, replacing prev (nil on creation),
	// adds to the activity counters; nil for kinds not counted (which
	// is all but runs). Not with unique.
	counts func(prev *T, v T) []store.ActivityDelta
}

// incrs returns the counter increments of writing v over prev.
func (k kind[T]) incrs(prev *T, v T) []counterIncr {
	if k.counts == nil {
		return nil
	}
	return k.s.activityIncrs(k.counts(prev, v))
}

// setsOf returns the sorted sets that list v.
func (k kind[T]) setsOf(v T) []string {
	if k.sets != nil {
		return k.sets(v)
	}
	return k.tenantSets(k.fields(&v).TenantID)
}

// create stores v with Version 1 (v.ForCreate), its second key if the
// kind has one, and adds its id to its sorted sets, in one script;
// store.ErrConflict if its key or its second key is taken.
func (k kind[T]) create(ctx context.Context, v T) (T, error) {
	var zero T
	if err := v.Validate(); err != nil {
		return zero, fmt.Errorf("redisstore: create %s: %w", k.what, err)
	}
	v = v.ForCreate(k.s.now())
	f := k.fields(&v)
	data, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("redisstore: create %s: %w", k.what, err)
	}
	// KEYS: record, [second key,] sorted sets. ARGV: JSON, id, score.
	script, keys := createRecordScript, []string{k.key(f.TenantID, f.ID)}
	if k.unique != nil {
		script, keys = createUniqueScript, append(keys, k.unique(v))
	}
	keys = append(keys, k.setsOf(v)...)
	args := []any{data, f.ID, score(f.Created)}
	if incrs := k.incrs(nil, v); len(incrs) > 0 && k.unique == nil {
		ckeys, cargs := scriptCounters(incrs)
		keys, args = append(keys, ckeys...), append(args, cargs...)
	}
	if err := createResult(k.s.write(ctx, k.replicated, script, keys, args...)); err != nil {
		return zero, fmt.Errorf("redisstore: create %s %s: %w", k.what, f.ID, err)
	}
	return v, nil
}

// read reads the record tenantID and id name; store.ErrNotFound if it is
// absent or does not reach it.
func (k kind[T]) read(ctx context.Context, tenantID, id string) (T, error) {
	var v T
	if err := k.s.getJSON(ctx, k.key(tenantID, id), &v); err != nil {
		var zero T
		return zero, err
	}
	if !k.reaches(k.fields(&v), tenantID, id) {
		var zero T
		return zero, store.ErrNotFound
	}
	return v, nil
}

// get returns the record tenantID and id name, or store.ErrNotFound; op
// names the call in errors ("get", "find").
func (k kind[T]) get(ctx context.Context, op, tenantID, id string) (T, error) {
	v, err := k.read(ctx, tenantID, id)
	if err != nil {
		return v, fmt.Errorf("redisstore: %s %s %s: %w", op, k.what, id, err)
	}
	return v, nil
}

// list returns the records whose ids the sorted set zkey holds (read at
// key(tenantID, id)) that keep accepts, oldest first (by CreatedAt, then
// id): scores are float64, too coarse for nanoseconds, so the records
// are sorted exactly here.
func (k kind[T]) list(ctx context.Context, tenantID, zkey string, keep func(T) bool) ([]T, error) {
	recordKey := func(id string) string { return k.key(tenantID, id) }
	out, err := listSet(ctx, k.s, zkey, recordKey, keep)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list %ss: %w", k.what, err)
	}
	store.SortOldestFirst(out, func(v T) time.Time { return k.fields(&v).Created }, func(v T) string { return k.fields(&v).ID })
	return out, nil
}

// update replaces the record v names if its stored Version equals
// v.Version and it is of v's tenant, moves its id between its sorted
// sets, and returns it with Version increased; store.ErrNotFound if it is
// absent or another tenant's, store.ErrConflict if another write came
// first. A kind with sets (whose sets depend on fields an update may
// change) reads the stored record first, to name the sets it leaves; the
// script's version check makes that read safe, and a record deleted
// since is store.ErrNotFound.
func (k kind[T]) update(ctx context.Context, v T) (T, error) {
	var zero T
	if err := v.Validate(); err != nil {
		return zero, fmt.Errorf("redisstore: update %s: %w", k.what, err)
	}
	f := k.fields(&v)
	var leave []string
	var incrs []counterIncr
	if k.sets != nil {
		cur, err := k.read(ctx, f.TenantID, f.ID)
		if err != nil {
			return zero, fmt.Errorf("redisstore: update %s %s: %w", k.what, f.ID, err)
		}
		if *k.fields(&cur).Version != *f.Version {
			return zero, fmt.Errorf("redisstore: update %s %s: %w", k.what, f.ID, store.ErrConflict)
		}
		leave = leaving(k.sets(cur), k.sets(v))
		incrs = k.incrs(&cur, v) // the script's version check makes cur the one replaced
	}
	want := *f.Version
	*f.Version++
	data, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("redisstore: update %s: %w", k.what, err)
	}
	// KEYS: record, sets to leave, sets to be in (to refresh the score).
	// ARGV: tenant, expected version, JSON, id, score, number of sets to leave.
	ckeys, cargs := scriptCounters(incrs)
	keys := slices.Concat([]string{k.key(f.TenantID, f.ID)}, leave, k.setsOf(v), ckeys)
	args := append([]any{f.TenantID, want, data, f.ID, score(f.Created), len(leave)}, cargs...)
	err = updateResult(k.s.write(ctx, k.replicated, updateRecordScript, keys, args...))
	if err != nil {
		return zero, fmt.Errorf("redisstore: update %s %s: %w", k.what, f.ID, err)
	}
	return v, nil
}

// remove deletes the tenant's record id and removes it from the tenant's
// sorted sets, in one script; store.ErrNotFound if it is absent or
// another tenant's. The kind's sets depend on the tenant alone.
func (k kind[T]) remove(ctx context.Context, tenantID, id string) error {
	// KEYS: record, sorted sets. ARGV: tenant, id.
	keys := append([]string{k.key(tenantID, id)}, k.tenantSets(tenantID)...)
	n, err := deleteRecordScript.Run(ctx, k.s.rdb, keys, tenantID, id).Int()
	if err == nil && n != 1 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete %s %s: %w", k.what, id, err)
	}
	return nil
}
