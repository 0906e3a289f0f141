package boltstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/triggerd/triggerd/store"
)

// BenchmarkDeliveryReads reads a log written as a busy ingest writes it:
// 100,000 records at 5,000 a second in writes of 500, so that an id group
// holds about 1,340 records in three batches: the Deliveries page's
// newest 50, a page further on, the refused ones, and a record's detail.
func BenchmarkDeliveryReads(b *testing.B) {
	ctx := b.Context()
	s, err := Open(filepath.Join(b.TempDir(), "triggerd.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	start := time.Now().Add(-time.Hour)
	var ids []string
	batch := make([]store.DeliveryRecord, 0, 500)
	for i := range 100_000 {
		at := start.Add(time.Duration(i) * 200 * time.Microsecond)
		answer := store.AnswerAccepted
		if i%10 == 0 {
			answer = store.AnswerRefused
		}
		d := store.DeliveryRecord{ID: store.NewDeliveryID(at), TenantID: "t1", Connector: "codehost", DeliveryID: fmt.Sprint("gh-", i),
			Key: fmt.Sprint("h1/gh-", i), Hook: "h1", Event: "issues", Action: "opened", Answer: answer, Status: 202, ReceivedAt: at,
			Events: []store.DeliveryEvent{{ID: fmt.Sprint("ev-", i), Kind: "new_issue", Summary: "#1 title"}}}
		ids = append(ids, d.ID)
		if batch = append(batch, d); len(batch) == cap(batch) {
			must(b, s.PutDeliveries(ctx, batch))
			batch = batch[:0]
		}
	}
	for _, c := range []struct {
		name string
		f    store.DeliveryFilter
	}{
		{"newest-50", store.DeliveryFilter{TenantID: "t1", Limit: 50}},
		{"after-200", store.DeliveryFilter{TenantID: "t1", Limit: 50, Before: ids[len(ids)-200]}},
		{"refused-50", store.DeliveryFilter{TenantID: "t1", Limit: 50, Answer: store.AnswerRefused}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if ds, err := s.ListDeliveries(ctx, c.f); err != nil || len(ds) != 50 {
					b.Fatalf("%d records, %v", len(ds), err)
				}
			}
		})
	}
	b.Run("detail", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i = (i + 7919) % len(ids)
			if _, err := s.GetDelivery(ctx, "t1", ids[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
