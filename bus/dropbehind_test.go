package bus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// recordingDropper records what dropBehind asks of the page cache.
type recordingDropper struct {
	started, finished []string
	fail              map[string]error // finish's answer per base name
}

func (r *recordingDropper) start(path string) error {
	r.started = append(r.started, rel(path))
	return nil
}

func (r *recordingDropper) finish(path string) error {
	r.finished = append(r.finished, rel(path))
	return r.fail[rel(path)]
}

func (r *recordingDropper) take() []string {
	if !slices.Equal(r.started, r.finished) {
		panic("dropBehind finished other files than it started")
	}
	got := r.finished
	r.started, r.finished = nil, nil
	return got
}

// rel shortens a block path to stream/n.blk.
func rel(path string) string {
	return filepath.Base(filepath.Dir(filepath.Dir(path))) + "/" + filepath.Base(path)
}

func TestDropBehindTakesEachSealedBlockOnce(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store [1]*") // pattern characters are just names
	msgs := func(stream string) string { return filepath.Join(root, "$G", "streams", stream, "msgs") }
	// Directory times have the kernel's coarse clock: changes within one
	// tick look like one. Give each change its own second, as changes
	// apart in time have.
	clock := time.Now()
	changed := func(stream string) {
		t.Helper()
		clock = clock.Add(time.Second)
		if err := os.Chtimes(msgs(stream), clock, clock); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(stream string, names ...string) {
		t.Helper()
		if err := os.MkdirAll(msgs(stream), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(msgs(stream), n), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		changed(stream)
	}
	remove := func(stream string, names ...string) {
		t.Helper()
		for _, n := range names {
			if err := os.Remove(filepath.Join(msgs(stream), n)); err != nil {
				t.Fatal(err)
			}
		}
		changed(stream)
	}
	rec := &recordingDropper{}
	d := newDropBehind(root, rec)
	var reported []string
	d.onError = func(path string, err error, failures int) {
		reported = append(reported, fmt.Sprintf("%s: %v (%d)", rel(path), err, failures))
	}
	reportClock := testenv.NewClock(time.Now())
	d.now = reportClock.Now
	step := func(name string, want ...string) {
		t.Helper()
		n := d.pass(context.Background())
		got := rec.take()
		if !slices.Equal(got, want) || n != len(want) {
			t.Fatalf("%s: dropped %q (pass said %d), want %q", name, got, n, want)
		}
	}

	step("empty store")
	touch("EVENTS", "1.blk", "index.db")
	step("one block, still written to")
	touch("EVENTS", "2.blk", "3.blk")
	step("two blocks sealed", "EVENTS/1.blk", "EVENTS/2.blk")
	step("nothing new")
	touch("EVENTS", "4.blk")
	touch("INDEX", "7.blk", "8.blk")
	step("a new stream's sealed blocks too", "EVENTS/3.blk", "INDEX/7.blk")

	// Retention removes old blocks and a block above the cursor goes
	// missing: the listing after the directory changed finds the rest.
	remove("EVENTS", "1.blk", "2.blk")
	touch("EVENTS", "6.blk")
	step("a gap in the numbering", "EVENTS/4.blk")
	touch("EVENTS", "7.blk")
	step("after the gap", "EVENTS/6.blk")

	// A purged and recreated stream numbers its blocks from 1 again.
	remove("INDEX", "7.blk", "8.blk")
	touch("INDEX", "1.blk", "2.blk")
	step("a recreated stream", "INDEX/1.blk")

	// A deleted stream is forgotten; a stream of the same name starts anew.
	if err := os.RemoveAll(filepath.Join(root, "$G", "streams", "INDEX")); err != nil {
		t.Fatal(err)
	}
	step("a deleted stream")
	if _, ok := d.streams[msgs("INDEX")]; ok {
		t.Fatal("a deleted stream's cursor was kept")
	}

	// A block removed before it is dropped is not an error; other
	// failures are reported, at most once a minute with a count, and the
	// block is not retried.
	rec.fail = map[string]error{
		"EVENTS/7.blk":  fs.ErrNotExist,
		"EVENTS/8.blk":  errors.New("disk on fire"),
		"EVENTS/9.blk":  errors.New("disk on fire"),
		"EVENTS/10.blk": errors.New("disk on fire"),
		"EVENTS/11.blk": errors.New("disk on fire"),
	}
	touch("EVENTS", "8.blk", "9.blk", "10.blk")
	step("failures", "EVENTS/7.blk", "EVENTS/8.blk", "EVENTS/9.blk")
	step("failed blocks are not retried")
	touch("EVENTS", "11.blk")
	reportClock.Advance(dropBehindReportEvery)
	touch("EVENTS", "12.blk")
	step("a minute later", "EVENTS/10.blk", "EVENTS/11.blk")
	want := []string{"EVENTS/8.blk: disk on fire (1)", "EVENTS/10.blk: disk on fire (2)"}
	if !slices.Equal(reported, want) {
		t.Fatalf("reported %q, want %q", reported, want)
	}
	if d.dropped != 7 {
		t.Fatalf("dropped count %d, want 7 (the failed blocks do not count)", d.dropped)
	}
}
