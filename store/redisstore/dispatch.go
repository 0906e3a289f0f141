package redisstore

import (
	"cmp"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// maxPutEventTries bounds PutEvent's optimistic retries under contention.
const maxPutEventTries = 100

// Scripts of the dispatcher's records. KEYS and ARGV are documented here
// and at each call.
var (
	// updateRecordScript replaces a tenant's record if its version field
	// is the expected one, removes its id from the sorted sets it leaves
	// and adds it (with its new score) to those it is in. KEYS: record,
	// ARGV[6] sorted sets to leave, sorted sets to be in. ARGV: tenant,
	// expected version, JSON, id, score, number of sets to leave. Returns
	// 1 when written, 0 on a version mismatch, -1 when the record does not
	// exist or is another tenant's.
	updateRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local r = cjson.decode(cur)
if r.tenant_id ~= ARGV[1] then return -1 end
if r.version ~= tonumber(ARGV[2]) then return 0 end
local leave = tonumber(ARGV[6])
for i = 2, 1 + leave do redis.call('ZREM', KEYS[i], ARGV[4]) end
for i = 2 + leave, #KEYS do redis.call('ZADD', KEYS[i], ARGV[5], ARGV[4]) end
redis.call('SET', KEYS[1], ARGV[3])
return 1`)

	// deleteRecordScript deletes a tenant's record and removes its id from
	// sorted sets. KEYS: record, sorted sets. ARGV: tenant, id. Returns 1
	// when deleted, 0 when the record does not exist or is another
	// tenant's.
	deleteRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).tenant_id ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[2]) end
return 1`)

	// updateHookScript replaces a hook if its version is the expected one
	// and its key is unchanged. KEYS: hook, hooks:{tenant}, hooks. ARGV:
	// expected version, JSON, id, score, then the key: tenant, account,
	// connector, scope, target. Returns 1 when written, 0 on a version
	// mismatch, -1 when the hook does not exist, -2 when the key differs.
	updateHookScript = redis.NewScript(sameHookKeyLua + `
local cur = redis.call('GET', KEYS[1])
if not cur then return -1 end
local h = cjson.decode(cur)
if h.version ~= tonumber(ARGV[1]) then return 0 end
if not sameHookKey(h, 5) then return -2 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
return 1`)

	// deleteHookScript deletes a hook whose key is the one the caller
	// read, with its activity, and frees the key. KEYS: hook, hook-key,
	// hooks:{tenant}, hooks, hook-activity. ARGV: id, then the key:
	// tenant, account, connector, scope, target. Returns 1 when deleted,
	// 0 when the hook does not exist, -1 when it has another key (it was
	// deleted and created again).
	deleteHookScript = redis.NewScript(sameHookKeyLua + `
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
if not sameHookKey(cjson.decode(cur), 2) then return -1 end
redis.call('DEL', KEYS[1], KEYS[5])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1`)

	// addHookActivityScript merges into the activity hash of a hook that
	// exists (its fields are listed under "Hook activity" below). Times are
	// activityTime strings: equal lengths of decimal digits, so that
	// comparing them as strings compares the times, exactly (Lua numbers
	// are doubles, too coarse for nanoseconds). KEYS: hook,
	// hook-activity. ARGV: LastAcceptedAt ("" for none), Refused, "1" if
	// there is a LastRefusal ("0" otherwise), then its at, status, code
	// and message. Returns 1 when merged, 0 when the hook does not exist.
	addHookActivityScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' then
	local cur = redis.call('HGET', KEYS[2], 'accepted_at')
	if not cur or ARGV[1] > cur then redis.call('HSET', KEYS[2], 'accepted_at', ARGV[1]) end
end
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[2], 'refused', ARGV[2]) end
if ARGV[3] == '1' then
	local cur = redis.call('HGET', KEYS[2], 'refusal_at')
	if not cur or ARGV[4] > cur then
		redis.call('HSET', KEYS[2], 'refusal_at', ARGV[4], 'refusal_status', ARGV[5],
			'refusal_code', ARGV[6], 'refusal_message', ARGV[7])
	end
end
return 1`)

	// putEventScript stores an event record if the stored one is still
	// the one the caller read, scores it in the events sorted set, and
	// moves its id between per-trigger sorted sets. KEYS: event, events,
	// ARGV[5] sorted sets to leave, sorted sets to be in. ARGV: SHA-1
	// (hex) of the JSON read, "" if none was stored; JSON, event id,
	// score, number of sets to leave, member of events. Returns 1 when
	// written, 0 when the stored record changed.
	putEventScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local sum = ''
if cur then sum = redis.sha1hex(cur) end
if sum ~= ARGV[1] then return 0 end
local leave = tonumber(ARGV[5])
for i = 3, 2 + leave do redis.call('ZREM', KEYS[i], ARGV[3]) end
for i = 3 + leave, #KEYS do redis.call('ZADD', KEYS[i], ARGV[4], ARGV[3]) end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[6])
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

	// pruneRecordScript deletes a record if the stored one is still the
	// one the caller read, and removes it from sorted sets. KEYS: record,
	// sorted sets. ARGV: SHA-1 (hex) of the JSON read, "" for a record
	// already gone (whose stale members are removed); then the record's
	// member of each sorted set, in order. Returns 1 when deleted (or
	// removed), 0 when the stored record changed.
	pruneRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local sum = ''
if cur then sum = redis.sha1hex(cur) end
if sum ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[i]) end
return 1`)

	// putCursorScript stores a cursor if the stored version (0 when none
	// is stored) is the expected one. KEYS: cursor. ARGV: expected
	// version, JSON. Returns 1 when written, 0 on a version mismatch.
	putCursorScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local v = 0
if cur then v = cjson.decode(cur).version end
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1`)
)

// sameHookKeyLua defines sameHookKey(h, i): whether the decoded hook h has
// the key ARGV[i..i+4] (tenant, account, connector, scope, target). An
// empty account is left out of the JSON.
const sameHookKeyLua = `
local function sameHookKey(h, i)
	return h.tenant_id == ARGV[i] and (h.account_id or '') == ARGV[i+1] and h.connector == ARGV[i+2]
		and h.scope == ARGV[i+3] and h.target == ARGV[i+4]
end
`

// Key names of the dispatcher's records.

func (s *Store) agentKey(id string) string        { return s.prefix + "agent:" + id }
func (s *Store) agentsKey(tenant string) string   { return s.prefix + "agents:" + tenant }
func (s *Store) triggerKey(id string) string      { return s.prefix + "trigger:" + id }
func (s *Store) triggersKey(tenant string) string { return s.prefix + "triggers:" + tenant }
func (s *Store) allTriggersKey() string           { return s.prefix + "triggers" }
func (s *Store) hookKey(id string) string         { return s.prefix + "hook:" + id }
func (s *Store) hooksKey(tenant string) string    { return s.prefix + "hooks:" + tenant }
func (s *Store) allHooksKey() string              { return s.prefix + "hooks" }
func (s *Store) hookActivityKey(id string) string { return s.prefix + "hook-activity:" + id }
func (s *Store) runKey(id string) string          { return s.prefix + "run:" + id }
func (s *Store) runsKey(tenant string) string     { return s.prefix + "runs:" + tenant }
func (s *Store) allRunsKey() string               { return s.prefix + "runs" }
func (s *Store) triggerRunsKey(trigger string) string {
	return s.prefix + "trigger-runs:" + trigger
}
func (s *Store) agentRunsKey(agent string) string { return s.prefix + "agent-runs:" + agent }
func (s *Store) eventRunsKey(tenant, event string) string {
	return s.prefix + "event-runs:" + tenant + ":" + event
}
func (s *Store) eventKey(tenant, event string) string {
	return s.eventMemberKey(eventMember(tenant, event))
}
func (s *Store) eventMemberKey(member string) string { return s.prefix + "event:" + member }
func (s *Store) allEventsKey() string                { return s.prefix + "events" }
func (s *Store) eventsIndexedKey() string            { return s.prefix + "events-indexed" }
func (s *Store) triggerEventsKey(tenant, trigger string) string {
	return s.prefix + "trigger-events:" + tenant + ":" + trigger
}
func (s *Store) cursorKey(key string) string { return s.prefix + "cursor:" + key }

// eventMember is an event record's member of the events sorted set: its
// key without the prefix and "event:". Records that are stored have
// distinct keys, so they have distinct members, and a member names its
// record's key.
func eventMember(tenant, event string) string { return tenant + ":" + event }
func (s *Store) hookKeyKey(k store.HookKey) string {
	return s.prefix + "hook-key:" + k.TenantID + ":" + k.AccountID + ":" + k.Connector + ":" + string(k.Scope) + ":" + k.Target
}

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
	// takes it); otherwise from the highest score down.
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
		if sc.oldest {
			zs, err = rdb.ZRangeByScoreWithScores(ctx, sc.zkey, &redis.ZRangeBy{Min: "-inf", Max: sc.max, Offset: int64(start), Count: int64(page + 1)}).Result()
		} else {
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
// whose ids the sorted set zkey holds, newest first as order sorts them
// (see scanSorted).
func newestFirst[T any](ctx context.Context, rdb *redis.Client, zkey string, recordKey func(id string) string,
	keep func(T) bool, order func(a, b T) int, limit int) ([]T, error) {
	found, _, err := scanSorted(ctx, rdb, sortedScan[T]{zkey: zkey, recordKey: recordKey, keep: keep, order: order, limit: limit})
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

// Agents.

// CreateAgent stores a new agent with Version 1; store.ErrConflict if the
// id exists, in any tenant (agent ids are global: runs are published to
// agents.<agent-id>.runs).
func (s *Store) CreateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := store.RequireIDs("redisstore: create agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	store.Stamp(&a.CreatedAt, &a.UpdatedAt, s.now())
	a.Version = 1
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent: %w", err)
	}
	// KEYS: agent, agents:{tenant}. ARGV: JSON, id, score.
	if err := createResult(createRecordScript.Run(ctx, s.rdb, []string{s.agentKey(a.ID), s.agentsKey(a.TenantID)}, v, a.ID, score(a.CreatedAt)).Int()); err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: create agent %s: %w", a.ID, err)
	}
	return a, nil
}

// GetAgent returns the tenant's agent, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	var a store.Agent
	err := s.getJSON(ctx, s.agentKey(id), &a)
	if err == nil && (a.TenantID != tenantID || a.ID != id) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: get agent %s: %w", id, err)
	}
	return a, nil
}

// FindAgent returns the agent with id, whatever its tenant, or
// store.ErrNotFound.
func (s *Store) FindAgent(ctx context.Context, id string) (store.Agent, error) {
	var a store.Agent
	err := s.getJSON(ctx, s.agentKey(id), &a)
	if err == nil && a.ID != id {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: find agent %s: %w", id, err)
	}
	return a, nil
}

// ListAgents returns the tenant's agents, oldest first (by CreatedAt, then
// id).
func (s *Store) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	as, err := listSet(ctx, s, s.agentsKey(tenantID), s.agentKey, func(a store.Agent) bool { return a.TenantID == tenantID })
	if err != nil {
		return nil, fmt.Errorf("redisstore: list agents: %w", err)
	}
	store.SortOldestFirst(as, func(a store.Agent) time.Time { return a.CreatedAt }, func(a store.Agent) string { return a.ID })
	return as, nil
}

// UpdateAgent replaces the agent if its stored Version equals a.Version,
// and returns it with Version increased; store.ErrConflict if another
// write came first, store.ErrNotFound if the tenant has no such agent.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := store.RequireIDs("redisstore: update agent", "id", a.ID, "tenant id", a.TenantID); err != nil {
		return store.Agent{}, err
	}
	want := a.Version
	a.Version++
	v, err := json.Marshal(a)
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: update agent: %w", err)
	}
	// KEYS: agent, agents:{tenant} (to refresh the score).
	// ARGV: tenant, expected version, JSON, id, score, 0 sets to leave.
	err = updateResult(updateRecordScript.Run(ctx, s.rdb, []string{s.agentKey(a.ID), s.agentsKey(a.TenantID)},
		a.TenantID, want, v, a.ID, score(a.CreatedAt), 0).Int())
	if err != nil {
		return store.Agent{}, fmt.Errorf("redisstore: update agent %s: %w", a.ID, err)
	}
	return a, nil
}

// DeleteAgent deletes the tenant's agent; store.ErrNotFound if absent.
func (s *Store) DeleteAgent(ctx context.Context, tenantID, id string) error {
	// KEYS: agent, agents:{tenant}. ARGV: tenant, id.
	n, err := deleteRecordScript.Run(ctx, s.rdb, []string{s.agentKey(id), s.agentsKey(tenantID)}, tenantID, id).Int()
	if err == nil && n != 1 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete agent %s: %w", id, err)
	}
	return nil
}

// Triggers.

// CreateTrigger stores a new trigger with Version 1; store.ErrConflict if
// the id exists, in any tenant (trigger ids are global: run ids are
// derived from them).
func (s *Store) CreateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := store.RequireIDs("redisstore: create trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	store.Stamp(&t.CreatedAt, &t.UpdatedAt, s.now())
	t.Version = 1
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: create trigger: %w", err)
	}
	// KEYS: trigger, triggers:{tenant}, triggers. ARGV: JSON, id, score.
	keys := []string{s.triggerKey(t.ID), s.triggersKey(t.TenantID), s.allTriggersKey()}
	if err := createResult(createRecordScript.Run(ctx, s.rdb, keys, v, t.ID, score(t.CreatedAt)).Int()); err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: create trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// GetTrigger returns the tenant's trigger, or store.ErrNotFound (also for
// another tenant's).
func (s *Store) GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error) {
	var t store.Trigger
	err := s.getJSON(ctx, s.triggerKey(id), &t)
	if err == nil && (t.TenantID != tenantID || t.ID != id) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: get trigger %s: %w", id, err)
	}
	return t, nil
}

// ListTriggers returns the triggers f selects (every tenant's when
// f.TenantID is empty), oldest first (by CreatedAt, then id).
func (s *Store) ListTriggers(ctx context.Context, f store.TriggerFilter) ([]store.Trigger, error) {
	zkey := s.allTriggersKey()
	if f.TenantID != "" {
		zkey = s.triggersKey(f.TenantID)
	}
	ts, err := listSet(ctx, s, zkey, s.triggerKey, f.Match)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list triggers: %w", err)
	}
	store.SortOldestFirst(ts, func(t store.Trigger) time.Time { return t.CreatedAt }, func(t store.Trigger) string { return t.ID })
	return ts, nil
}

// UpdateTrigger replaces the trigger if its stored Version equals
// t.Version, and returns it with Version increased; store.ErrConflict if
// another write came first, store.ErrNotFound if the tenant has no such
// trigger.
func (s *Store) UpdateTrigger(ctx context.Context, t store.Trigger) (store.Trigger, error) {
	if err := store.RequireIDs("redisstore: update trigger", "id", t.ID, "tenant id", t.TenantID); err != nil {
		return store.Trigger{}, err
	}
	want := t.Version
	t.Version++
	v, err := json.Marshal(t)
	if err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: update trigger: %w", err)
	}
	// KEYS: trigger, triggers:{tenant}, triggers (to refresh the score).
	// ARGV: tenant, expected version, JSON, id, score, 0 sets to leave.
	keys := []string{s.triggerKey(t.ID), s.triggersKey(t.TenantID), s.allTriggersKey()}
	if err := updateResult(updateRecordScript.Run(ctx, s.rdb, keys, t.TenantID, want, v, t.ID, score(t.CreatedAt), 0).Int()); err != nil {
		return store.Trigger{}, fmt.Errorf("redisstore: update trigger %s: %w", t.ID, err)
	}
	return t, nil
}

// DeleteTrigger deletes the tenant's trigger; store.ErrNotFound if absent.
func (s *Store) DeleteTrigger(ctx context.Context, tenantID, id string) error {
	// KEYS: trigger, triggers:{tenant}, triggers. ARGV: tenant, id.
	keys := []string{s.triggerKey(id), s.triggersKey(tenantID), s.allTriggersKey()}
	n, err := deleteRecordScript.Run(ctx, s.rdb, keys, tenantID, id).Int()
	if err == nil && n != 1 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: delete trigger %s: %w", id, err)
	}
	return nil
}

// Hooks.

// hookKeyArgs returns a hook key as script arguments.
func hookKeyArgs(k store.HookKey) []any {
	return []any{k.TenantID, k.AccountID, k.Connector, string(k.Scope), k.Target}
}

// CreateHook stores a new hook with Version 1; store.ErrConflict if its id
// or its Key is taken.
func (s *Store) CreateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	if err := store.ValidateHook("redisstore: create hook", h); err != nil {
		return store.Hook{}, err
	}
	store.Stamp(&h.CreatedAt, &h.UpdatedAt, s.now())
	h.Version = 1
	v, err := json.Marshal(h)
	if err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: create hook: %w", err)
	}
	// KEYS: hook, hook-key, hooks:{tenant}, hooks. ARGV: JSON, id, score.
	keys := []string{s.hookKey(h.ID), s.hookKeyKey(h.Key()), s.hooksKey(h.TenantID), s.allHooksKey()}
	if err := createResult(createUniqueScript.Run(ctx, s.rdb, keys, v, h.ID, score(h.CreatedAt)).Int()); err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: create hook %s: %w", h.ID, err)
	}
	return h, nil
}

// getHook reads a hook by id; store.ErrNotFound if absent.
func (s *Store) getHook(ctx context.Context, id string) (store.Hook, error) {
	var h store.Hook
	if err := s.getJSON(ctx, s.hookKey(id), &h); err != nil {
		return store.Hook{}, err
	}
	if h.ID != id {
		return store.Hook{}, store.ErrNotFound
	}
	return h, nil
}

// GetHook returns a hook by id, whatever its tenant, or store.ErrNotFound.
func (s *Store) GetHook(ctx context.Context, id string) (store.Hook, error) {
	h, err := s.getHook(ctx, id)
	if err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: get hook %s: %w", id, err)
	}
	return h, nil
}

// FindHook returns the hook with this key, or store.ErrNotFound.
func (s *Store) FindHook(ctx context.Context, k store.HookKey) (store.Hook, error) {
	id, err := s.rdb.Get(ctx, s.hookKeyKey(k)).Result()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	var h store.Hook
	if err == nil {
		h, err = s.getHook(ctx, id)
	}
	if err == nil && h.Key() != k {
		err = store.ErrNotFound // ':' in a part made two keys one
	}
	if err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: find hook %s %s %s: %w", k.Connector, k.Scope, k.Target, err)
	}
	return h, nil
}

// ListHooks returns the tenant's hooks (every tenant's for ""), oldest
// first (by CreatedAt, then id).
func (s *Store) ListHooks(ctx context.Context, tenantID string) ([]store.Hook, error) {
	zkey := s.allHooksKey()
	if tenantID != "" {
		zkey = s.hooksKey(tenantID)
	}
	hs, err := listSet(ctx, s, zkey, s.hookKey, func(h store.Hook) bool { return tenantID == "" || h.TenantID == tenantID })
	if err != nil {
		return nil, fmt.Errorf("redisstore: list hooks: %w", err)
	}
	store.SortOldestFirst(hs, func(h store.Hook) time.Time { return h.CreatedAt }, func(h store.Hook) string { return h.ID })
	return hs, nil
}

// UpdateHook replaces the hook if its stored Version equals h.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first or if h's Key differs from the stored one (the Key cannot
// change), store.ErrNotFound if it does not exist.
func (s *Store) UpdateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	if err := store.ValidateHook("redisstore: update hook", h); err != nil {
		return store.Hook{}, err
	}
	want := h.Version
	h.Version++
	v, err := json.Marshal(h)
	if err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: update hook: %w", err)
	}
	// KEYS: hook, hooks:{tenant}, hooks.
	// ARGV: expected version, JSON, id, score, key (5 parts).
	keys := []string{s.hookKey(h.ID), s.hooksKey(h.TenantID), s.allHooksKey()}
	args := append([]any{want, v, h.ID, score(h.CreatedAt)}, hookKeyArgs(h.Key())...)
	n, err := updateHookScript.Run(ctx, s.rdb, keys, args...).Int()
	if err == nil && n == -2 {
		err = fmt.Errorf("the key (tenant, account, connector, scope, target) cannot change: %w", store.ErrConflict)
	} else {
		err = updateResult(n, err)
	}
	if err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: update hook %s: %w", h.ID, err)
	}
	return h, nil
}

// DeleteHook deletes the hook, which frees its Key; store.ErrNotFound if
// absent.
func (s *Store) DeleteHook(ctx context.Context, id string) error {
	// The script must name the hook's key and tenant set, so read the hook
	// first; the script checks that the key is still the one read (the
	// hook may have been deleted and created again in between).
	for {
		h, err := s.getHook(ctx, id)
		if err != nil {
			return fmt.Errorf("redisstore: delete hook %s: %w", id, err)
		}
		// KEYS: hook, hook-key, hooks:{tenant}, hooks, hook-activity.
		// ARGV: id, key (5 parts).
		keys := []string{s.hookKey(id), s.hookKeyKey(h.Key()), s.hooksKey(h.TenantID), s.allHooksKey(), s.hookActivityKey(id)}
		n, err := deleteHookScript.Run(ctx, s.rdb, keys, append([]any{id}, hookKeyArgs(h.Key())...)...).Int()
		switch {
		case err != nil:
			return fmt.Errorf("redisstore: delete hook %s: %w", id, err)
		case n == 1:
			return nil
		case n == 0:
			return fmt.Errorf("redisstore: delete hook %s: %w", id, store.ErrNotFound)
		}
	}
}

// Hook activity. The hash at hook-activity:{id} holds a hook's
// store.HookActivity; addHookActivityScript writes it only while the hook
// exists, and deleteHookScript deletes it with the hook. Its fields:
//
//	accepted_at      LastAcceptedAt (activityTime); absent for none
//	refused          Refused (integer, HINCRBY)
//	refusal_at       LastRefusal.At (activityTime); absent for none
//	refusal_status   LastRefusal.Status (integer)
//	refusal_code     LastRefusal.Code
//	refusal_message  LastRefusal.Message
//
// The refusal fields are written together.

// activityTimeLen is the length of an activityTime.
const activityTimeLen = 29

// activityTime encodes t as 29 decimal digits whose string order is time
// order, to the nanosecond and whatever the zone, over the whole range of
// time.Time (UnixNano would not reach the zero time): the Unix seconds
// with the sign bit flipped, zero-padded to 20 digits, then the
// nanoseconds, zero-padded to 9.
func activityTime(t time.Time) string {
	return fmt.Sprintf("%020d%09d", uint64(t.Unix())^(1<<63), t.Nanosecond())
}

// parseActivityTime decodes an activityTime, in UTC.
func parseActivityTime(v string) (time.Time, error) {
	if len(v) != activityTimeLen {
		return time.Time{}, fmt.Errorf("bad activity time %q", v)
	}
	sec, err := strconv.ParseUint(v[:20], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad activity time %q: %w", v, err)
	}
	nsec, err := strconv.ParseInt(v[20:], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad activity time %q: %w", v, err)
	}
	return time.Unix(int64(sec^(1<<63)), nsec).UTC(), nil
}

// AddHookActivity merges a into the activity of hook id, in one script
// that also checks the hook exists: the later LastAcceptedAt wins (a zero
// one is none), Refused adds up, and a.LastRefusal replaces the stored
// one if there is none or its At is later (a nil one changes nothing).
// store.ErrNotFound if the hook is absent.
func (s *Store) AddHookActivity(ctx context.Context, id string, a store.HookActivity) error {
	accepted := ""
	if !a.LastAcceptedAt.IsZero() {
		accepted = activityTime(a.LastAcceptedAt)
	}
	// ARGV: accepted, refused, has refusal, at, status, code, message.
	args := []any{accepted, a.Refused, "0", "", 0, "", ""}
	if r := a.LastRefusal; r != nil {
		args[2], args[3], args[4], args[5], args[6] = "1", activityTime(r.At), r.Status, r.Code, r.Message
	}
	n, err := addHookActivityScript.Run(ctx, s.rdb, []string{s.hookKey(id), s.hookActivityKey(id)}, args...).Int()
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("redisstore: add hook activity %s: %w", id, err)
	}
	return nil
}

// GetHookActivity returns the activity of hook id: a zero
// store.HookActivity when none was added (or the hook is absent).
func (s *Store) GetHookActivity(ctx context.Context, id string) (store.HookActivity, error) {
	m, err := s.rdb.HGetAll(ctx, s.hookActivityKey(id)).Result()
	if err != nil {
		return store.HookActivity{}, fmt.Errorf("redisstore: get hook activity %s: %w", id, err)
	}
	a, err := decodeHookActivity(m)
	if err != nil {
		return store.HookActivity{}, fmt.Errorf("redisstore: get hook activity %s: %w", id, err)
	}
	return a, nil
}

// decodeHookActivity decodes the fields of a hook-activity hash.
func decodeHookActivity(m map[string]string) (store.HookActivity, error) {
	var a store.HookActivity
	var err error
	if v, ok := m["accepted_at"]; ok {
		if a.LastAcceptedAt, err = parseActivityTime(v); err != nil {
			return store.HookActivity{}, err
		}
	}
	if v, ok := m["refused"]; ok {
		if a.Refused, err = strconv.ParseInt(v, 10, 64); err != nil {
			return store.HookActivity{}, fmt.Errorf("bad refused %q: %w", v, err)
		}
	}
	if v, ok := m["refusal_at"]; ok {
		r := &store.HookRefusal{Code: m["refusal_code"], Message: m["refusal_message"]}
		if r.At, err = parseActivityTime(v); err != nil {
			return store.HookActivity{}, err
		}
		if r.Status, err = strconv.Atoi(m["refusal_status"]); err != nil {
			return store.HookActivity{}, fmt.Errorf("bad refusal status %q: %w", m["refusal_status"], err)
		}
		a.LastRefusal = r
	}
	return a, nil
}

// Runs.

// runSets returns the sorted sets that list r: every run is in runs and
// runs:{tenant}; runs with a trigger, agent or event id are in
// trigger-runs, agent-runs or event-runs too.
func (s *Store) runSets(r store.Run) []string {
	sets := []string{s.allRunsKey(), s.runsKey(r.TenantID)}
	if r.TriggerID != "" {
		sets = append(sets, s.triggerRunsKey(r.TriggerID))
	}
	if r.AgentID != "" {
		sets = append(sets, s.agentRunsKey(r.AgentID))
	}
	if r.EventID != "" {
		sets = append(sets, s.eventRunsKey(r.TenantID, r.EventID))
	}
	return sets
}

// newerRun orders runs newest first, by CreatedAt then id.
func newerRun(a, b store.Run) int {
	return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
}

// CreateRun stores a new run with Version 1; store.ErrConflict if the id
// exists, in any tenant: the run was already claimed by someone.
func (s *Store) CreateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := store.RequireIDs("redisstore: create run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	store.Stamp(&r.CreatedAt, &r.UpdatedAt, s.now())
	r.Version = 1
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("redisstore: create run: %w", err)
	}
	// KEYS: run, its sorted sets. ARGV: JSON, id, score.
	keys := append([]string{s.runKey(r.ID)}, s.runSets(r)...)
	if err := createResult(createRecordScript.Run(ctx, s.rdb, keys, v, r.ID, score(r.CreatedAt)).Int()); err != nil {
		return store.Run{}, fmt.Errorf("redisstore: create run %s: %w", r.ID, err)
	}
	return r, nil
}

// getRun reads the tenant's run (any tenant's for ""); store.ErrNotFound
// if absent or another tenant's.
func (s *Store) getRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	var r store.Run
	if err := s.getJSON(ctx, s.runKey(id), &r); err != nil {
		return store.Run{}, err
	}
	if r.ID != id || (tenantID != "" && r.TenantID != tenantID) {
		return store.Run{}, store.ErrNotFound
	}
	return r, nil
}

// GetRun returns the tenant's run (any tenant's for ""), or
// store.ErrNotFound.
func (s *Store) GetRun(ctx context.Context, tenantID, id string) (store.Run, error) {
	r, err := s.getRun(ctx, tenantID, id)
	if err != nil {
		return store.Run{}, fmt.Errorf("redisstore: get run %s: %w", id, err)
	}
	return r, nil
}

// UpdateRun replaces the run if its stored Version equals r.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first, store.ErrNotFound if the tenant has no such run. The sorted
// sets follow the new run's trigger, agent, event and CreatedAt.
func (s *Store) UpdateRun(ctx context.Context, r store.Run) (store.Run, error) {
	if err := store.RequireIDs("redisstore: update run", "id", r.ID, "tenant id", r.TenantID); err != nil {
		return store.Run{}, err
	}
	// The script must name the sets the run leaves, so read it first; the
	// script's version check makes that read safe: the stored run is
	// still the one read. A run that PruneRuns deleted since the read is
	// missing, which the script answers with -1 (store.ErrNotFound).
	cur, err := s.getRun(ctx, r.TenantID, r.ID)
	if err != nil {
		return store.Run{}, fmt.Errorf("redisstore: update run %s: %w", r.ID, err)
	}
	if cur.Version != r.Version {
		return store.Run{}, fmt.Errorf("redisstore: update run %s: %w", r.ID, store.ErrConflict)
	}
	want := r.Version
	r.Version++
	v, err := json.Marshal(r)
	if err != nil {
		return store.Run{}, fmt.Errorf("redisstore: update run: %w", err)
	}
	sets := s.runSets(r)
	leave := leaving(s.runSets(cur), sets)
	// KEYS: run, sets to leave, sets to be in.
	// ARGV: tenant, expected version, JSON, id, score, number of sets to leave.
	keys := slices.Concat([]string{s.runKey(r.ID)}, leave, sets)
	if err := updateResult(updateRecordScript.Run(ctx, s.rdb, keys, r.TenantID, want, v, r.ID, score(r.CreatedAt), len(leave)).Int()); err != nil {
		return store.Run{}, fmt.Errorf("redisstore: update run %s: %w", r.ID, err)
	}
	return r, nil
}

// ListRuns returns the runs f selects, newest first (by CreatedAt, then
// id), at most f.Limit (100 if not positive). It reads the most selective
// sorted set f allows (the tenant's event, the trigger, the agent, the
// tenant, or every run) and checks the rest, the status included, on the
// runs it reads.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	var zkey string
	switch {
	case f.TenantID != "" && f.EventID != "":
		zkey = s.eventRunsKey(f.TenantID, f.EventID)
	case f.TriggerID != "":
		zkey = s.triggerRunsKey(f.TriggerID)
	case f.AgentID != "":
		zkey = s.agentRunsKey(f.AgentID)
	case f.TenantID != "":
		zkey = s.runsKey(f.TenantID)
	default:
		zkey = s.allRunsKey()
	}
	rs, err := newestFirst(ctx, s.rdb, zkey, s.runKey, f.Match, newerRun, store.ListLimit(f.Limit))
	if err != nil {
		return nil, fmt.Errorf("redisstore: list runs: %w", err)
	}
	return rs, nil
}

// PruneRuns deletes the runs of every tenant that finished before before
// (see store.Run.FinishedBefore), with their members of every sorted set,
// oldest CreatedAt first (then least id), at most limit
// (store.DefaultPruneLimit if not positive), and returns how many it
// deleted. It reads runs from the lowest score up to before's, past the
// runs that have not finished, and deletes each with a script that checks
// the stored run is still the one read: a run updated meanwhile is left
// for a later call. It also removes the members of runs that are gone.
func (s *Store) PruneRuns(ctx context.Context, before time.Time, limit int) (int, error) {
	keep := func(r store.Run) bool { return r.FinishedBefore(before) }
	older := func(a, b store.Run) int { return newerRun(b, a) }
	sets := func(r sortedRecord[store.Run]) (keys, members []string) {
		keys = s.runSets(r.v)
		for range keys {
			members = append(members, r.member)
		}
		return keys, members
	}
	n, err := pruneOldest(ctx, s.rdb, s.allRunsKey(), s.runKey, keep, older, before, store.PruneLimit(limit), sets)
	if err != nil {
		return n, fmt.Errorf("redisstore: prune runs: %w", err)
	}
	return n, nil
}

// Events.

// eventSets returns the per-trigger sorted sets that list e, one per
// trigger with an outcome.
func (s *Store) eventSets(e store.EventRecord) []string {
	var sets []string
	for _, tr := range e.TriggerIDs() {
		sets = append(sets, s.triggerEventsKey(e.TenantID, tr))
	}
	return sets
}

// PutEvent stores or replaces the tenant's record of an event, scores it
// in the events sorted set, and moves it between the per-trigger sorted
// sets: a trigger no longer among the outcomes no longer lists it. A zero
// DispatchedAt is stored as the time of the write.
func (s *Store) PutEvent(ctx context.Context, e store.EventRecord) error {
	if err := store.RequireIDs("redisstore: put event", "tenant id", e.TenantID, "event id", e.EventID); err != nil {
		return err
	}
	if e.DispatchedAt.IsZero() {
		e.DispatchedAt = s.now()
	}
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("redisstore: put event: %w", err)
	}
	key, sets := s.eventKey(e.TenantID, e.EventID), s.eventSets(e)
	// The script must name the sets the record leaves, so read the stored
	// record first; the script writes only if it is still the one read,
	// and the read is tried again otherwise.
	for range maxPutEventTries {
		raw, err := s.rdb.Get(ctx, key).Result()
		sum := ""
		var leave []string
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return fmt.Errorf("redisstore: put event %s: %w", e.EventID, err)
		default:
			var old store.EventRecord
			if err := json.Unmarshal([]byte(raw), &old); err != nil {
				return fmt.Errorf("redisstore: put event %s: decode %s: %w", e.EventID, key, err)
			}
			if old.TenantID != e.TenantID || old.EventID != e.EventID {
				// ':' in an id made two keys one.
				return fmt.Errorf("redisstore: put event %s: %w", e.EventID, store.ErrConflict)
			}
			h := sha1.Sum([]byte(raw))
			sum = hex.EncodeToString(h[:])
			leave = leaving(s.eventSets(old), sets)
		}
		// KEYS: event, events, sets to leave, sets to be in. ARGV: SHA-1 of
		// the record read, JSON, event id, score, number of sets to leave,
		// member of events.
		keys := slices.Concat([]string{key, s.allEventsKey()}, leave, sets)
		n, err := putEventScript.Run(ctx, s.rdb, keys, sum, v, e.EventID, score(e.DispatchedAt), len(leave),
			eventMember(e.TenantID, e.EventID)).Int()
		if err != nil {
			return fmt.Errorf("redisstore: put event %s: %w", e.EventID, err)
		}
		if n == 1 {
			return nil
		}
	}
	return fmt.Errorf("redisstore: put event %s: the record kept changing (%d tries): %w", e.EventID, maxPutEventTries, store.ErrConflict)
}

// GetEvent returns the tenant's record of an event, or store.ErrNotFound.
func (s *Store) GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error) {
	var e store.EventRecord
	err := s.getJSON(ctx, s.eventKey(tenantID, eventID), &e)
	if err == nil && (e.TenantID != tenantID || e.EventID != eventID) {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.EventRecord{}, fmt.Errorf("redisstore: get event %s: %w", eventID, err)
	}
	return e, nil
}

// ListTriggerEvents returns the tenant's records that have an outcome for
// the trigger, newest DispatchedAt first (then greatest event id), at most
// limit (100 if not positive).
func (s *Store) ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]store.EventRecord, error) {
	recordKey := func(id string) string { return s.eventKey(tenantID, id) }
	keep := func(e store.EventRecord) bool { return e.TenantID == tenantID && e.HasOutcome(triggerID) }
	newer := func(a, b store.EventRecord) int {
		return cmp.Or(b.DispatchedAt.Compare(a.DispatchedAt), cmp.Compare(b.EventID, a.EventID))
	}
	es, err := newestFirst(ctx, s.rdb, s.triggerEventsKey(tenantID, triggerID), recordKey, keep, newer, store.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("redisstore: list trigger events %s: %w", triggerID, err)
	}
	return es, nil
}

// PruneEvents deletes the records of every tenant whose DispatchedAt is
// before before, with their members of every sorted set, oldest
// DispatchedAt first (then least tenant and event id), at most limit
// (store.DefaultPruneLimit if not positive), and returns how many it
// deleted. It reads the events sorted set from the lowest score up to
// before's and deletes each record with a script that checks it is still
// the one read: a record replaced meanwhile is left for a later call. It
// also removes the members of records that are gone. The first call of a
// Store adds the records written before the events set existed to it (see
// indexEvents).
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.indexEvents(ctx); err != nil {
		return 0, fmt.Errorf("redisstore: prune events: index records: %w", err)
	}
	keep := func(e store.EventRecord) bool { return e.DispatchedAt.Before(before) }
	older := func(a, b store.EventRecord) int {
		return cmp.Or(a.DispatchedAt.Compare(b.DispatchedAt), cmp.Compare(a.TenantID+"\x00"+a.EventID, b.TenantID+"\x00"+b.EventID))
	}
	// The events set lists a record as its member, the per-trigger sets
	// as its event id.
	sets := func(r sortedRecord[store.EventRecord]) (keys, members []string) {
		keys, members = []string{s.allEventsKey()}, []string{r.member}
		for _, k := range s.eventSets(r.v) {
			keys, members = append(keys, k), append(members, r.v.EventID)
		}
		return keys, members
	}
	n, err := pruneOldest(ctx, s.rdb, s.allEventsKey(), s.eventMemberKey, keep, older, before, store.PruneLimit(limit), sets)
	if err != nil {
		return n, fmt.Errorf("redisstore: prune events: %w", err)
	}
	return n, nil
}

// indexEvents adds the event records written before the events sorted set
// existed to it, unless the events-indexed marker says it was done: it
// SCANs the keys event:*, adds each record found (ZADD NX, so as not to
// undo the score of a PutEvent meanwhile), then sets the marker. Keys that
// are not this store's records (another store's, whose prefix starts with
// this one's) are left out. Stores doing it at once add the same members.
func (s *Store) indexEvents(ctx context.Context) error {
	return s.indexOnce(ctx, &s.eventsIndexed, s.eventsIndexedKey(), "event:*", s.indexEventKeys)
}

// indexEventKeys adds the event records at keys to the events sorted set,
// unless they are in it.
func (s *Store) indexEventKeys(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return err
	}
	var zs []redis.Z
	for i, val := range vals {
		raw, ok := val.(string)
		if !ok {
			continue // gone, or not a record
		}
		var e store.EventRecord
		if json.Unmarshal([]byte(raw), &e) != nil || keys[i] != s.eventKey(e.TenantID, e.EventID) {
			continue // not this store's record
		}
		zs = append(zs, redis.Z{Score: float64(e.DispatchedAt.UnixNano()), Member: eventMember(e.TenantID, e.EventID)})
	}
	if len(zs) == 0 {
		return nil
	}
	return s.rdb.ZAddNX(ctx, s.allEventsKey(), zs...).Err()
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

// Cursors.

// GetCursor returns the cursor, or one with Version 0 and no Value when
// none is stored.
func (s *Store) GetCursor(ctx context.Context, key string) (store.Cursor, error) {
	var c store.Cursor
	err := s.getJSON(ctx, s.cursorKey(key), &c)
	if errors.Is(err, store.ErrNotFound) {
		return store.Cursor{Key: key}, nil
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: get cursor %s: %w", key, err)
	}
	return c, nil
}

// PutCursor stores c if the stored Version equals c.Version (0: none is
// stored), store.ErrConflict otherwise, and returns it with Version
// increased. A zero UpdatedAt is stored as the time of the write.
func (s *Store) PutCursor(ctx context.Context, c store.Cursor) (store.Cursor, error) {
	if err := store.RequireIDs("redisstore: put cursor", "key", c.Key); err != nil {
		return store.Cursor{}, err
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = s.now()
	}
	want := c.Version
	c.Version++
	v, err := json.Marshal(c)
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: put cursor: %w", err)
	}
	// KEYS: cursor. ARGV: expected version, JSON.
	n, err := putCursorScript.Run(ctx, s.rdb, []string{s.cursorKey(c.Key)}, want, v).Int()
	if err == nil && n != 1 {
		err = store.ErrConflict
	}
	if err != nil {
		return store.Cursor{}, fmt.Errorf("redisstore: put cursor %s: %w", c.Key, err)
	}
	return c, nil
}
