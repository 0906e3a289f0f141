package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// readBackFirstWindow is the width, in stream sequences, of ReadBack's
// first window; each later window is four times wider, so a kind that is
// rare in a long stream is found in a few reads.
const readBackFirstWindow = 256

// ReadBack reads the events on subjects matching any of filters (which must
// not overlap) backwards from the newest, to answer "what would have
// matched?" through short-lived consumers of its own, which the dispatcher
// never sees.
//
// It reads windows of stream sequences, each older than the one before:
// for each window it calls visit with the window's events in stream order,
// then done, and goes on to the next window while done returns true. It
// stops when done returns false; when the window reached the stream's
// first sequence (exhausted: the stream holds no older event on filters);
// or once maxRead events were read. A window that could pass maxRead is
// narrowed before it is read, so visit sees a window only in part (its
// oldest events) only when events expire while ReadBack runs.
func (b *Bus) ReadBack(ctx context.Context, filters []string, maxRead int, visit func(data []byte), done func() bool) (read int, exhausted bool, err error) {
	info, err := b.events.Info(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read back %v: %w", filters, err)
	}
	first, end := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 || end < first {
		return 0, true, nil
	}
	width := uint64(readBackFirstWindow)
	// newer is how many events on the filters the consumer of the window
	// before counted as pending: those from its start on. A window's own
	// count is its consumer's pending minus newer (or a little more, when
	// events were published in between).
	var newer uint64
	for read < maxRead {
		start := first
		if end-first >= width {
			start = end - width + 1
		}
		cons, pending, err := b.readBackConsumer(ctx, filters, start)
		if err != nil {
			return read, false, err
		}
		if count := pending - min(pending, newer); count > uint64(maxRead-read) && width > 1 {
			b.dropReadBackConsumer(cons)
			width = max(1, width/4)
			continue
		}
		n, whole, err := readWindow(ctx, cons, end, maxRead-read, visit)
		b.dropReadBackConsumer(cons)
		read += n
		if err != nil {
			return read, false, fmt.Errorf("read back %v: %w", filters, err)
		}
		more := done()
		if !whole {
			return read, false, nil
		}
		if start == first {
			return read, true, nil
		}
		if !more {
			return read, false, nil
		}
		end, newer = start-1, pending
		width *= 4
	}
	return read, false, nil
}

// readBackConsumer creates an ephemeral consumer of the events stream on
// filters from sequence start, and returns it with its pending count.
func (b *Bus) readBackConsumer(ctx context.Context, filters []string, start uint64) (jetstream.Consumer, uint64, error) {
	cons, err := b.events.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubjects:    filters,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read back %v from %d: %w", filters, start, err)
	}
	return cons, cons.CachedInfo().NumPending, nil
}

// dropReadBackConsumer deletes a read-back consumer; one left behind (the
// server unreachable) is removed by its inactivity threshold.
func (b *Bus) dropReadBackConsumer(cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.events.DeleteConsumer(ctx, cons.CachedInfo().Name)
}

// readWindow passes cons's events up to sequence end, at most limit of
// them, to visit. It returns how many it passed and whether that was the
// whole window.
func readWindow(ctx context.Context, cons jetstream.Consumer, end uint64, limit int, visit func([]byte)) (n int, whole bool, err error) {
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return n, false, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				return n, false, err
			}
			if md.Sequence.Stream > end {
				return n, true, nil
			}
			if n == limit {
				return n, false, nil
			}
			visit(msg.Data())
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, false, err
		}
		if got == 0 {
			return n, true, ctx.Err()
		}
	}
}
