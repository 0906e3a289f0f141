package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/internal/record"
)

// updateHookScript replaces a hook if its version is the expected one
// and its key is unchanged. KEYS: hook, hooks:{tenant}, hooks. ARGV:
// expected version, JSON, id, score, then the key: tenant, account,
// connector, scope, target. Returns 1 when written, 0 on a version
// mismatch, -1 when the hook does not exist, -2 when the key differs.
var updateHookScript = redis.NewScript(sameHookKeyLua + `
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
var deleteHookScript = redis.NewScript(sameHookKeyLua + `
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
var addHookActivityScript = redis.NewScript(`
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

// sameHookKeyLua defines sameHookKey(h, i): whether the decoded hook h has
// the key ARGV[i..i+4] (tenant, account, connector, scope, target). An
// empty account is left out of the JSON.
const sameHookKeyLua = `
local function sameHookKey(h, i)
	return h.tenant_id == ARGV[i] and (h.account_id or '') == ARGV[i+1] and h.connector == ARGV[i+2]
		and h.scope == ARGV[i+3] and h.target == ARGV[i+4]
end
`

// Key names (the package doc lists them).
func (s *Store) hookKey(id string) string         { return s.prefix + "hook:" + id }
func (s *Store) hooksKey(tenant string) string    { return s.prefix + "hooks:" + tenant }
func (s *Store) allHooksKey() string              { return s.prefix + "hooks" }
func (s *Store) hookActivityKey(id string) string { return s.prefix + "hook-activity:" + id }
func (s *Store) hookKeyKey(k store.HookKey) string {
	return s.prefix + "hook-key:" + k.TenantID + ":" + k.AccountID + ":" + k.Connector + ":" + string(k.Scope) + ":" + k.Target
}

// hookKeyArgs returns a hook key as script arguments.
func hookKeyArgs(k store.HookKey) []any {
	return []any{k.TenantID, k.AccountID, k.Connector, string(k.Scope), k.Target}
}

// hooks keeps hooks: by id, whatever the tenant (ingest knows only the id
// in the URL), listed per tenant by hooks:{tenant} and all together by
// hooks, and found by their Key at hook-key, which no two hooks share.
func (s *Store) hooks() kind[store.Hook] {
	return kind[store.Hook]{
		s:          s,
		what:       "hook",
		key:        func(_, id string) string { return s.hookKey(id) },
		fields:     record.OfHook,
		reaches:    record.AnyTenant,
		tenantSets: func(tenant string) []string { return []string{s.hooksKey(tenant), s.allHooksKey()} },
		unique:     func(h store.Hook) string { return s.hookKeyKey(h.Key()) },
	}
}

// CreateHook stores a new hook with Version 1; store.ErrConflict if its id
// or its Key is taken.
func (s *Store) CreateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	return s.hooks().create(ctx, h)
}

// GetHook returns a hook by id, whatever its tenant, or store.ErrNotFound.
func (s *Store) GetHook(ctx context.Context, id string) (store.Hook, error) {
	return s.hooks().get(ctx, "get", "", id)
}

// FindHook returns the hook with this key, or store.ErrNotFound.
func (s *Store) FindHook(ctx context.Context, k store.HookKey) (store.Hook, error) {
	id, err := s.rdb.Get(ctx, s.hookKeyKey(k)).Result()
	if errors.Is(err, redis.Nil) {
		err = store.ErrNotFound
	}
	var h store.Hook
	if err == nil {
		h, err = s.hooks().read(ctx, "", id)
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
	return s.hooks().list(ctx, tenantID, zkey, func(h store.Hook) bool { return tenantID == "" || h.TenantID == tenantID })
}

// UpdateHook replaces the hook if its stored Version equals h.Version, and
// returns it with Version increased; store.ErrConflict if another write
// came first or if h's Key differs from the stored one (the Key cannot
// change), store.ErrNotFound if it does not exist.
func (s *Store) UpdateHook(ctx context.Context, h store.Hook) (store.Hook, error) {
	if err := h.Validate(); err != nil {
		return store.Hook{}, fmt.Errorf("redisstore: update hook: %w", err)
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
	// hook may have been deleted and created again in between). Each try
	// that loses that race means another writer succeeded; a few tries are
	// plenty, and a bound keeps a pathological writer from pinning this
	// one.
	const tries = 10
	for range tries {
		h, err := s.hooks().read(ctx, "", id)
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
	return fmt.Errorf("redisstore: delete hook %s: its key changed under %d tries in a row: %w", id, tries, store.ErrConflict)
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
