//go:build unix

package bus

import (
	"errors"
	"strings"
	"testing"
)

// TestEmbeddedStoreLocked checks that a second embedded server is refused
// a data directory whose store a running one holds (nats-server itself
// would start on it), and gets it once the first has shut down.
func TestEmbeddedStoreLocked(t *testing.T) {
	ts := startServer(t, 0)
	_, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: ts.dir})
	if !errors.Is(err, ErrStoreLocked) || !strings.Contains(err.Error(), ts.dir) {
		t.Fatalf("StartEmbedded on a data directory in use = %v, want ErrStoreLocked naming %s", err, ts.dir)
	}
	ts.emb.Shutdown()
	second, err := StartEmbedded(EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: ts.dir})
	if err != nil {
		t.Fatalf("StartEmbedded after the first server shut down: %v", err)
	}
	ts.emb = second // the cleanup shuts it down
}
