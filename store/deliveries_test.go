package store

import (
	"fmt"
	"testing"
	"time"
)

// NewDeliveryID's ids are 16 hex digits of the Unix nanoseconds, then 8
// others, and sort as their times do.
func TestNewDeliveryID(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	seen := map[string]bool{}
	for range 1000 {
		id := NewDeliveryID(at)
		if len(id) != 24 || id[:16] != fmt.Sprintf("%016x", uint64(at.UnixNano())) || id[:16] != DeliveryIDAt(at) {
			t.Fatalf("NewDeliveryID(%v) = %q", at, id)
		}
		for _, c := range id {
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				t.Fatalf("NewDeliveryID = %q: not hex", id)
			}
		}
		seen[id] = true
		if later := NewDeliveryID(at.Add(time.Nanosecond)); later <= id {
			t.Fatalf("id of a nanosecond later %q sorts before %q", later, id)
		}
	}
	if len(seen) < 990 {
		t.Errorf("1000 ids of one nanosecond: only %d different", len(seen))
	}
}
