package bus

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Drop-behind for the embedded JetStream store.
//
// JetStream appends each message to the current block file of its stream
// (8 MB for the events stream) through the page cache, and a block, once
// sealed, is read again only when a reader falls behind the server's own
// block cache, or to replay. Left alone, the page cache grows by every byte
// ingested until memory runs short, and every append lands on a page the
// kernel must take from free memory. On virtual machines that hand free
// memory back to the host (virtio-balloon free page reporting, as on
// Firecracker), the first touch of such a page costs the host a fault: on
// triggerd's development VM about 13 µs per 4 KB page, 40 µs for one 12 KB
// event, over a quarter of the CPU triggerd spent on a delivery.
//
// dropBehind writes sealed blocks back to disk as soon as they are sealed
// and then drops them from the page cache, so the store's share of the page
// cache stays a few blocks big and new appends reuse the pages the kernel
// has just freed. Nothing about the data changes: the writeback is what the
// kernel would do within 30 seconds anyway, and a dropped block is read
// from disk when it is needed again.

// ErrDropBehindUnsupported is StartEmbedded's error for DropBehind where
// DropBehindSupported is false.
var ErrDropBehindUnsupported = errors.New("dropping pages from the page cache is supported on Linux only")

// dropBehindIdle is the longest pause between two passes over the store;
// passes come every dropBehindBusy while blocks keep being sealed.
const (
	dropBehindBusy = 200 * time.Millisecond
	dropBehindIdle = 2 * time.Second
)

// pageDropper writes a file's dirty pages back and drops its pages from the
// page cache: start begins the writeback of each file, finish waits for it
// and drops the pages. It is the platform's part of dropBehind.
type pageDropper interface {
	start(path string) error
	finish(path string) error
}

// dropBehind tracks the block files of every stream under a JetStream
// store directory (<dir>/<account>/streams/<stream>/msgs/<n>.blk).
type dropBehind struct {
	dir     string
	drop    pageDropper
	streams map[string]*blockCursor // by msgs directory
	// onError hears about a block that could not be dropped (each is
	// tried once), at most once per dropBehindReportEvery, with how many
	// blocks failed since it last heard; nil ignores them.
	onError func(path string, err error, failures int)
	now     func() time.Time
	// failures counts the blocks that failed since onError last heard,
	// at reportedAt.
	failures   int
	reportedAt time.Time
	dropped    int64 // files dropped so far, for tests
}

// dropBehindReportEvery bounds how often failures are reported: a store
// on a file system that refuses to drop pages would otherwise report
// every block.
const dropBehindReportEvery = time.Minute

// blockCursor is where dropBehind stands in one stream's msgs directory:
// every block below next has been handled; next is the newest block seen
// (the one JetStream appends to).
type blockCursor struct {
	next     uint64
	listedAt time.Time // the directory's mtime at the last listing
	listed   bool
}

// startDropBehind runs drop-behind for the JetStream store in storeDir
// (the server's StoreDir) and returns the function that stops it and waits
// for it; nil when the store is kept in memory and has nothing to drop.
// logger, if not nil, hears why and about failures.
func startDropBehind(storeDir string, logger server.Logger) (stop func()) {
	if inMemory(storeDir) {
		if logger != nil {
			logger.Noticef("drop-behind: the store %s is kept in memory (tmpfs): nothing to drop", storeDir)
		}
		return nil
	}
	d := newDropBehind(filepath.Join(storeDir, "jetstream"), pageCache{})
	if logger != nil {
		d.onError = func(path string, err error, failures int) {
			logger.Warnf("drop-behind: block %s stays in the page cache: %v (%d blocks failed since the last report; turn drop-behind off to silence this)", path, err, failures)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

func newDropBehind(dir string, drop pageDropper) *dropBehind {
	return &dropBehind{dir: dir, drop: drop, streams: map[string]*blockCursor{}, now: time.Now}
}

// run passes over the store until ctx ends: every dropBehindBusy while
// blocks are being sealed, backing off to dropBehindIdle when none are.
func (d *dropBehind) run(ctx context.Context) {
	wait := dropBehindBusy
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.pass(ctx) > 0 {
			wait = dropBehindBusy
		} else {
			wait = min(2*wait, dropBehindIdle)
		}
		t.Reset(wait)
	}
}

// pass drops every block sealed since the last pass and returns how many;
// it stops early, leaving the rest in the page cache, when ctx ends.
func (d *dropBehind) pass(ctx context.Context) int {
	msgDirs := d.msgDirs()
	var sealed []string
	seen := make(map[string]bool, len(msgDirs))
	for _, md := range msgDirs {
		seen[md] = true
		c := d.streams[md]
		if c == nil {
			c = &blockCursor{}
			d.streams[md] = c
		}
		sealed = c.advance(md, sealed)
	}
	for md := range d.streams {
		if !seen[md] {
			delete(d.streams, md) // the stream was deleted
		}
	}
	// Start every writeback first, so the disk works on them together,
	// then wait for each and drop it.
	for _, p := range sealed {
		d.report(p, d.drop.start(p))
	}
	for _, p := range sealed {
		if ctx.Err() != nil {
			break
		}
		if err := d.drop.finish(p); err != nil {
			d.report(p, err)
			continue
		}
		d.dropped++
	}
	return len(sealed)
}

// msgDirs lists the msgs directory of every stream in the store. (Not a
// filepath.Glob: the store's own path may hold pattern characters.)
func (d *dropBehind) msgDirs() []string {
	var dirs []string
	accounts, _ := os.ReadDir(d.dir)
	for _, a := range accounts {
		if !a.IsDir() {
			continue
		}
		streams := filepath.Join(d.dir, a.Name(), "streams")
		entries, _ := os.ReadDir(streams)
		for _, st := range entries {
			if st.IsDir() {
				dirs = append(dirs, filepath.Join(streams, st.Name(), "msgs"))
			}
		}
	}
	return dirs
}

func (d *dropBehind) report(path string, err error) {
	// A block removed in the meantime (retention, a purge) needs nothing.
	if err == nil || errors.Is(err, fs.ErrNotExist) || d.onError == nil {
		return
	}
	d.failures++
	now := d.now()
	if !d.reportedAt.IsZero() && now.Sub(d.reportedAt) < dropBehindReportEvery {
		return
	}
	d.onError(path, err, d.failures)
	d.failures, d.reportedAt = 0, now
}

// advance appends to sealed the blocks of msgs directory md sealed since
// the last call: all but the newest. The common case, blocks sealed one
// after another, costs one stat per block; the directory is listed only
// on the first call and when it changed otherwise (blocks removed, a
// stream purged or recreated). Directory times come from a coarse clock,
// so a change within the same tick as one already seen is found at the
// next change: a block is then dropped later, never twice.
func (c *blockCursor) advance(md string, sealed []string) []string {
	progressed := false
	if c.listed {
		for exists(blockPath(md, c.next+1)) {
			sealed = append(sealed, blockPath(md, c.next))
			c.next++
			progressed = true
		}
	}
	st, err := os.Stat(md)
	if err != nil || (c.listed && (progressed || st.ModTime().Equal(c.listedAt))) {
		if progressed && err == nil {
			c.listedAt = st.ModTime() // creating the blocks just passed changed it
		}
		return sealed
	}
	idx := listBlocks(md)
	c.listedAt, c.listed = st.ModTime(), true
	if len(idx) == 0 {
		return sealed
	}
	newest := idx[len(idx)-1]
	from := c.next
	if newest < c.next {
		from = 0 // the stream was recreated and numbers its blocks afresh
	}
	for _, i := range idx[:len(idx)-1] {
		if i >= from {
			sealed = append(sealed, blockPath(md, i))
		}
	}
	c.next = newest
	return sealed
}

func blockPath(md string, i uint64) string {
	return filepath.Join(md, strconv.FormatUint(i, 10)+".blk")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// listBlocks returns the indexes of the block files in md, ascending.
func listBlocks(md string) []uint64 {
	entries, _ := os.ReadDir(md)
	var idx []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".blk")
		if !ok {
			continue
		}
		if i, err := strconv.ParseUint(name, 10, 64); err == nil {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	return idx
}
