// Package bustest starts an embedded NATS and a Bus on it for other
// packages' tests, as nats-server's own tests do: a random port, a
// temporary store, both stopped when the test ends.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
)

// Start runs an embedded NATS with JetStream and returns a Bus connected
// to it in process, with the triggerd streams provisioned.
func Start(tb testing.TB) (*bus.Bus, *bus.Embedded) {
	tb.Helper()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(emb.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{Embedded: emb})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	return b, emb
}
