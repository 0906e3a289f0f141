package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// TailFrom says where a tail starts.
type TailFrom int

// Where a tail starts.
const (
	// FromNew delivers only events published after the tail starts.
	FromNew TailFrom = iota
	// FromAll delivers every event the stream still holds, then new ones.
	FromAll
)

// Tail calls fn with every event on subjects matching filter ("triggers.>"
// when empty), in stream order, until ctx ends or fn returns an error. It
// uses an ordered consumer: nothing is acknowledged and no state is left on
// the server, so tails cannot disturb the dispatcher.
func (b *Bus) Tail(ctx context.Context, filter string, from TailFrom, fn func(subject string, data []byte) error) error {
	if filter == "" {
		filter = EventsFilter
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if from == FromAll {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := b.js.OrderedConsumer(ctx, EventsStream, cfg)
	if err != nil {
		return fmt.Errorf("tail %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("tail %s: %w", filter, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			return fmt.Errorf("tail %s: %w", filter, err)
		}
		if err := fn(msg.Subject(), msg.Data()); err != nil {
			return err
		}
	}
}
