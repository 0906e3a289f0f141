package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normCursor(x store.Cursor) store.Cursor {
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.Value = normJSON(x.Value)
	return x
}

func testCursorPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	got, err := s.GetCursor(ctx, "poll:acc1:octo/hello")
	must(t, "GetCursor unknown", err)
	same(t, "GetCursor unknown", normCursor, got, store.Cursor{Key: "poll:acc1:octo/hello"})
	if got.Value != nil || got.Version != 0 || !got.UpdatedAt.IsZero() {
		t.Fatalf("GetCursor unknown = %+v, want only the key", got)
	}

	c := store.Cursor{Key: "poll:acc1:octo/hello", Value: json.RawMessage(`{"etag": "W/\"abc\"", "newest": 12, "html": "<&>"}`), UpdatedAt: base}
	put, err := s.PutCursor(ctx, c)
	must(t, "PutCursor from version 0", err)
	want := c
	want.Version = 1
	same(t, "PutCursor result", normCursor, put, want)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor", err)
	same(t, "GetCursor", normCursor, got, want)
	got.Value[0] = ' '
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor again", err)
	same(t, "GetCursor after changing the result of the first", normCursor, got, want)

	_, err = s.PutCursor(ctx, c) // Version 0, but one is stored
	wantErr(t, "PutCursor from version 0 of a stored cursor", err, store.ErrConflict)

	next := put
	next.Value = json.RawMessage(`{"etag":"W/\"def\"","newest":13}`)
	next.UpdatedAt = base.Add(time.Minute)
	put2, err := s.PutCursor(ctx, next)
	must(t, "PutCursor from version 1", err)
	want = next
	want.Version = 2
	same(t, "PutCursor from version 1", normCursor, put2, want)

	_, err = s.PutCursor(ctx, next) // Version 1: stale
	wantErr(t, "PutCursor with a stale version", err, store.ErrConflict)
	future := put2
	future.Version = 5
	_, err = s.PutCursor(ctx, future)
	wantErr(t, "PutCursor with a future version", err, store.ErrConflict)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor after refused puts", err)
	same(t, "GetCursor after refused puts", normCursor, got, want)

	// Keys are independent.
	other := store.Cursor{Key: "poll:acc1:octo/world", Value: json.RawMessage(`"x"`), UpdatedAt: base}
	_, err = s.PutCursor(ctx, other)
	must(t, "PutCursor other key", err)
	got, err = s.GetCursor(ctx, c.Key)
	must(t, "GetCursor after putting another key", err)
	same(t, "GetCursor after putting another key", normCursor, got, want)
	absent := store.Cursor{Key: "poll:acc1:octo/nope", Value: json.RawMessage(`1`), UpdatedAt: base, Version: 1}
	_, err = s.PutCursor(ctx, absent)
	wantErr(t, "PutCursor from version 1 of an unknown cursor", err, store.ErrConflict)
	got, err = s.GetCursor(ctx, absent.Key)
	must(t, "GetCursor of the refused cursor", err)
	if got.Version != 0 {
		t.Fatalf("GetCursor of a refused cursor = %+v, want version 0", got)
	}
}

func testCursorConcurrentPuts(t *testing.T, s store.Store) {
	ctx := t.Context()
	for version := range int64(3) {
		winner := OneWins(t, fmt.Sprintf("PutCursor from version %d", version), 10, func(i int) (store.Cursor, error) {
			return s.PutCursor(ctx, store.Cursor{Key: "k", Value: json.RawMessage(fmt.Sprint(i)), UpdatedAt: base, Version: version})
		})
		got, err := s.GetCursor(ctx, "k")
		must(t, "GetCursor", err)
		same(t, "GetCursor after concurrent puts", normCursor, got, winner)
		if got.Version != version+1 {
			t.Fatalf("Version = %d after puts from %d, want %d", got.Version, version, version+1)
		}
	}
}
