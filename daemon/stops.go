package daemon

import (
	"context"
	"slices"

	"github.com/rs/zerolog"
)

// stops is the daemon's teardown, written down as it starts: each part
// that starts adds how to stop it, and run stops them in reverse order, so
// that a part stops before what it depends on (the store outlives the
// dispatcher, NATS outlives the HTTP server's last commits).
type stops struct {
	log  zerolog.Logger
	list []namedStop
}

type namedStop struct {
	name string
	stop func(ctx context.Context) error
}

// add registers stop under name. A name added again moves to the end, to
// be stopped first: the HTTP server, which serves webhooks alone while an
// external NATS is away, is stopped before everything started behind it.
func (s *stops) add(name string, stop func(ctx context.Context) error) {
	s.list = slices.DeleteFunc(s.list, func(n namedStop) bool { return n.name == name })
	s.list = append(s.list, namedStop{name, stop})
}

// addFunc registers a stop that cannot fail.
func (s *stops) addFunc(name string, stop func()) {
	s.add(name, func(context.Context) error { stop(); return nil })
}

// run stops every part, the last added first, within ctx. A part that
// fails to stop cleanly is logged and the others still stop.
func (s *stops) run(ctx context.Context) {
	for i := len(s.list) - 1; i >= 0; i-- {
		n := s.list[i]
		if err := n.stop(ctx); err != nil {
			s.log.Warn().Err(err).Str("part", n.name).Msg("stopping was cut short")
		} else {
			s.log.Debug().Str("part", n.name).Msg("stopped")
		}
	}
	s.list = nil
}
