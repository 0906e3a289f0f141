package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// benchBaseline implements "triggerctl bench-baseline": a bare echo server
// whose POST /webhooks/:connector reads the body and answers 204, with no
// middleware and no logging, so that "bench" against it measures the floor
// that HTTP, echo and the client cost. It serves until ctx ends, then shuts
// down gracefully within 5 s.
func benchBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-baseline", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8099", "address to listen on (port 0 picks a free port)")
	synopsis := "usage: triggerctl bench-baseline [--listen 127.0.0.1:8099]\n\n" +
		"Serves POST /webhooks/:connector that discards the body and answers 204, as the baseline for\n" +
		"\"triggerctl bench --url http://ADDR\". Stops on SIGINT or SIGTERM.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected arguments %q", fs.Args())
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
	e.POST("/webhooks/:connector", func(c echo.Context) error {
		if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	})

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
