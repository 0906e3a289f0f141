package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// This file holds the conformance tests of the delivery log.

func delivery(tenantID string, at time.Time, answer, event string) store.DeliveryRecord {
	return store.DeliveryRecord{
		ID: store.NewDeliveryID(at), TenantID: tenantID, Connector: "codehost",
		DeliveryID: "gh-" + at.Format("150405.000000000"), Key: "hook1/gh", Hook: "hook1",
		Event: event, Action: "opened", Answer: answer, Status: 202,
		Events:     []store.DeliveryEvent{{ID: "ev-" + at.Format("150405.000000000"), Kind: "new_issue"}},
		ReceivedAt: at,
	}
}

func deliveryIDs(ds []store.DeliveryRecord) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func testDeliveryPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, pdt)
	d := delivery("t1", at, store.AnswerRefused, "issues")
	d.Code, d.Message, d.Status = "invalid_signature", "the signature does not match <b>", 401
	if err := s.PutDeliveries(ctx, []store.DeliveryRecord{d}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDelivery(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.ReceivedAt.Equal(at) || got.Message != d.Message || got.Code != d.Code || len(got.Events) != 1 || got.Events[0] != d.Events[0] {
		t.Errorf("GetDelivery = %+v, want %+v", got, d)
	}
	if _, err := s.GetDelivery(ctx, "t2", d.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's GetDelivery: %v, want ErrNotFound", err)
	}
	if _, err := s.GetDelivery(ctx, "t1", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDelivery of an unknown id: %v, want ErrNotFound", err)
	}
	if err := s.PutDeliveries(ctx, []store.DeliveryRecord{{ID: "x"}}); err == nil {
		t.Error("PutDeliveries without a tenant id: no error")
	}
}

func testDeliveryList(t *testing.T, s store.Store) {
	ctx := t.Context()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var all []store.DeliveryRecord
	for i := range 30 {
		answer := store.AnswerAccepted
		if i%3 == 0 {
			answer = store.AnswerRefused
		}
		event := "issues"
		if i%2 == 0 {
			event = "push"
		}
		all = append(all, delivery("t1", base.Add(time.Duration(i)*time.Second), answer, event))
	}
	other := delivery("t2", base.Add(time.Hour), store.AnswerAccepted, "issues")
	// Two batches, the second with another tenant's record.
	if err := s.PutDeliveries(ctx, all[:10]); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDeliveries(ctx, append(slices.Clone(all[10:]), other)); err != nil {
		t.Fatal(err)
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)

	list := func(f store.DeliveryFilter) []store.DeliveryRecord {
		t.Helper()
		ds, err := s.ListDeliveries(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	// Pages of 7, each after the last of the one before, cover all 30
	// newest first, and only t1's.
	var paged []store.DeliveryRecord
	before := ""
	for range 10 {
		page := list(store.DeliveryFilter{TenantID: "t1", Limit: 7, Before: before})
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		before = page[len(page)-1].ID
	}
	if !slices.Equal(deliveryIDs(paged), deliveryIDs(newest)) {
		t.Errorf("paged list = %v, want %v", deliveryIDs(paged), deliveryIDs(newest))
	}
	if got := list(store.DeliveryFilter{TenantID: "t2"}); len(got) != 1 || got[0].ID != other.ID {
		t.Errorf("t2's list = %v, want [%s]", deliveryIDs(got), other.ID)
	}
	if got := list(store.DeliveryFilter{TenantID: "t3"}); len(got) != 0 {
		t.Errorf("an unknown tenant's list = %v, want none", deliveryIDs(got))
	}
	filtered := func(f store.DeliveryFilter) []string {
		var want []string
		for _, d := range newest {
			if f.Match(d) {
				want = append(want, d.ID)
			}
		}
		return want
	}
	for _, f := range []store.DeliveryFilter{
		{Answer: store.AnswerRefused},
		{Event: "push"},
		{Event: "issues.opened"},
		{DeliveryID: all[4].DeliveryID},
		{Since: base.Add(25 * time.Second)},
		{Since: base.Add(10 * time.Second), Until: base.Add(20 * time.Second)},
		{Answer: store.AnswerAccepted, Event: "issues", Before: all[20].ID},
	} {
		want := filtered(f)
		f.TenantID = "t1"
		if got := list(f); !slices.Equal(deliveryIDs(got), want) {
			t.Errorf("list %+v = %v, want %v", f, deliveryIDs(got), want)
		}
	}
	if got, want := list(store.DeliveryFilter{TenantID: "t1", Answer: store.AnswerRefused, Limit: 2}), filtered(store.DeliveryFilter{Answer: store.AnswerRefused})[:2]; !slices.Equal(deliveryIDs(got), want) {
		t.Errorf("first 2 refused = %v, want %v", deliveryIDs(got), want)
	}
	// Replacing a record keeps one copy of it.
	changed := all[29]
	changed.Answer = store.AnswerDuplicate
	if err := s.PutDeliveries(ctx, []store.DeliveryRecord{changed}); err != nil {
		t.Fatal(err)
	}
	if got := list(store.DeliveryFilter{TenantID: "t1", Limit: 2}); len(got) != 2 || got[0].Answer != store.AnswerDuplicate || got[1].ID != all[28].ID {
		t.Errorf("after replacing the newest: %+v", got)
	}
}

func testDeliveryPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var ds []store.DeliveryRecord
	for i := range 12 {
		ds = append(ds, delivery(fmt.Sprintf("t%d", i%2), base.Add(time.Duration(i)*time.Minute), store.AnswerAccepted, "issues"))
	}
	if err := s.PutDeliveries(ctx, ds); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneDeliveries(ctx, base.Add(5*time.Minute), 3)
	if err != nil || n != 3 {
		t.Fatalf("PruneDeliveries limit 3 = %d, %v; want 3", n, err)
	}
	n, err = s.PruneDeliveries(ctx, base.Add(5*time.Minute), 0)
	if err != nil || n != 2 {
		t.Fatalf("PruneDeliveries = %d, %v; want the 2 left before the cut", n, err)
	}
	for i, d := range ds {
		_, err := s.GetDelivery(ctx, d.TenantID, d.ID)
		if pruned := i < 5; pruned != errors.Is(err, store.ErrNotFound) {
			t.Errorf("record %d (pruned %v): GetDelivery err %v", i, pruned, err)
		}
	}
	// Records 0-4 are pruned: t0 keeps 6, 8 and 10, t1 5, 7, 9 and 11.
	for tenant, left := range map[string]int{"t0": 3, "t1": 4} {
		got, err := s.ListDeliveries(ctx, store.DeliveryFilter{TenantID: tenant})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range got {
			if d.ReceivedAt.Before(base.Add(5 * time.Minute)) {
				t.Errorf("%s lists pruned record %s", tenant, d.ID)
			}
		}
		if len(got) != left {
			t.Errorf("%s lists %d records after the prune, want %d", tenant, len(got), left)
		}
	}
}
