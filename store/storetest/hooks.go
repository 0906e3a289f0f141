package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

func normHook(x store.Hook) store.Hook {
	x.CreatedAt = normTime(x.CreatedAt)
	x.UpdatedAt = normTime(x.UpdatedAt)
	x.CheckedAt = normTime(x.CheckedAt)
	x.SecretsSetAt = normTime(x.SecretsSetAt)
	return x
}

func normHookActivity(x store.HookActivity) store.HookActivity {
	x.LastAcceptedAt = normTime(x.LastAcceptedAt)
	if x.LastRefusal != nil {
		r := *x.LastRefusal
		r.At = normTime(r.At)
		x.LastRefusal = &r
	}
	return x
}

// hook returns a minimal repository hook.
func hook(tenantID, id, accountID, target string, created time.Time) store.Hook {
	return store.Hook{
		ID: id, TenantID: tenantID, AccountID: accountID, Connector: "codehost", Scope: store.HookRepository,
		Target: target, Status: store.HookActive, CreatedAt: created, UpdatedAt: created,
	}
}

// fullHook returns a hook with every field set.
func fullHook(tenantID, id string) store.Hook {
	return store.Hook{
		ID:           id,
		TenantID:     tenantID,
		AccountID:    "acc1",
		Connector:    "codehost",
		Scope:        store.HookOrganization,
		Target:       "octo-org",
		ExternalID:   1<<40 + 7,
		Events:       []string{"push", "pull_request", "issue_comment"},
		SealedSecret: everyByte(),
		SecretsSetAt: base.Add(90*time.Minute + 5).In(pdt),
		Status:       store.HookFailing,
		StatusReason: "422 \"Hook already exists\"\n",
		CreatedAt:    base,
		UpdatedAt:    base.Add(time.Second + 1),
		CheckedAt:    base.Add(2*time.Hour + 999999999).In(pdt),
	}
}

func hookID(h store.Hook) string { return h.ID }

func testHookCreateGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	h := fullHook("t1", "h1")
	h.Version = 42
	created, err := s.CreateHook(ctx, h)
	must(t, "CreateHook", err)
	want := h
	want.Version = 1
	same(t, "CreateHook result", normHook, created, want)

	// GetHook needs only the id (ingest knows only the id in the URL).
	got, err := s.GetHook(ctx, "h1")
	must(t, "GetHook", err)
	same(t, "GetHook", normHook, got, want)
	got.Events[0] = "changed"
	got.SealedSecret[0] = 'x'
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook again", err)
	same(t, "GetHook after changing the result of the first", normHook, got, want)
	_, err = s.GetHook(ctx, "nope")
	wantErr(t, "GetHook unknown", err, store.ErrNotFound)

	got, err = s.FindHook(ctx, want.Key())
	must(t, "FindHook", err)
	same(t, "FindHook", normHook, got, want)

	dup := hook("t1", "h1", "acc9", "octo/other", base)
	_, err = s.CreateHook(ctx, dup)
	wantErr(t, "CreateHook with a taken id", err, store.ErrConflict)
	dup.TenantID = "t2"
	_, err = s.CreateHook(ctx, dup)
	wantErr(t, "CreateHook with another tenant's hook id", err, store.ErrConflict)
	// The refused hooks did not claim their keys.
	_, err = s.FindHook(ctx, dup.Key())
	wantErr(t, "FindHook of a refused hook", err, store.ErrNotFound)
	dup.TenantID = "t1"
	_, err = s.FindHook(ctx, dup.Key())
	wantErr(t, "FindHook of a refused hook", err, store.ErrNotFound)
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook after conflicts", err)
	same(t, "GetHook after conflicts", normHook, got, want)
}

func testHookKeys(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := hook("t1", "h1", "acc1", "octo/hello", base)
	endpoint := store.Hook{ID: "h2", TenantID: "t1", Connector: "deploy", Scope: store.HookAgentEndpoint, Target: "ag1", Status: store.HookActive}
	// Each differs from first in one part of the key, so none conflicts.
	variants := []store.Hook{first, endpoint}
	for i, change := range []func(*store.Hook){
		func(h *store.Hook) { h.TenantID = "t2" },
		func(h *store.Hook) { h.AccountID = "acc2" },
		func(h *store.Hook) { h.AccountID = "" },
		func(h *store.Hook) { h.Connector = "deploy" },
		func(h *store.Hook) { h.Scope = store.HookOrganization },
		func(h *store.Hook) { h.Target = "octo/world" },
		func(h *store.Hook) { h.Target = "octo/hello:x" },
		func(h *store.Hook) { h.AccountID, h.Connector = "acc1:codehost", "x" },
	} {
		h := first
		h.ID = fmt.Sprintf("v%d", i)
		change(&h)
		variants = append(variants, h)
	}
	for i, h := range variants {
		created, err := s.CreateHook(ctx, h)
		must(t, "CreateHook "+h.ID, err)
		variants[i] = created
	}
	for _, h := range variants {
		got, err := s.FindHook(ctx, h.Key())
		must(t, "FindHook of "+h.ID, err)
		same(t, "FindHook of "+h.ID, normHook, got, h)

		dup := h
		dup.ID = "dup-" + h.ID
		_, err = s.CreateHook(ctx, dup)
		wantErr(t, "CreateHook with the key of "+h.ID, err, store.ErrConflict)
		_, err = s.GetHook(ctx, dup.ID)
		wantErr(t, "GetHook of the refused "+dup.ID, err, store.ErrNotFound)
	}
	unknown := first.Key()
	unknown.Target = "octo/nope"
	_, err := s.FindHook(ctx, unknown)
	wantErr(t, "FindHook unknown", err, store.ErrNotFound)

	// Of many creates with one key, one wins.
	k := hook("t3", "", "acc1", "octo/race", base)
	winner := OneWins(t, "CreateHook of one key", 10, func(i int) (store.Hook, error) {
		h := k
		h.ID = fmt.Sprintf("race-%d", i)
		return s.CreateHook(ctx, h)
	})
	got, err := s.FindHook(ctx, k.Key())
	must(t, "FindHook after concurrent creates", err)
	same(t, "FindHook after concurrent creates", normHook, got, winner)
	list, err := s.ListHooks(ctx, "t3")
	must(t, "ListHooks t3", err)
	sameOrder(t, "ListHooks after concurrent creates", normHook, hookID, list, []store.Hook{winner})
}

func testHookList(t *testing.T, s store.Store) {
	ctx := t.Context()
	if hs, err := s.ListHooks(ctx, ""); err != nil || len(hs) != 0 {
		t.Fatalf("ListHooks on an empty store = %v, %v; want none", hs, err)
	}
	byTenant := map[string][]store.Hook{}
	var all []store.Hook
	for i := range 12 {
		j := i * 5 % 12
		tenant := []string{"t1", "t2", "t1:x"}[j%3]
		h, err := s.CreateHook(ctx, hook(tenant, fmt.Sprintf("h%02d", (j*7)%12), "acc1", fmt.Sprintf("octo/r%d", j), base.Add(time.Duration(j/2))))
		must(t, "CreateHook", err)
		byTenant[tenant] = append(byTenant[tenant], h)
		all = append(all, h)
	}
	oldest := func(hs []store.Hook) []store.Hook {
		hs = slices.Clone(hs)
		slices.SortFunc(hs, func(a, b store.Hook) int { return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID)) })
		return hs
	}
	for _, tenant := range []string{"t1", "t2", "t1:x"} {
		got, err := s.ListHooks(ctx, tenant)
		must(t, "ListHooks "+tenant, err)
		sameOrder(t, "ListHooks "+tenant, normHook, hookID, got, oldest(byTenant[tenant]))
	}
	got, err := s.ListHooks(ctx, "")
	must(t, "ListHooks of every tenant", err)
	sameOrder(t, "ListHooks of every tenant", normHook, hookID, got, oldest(all))
	got, err = s.ListHooks(ctx, "t3")
	must(t, "ListHooks t3", err)
	if len(got) != 0 {
		t.Fatalf("ListHooks of a tenant without hooks = %+v", got)
	}
}

func testHookUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	h, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)

	h.ExternalID = 77
	h.Events = []string{"push"}
	h.SealedSecret = []byte("secret")
	h.Status = store.HookFailing
	h.StatusReason = "404"
	h.CheckedAt = base.Add(time.Hour)
	h.SecretsSetAt = base.Add(time.Hour + 7).In(pdt)
	h.UpdatedAt = base.Add(time.Hour)
	up, err := s.UpdateHook(ctx, h)
	must(t, "UpdateHook", err)
	want := h
	want.Version = 2
	same(t, "UpdateHook result", normHook, up, want)
	got, err := s.GetHook(ctx, "h1")
	must(t, "GetHook", err)
	same(t, "GetHook after update", normHook, got, want)

	_, err = s.UpdateHook(ctx, h) // Version 1: stale
	wantErr(t, "UpdateHook with a stale version", err, store.ErrConflict)
	future := up
	future.Version = 9
	_, err = s.UpdateHook(ctx, future)
	wantErr(t, "UpdateHook with a future version", err, store.ErrConflict)

	// The key cannot change, whichever part.
	for name, change := range map[string]func(*store.Hook){
		"tenant":    func(h *store.Hook) { h.TenantID = "t2" },
		"account":   func(h *store.Hook) { h.AccountID = "acc2" },
		"connector": func(h *store.Hook) { h.Connector = "deploy" },
		"scope":     func(h *store.Hook) { h.Scope = store.HookOrganization },
		"target":    func(h *store.Hook) { h.Target = "octo/moved" },
	} {
		moved := up
		change(&moved)
		_, err = s.UpdateHook(ctx, moved)
		wantErr(t, "UpdateHook changing the "+name, err, store.ErrConflict)
		_, err = s.FindHook(ctx, moved.Key())
		wantErr(t, "FindHook of the refused key ("+name+")", err, store.ErrNotFound)
	}
	got, err = s.FindHook(ctx, up.Key())
	must(t, "FindHook after refused updates", err)
	same(t, "FindHook after refused updates", normHook, got, want)

	missing := hook("t1", "nope", "acc1", "octo/nope", base)
	missing.Version = 1
	_, err = s.UpdateHook(ctx, missing)
	wantErr(t, "UpdateHook unknown", err, store.ErrNotFound)

	winner := OneWins(t, "UpdateHook", 10, func(i int) (store.Hook, error) {
		b := up
		b.ExternalID = int64(100 + i)
		return s.UpdateHook(ctx, b)
	})
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook after concurrent updates", err)
	same(t, "GetHook after concurrent updates", normHook, got, winner)
	if got.Version != 3 {
		t.Fatalf("Version = %d after one more update, want 3", got.Version)
	}
}

func testHookDelete(t *testing.T, s store.Store) {
	ctx := t.Context()
	a, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)
	b, err := s.CreateHook(ctx, hook("t1", "h2", "acc1", "octo/world", base.Add(time.Second)))
	must(t, "CreateHook", err)

	must(t, "DeleteHook", s.DeleteHook(ctx, "h1"))
	_, err = s.GetHook(ctx, "h1")
	wantErr(t, "GetHook of a deleted hook", err, store.ErrNotFound)
	_, err = s.FindHook(ctx, a.Key())
	wantErr(t, "FindHook of a deleted hook", err, store.ErrNotFound)
	for _, tenant := range []string{"t1", ""} {
		list, err := s.ListHooks(ctx, tenant)
		must(t, "ListHooks", err)
		sameOrder(t, "ListHooks after delete", normHook, hookID, list, []store.Hook{b})
	}
	wantErr(t, "second DeleteHook", s.DeleteHook(ctx, "h1"), store.ErrNotFound)
	wantErr(t, "DeleteHook unknown", s.DeleteHook(ctx, "nope"), store.ErrNotFound)
	_, err = s.UpdateHook(ctx, a)
	wantErr(t, "UpdateHook of a deleted hook", err, store.ErrNotFound)

	// The key is free again, and so is the id.
	c := a
	c.ID = "h3"
	c, err = s.CreateHook(ctx, c)
	must(t, "CreateHook with a deleted hook's key", err)
	got, err := s.FindHook(ctx, a.Key())
	must(t, "FindHook of the new hook", err)
	same(t, "FindHook of the new hook", normHook, got, c)
	d, err := s.CreateHook(ctx, hook("t2", "h1", "acc2", "octo/hello", base))
	must(t, "CreateHook with a deleted hook's id", err)
	got, err = s.GetHook(ctx, "h1")
	must(t, "GetHook of the new h1", err)
	same(t, "GetHook of the new h1", normHook, got, d)
	// Deleting it again leaves the other hook with the old key alone.
	must(t, "DeleteHook new h1", s.DeleteHook(ctx, "h1"))
	got, err = s.FindHook(ctx, a.Key())
	must(t, "FindHook h3 after deleting the new h1", err)
	same(t, "FindHook h3 after deleting the new h1", normHook, got, c)
}

// wantHookActivity fails the test unless the activity of hook id is want.
func wantHookActivity(t *testing.T, s store.Store, what, id string, want store.HookActivity) {
	t.Helper()
	got, err := s.GetHookActivity(t.Context(), id)
	must(t, what+": GetHookActivity "+id, err)
	same(t, what+": GetHookActivity "+id, normHookActivity, got, want)
}

func testHookActivity(t *testing.T, s store.Store) {
	ctx := t.Context()
	none := store.HookActivity{}
	wantHookActivity(t, s, "before the hook exists", "h1", none)
	wantErr(t, "AddHookActivity to an absent hook",
		s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: base, Refused: 1}), store.ErrNotFound)
	wantHookActivity(t, s, "after a refused add", "h1", none)

	h, err := s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook", err)
	wantHookActivity(t, s, "a new hook", "h1", none)
	must(t, "AddHookActivity of nothing", s.AddHookActivity(ctx, "h1", none))
	wantHookActivity(t, s, "after adding nothing", "h1", none)

	// The later LastAcceptedAt wins, to the nanosecond and whatever the
	// zone; a zero one is none.
	accepted := base.Add(time.Minute)
	must(t, "AddHookActivity accepted", s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted}))
	want := store.HookActivity{LastAcceptedAt: accepted}
	wantHookActivity(t, s, "after an accept", "h1", want)
	must(t, "AddHookActivity earlier accepted",
		s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted.Add(-time.Nanosecond).In(pdt)}))
	wantHookActivity(t, s, "after an earlier accept", "h1", want)
	accepted = accepted.Add(time.Nanosecond).In(pdt)
	must(t, "AddHookActivity later accepted", s.AddHookActivity(ctx, "h1", store.HookActivity{LastAcceptedAt: accepted}))
	want.LastAcceptedAt = accepted
	wantHookActivity(t, s, "after a later accept", "h1", want)

	// Refused adds up; the LastRefusal with the later At wins, all its
	// fields together; a nil one changes nothing.
	first := &store.HookRefusal{At: base.Add(time.Hour), Status: 401, Code: "bad_signature", Message: "signature \"v1,…\" does not match\n"}
	must(t, "AddHookActivity refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1, LastRefusal: first}))
	want.Refused, want.LastRefusal = 1, first
	wantHookActivity(t, s, "after a refusal", "h1", want)
	for _, at := range []time.Time{first.At.Add(-time.Nanosecond), first.At.In(pdt)} {
		older := &store.HookRefusal{At: at, Status: 400, Code: "older", Message: "older"}
		must(t, "AddHookActivity earlier refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 2, LastRefusal: older}))
		want.Refused += 2
		wantHookActivity(t, s, "after a refusal that is not later", "h1", want)
	}
	later := &store.HookRefusal{At: first.At.Add(time.Nanosecond).In(pdt), Status: 429}
	must(t, "AddHookActivity later refusal", s.AddHookActivity(ctx, "h1", store.HookActivity{LastRefusal: later}))
	want.LastRefusal = later
	wantHookActivity(t, s, "after a later refusal", "h1", want)
	must(t, "AddHookActivity refused only", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 10}))
	want.Refused += 10
	wantHookActivity(t, s, "after refused only", "h1", want)

	// Updating the hook leaves its activity alone.
	h.Status = store.HookFailing
	_, err = s.UpdateHook(ctx, h)
	must(t, "UpdateHook", err)
	wantHookActivity(t, s, "after UpdateHook", "h1", want)

	// Concurrent adds (of several processes) all count, and the latest
	// times win whatever the order they arrive in: a read-modify-write
	// that is not atomic loses some.
	_, err = s.CreateHook(ctx, hook("t1", "h2", "acc1", "octo/world", base))
	must(t, "CreateHook h2", err)
	const writers, adds = 8, 25
	at := func(i, j int) time.Time { return base.Add(3*time.Hour + time.Duration(i*adds+j)) }
	wins := runConcurrently(t, writers, nil, func(i int) error {
		for j := range adds {
			a := store.HookActivity{
				LastAcceptedAt: at(i, j),
				Refused:        1,
				LastRefusal:    &store.HookRefusal{At: at(i, j), Status: 400 + i, Code: fmt.Sprintf("c%d-%d", i, j)},
			}
			if err := s.AddHookActivity(ctx, "h2", a); err != nil {
				return err
			}
		}
		return nil
	})
	if wins != writers {
		t.Fatalf("%d of %d concurrent writers succeeded", wins, writers)
	}
	last := at(writers-1, adds-1)
	wantHookActivity(t, s, "after concurrent adds", "h2", store.HookActivity{
		LastAcceptedAt: last,
		Refused:        writers * adds,
		LastRefusal:    &store.HookRefusal{At: last, Status: 400 + writers - 1, Code: fmt.Sprintf("c%d-%d", writers-1, adds-1)},
	})
	wantHookActivity(t, s, "h1 after adds to h2", "h1", want)

	// DeleteHook deletes the activity: nothing outlives the hook, and a
	// hook created again with the same id and key starts with none.
	must(t, "DeleteHook", s.DeleteHook(ctx, "h1"))
	wantHookActivity(t, s, "after DeleteHook", "h1", none)
	wantErr(t, "AddHookActivity to a deleted hook",
		s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1}), store.ErrNotFound)
	_, err = s.CreateHook(ctx, hook("t1", "h1", "acc1", "octo/hello", base))
	must(t, "CreateHook again", err)
	wantHookActivity(t, s, "the hook created again", "h1", none)
	must(t, "AddHookActivity to the hook created again", s.AddHookActivity(ctx, "h1", store.HookActivity{Refused: 1}))
	wantHookActivity(t, s, "the hook created again, after an add", "h1", store.HookActivity{Refused: 1})
	wantHookActivity(t, s, "h2 after deleting h1", "h2", store.HookActivity{
		LastAcceptedAt: last,
		Refused:        writers * adds,
		LastRefusal:    &store.HookRefusal{At: last, Status: 400 + writers - 1, Code: fmt.Sprintf("c%d-%d", writers-1, adds-1)},
	})
}
