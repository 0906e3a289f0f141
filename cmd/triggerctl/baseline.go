package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
)

// benchBaseline implements "triggerctl bench-baseline": a bare echo server
// whose POST /webhooks/:connector reads the body and answers 204, with no
// middleware and no logging, so that "bench" against it measures the floor
// that HTTP, echo and the client cost. With --naive it is instead the
// obvious hand-rolled receiver the ingest target is set against; with
// --publish-only, a receiver that does nothing but make the body durable
// (the floor under any receiver that does), and with --publish-only
// --verify one that checks the signature first (the floor under any
// receiver that verifies and stores). It serves until ctx ends, then
// shuts down gracefully within 5 s.
func benchBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8099", "address to listen on (port 0 picks a free port)")
	naive := fs.Bool("naive", false, "be the obvious hand-rolled receiver instead: verify the code-hosting signature, decode the whole payload with encoding/json (as go-github's ParseWebHook does), publish it to JetStream (an embedded server on a temporary store) and await the ack before answering 202")
	publishOnly := fs.Bool("publish-only", false, "be a receiver that only makes each delivery durable instead: publish the body to JetStream as --naive does and await the ack before answering 202, with no signature check and no decoding; what any receiver that makes deliveries durable pays on this machine before its own work (it checks nothing: a measuring device, never a receiver to deploy)")
	verify := fs.Bool("verify", false, "with --publish-only: verify the code-hosting signature before publishing (401 when it does not hold), and still decode nothing; what any receiver that checks signatures and makes deliveries durable pays")
	dropBehind := fs.Bool("nats-drop-behind", false, "with --naive or --publish-only: run the embedded NATS with drop-behind, as triggerd does by default (see triggerd --help); the bare baseline stores nothing and ignores it")
	dataDir := fs.String("data-dir", "./data", "with --naive or --verify: where triggerd keeps generated webhook secrets, read when TRIGGERD_CODEHOST_WEBHOOK_SECRET is unset")
	synopsis := "usage: triggerctl bench-baseline [--listen 127.0.0.1:8099] [--naive | --publish-only [--verify]] [--nats-drop-behind]\n\n" +
		"Serves POST /webhooks/:connector that discards the body and answers 204, as the baseline for\n" +
		"\"triggerctl bench --url http://ADDR\". Stops on SIGINT or SIGTERM.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
	}
	if *naive && *publishOnly {
		return usageError(fs, "--naive and --publish-only are two different receivers: pick one")
	}
	if *verify && !*publishOnly {
		return usageError(fs, "--verify goes with --publish-only (--naive always verifies)")
	}
	handle := func(c echo.Context) error {
		if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	if *naive || *publishOnly {
		h, stop, err := naiveReceiver(ctx, *dataDir, *naive || *verify, *naive, *dropBehind)
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl bench-baseline: %v\n", err)
			return 1
		}
		defer stop()
		handle = h
	}

	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl bench-baseline: %v; pick another --listen address\n", err)
		return 1
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Listener = ln
	e.POST("/webhooks/:connector", handle)

	served := make(chan error, 1)
	go func() { served <- e.Start("") }()
	fmt.Fprintf(stderr, "triggerctl bench-baseline: listening on http://%s\n", ln.Addr())

	select {
	case err := <-served:
		// Serve only returns early on a listener failure.
		fmt.Fprintf(stderr, "triggerctl bench-baseline: serve: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Shutdown(shutdownCtx); err != nil {
		fmt.Fprintf(stderr, "triggerctl bench-baseline: shut down: %v\n", err)
		return 1
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(stderr, "triggerctl bench-baseline: serve: %v\n", err)
		return 1
	}
	return 0
}

// naiveReceiver returns the handler of "bench-baseline --naive": what a
// receiver written the obvious way does with a GitHub delivery (verify,
// decode, one publish awaited), with none of triggerd's mapping, envelope,
// duplicate check, archive or dispatch. It publishes through the same bus
// package, to an embedded server configured as triggerd's, on a temporary
// store that stop removes. Without verify and decode it is the handler of
// --publish-only; with verify alone, that of --publish-only --verify.
func naiveReceiver(ctx context.Context, dataDir string, verify, decode, dropBehind bool) (handle echo.HandlerFunc, stop func(), err error) {
	var verifier *ingest.Verifier
	if verify {
		secret, _, err := loadSecret(connectorCodeHost, dataDir)
		if err != nil {
			return nil, nil, err
		}
		if verifier, err = ingest.NewVerifier(ingest.CodeHostScheme, string(secret)); err != nil {
			return nil, nil, err
		}
	}
	dir, err := os.MkdirTemp("", "triggerctl-naive-")
	if err != nil {
		return nil, nil, err
	}
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: dir, DropBehind: dropBehind})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	b, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{Name: "triggerctl-naive", Embedded: emb})
	if err != nil {
		emb.Shutdown()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	stop = func() {
		b.Close()
		emb.Shutdown()
		os.RemoveAll(dir)
	}
	handle = func(c echo.Context) error {
		r := c.Request()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		if verify && !verifier.Verify(r.Header.Get(ingest.CodeHostScheme.Header), body) {
			return c.NoContent(http.StatusUnauthorized)
		}
		if decode {
			var payload map[string]any
			if err := json.Unmarshal(body, &payload); err != nil {
				return c.NoContent(http.StatusBadRequest)
			}
		}
		if err := b.Publish(r.Context(), "triggers.codehost.naive.bench.bench", r.Header.Get("X-GitHub-Delivery"), body); err != nil {
			return c.NoContent(http.StatusServiceUnavailable)
		}
		return c.NoContent(http.StatusAccepted)
	}
	return handle, stop, nil
}
