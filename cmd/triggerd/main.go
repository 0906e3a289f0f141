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
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/spool"
	"github.com/triggerd/triggerd/tenants"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}

// defaultGCPercent is triggerd's GOGC unless told otherwise. Under a burst
// of webhooks the heap is mostly short-lived buffers (bodies, envelopes,
// the server's copies of messages), and at Go's 100 the collector ran about
// eight times a second on a live heap of up to 84 MB and took 4-6 % of the
// CPU. At
// 300 the heap may grow to four times the live data instead of twice, and
// the CPU per webhook measured 6 % lower (BENCHMARKS.md, session 9).
const defaultGCPercent = 300

// gcPercent returns the collector target to set: --gc-percent, unless the
// GOGC variable is set (Go has applied it already; ok is false).
func gcPercent(cfg config, lookup func(string) (string, bool)) (pct int, ok bool) {
	if _, set := lookup("GOGC"); set {
		return 0, false
	}
	return cfg.GCPercent, true
}

// run starts triggerd and blocks until ctx ends or a component fails. It
// returns the process exit code: 0 after a clean shutdown, 1 on a failure,
// 2 on bad configuration.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stderr io.Writer) int {
	cfg, files, err := parseConfig(args, lookup, stderr)
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
	if err := serve(ctx, cfg, files, lookup, log); err != nil {
		log.Error().Err(err).Msg("triggerd stopped")
		return 1
	}
	return 0
}

func newLogger(cfg config, stderr io.Writer) (zerolog.Logger, error) {
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

// serve wires the components, runs them until ctx ends, and shuts them down
// in reverse order within cfg.ShutdownTimeout.
func serve(ctx context.Context, cfg config, files map[string]string, lookup func(string) (string, bool), log zerolog.Logger) error {
	codeHostSecrets, codeHostFrom, err := loadSecrets(codeHostSecret, files[codeHostSecret.fileFlag], cfg.DataDir, lookup)
	if err != nil {
		return err
	}
	deploySecrets, deployFrom, err := loadSecrets(deploySecret, files[deploySecret.fileFlag], cfg.DataDir, lookup)
	if err != nil {
		return err
	}
	log.Info().Str("codehost", codeHostFrom).Str("deploy", deployFrom).Msg("webhook secrets loaded")
	codeHost, err := ingest.NewVerifier(ingest.CodeHostScheme, codeHostSecrets...)
	if err != nil {
		return err
	}
	deploy, err := ingest.NewVerifier(ingest.DeployScheme, deploySecrets...)
	if err != nil {
		return err
	}
	var secretFiles []*secretFile
	for _, f := range []*secretFile{
		{flag: codeHostSecret.fileFlag, v: codeHost, secrets: codeHostSecrets},
		{flag: deploySecret.fileFlag, v: deploy, secrets: deploySecrets},
	} {
		if f.path = files[f.flag]; f.path != "" {
			secretFiles = append(secretFiles, f)
		}
	}
	defer watchSecrets(secretFiles, secretReloadInterval, log)()

	adminKeys, adminFrom, err := loadSecrets(adminKey, "", cfg.DataDir, lookup)
	if err != nil {
		return err
	}
	encKey, _ := lookup("TRIGGERD_ENCRYPTION_KEY")
	keys, keyFrom, err := accounts.LoadKeys(encKey, cfg.EncryptionKey, cfg.DataDir)
	if err != nil {
		return err
	}
	vault, err := accounts.NewVault(keys...)
	if err != nil {
		return err
	}
	log.Info().Str("admin_key", adminFrom).Str("encryption_key", keyFrom).Msg("keys loaded")
	// Listen before starting anything slow, so a busy port fails fast.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", cfg.HTTPAddr, err)
	}
	defer ln.Close()

	cfg.listeningOn(ln.Addr().String())
	var sb *sandbox
	providerLookup := lookup
	if cfg.Sandbox {
		sb = startSandbox()
		defer sb.close()
		providerLookup = sb.point(&cfg.Providers, lookup)
		log.Warn().Str("github", sb.github).Str("vercel", sb.vercel).Str("analytics", sb.analytics).
			Msg("sandbox mode: the providers are in-process fakes; nothing reaches the real services")
	}
	providers, unconfigured, err := buildProviders(cfg.Providers, cfg.PublicURL, providerLookup)
	if err != nil {
		return err
	}
	if len(unconfigured) > 0 {
		log.Info().Strs("connectors", unconfigured).Msg("connectors without OAuth client settings cannot connect accounts (see --<connector>-client-id)")
	}

	// The store opens first: the embedded NATS checks agents' passwords
	// in it from the moment it listens (an agent reconnecting to a
	// restarted triggerd is let in at once).
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()

	natsURL := cfg.NATSURL
	var embedded *bus.Embedded
	var natsUser, natsPass string
	if natsURL != "" {
		// Another triggerd's embedded NATS, say: connect as its operator
		// when the password is at hand and the URL names no user.
		if natsUser, natsPass, err = externalNATSCredentials(natsURL, cfg.DataDir, lookup); err != nil {
			return err
		}
	} else {
		natsPasswords, natsFrom, err := loadSecrets(natsPassword, "", cfg.DataDir, lookup)
		if err != nil {
			return err
		}
		natsUser, natsPass = bus.OperatorUser, natsPasswords[0]
		refusals := log.With().Str("component", "nats").Logger().Sample(&zerolog.BurstSampler{Burst: 20, Period: time.Minute})
		embedded, err = bus.StartEmbedded(bus.EmbeddedOptions{
			Listen:     cfg.NATSListen,
			DataDir:    cfg.DataDir,
			Logger:     natsLogger{log.With().Str("component", "nats").Logger()},
			ListenFlag: "--nats-listen",
			DropBehind: cfg.NATSDropBehind,
			Auth: &bus.ClientAuth{
				OperatorPasswords: natsPasswords,
				Agents:            registry.AgentPasswords{Store: st},
				OnRefused: func(user string, reason error) {
					refusals.Warn().Str("user", user).Str("reason", reason.Error()).Msg("NATS connection refused")
				},
			},
		})
		if err != nil {
			return err
		}
		defer embedded.Shutdown()
		natsURL = embedded.ClientURL()
		log.Info().Str("nats_url", natsURL).Str("store", cfg.DataDir).Bool("drop_behind", cfg.NATSDropBehind).
			Str("operator_password", natsFrom).Msg("embedded NATS with JetStream started; agents connect as themselves, operators as " + bus.OperatorUser)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Ingest is built before the bus, on a slot the bus takes once all is
	// up: an external NATS that cannot be reached at startup then leaves
	// webhooks spooled, not refused, while serve keeps trying it.
	var slot busSlot
	spooler, err := openSpool(cfg, &slot, reg, log)
	if err != nil {
		return err
	}
	hooks, activity, err := newIngestHooks(st, vault, reg, log)
	if err != nil {
		return err
	}
	// Stopped after the HTTP server (deferred later, so closed first),
	// before the store.
	defer runActivity(activity)()
	ing, err := ingest.New(ingest.Options{
		Spool:                spooler,
		Committer:            &slot,
		CodeHost:             codeHost,
		Deploy:               deploy,
		Hooks:                hooks,
		Activity:             activity,
		Ready:                slot.Ready,
		MaxBodyBytes:         cfg.MaxBodyBytes,
		MaxBodyBytesInFlight: cfg.MaxBodyInFlight,
		CommitTimeout:        cfg.CommitTimeout,
		Logger:               log,
		Registerer:           reg,
	})
	if err != nil {
		return err
	}
	web := newWebServer(ln, cfg.HTTPReadTimeout)
	defer web.close()

	busOpts := bus.Options{
		Name:             "triggerd",
		User:             natsUser,
		Password:         natsPass,
		Embedded:         embedded,
		EventRetention:   cfg.EventRetention,
		ArchiveRetention: cfg.ArchiveRetention,
		DedupWindow:      cfg.DedupWindow,
		MaxInlineBytes:   cfg.MaxInlineBytes,
		// Agents' consumer creations and results come through triggerd
		// (agent.Imports); on an external NATS, when its operator routes
		// them here.
		ServeAgents: true,
		OnConnectionChange: func(up bool, detail string) {
			if up {
				log.Info().Str("component", "bus").Msg(detail)
			} else {
				log.Warn().Str("component", "bus").Msg(detail)
			}
		},
		OnWorkStall: func(durable string, pending uint64) {
			log.Warn().Str("component", "bus").Str("consumer", durable).Uint64("pending", pending).
				Msg("consumer had stopped pulling with messages waiting; pulling afresh")
		},
	}
	b, err := connectBus(ctx, natsURL, busOpts)
	if err != nil && embedded == nil && natsUnreachable(err) {
		// A supervisor restarting triggerd until NATS is back would keep
		// the port closed meanwhile, and the code-hosting sender does not
		// retry a delivery it could not make.
		log.Warn().Err(err).Str("nats_url", bus.RedactURL(natsURL)).Str("http_addr", ln.Addr().String()).
			Msg(unreachableMessage(spooler))
		web.serve(newHandler(log, ing, nil, reg))
		b, err = awaitBus(ctx, natsURL, busOpts, log)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Stopped before NATS was reached: what was spooled meanwhile
		// stays in the spool for the next start.
		log.Info().Msg("shutting down")
		shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		if err := web.shutdown(shutdownCtx); err != nil {
			log.Warn().Err(err).Msg("http shutdown was cut short")
		}
		return nil
	case embedded == nil:
		// Say which setting named that NATS: it may be a variable the
		// user exported for triggerctl.
		return externalNATSError(cfg, err)
	default:
		return err
	}
	defer b.Close()

	acct, err := accounts.New(accounts.Options{Store: st, Vault: vault, Providers: providers, Logger: log})
	if err != nil {
		return err
	}
	tenantSvc := tenants.New(st, nil)
	if path, created, err := tenantSvc.EnsureDefault(ctx, cfg.DataDir); err != nil {
		return err
	} else if created {
		log.Info().Str("key_file", path).Msg("created the default tenant; its API key is in key_file")
	}
	var sandboxAccounts []store.Account
	if sb != nil {
		tid, err := tenantSvc.Default(ctx)
		if err != nil {
			return err
		} else if tid == "" {
			return fmt.Errorf("sandbox: no tenant named %s to connect the sandbox accounts to", tenants.DefaultName)
		}
		if sandboxAccounts, err = sb.adopt(ctx, acct, tid, log); err != nil {
			return err
		}
	}
	runner, err := newStepRunner(cfg.Providers, acct, st, log)
	if err != nil {
		return err
	}
	disp, err := newDispatch(ctx, cfg, b, embedded, st, acct, vault, runner, hooks, reg, log)
	if err != nil {
		return err
	}
	for _, a := range sandboxAccounts {
		// An account removed in an earlier sandbox run is connected
		// again: its triggers come back as a finished sign-in's would.
		if err := disp.registry.AccountConnected(ctx, a.TenantID, a.ID); err != nil {
			log.Warn().Err(err).Str("account", a.ID).Msg("reactivating the sandbox account's triggers")
		}
	}
	mgmt, err := api.New(api.Options{
		Accounts: acct, Auth: tenantSvc, Tenants: tenantSvc, Steps: runner, AdminKeys: adminKeys, Logger: log,
		ReturnOrigins: cfg.returnOrigins(), ReturnOriginsSetting: "--connect-return-origins (TRIGGERD_CONNECT_RETURN_ORIGINS)",
		Registry: disp.registry, Records: st, Replayer: disp.dispatcher, DryRunner: disp.dispatcher,
	})
	if err != nil {
		return err
	}
	if cfg.DebugAddr != "" {
		stopDebug, err := serveDebug(cfg.DebugAddr, log)
		if err != nil {
			return err
		}
		defer stopDebug()
	}
	slot.set(b)
	stopDispatch := disp.run(cfg, b, log)
	stopSpool := runSpool(spooler, log)
	web.serve(newHandler(log, ing, mgmt, reg))
	log.Info().Str("http_addr", ln.Addr().String()).Str("public_url", cfg.PublicURL).Str("nats_url", bus.RedactURL(natsURL)).Msg("triggerd ready: POST webhooks to /webhooks/codehost and /webhooks/deploy")

	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	case <-web.done:
		stopSpool(context.Background())
		stopDispatch(context.Background())
		return fmt.Errorf("http server: %w", web.err)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// In-flight deliveries finish (and become durable) before NATS closes;
	// the deferred closes then run in reverse order: bus, embedded NATS.
	if err := web.shutdown(shutdownCtx); err != nil {
		log.Warn().Err(err).Msg("http shutdown was cut short")
	}
	// No delivery is spooled now; what NATS can take before the deadline
	// leaves the spool, the rest waits for the next start.
	stopSpool(shutdownCtx)
	// Workers stop fetching and finish the jobs in hand (or leave them to
	// be redelivered) before NATS and the store close.
	stopDispatch(shutdownCtx)
	return nil
}

// newEcho returns an echo instance whose errors (unknown routes, wrong
// methods, panics) are JSON like every other answer.
func newEcho(log zerolog.Logger) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.Error().Err(err).Str("path", c.Path()).Bytes("stack", stack).Msg("handler panicked")
			return err
		},
	}))
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, code, msg := http.StatusInternalServerError, "internal", "internal error"
		var he *echo.HTTPError
		if errors.As(err, &he) {
			status = he.Code
			msg = fmt.Sprint(he.Message)
			switch status {
			case http.StatusNotFound:
				code, msg = "not_found", "no such endpoint (webhooks: POST /webhooks/codehost, /webhooks/deploy; management API: /v1/...)"
			case http.StatusMethodNotAllowed:
				code = "method_not_allowed"
			default:
				code = "error"
			}
		}
		body := map[string]map[string]string{"error": {"code": code, "message": msg}}
		if err := c.JSON(status, body); err != nil {
			log.Debug().Err(err).Msg("writing error answer")
		}
	}
	return e
}

// serveDebug serves net/http/pprof on addr until the returned stop is
// called.
func serveDebug(addr string, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("debug server stopped")
		}
	}()
	log.Info().Str("debug_addr", ln.Addr().String()).Msg("pprof profiles served")
	return func() { srv.Close(); <-done }, nil
}

// natsLogger sends the embedded NATS server's log lines to zerolog.
type natsLogger struct{ l zerolog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug().Msgf(format, v...) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn().Msgf(format, v...) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error().Msgf(format, v...) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error().Msgf(format, v...) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug().Msgf(format, v...) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Trace().Msgf(format, v...) }

// openSpool opens <data-dir>/spool, where deliveries go that NATS cannot
// make durable in time; nil when --spool-max-bytes is 0. It forwards them
// to slot's bus, once it has one.
func openSpool(cfg config, slot *busSlot, reg prometheus.Registerer, log zerolog.Logger) (*ingest.Spooler, error) {
	if cfg.SpoolMaxBytes == 0 {
		log.Info().Msg("no spool (--spool-max-bytes 0): deliveries NATS cannot take in time are answered 503")
		return nil, nil
	}
	disk, err := spool.Open(filepath.Join(cfg.DataDir, "spool"), spool.Options{MaxBytes: cfg.SpoolMaxBytes})
	if err != nil {
		return nil, fmt.Errorf("open the spool (--spool-max-bytes 0 runs without one): %w", err)
	}
	if n := disk.Len(); n > 0 {
		log.Warn().Int("pending", n).Str("dir", disk.Dir()).Msg("deliveries spooled by an earlier run wait to be published to NATS")
	}
	return ingest.NewSpooler(ingest.SpoolerOptions{
		Disk:          disk,
		Committer:     slot,
		Ready:         slot.Ready,
		Header:        bus.ArchivedHeader,
		CommitTimeout: cfg.CommitTimeout,
		Logger:        log,
		Registerer:    reg,
	})
}

// runSpool forwards spooled deliveries until the returned stop is called;
// stop then makes a last pass bounded by its context.
func runSpool(sp *ingest.Spooler, log zerolog.Logger) (stop func(context.Context)) {
	if sp == nil {
		return func(context.Context) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sp.Run(ctx)
	}()
	return func(shutdownCtx context.Context) {
		cancel()
		<-done
		if err := sp.Flush(shutdownCtx); err != nil {
			log.Warn().Err(err).Msg("spooled deliveries left for the next start")
		}
	}
}
