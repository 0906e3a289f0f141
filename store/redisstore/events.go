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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// maxPutEventTries bounds PutEvent's optimistic retries under contention.
const maxPutEventTries = 100

// putEventScript stores an event record if the stored one is still
// the one the caller read, scores it in the events sorted set, and
// moves its id between per-trigger sorted sets. KEYS: event, events,
// ARGV[5] sorted sets to leave, sorted sets to be in. ARGV: SHA-1
// (hex) of the JSON read, "" if none was stored; JSON, event id,
// score, number of sets to leave, member of events. Returns 1 when
// written, 0 when the stored record changed.
var putEventScript = redis.NewScript(`
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

// Key names (the package doc lists them).
func (s *Store) eventKey(tenant, event string) string {
	return s.eventMemberKey(eventMember(tenant, event))
}
func (s *Store) eventMemberKey(member string) string { return s.prefix + "event:" + member }
func (s *Store) allEventsKey() string                { return s.prefix + "events" }
func (s *Store) eventsIndexedKey() string            { return s.prefix + "events-indexed" }
func (s *Store) triggerEventsKey(tenant, trigger string) string {
	return s.prefix + "trigger-events:" + tenant + ":" + trigger
}

// eventMember is an event record's member of the events sorted set: its
// key without the prefix and "event:". Records that are stored have
// distinct keys, so they have distinct members, and a member names its
// record's key.
func eventMember(tenant, event string) string { return tenant + ":" + event }

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
	if err := e.Validate(); err != nil {
		return fmt.Errorf("redisstore: put event: %w", err)
	}
	e = e.ForPut(s.now())
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
	es, err := newestFirst(ctx, s.rdb, s.triggerEventsKey(tenantID, triggerID), "", recordKey, keep, newer, store.ListLimit(limit))
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
