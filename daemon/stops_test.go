package daemon

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rs/zerolog"
)

func TestStopsRunInReverseAndARenamedPartMovesLast(t *testing.T) {
	var got []string
	s := &stops{log: zerolog.Nop()}
	for _, name := range []string{"store", "http", "nats", "dispatch"} {
		s.add(name, func(context.Context) error { got = append(got, name); return nil })
	}
	// The HTTP server, added early to serve webhooks alone, is added again
	// once everything has started: it now stops first.
	s.add("http", func(context.Context) error { got = append(got, "http"); return errors.New("cut short") })
	s.run(context.Background())
	if want := []string{"http", "dispatch", "nats", "store"}; !slices.Equal(got, want) {
		t.Fatalf("stopped %v, want %v", got, want)
	}
	s.run(context.Background())
	if len(got) != 4 {
		t.Fatalf("a second run stopped parts again: %v", got)
	}
}
