// Command triggerd is the integrations service's trigger engine: it takes
// signed webhooks from the code-hosting service and the deployment platform,
// maps them onto trigger events and publishes them to NATS JetStream.
//
// With no flags it runs on embedded defaults: an in-process NATS server with
// JetStream under ./data, listening for agents on 127.0.0.1:4222, and the
// HTTP server on :8080.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/daemon"
	"github.com/triggerd/triggerd/internal/buildinfo"
)

func main() {
	// issue 40: "triggerd version" (or --version) prints the build's
	// version, commit and Go version, and exits.
	if len(os.Args) == 2 && (os.Args[1] == "version" || os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Fprint(os.Stdout, buildinfo.Read().String("triggerd"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// defaultGCPercent is triggerd's GOGC unless told otherwise. Under a burst
// of webhooks the heap is mostly short-lived buffers (bodies, envelopes,
// the server's copies of messages), and at Go's 100 the collector ran about
// eight times a second on a live heap of up to 84 MB and took 4-6 % of the
// CPU. At 300 the heap may grow to four times the live data instead of twice, and
// the CPU per webhook measured 6 % lower (BENCHMARKS.md, session 9).
const defaultGCPercent = 300

// gcPercent returns the collector target to set: --gc-percent, unless the
// GOGC variable is set (Go has applied it already; ok is false).
func gcPercent(cfg daemon.Config, lookup func(string) (string, bool)) (pct int, ok bool) {
	if _, set := lookup("GOGC"); set {
		return 0, false
	}
	return cfg.GCPercent, true
}

// run starts triggerd and blocks until ctx ends or a component fails. It
// returns the process exit code: 0 after a clean shutdown, 1 on a failure,
// 2 on bad configuration.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, lookup, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "triggerd:", err)
		return 2
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "triggerd:", err)
		return 2
	}
	if pct, ok := gcPercent(cfg, lookup); ok {
		debug.SetGCPercent(pct)
	}
	if err := daemon.Run(ctx, cfg, lookup, log); err != nil {
		return 1 // daemon.Run has logged why
	}
	return 0
}

func newLogger(cfg daemon.Config, stderr io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	var w io.Writer = stderr
	if cfg.LogFormat == "console" {
		// Colour only on a terminal: redirected to a file or a journal,
		// escape codes would be written as text.
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.RFC3339, NoColor: !isTerminal(stderr)}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
