package daemon

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/triggers"
)

// connectTimeout bounds one attempt at connecting to NATS and provisioning
// the streams.
const connectTimeout = 30 * time.Second

// The wait between attempts at an external NATS that could not be reached
// at startup: doubled after each, up to natsRetryMax. Deliveries are
// spooled meanwhile, so a longer wait costs only readiness, never a
// delivery.
const (
	natsRetryMin = time.Second
	natsRetryMax = 15 * time.Second
)

// connectBus makes one attempt at connecting to NATS.
func connectBus(ctx context.Context, url string, o bus.Options) (*bus.Bus, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return bus.Connect(ctx, url, o)
}

// awaitBus tries connectBus again, waiting longer each time, until it
// connects, fails in a way no wait cures (bus.Unreachable false), or ctx
// ends.
func awaitBus(ctx context.Context, url string, o bus.Options, log zerolog.Logger) (*bus.Bus, error) {
	wait := natsRetryMin
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		b, err := connectBus(ctx, url, o)
		if err == nil || !bus.Unreachable(err) || ctx.Err() != nil {
			return b, err
		}
		wait = min(2*wait, natsRetryMax)
		log.Warn().Err(err).Dur("retry_in", wait).Msg("NATS still cannot be reached")
		t.Reset(wait)
	}
}

// unreachableMessage is the warning that NATS could not be reached at
// startup: what triggerd does meanwhile.
func unreachableMessage(sp *ingest.Spooler) string {
	const msg = "NATS cannot be reached; triggerd keeps trying it and serves webhooks meanwhile: "
	if sp == nil {
		return msg + "without a spool (--spool-max-bytes 0) they are answered 503 until it is reached, as are /readyz and the management API"
	}
	return msg + "they are spooled to local disk and published once it is reached; /readyz and the management API answer 503 until then"
}

// errNATSNotYet is busSlot's commit error before it has the bus.
var errNATSNotYet = errors.New("NATS has not been reached yet")

// busSlot is the Committer of ingest and of the spool: the bus, from the
// moment serve has brought everything else up on it. Until then it is not
// ready and every commit fails at once, so a delivery goes to the spool (or
// is answered 503 without one).
type busSlot struct{ b atomic.Pointer[bus.Bus] }

func (s *busSlot) set(b *bus.Bus) { s.b.Store(b) }

// Ready reports whether the bus is there and connected.
func (s *busSlot) Ready() bool {
	b := s.b.Load()
	return b != nil && b.Ready()
}

// NotReadyReason says why the bus is not ready ("" when it is).
func (s *busSlot) NotReadyReason() string {
	b := s.b.Load()
	if b == nil {
		return errNATSNotYet.Error()
	}
	return b.NotReadyReason()
}

func (s *busSlot) Commit(ctx context.Context, c triggers.Capture, events []triggers.Event) (duplicate bool, err error) {
	b := s.b.Load()
	if b == nil {
		return false, errNATSNotYet
	}
	return b.Commit(ctx, c, events)
}
