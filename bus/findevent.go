package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/triggers"
)

// findEventFirstWindow is the width, in stream sequences, of FindEvent's
// first window; each later window is four times wider.
const findEventFirstWindow = 1024

// FindEvent looks for the event whose id is id among the newest maxRead
// trigger events of EventsStream, newest window first, and returns its
// stream sequence (EventAt reads it). It reads headers only: an event's id
// is its Nats-Msg-Id, so a window of thousands of events costs a few
// hundred kilobytes, whatever their payloads.
//
// It answers "was this event received?" for an event that left no record,
// which nothing indexes by id: found false with exhausted true means the
// stream holds no such event; exhausted false means the search stopped
// after maxRead events, so an older one may still be there.
func (b *Bus) FindEvent(ctx context.Context, id string, maxRead int) (seq uint64, found, exhausted bool, err error) {
	info, err := b.events.Info(ctx)
	if err != nil {
		return 0, false, false, fmt.Errorf("find event %s: %w", id, err)
	}
	first, end := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 || end < first {
		return 0, false, true, nil
	}
	filter := triggers.SubjectPrefix + ".>"
	width := uint64(findEventFirstWindow)
	read := 0
	for read < maxRead {
		// A window never reaches past the newest maxRead sequences: a
		// window is read oldest first.
		width = min(width, uint64(maxRead-read))
		start := first
		if end-first >= width {
			start = end - width + 1
		}
		seq, n, err := b.findInWindow(ctx, filter, start, end, id, maxRead-read)
		read += n
		switch {
		case err != nil:
			return 0, false, false, fmt.Errorf("find event %s: %w", id, err)
		case seq != 0:
			return seq, true, false, nil
		case start == first:
			return 0, false, true, nil
		}
		end = start - 1
		width *= 4
	}
	return 0, false, false, nil
}

// findInWindow reads the headers of the events on filter from sequence
// start to end, at most limit of them, through a consumer of its own, and
// returns the sequence of the one whose Nats-Msg-Id is id (0 for none) and
// how many it read.
func (b *Bus) findInWindow(ctx context.Context, filter string, start, end uint64, id string, limit int) (seq uint64, n int, err error) {
	cons, err := b.events.CreateConsumer(ctx, jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       true,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read from %d: %w", start, err)
	}
	defer b.dropReadBackConsumer(cons)
	for n < limit {
		batch, err := cons.FetchNoWait(min(512, limit-n))
		if err != nil {
			return 0, n, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			md, err := msg.Metadata()
			if err != nil {
				return 0, n, err
			}
			if md.Sequence.Stream > end {
				return 0, n, nil
			}
			n++
			if msg.Headers().Get(jetstream.MsgIDHeader) == id {
				return md.Sequence.Stream, n, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return 0, n, err
		}
		if got == 0 {
			return 0, n, ctx.Err()
		}
	}
	return 0, n, nil
}
