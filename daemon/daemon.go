package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/mcpserver"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/spool"
	"github.com/triggerd/triggerd/tenants"
)

// Run starts triggerd as cfg says and blocks until ctx ends or a part
// fails: it listens for webhooks and the API, runs (or connects to) NATS
// with JetStream, and dispatches events to agents. It then stops every
// part in reverse order of starting, within cfg.ShutdownTimeout. lookup
// reads the environment (secrets, the encryption key).
//
// Its last log line says that triggerd has stopped, and why when it failed.
func Run(ctx context.Context, cfg Config, lookup func(string) (string, bool), log zerolog.Logger) (err error) {
	d := &daemon{cfg: cfg, lookup: lookup, log: log, stops: stops{log: log}}
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
		defer cancel()
		d.stops.run(shutdownCtx)
		if err != nil {
			log.Error().Err(err).Msg("triggerd stopped")
		} else {
			log.Info().Msg("triggerd stopped")
		}
	}()
	if err := cfg.Check(); err != nil {
		return err
	}
	for _, phase := range []func(context.Context) error{
		d.loadKeys, d.listen, d.startSandbox, d.openStore, d.startNATS, d.buildIngest,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	if err := d.connectBus(ctx); err != nil || d.bus == nil {
		return err // nil: stopped before NATS was reached
	}
	if err := d.startServices(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		log.Info().Msg("shutting down")
		return nil
	case <-d.web.done:
		return fmt.Errorf("http server: %w", d.web.err)
	}
}

// daemon holds triggerd's parts as Run starts them, phase by phase.
type daemon struct {
	cfg    Config
	lookup func(string) (string, bool)
	log    zerolog.Logger
	stops  stops

	// loadKeys
	codeHost, deploy *ingest.Verifier
	adminKeys        []string
	vault            *accounts.Vault
	// listen, startSandbox
	ln        net.Listener
	sb        *sandbox.Sandbox
	providers map[string]connectors.Provider
	// providerTransport carries every request to the providers (see
	// ProviderConfig.transport).
	providerTransport http.RoundTripper
	// unconfigured names the connectors without OAuth client settings.
	unconfigured []string
	// openStore, startNATS
	st                 store.Store
	embedded           *bus.Embedded
	natsURL            string
	natsUser, natsPass string
	// buildIngest
	reg     *prometheus.Registry
	slot    busSlot
	spooler *ingest.Spooler
	hooks   *ingest.HookCache
	ing     *ingest.Server
	web     *webServer
	// connectBus
	bus *bus.Bus
}

// loadKeys reads (or generates once into the data dir) the webhook
// secrets, the admin key and the token encryption keys.
func (d *daemon) loadKeys(context.Context) error {
	cfg := d.cfg
	codeHostSecrets, codeHostFrom, err := loadSecrets(CodeHostSecret, cfg.CodeHostSecretFile, cfg.DataDir, d.lookup)
	if err != nil {
		return err
	}
	deploySecrets, deployFrom, err := loadSecrets(DeploySecret, cfg.DeploySecretFile, cfg.DataDir, d.lookup)
	if err != nil {
		return err
	}
	d.log.Info().Str("codehost", codeHostFrom).Str("deploy", deployFrom).Msg("webhook secrets loaded")
	if d.codeHost, err = ingest.NewVerifier(ingest.CodeHostScheme, codeHostSecrets...); err != nil {
		return err
	}
	if d.deploy, err = ingest.NewVerifier(ingest.DeployScheme, deploySecrets...); err != nil {
		return err
	}
	var secretFiles []*secretFile
	for _, f := range []*secretFile{
		{flag: CodeHostSecret.FileFlag, path: cfg.CodeHostSecretFile, v: d.codeHost, secrets: codeHostSecrets},
		{flag: DeploySecret.FileFlag, path: cfg.DeploySecretFile, v: d.deploy, secrets: deploySecrets},
	} {
		if f.path != "" {
			secretFiles = append(secretFiles, f)
		}
	}
	d.stops.addFunc("webhook secret files' watcher", watchSecrets(secretFiles, secretReloadInterval, d.log))

	adminKeys, adminFrom, err := loadSecrets(AdminKey, "", cfg.DataDir, d.lookup)
	if err != nil {
		return err
	}
	d.adminKeys = adminKeys
	encKey, _ := d.lookup("TRIGGERD_ENCRYPTION_KEY")
	keys, keyFrom, err := accounts.LoadKeys(encKey, cfg.EncryptionKey, cfg.DataDir)
	if err != nil {
		return err
	}
	if d.vault, err = accounts.NewVault(keys...); err != nil {
		return err
	}
	d.log.Info().Str("admin_key", adminFrom).Str("encryption_key", keyFrom).Msg("keys loaded")
	return nil
}

// listen binds the HTTP address before anything slow starts, so a busy
// port fails fast.
func (d *daemon) listen(context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", d.cfg.HTTPAddr, err)
	}
	d.ln = ln
	d.stops.add("http listener", func(context.Context) error { ln.Close(); return nil })
	d.cfg.listeningOn(ln.Addr().String())
	return nil
}

// startSandbox starts the providers' fakes with --sandbox, and builds the
// connectors' OAuth clients on the providers triggerd talks to.
func (d *daemon) startSandbox(context.Context) error {
	providerLookup := d.lookup
	if d.cfg.Sandbox {
		d.sb = sandbox.Start()
		d.stops.addFunc("sandbox providers", d.sb.Close)
		providerLookup = pointAtSandbox(d.sb, &d.cfg.Providers, d.lookup)
		d.log.Warn().Str("codehost", d.sb.CodeHostURL).Str("deploy", d.sb.DeployURL).Str("analytics", d.sb.AnalyticsURL).
			Msg("sandbox mode: the providers are in-process fakes; nothing reaches the real services")
	}
	if d.cfg.Providers.AllowPrivateURLs && !d.cfg.Sandbox {
		d.log.Warn().Str("flag", "--allow-private-provider-urls").
			Msg("requests to the providers may connect to loopback, private and link-local addresses: a provider URL or DNS answer pointing inside the network gets tokens sent there")
	}
	d.providerTransport = d.cfg.Providers.transport()
	providers, unconfigured, err := buildProviders(d.cfg.Providers, d.providerTransport, d.cfg.PublicURL, providerLookup)
	if err != nil {
		return err
	}
	d.providers = providers
	d.unconfigured = unconfigured
	if len(unconfigured) > 0 {
		d.log.Info().Strs("connectors", unconfigured).Msg("connectors without OAuth client settings cannot connect accounts (see --<connector>-client-id)")
	}
	return nil
}

// openStore opens bolt or Redis. It opens before NATS: the embedded NATS
// checks agents' passwords in it from the moment it listens (an agent
// reconnecting to a restarted triggerd is let in at once).
func (d *daemon) openStore(ctx context.Context) error {
	st, err := openStore(ctx, d.cfg, d.log)
	if err != nil {
		return err
	}
	d.st = st
	d.stops.add("store", func(context.Context) error { return st.Close() })
	return nil
}

// startNATS starts the embedded NATS server, or, with --nats-url, finds
// the credentials to connect to an external one.
func (d *daemon) startNATS(context.Context) error {
	cfg := d.cfg
	if d.natsURL = cfg.NATSURL; d.natsURL != "" {
		// Another triggerd's embedded NATS, say: connect as its operator
		// when the password is at hand and the URL names no user.
		var err error
		d.natsUser, d.natsPass, err = externalNATSCredentials(d.natsURL, cfg.DataDir, d.lookup)
		return err
	}
	natsPasswords, natsFrom, err := loadSecrets(NATSPassword, "", cfg.DataDir, d.lookup)
	if err != nil {
		return err
	}
	d.natsUser, d.natsPass = bus.OperatorUser, natsPasswords[0]
	natsLog := d.log.With().Str("component", "nats").Logger()
	refusals := natsLog.Sample(&zerolog.BurstSampler{Burst: 20, Period: time.Minute})
	embedded, err := bus.StartEmbedded(bus.EmbeddedOptions{
		Listen:     cfg.NATSListen,
		DataDir:    cfg.DataDir,
		Logger:     natsLogger{natsLog},
		ListenFlag: "--nats-listen",
		DropBehind: cfg.NATSDropBehind,
		Cluster: bus.EmbeddedCluster{
			ServerName: cfg.NATSServerName,
			Listen:     cfg.NATSClusterListen,
			Routes:     cfg.NATSRoutes,
			Password:   natsPasswords[0],
			ListenFlag: "--nats-cluster-listen",
			RoutesFlag: "--nats-routes",
		},
		Auth: &bus.ClientAuth{
			OperatorPasswords: natsPasswords,
			Agents:            registry.AgentPasswords{Store: d.st},
			OnRefused: func(user string, reason error) {
				refusals.Warn().Str("user", user).Str("reason", reason.Error()).Msg("NATS connection refused")
			},
		},
	})
	if err != nil {
		return err
	}
	d.embedded = embedded
	d.stops.addFunc("embedded NATS", embedded.Shutdown)
	d.natsURL = embedded.ClientURL()
	d.log.Info().Str("nats_url", d.natsURL).Str("store", cfg.DataDir).Bool("drop_behind", cfg.NATSDropBehind).
		Str("operator_password", natsFrom).Msg("embedded NATS with JetStream started; agents connect as themselves, operators as " + bus.OperatorUser)
	if n := embedded.ClusterSize(); n > 0 {
		d.log.Info().Strs("routes", cfg.NATSRoutes).Int("cluster_size", n).Str("cluster_listen", cfg.NATSClusterListen).
			Msg("embedded NATS joins a JetStream cluster: its routes authenticate with the operator password, which every member must share (TRIGGERD_NATS_PASSWORD); JetStream waits for a majority of the members")
	}
	return nil
}

// buildIngest builds the webhook receiver and the HTTP server, before the
// bus: ingest commits through a slot the bus takes once all is up, so an
// external NATS that cannot be reached at startup leaves webhooks spooled,
// not refused, while connectBus keeps trying it.
func (d *daemon) buildIngest(context.Context) error {
	d.reg = prometheus.NewRegistry()
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	spooler, err := openSpool(d.cfg, &d.slot, d.reg, d.log)
	if err != nil {
		return err
	}
	d.spooler = spooler
	hooks, activity, err := newIngestHooks(d.st, d.vault, d.reg, d.log)
	if err != nil {
		return err
	}
	d.hooks = hooks
	// Stopped after the HTTP server, before the store.
	d.stops.addFunc("hook activity recorder", runActivity(activity))
	// Console (issue 38): the delivery log, stopped after the HTTP server.
	var deliveryLog ingest.DeliveryLog
	if !d.cfg.NoDeliveryLog {
		dl, stopDeliveryLog, err := startDeliveryLog(d.cfg, d.st, d.reg, d.log)
		if err != nil {
			return err
		}
		d.stops.addFunc("delivery log", stopDeliveryLog)
		deliveryLog = dl
	}
	d.ing, err = ingest.New(ingest.Options{
		Spool:                spooler,
		Committer:            &d.slot,
		CodeHost:             d.codeHost,
		Deploy:               d.deploy,
		Hooks:                hooks,
		Activity:             activity,
		Deliveries:           deliveryLog, // console (issue 38)
		Ready:                d.slot.Ready,
		NotReadyReason:       d.slot.NotReadyReason,
		MaxBodyBytes:         d.cfg.MaxBodyBytes,
		MaxBodyBytesInFlight: d.cfg.MaxBodyInFlight,
		CommitTimeout:        d.cfg.CommitTimeout,
		MaxDeliveryAge:       maxDeliveryAge(d.cfg.ArchiveRetention),
		Logger:               d.log,
		Registerer:           d.reg,
	})
	if err != nil {
		return err
	}
	d.web = newWebServer(d.ln, d.cfg.HTTPReadTimeout)
	d.stops.add("http server", d.web.shutdown)
	return nil
}

// maxDeliveryAge is the age past which a delivery that says when it was
// created is refused (ingest.Options.MaxDeliveryAge): the archive's
// retention, which duplicates are recognised by, less the sender's clock
// skew allowed (a delivery stamped ahead of the time it was received is
// archived for less than its stamp suggests).
func maxDeliveryAge(archiveRetention time.Duration) time.Duration {
	if archiveRetention <= 0 {
		archiveRetention = bus.DefaultArchiveRetention
	}
	return archiveRetention - ingest.ClockSkew
}

// connectBus connects to NATS. An external NATS that cannot be reached
// is retried while ingest serves webhooks into the spool; d.bus stays nil
// when ctx ends first (what was spooled meanwhile waits for the next
// start).
func (d *daemon) connectBus(ctx context.Context) error {
	log := d.log
	busOpts := bus.Options{
		Name:             "triggerd",
		User:             d.natsUser,
		Password:         d.natsPass,
		Embedded:         d.embedded,
		EventRetention:   d.cfg.EventRetention,
		ArchiveRetention: d.cfg.ArchiveRetention,
		DedupWindow:      d.cfg.DedupWindow,
		MaxInlineBytes:   d.cfg.MaxInlineBytes,
		Replicas:         d.cfg.NATSReplicas,
		ReplicasFlag:     "--nats-replicas",
		OnReplicasKept: func(stream string, have, want int) {
			log.Warn().Str("component", "bus").Str("stream", stream).Int("replicas", have).Int("nats_replicas", want).
				Msg("stream has more replicas than --nats-replicas asks; left as it is (lower it by hand if that is meant)")
		},
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
	b, err := connectBus(ctx, d.natsURL, busOpts)
	// An external NATS, or the embedded server's cluster before a
	// majority of its members is up, is waited for.
	if err != nil && (d.embedded == nil || d.embedded.ClusterSize() > 0) && bus.Unreachable(err) {
		// A supervisor restarting triggerd until NATS is back would keep
		// the port closed meanwhile, and the code-hosting sender does not
		// retry a delivery it could not make.
		log.Warn().Err(err).Str("nats_url", bus.RedactURL(d.natsURL)).Str("http_addr", d.ln.Addr().String()).
			Msg(unreachableMessage(d.spooler))
		d.web.serve(newHandler(log, d.ing, nil, nil, d.reg))
		b, err = awaitBus(ctx, d.natsURL, busOpts, log)
	}
	switch {
	case err == nil:
		d.bus = b
		d.stops.addFunc("bus", b.Close)
		return nil
	case ctx.Err() != nil:
		log.Info().Msg("shutting down before NATS was reached; spooled deliveries wait for the next start")
		return nil
	case d.embedded == nil:
		// Say which setting named that NATS: it may be a variable the
		// user exported for triggerctl.
		return externalNATSError(d.cfg, err)
	default:
		return err
	}
}

// startServices builds what needs NATS (accounts, tenants, the step
// runner, the dispatcher and registry, the management API), starts the
// dispatcher and the spool's forwarding, and serves every route.
func (d *daemon) startServices(ctx context.Context) error {
	cfg, log, st := d.cfg, d.log, d.st
	acct, err := accounts.New(accounts.Options{Store: st, Vault: d.vault, Providers: d.providers, Logger: log, Transport: d.providerTransport})
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
	if d.sb != nil {
		tid, err := tenantSvc.Default(ctx)
		if err != nil {
			return err
		} else if tid == "" {
			return fmt.Errorf("sandbox: no tenant named %s to connect the sandbox accounts to", tenants.DefaultName)
		}
		if sandboxAccounts, err = d.sb.Adopt(ctx, acct, tid, log); err != nil {
			return err
		}
	}
	runner, err := newStepRunner(cfg.Providers, d.providerTransport, acct, st, log)
	if err != nil {
		return err
	}
	disp, err := newDispatch(ctx, cfg, d.bus, d.embedded, st, acct, d.vault, runner, d.hooks, d.reg, log)
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
		Accounts: notifyingAccounts{Service: acct, b: d.bus, log: log}, Auth: tenantSvc, Tenants: tenantSvc, Steps: runner, AdminKeys: d.adminKeys, Logger: log,
		ReturnOrigins: cfg.ConnectReturnOrigins(), ReturnOriginsSetting: "--connect-return-origins (TRIGGERD_CONNECT_RETURN_ORIGINS)",
		Registry: disp.registry, Records: st, Replayer: disp.dispatcher, DryRunner: disp.dispatcher, Unrecorded: disp.dispatcher,
	})
	if err != nil {
		return err
	}
	// MCP (mcp.go).
	mcpSrv, err := newMCP(acct, tenantSvc, runner, disp, st, log)
	if err != nil {
		return err
	}
	if err := listenMCP(ctx, d.bus, mcpSrv); err != nil {
		log.Warn().Err(err).Msg("MCP sessions hear of runs and account changes only at their next list")
	}
	// Console (issue 38).
	con, err := newConsole(consoleDeps{cfg: cfg, st: st, tenants: tenantSvc, accounts: acct, registry: disp.registry,
		replayer: disp.dispatcher, dryRunner: disp.dispatcher, steps: runner, bus: d.bus, adminKeys: d.adminKeys, unconfigured: d.unconfigured,
		ready: d.slot.Ready, notReadyReason: d.slot.NotReadyReason, reg: d.reg, log: log})
	if err != nil {
		return err
	}
	if cfg.DebugAddr != "" {
		stopDebug, err := serveDebug(cfg.DebugAddr, log)
		if err != nil {
			return err
		}
		d.stops.addFunc("pprof server", stopDebug)
	}
	d.slot.set(d.bus)
	// Workers stop fetching and finish the jobs in hand (or leave them to
	// be redelivered) before NATS and the store close.
	d.stops.add("dispatcher", stopWith(disp.run(cfg, d.bus, log)))
	// Once no delivery is spooled any more, what NATS can take before the
	// deadline leaves the spool; the rest waits for the next start.
	d.stops.add("spool forwarder", stopWith(runSpool(d.spooler, log)))
	handler := newHandler(log, d.ing, mgmt, con, d.reg)
	mountMCP(handler, mcpSrv)
	d.web.serve(handler)
	// In-flight deliveries finish (and become durable) before the rest
	// stops: the HTTP server moves to the end of the list.
	d.stops.add("http server", d.web.shutdown)
	log.Info().Str("http_addr", d.ln.Addr().String()).Str("public_url", cfg.PublicURL).Str("nats_url", bus.RedactURL(d.natsURL)).Int("nats_replicas", d.bus.Replicas()).
		Str("mcp", mcpserver.Path).Msg("triggerd ready: POST webhooks to /webhooks/codehost and /webhooks/deploy")
	return nil
}

// stopWith adapts a stop that takes a deadline and cannot fail.
func stopWith(stop func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error { stop(ctx); return nil }
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
func openSpool(cfg Config, slot *busSlot, reg prometheus.Registerer, log zerolog.Logger) (*ingest.Spooler, error) {
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
