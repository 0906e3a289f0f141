package bus

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"
)

// readBackAll runs ReadBack and returns the events it read, newest first
// (each window's events reversed, windows in the order read), stopping
// once stopAt events were read (0: never).
func readBackAll(t *testing.T, b *Bus, filters []string, maxRead, stopAt int) (got []string, exhausted bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var window []string
	read, exhausted, err := b.ReadBack(ctx, filters, maxRead, func(data []byte) {
		window = append(window, string(data))
	}, func() bool {
		slices.Reverse(window)
		got = append(got, window...)
		window = window[:0]
		return stopAt == 0 || len(got) < stopAt
	})
	if err != nil {
		t.Fatalf("ReadBack: %v", err)
	}
	if read != len(got) {
		t.Fatalf("ReadBack read %d, visited %d", read, len(got))
	}
	return got, exhausted
}

func TestReadBack(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	ctx := context.Background()
	// 2,000 events; every 7th on the subject asked for, every 11th on a
	// second one, the rest on a third.
	const total = 2000
	var want, wantBoth []string // newest first
	for i := range total {
		subject := "triggers.codehost.new_issue.octo.other"
		switch {
		case i%7 == 0:
			subject = "triggers.codehost.new_issue.octo.api"
		case i%11 == 0:
			subject = "triggers.codehost.new_issue.octo.web"
		}
		data := strconv.Itoa(i)
		if _, err := b.js.Publish(ctx, subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			want = append([]string{data}, want...)
		}
		if i%7 == 0 || i%11 == 0 {
			wantBoth = append([]string{data}, wantBoth...)
		}
	}
	api := []string{"triggers.codehost.new_issue.octo.api"}

	t.Run("everything", func(t *testing.T) {
		got, exhausted := readBackAll(t, b, api, 10_000, 0)
		if !slices.Equal(got, want) || !exhausted {
			t.Fatalf("read %d events (exhausted %v), want all %d newest first:\n%v", len(got), exhausted, len(want), got)
		}
	})
	t.Run("two filters", func(t *testing.T) {
		got, exhausted := readBackAll(t, b, append(api, "triggers.codehost.new_issue.octo.web"), 10_000, 0)
		if !slices.Equal(got, wantBoth) || !exhausted {
			t.Fatalf("read %d events (exhausted %v), want %d", len(got), exhausted, len(wantBoth))
		}
	})
	t.Run("done stops", func(t *testing.T) {
		got, exhausted := readBackAll(t, b, api, 10_000, 5)
		// The first window (256 sequences) holds 37 of them.
		if len(got) < 5 || len(got) >= len(want) || exhausted || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("read %d events (exhausted %v): %v", len(got), exhausted, got)
		}
	})
	t.Run("maxRead narrows the windows to the newest", func(t *testing.T) {
		got, exhausted := readBackAll(t, b, api, 10, 0)
		if !slices.Equal(got, want[:10]) || exhausted {
			t.Fatalf("read %v (exhausted %v), want the newest 10 %v", got, exhausted, want[:10])
		}
	})
	t.Run("nothing on the subject", func(t *testing.T) {
		got, exhausted := readBackAll(t, b, []string{"triggers.codehost.new_fork.>"}, 10_000, 0)
		if len(got) != 0 || !exhausted {
			t.Fatalf("read %v (exhausted %v), want nothing and exhausted", got, exhausted)
		}
	})
	t.Run("no consumer left behind", func(t *testing.T) {
		info, err := b.events.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Consumers != 0 {
			t.Fatalf("%d consumers left on the events stream", info.State.Consumers)
		}
	})
}

func TestReadBackEmptyStream(t *testing.T) {
	ts := startServer(t, 0)
	b := ts.connect(Options{})
	got, exhausted := readBackAll(t, b, []string{EventsFilter}, 100, 0)
	if len(got) != 0 || !exhausted {
		t.Fatalf("read %v (exhausted %v) from an empty stream", got, exhausted)
	}
}
