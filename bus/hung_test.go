package bus

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// blackhole is a TCP proxy in front of a NATS server that can hang: it
// then stops reading from either side and forwards nothing, with every
// connection left open, as a stopped (SIGSTOP) server or a network black
// hole does. release lets new connections through again.
type blackhole struct {
	ln     net.Listener
	target string

	hung atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{ln: ln, target: target}
	bh.wg.Add(1)
	go bh.accept()
	t.Cleanup(bh.close)
	return bh
}

func (bh *blackhole) url() string { return "nats://" + bh.ln.Addr().String() }

func (bh *blackhole) hang() { bh.hung.Store(true) }

// release lets new connections through; those open while hung stay
// unread.
func (bh *blackhole) release() { bh.hung.Store(false) }

func (bh *blackhole) accept() {
	defer bh.wg.Done()
	for {
		c, err := bh.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", bh.target)
		if err != nil {
			c.Close()
			continue
		}
		bh.mu.Lock()
		bh.conns = append(bh.conns, c, s)
		bh.mu.Unlock()
		bh.wg.Add(2)
		go bh.pipe(s, c)
		go bh.pipe(c, s)
	}
}

// pipe copies src to dst while the proxy is not hung. Hung, it reads
// nothing more and drops what it had read, until the connection closes.
func (bh *blackhole) pipe(dst, src net.Conn) {
	defer bh.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		if bh.hung.Load() {
			return // the connection stays open, unread, until close
		}
		n, err := src.Read(buf)
		if bh.hung.Load() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (bh *blackhole) close() {
	bh.ln.Close()
	bh.mu.Lock()
	for _, c := range bh.conns {
		c.Close()
	}
	bh.mu.Unlock()
	bh.wg.Wait()
}

// TestHungServerCannotHoldACommitPastItsDeadline: with NATS stopped, the
// connection open and nothing read (reliability catalogue #9), a Commit
// must give up at its context's deadline plus at most the write timeout,
// so ingest can spool the delivery and answer in time. nats.go writes to
// the socket under the connection's lock once 32 KB are buffered; with its
// default write timeout of a minute, every publisher then waited that
// minute.
func TestHungServerCannotHoldACommitPastItsDeadline(t *testing.T) {
	ts := startServer(t, 0)
	bh := startBlackhole(t, ts.listen)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Connect(ctx, bh.url(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	payload := []byte(`{"x":"` + string(bytes.Repeat([]byte("a"), 512<<10)) + `"}`)
	c, events := testDelivery("d-before", 1, payload)
	commit(t, b, c, events)

	bh.hang()
	// 64 deliveries of 512 KB, 32 MB in all: more than the kernel buffers
	// between the two sides hold, so writes block.
	const budget = time.Second
	limit := budget + DefaultWriteTimeout + 2*time.Second
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				c, events := testDelivery(fmt.Sprintf("d-hung-%d-%d", w, i), 1, payload)
				ctx, cancel := context.WithTimeout(context.Background(), budget)
				start := time.Now()
				_, err := b.Commit(ctx, c, events)
				cancel()
				switch took := time.Since(start); {
				case err == nil:
					errs <- fmt.Errorf("%s: committed with NATS hung", c.DeliveryID)
				case took > limit:
					errs <- fmt.Errorf("%s: Commit took %s with a %s budget; want at most %s", c.DeliveryID, took.Round(time.Millisecond), budget, limit)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(4 * limit):
		// Unblock the writers so the goroutines end before the test does.
		bh.close()
		<-done
		t.Fatalf("Commits were still running %s after NATS hung; each should give up within %s", 4*limit, limit)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Once NATS answers again, the Bus reconnects and commits (after
	// sending what it buffered while reconnecting).
	bh.release()
	testenv.Eventually(t, 15*time.Second, "a commit after NATS answers again", func() bool {
		c, events := testDelivery("d-after", 1, []byte(`{}`))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := b.Commit(ctx, c, events)
		if err != nil {
			t.Logf("commit after release: %v (ready: %q)", err, b.NotReadyReason())
		}
		return err == nil
	})
}
