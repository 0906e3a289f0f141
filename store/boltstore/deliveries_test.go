package boltstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/triggerd/triggerd/store"
)

// sameDelivery reports whether a and b are the same record, their times
// compared as instants with the same offset.
func sameDelivery(a, b store.DeliveryRecord) bool {
	_, ao := a.ReceivedAt.Zone()
	_, bo := b.ReceivedAt.Zone()
	if !a.ReceivedAt.Equal(b.ReceivedAt) || ao != bo {
		return false
	}
	a.ReceivedAt, b.ReceivedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func TestDeliveryCodecRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("PDT", -7*3600))
	ds := []store.DeliveryRecord{
		{ID: store.NewDeliveryID(at), TenantID: "t1", Connector: "codehost", DeliveryID: "gh-1", Key: "h1/gh-1", Hook: "h1",
			Event: "issues", Action: "opened", Summary: "#1 <b>title</b> ü", Answer: store.AnswerAccepted, Status: 202,
			Events:     []store.DeliveryEvent{{ID: "ev1", Kind: "new_issue", Summary: "#1 <b>title</b> ü"}, {ID: "ev2", Kind: "label"}},
			ReceivedAt: at},
		{ID: "x", TenantID: "t1", Answer: store.AnswerRefused, Status: 401, Code: "invalid_signature",
			Message: "the signature does not match", ReceivedAt: time.Unix(-5, 7).UTC()},
		{ID: store.NewDeliveryID(at), TenantID: "t1", Connector: "codehost", Hook: "h1", Event: "issues", Action: "opened",
			Answer: store.AnswerDuplicate, Status: 200, Redelivery: true, ReceivedAt: at.Add(time.Hour).In(time.UTC)},
		{ID: "zero time", TenantID: "t1"},
	}
	v := encodeDeliveries([]*store.DeliveryRecord{&ds[0], &ds[1], &ds[2], &ds[3]})
	got, err := decodeDeliveries(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ds) {
		t.Fatalf("decoded %d records, want %d", len(got), len(ds))
	}
	for i := range ds {
		if !sameDelivery(got[i], ds[i]) {
			t.Errorf("record %d = %+v, want %+v", i, got[i], ds[i])
		}
	}
	if !got[3].ReceivedAt.IsZero() {
		t.Errorf("a zero ReceivedAt decodes as %v", got[3].ReceivedAt)
	}
	if j, err := json.Marshal(ds); err == nil && len(v) >= len(j)/2 {
		t.Errorf("encoded in %d bytes; JSON takes %d: want less than half", len(v), len(j))
	}
	// A cut or changed value is an error, never a panic or a record.
	for n := range len(v) {
		if _, err := decodeDeliveries(v[:n]); !errors.Is(err, errDeliveryCodec) {
			t.Fatalf("the first %d bytes decode: err %v", n, err)
		}
	}
	if _, err := decodeDeliveries(append(slices.Clone(v), 0)); !errors.Is(err, errDeliveryCodec) {
		t.Errorf("a value with a byte too many decodes: err %v", err)
	}
	bad := slices.Clone(v)
	bad[0] = 9
	if _, err := decodeDeliveries(bad); !errors.Is(err, errDeliveryCodec) {
		t.Errorf("an unknown version decodes: err %v", err)
	}
}

// TestDeliveryBatches checks the layout: one key per tenant and id group
// of a write, and the reads across batches whose ids interleave.
func TestDeliveryBatches(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "triggerd.db"), Options{})
	defer func() { _ = s.Close() }()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := func(tenant string, i int) store.DeliveryRecord {
		at := base.Add(time.Duration(i) * time.Millisecond)
		return store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: tenant, Connector: "codehost", Hook: "h",
			Event: "issues", Action: "opened", Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at}
	}
	// 200 records over 200 ms (one or two id groups) in one write.
	var first []store.DeliveryRecord
	for i := range 200 {
		first = append(first, rec("t1", i*2))
	}
	must(t, s.PutDeliveries(ctx, first))
	groups := map[string]bool{}
	for _, d := range first {
		groups[deliveryGroup(d.ID)] = true
	}
	if n := count(t, s, bucketDeliveryLog); n != len(groups) || count(t, s, bucketDeliveryTime) != n {
		t.Fatalf("a write of 200 records in %d id groups made %d keys (and %d time keys)", len(groups), n, count(t, s, bucketDeliveryTime))
	}
	// A second write whose ids fall between the first's, in reverse
	// order, with another tenant's records and a new copy of one of the
	// first write's.
	var second []store.DeliveryRecord
	for i := 199; i >= 0; i-- {
		second = append(second, rec("t1", i*2+1), rec("t2", i))
	}
	changed := first[100]
	changed.Answer = store.AnswerDuplicate
	second = append(second, changed)
	must(t, s.PutDeliveries(ctx, second))

	var want []store.DeliveryRecord
	for _, d := range slices.Concat(first, second) {
		if d.TenantID == "t1" && d.ID != changed.ID {
			want = append(want, d)
		}
	}
	want = append(want, changed)
	slices.SortFunc(want, func(a, b store.DeliveryRecord) int { return -compareIDs(a, b) })

	var paged []store.DeliveryRecord
	before := ""
	for range 100 {
		page, err := s.ListDeliveries(ctx, store.DeliveryFilter{TenantID: "t1", Limit: 33, Before: before})
		must(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		before = page[len(page)-1].ID
	}
	if len(paged) != len(want) {
		t.Fatalf("paged list has %d records, want %d", len(paged), len(want))
	}
	for i := range want {
		if !sameDelivery(paged[i], want[i]) {
			t.Fatalf("paged list [%d] = %+v, want %+v", i, paged[i], want[i])
		}
	}
	got, err := s.GetDelivery(ctx, "t1", changed.ID)
	if err != nil || got.Answer != store.AnswerDuplicate {
		t.Errorf("GetDelivery of the record put again = %+v, %v; want its latest copy", got, err)
	}
	if _, err := s.GetDelivery(ctx, "t2", changed.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetDelivery of t1's record as t2: %v, want ErrNotFound", err)
	}
	if d, err := s.GetDelivery(ctx, "t2", second[1].ID); err != nil || !sameDelivery(d, second[1]) {
		t.Errorf("GetDelivery of t2's record = %+v, %v", d, err)
	}

	// Pruning cuts through batches: what a batch keeps stays listed, and
	// is pruned later.
	cut := base.Add(150 * time.Millisecond)
	n, err := s.PruneDeliveries(ctx, cut, 7)
	if err != nil || n != 7 {
		t.Fatalf("PruneDeliveries limit 7 = %d, %v", n, err)
	}
	n, err = s.PruneDeliveries(ctx, cut, 0)
	must(t, err)
	// t1: 150 records (0..149 ms), t2: 150.
	if n != 300-7 {
		t.Errorf("PruneDeliveries after the first 7 = %d, want %d", n, 300-7)
	}
	left, err := s.ListDeliveries(ctx, store.DeliveryFilter{TenantID: "t1", Limit: 1000})
	must(t, err)
	if len(left) != 400-150 {
		t.Errorf("t1 lists %d records after the prune, want %d", len(left), 400-150)
	}
	for _, d := range left {
		if d.ReceivedAt.Before(cut) {
			t.Errorf("t1 lists pruned record %s", d.ID)
		}
	}
	// The rest: t1's 250, the first copy of the one put again (200 ms),
	// t2's 50.
	if n, err := s.PruneDeliveries(ctx, base.Add(time.Hour), 0); err != nil || n != 250+1+50 {
		t.Errorf("pruning the rest = %d, %v; want 301", n, err)
	}
	if n, m := count(t, s, bucketDeliveryLog), count(t, s, bucketDeliveryTime); n != 0 || m != 0 {
		t.Errorf("after pruning all, %d batches and %d time keys are left", n, m)
	}
}

func compareIDs(a, b store.DeliveryRecord) int {
	switch {
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

// TestMigrateDeliveries opens a file of the layout before batches (a key
// per record, and delivery-ids): Open moves its records into batches.
func TestMigrateDeliveries(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "triggerd.db")
	s := open(t, path, Options{})
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var ds []store.DeliveryRecord
	must(t, s.db.Update(func(tx *bolt.Tx) error {
		recs, err := tx.CreateBucket(bucketDeliveriesV0)
		if err != nil {
			return err
		}
		ids, err := tx.CreateBucket(bucketDeliveryIDsV0)
		if err != nil {
			return err
		}
		for i := range 12000 { // more than a transaction of the move
			at := base.Add(time.Duration(i) * 10 * time.Millisecond)
			d := store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: fmt.Sprintf("t%d", i%3), Connector: "deploy",
				Answer: store.AnswerAccepted, Status: 202, Summary: fmt.Sprint(i), ReceivedAt: at}
			ds = append(ds, d)
			v, err := json.Marshal(d)
			if err != nil {
				return err
			}
			if err := recs.Put([]byte(d.TenantID+sep+d.ID), v); err != nil {
				return err
			}
			if err := ids.Put([]byte(d.ID+sep+d.TenantID), nil); err != nil {
				return err
			}
		}
		return nil
	}))
	must(t, s.Close())

	s = open(t, path, Options{})
	defer func() { _ = s.Close() }()
	must(t, s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketDeliveriesV0) != nil || tx.Bucket(bucketDeliveryIDsV0) != nil {
			t.Error("the buckets of the layout before batches are still there")
		}
		return nil
	}))
	for _, i := range []int{0, 1, 5000, 11999} {
		got, err := s.GetDelivery(ctx, ds[i].TenantID, ds[i].ID)
		if err != nil || !sameDelivery(got, ds[i]) {
			t.Errorf("GetDelivery of record %d = %+v, %v; want %+v", i, got, err, ds[i])
		}
	}
	page, err := s.ListDeliveries(ctx, store.DeliveryFilter{TenantID: "t2", Limit: 3})
	must(t, err)
	if ids := []string{page[0].Summary, page[1].Summary, page[2].Summary}; !slices.Equal(ids, []string{"11999", "11996", "11993"}) {
		t.Errorf("t2's newest 3 = %v", ids)
	}
	if n, err := s.PruneDeliveries(ctx, base.Add(time.Minute), 10000); err != nil || n != 6000 {
		t.Errorf("PruneDeliveries of the first minute = %d, %v; want 6000", n, err)
	}
}
