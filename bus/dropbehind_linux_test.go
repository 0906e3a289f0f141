package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/triggerd/triggerd/internal/testenv"
)

// residentPages counts the pages of path that are in the page cache.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() == 0 {
		return 0
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (len(mem)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// needDisk stops a test whose files would live in memory: tmpfs pages have
// no disk to go back to, and nothing drops them. It is a missing
// prerequisite (testenv.Missing): CI must not pass without these tests.
func needDisk(t *testing.T, dir string) {
	t.Helper()
	if inMemory(dir) {
		testenv.Missing(t, "a disk under TMPDIR (it is tmpfs, whose pages cannot be dropped)", errors.New(dir+" is kept in memory"))
	}
}

func TestPageCacheDropsAFileAndKeepsItsData(t *testing.T) {
	dir := t.TempDir()
	needDisk(t, dir)
	path := filepath.Join(dir, "1.blk")
	data := bytes.Repeat([]byte("triggerd "), 1<<17) // 1.1 MB
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n == 0 {
		testenv.Missing(t, "a page cache that keeps a file just written", errors.New("no page of it is resident"))
	}
	var pc pageCache
	if err := pc.start(path); err != nil {
		t.Fatal(err)
	}
	if err := pc.finish(path); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n != 0 {
		t.Fatalf("%d pages still in the page cache after the drop", n)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the file reads back differently after its pages were dropped")
	}
	if err := pc.finish(filepath.Join(t.TempDir(), "gone.blk")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("finish on a missing file: %v, want a not-exist error", err)
	}
}

// TestEmbeddedDropsSealedBlocks publishes past one block of the events
// stream and checks that the sealed block leaves the page cache with
// DropBehind and stays in it without, and that every event reads back.
func TestEmbeddedDropsSealedBlocks(t *testing.T) {
	for _, drop := range []bool{true, false} {
		t.Run(fmt.Sprintf("DropBehind=%v", drop), func(t *testing.T) {
			dir := t.TempDir()
			needDisk(t, dir)
			emb, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: dir, DropBehind: drop})
			if err != nil {
				t.Fatal(err)
			}
			defer emb.Shutdown()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := Connect(ctx, emb.ClientURL(), Options{Name: "dropbehind-test", Embedded: emb})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()

			body := bytes.Repeat([]byte{'x'}, 12<<10)
			msgs := filepath.Join(dir, "jetstream", "jetstream", "$G", "streams", EventsStream, "msgs")
			sealed := filepath.Join(msgs, "1.blk")
			n := 0
			for !exists(filepath.Join(msgs, "2.blk")) {
				if n == 2000 {
					t.Fatalf("no second block after %d events of %d bytes", n, len(body))
				}
				n++
				if err := b.Publish(ctx, "triggers.codehost.new_issue.o.r", fmt.Sprintf("ev-%d", n), body); err != nil {
					t.Fatal(err)
				}
			}
			if drop {
				testenv.Eventually(t, 10*time.Second, "the sealed block to leave the page cache", func() bool {
					return residentPages(t, sealed) == 0
				})
			} else if p := residentPages(t, sealed); p == 0 {
				testenv.Missing(t, "a page cache that keeps a sealed block without drop-behind", errors.New("it left the cache (memory pressure?), so the comparison means nothing"))
			}
			info, err := b.events.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != uint64(n) {
				t.Fatalf("stream holds %d events, published %d", info.State.Msgs, n)
			}
			for seq := uint64(1); seq <= uint64(n); seq++ {
				m, err := b.events.GetMsg(ctx, seq)
				if err != nil {
					t.Fatalf("event %d: %v", seq, err)
				}
				if !bytes.Equal(m.Data, body) {
					t.Fatalf("event %d reads back differently", seq)
				}
			}
		})
	}
}

// BenchmarkBlockAppend appends 12.5 KB records, the size of an
// issues.opened event, to 8 MB block files as JetStream's file store does,
// with and without drop-behind running beside it as in triggerd. cpu-ns/op
// is the process's CPU time per append, drop-behind's included. Run it
// long enough to go past the memory the machine has freed recently, which
// is cheap to touch again:
//
//	go test -run '^$' -bench BlockAppend -benchtime 200000x ./bus
func BenchmarkBlockAppend(b *testing.B) {
	for _, drop := range []bool{false, true} {
		b.Run(fmt.Sprintf("drop=%v", drop), func(b *testing.B) {
			root := b.TempDir()
			msgs := filepath.Join(root, "$G", "streams", "BENCH", "msgs")
			if err := os.MkdirAll(msgs, 0o700); err != nil {
				b.Fatal(err)
			}
			rec := bytes.Repeat([]byte{'e'}, 12800)
			stop := func() {}
			if drop {
				d := newDropBehind(root, pageCache{})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					d.run(ctx)
				}()
				stop = func() { cancel(); <-done }
			}
			const blockSize = 8 << 20
			var f *os.File
			var off int64
			var idx uint64
			b.SetBytes(int64(len(rec)))
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				if f == nil || off+int64(len(rec)) > blockSize {
					if f != nil {
						f.Close()
					}
					idx++
					var err error
					if f, err = os.Create(blockPath(msgs, idx)); err != nil {
						b.Fatal(err)
					}
					off = 0
				}
				if _, err := f.WriteAt(rec, off); err != nil {
					b.Fatal(err)
				}
				off += int64(len(rec))
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			stop()
			f.Close()
		})
	}
}

// processCPU returns the CPU time this process has used, in nanoseconds.
func processCPU(tb testing.TB) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// A store kept in memory has nothing to drop: no drop-behind runs for it.
func TestEmbeddedSkipsDropBehindInMemory(t *testing.T) {
	if !inMemory("/dev/shm") {
		testenv.Missing(t, "a tmpfs at /dev/shm to put a store on", errors.New("/dev/shm is absent or on a disk"))
	}
	shm, err := os.MkdirTemp("/dev/shm", "triggerd-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	for _, c := range []struct {
		dir  string
		runs bool
	}{{shm, false}, {t.TempDir(), !inMemory(os.TempDir())}} {
		emb, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: c.dir, DropBehind: true})
		if err != nil {
			t.Fatal(err)
		}
		if runs := emb.stopDrop != nil; runs != c.runs {
			t.Errorf("store in %s: drop-behind running %v, want %v", c.dir, runs, c.runs)
		}
		emb.Shutdown()
	}
}
