package redisstore

import (
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/store"
)

// updateRecordScript replaces a tenant's record if its version field
// is the expected one, removes its id from the sorted sets it leaves
// and adds it (with its new score) to those it is in. KEYS: record,
// ARGV[6] sorted sets to leave, sorted sets to be in. ARGV: tenant,
// expected version, JSON, id, score, number of sets to leave. Returns
// 1 when written, 0 on a version mismatch, -1 when the record does not
// exist or is another tenant's.
var updateRecordScript = redis.NewScript(`
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
var deleteRecordScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or cjson.decode(cur).tenant_id ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[2]) end
return 1`)

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
