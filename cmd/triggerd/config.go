package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/envflag"
)

// defaultSpoolMaxBytes is the spool's room on disk: about 60,000 spooled
// 11 KB deliveries (a record holds the body base64-encoded, about 17 KB).
const defaultSpoolMaxBytes = 1 << 30

// envPrefix is prepended to a flag's upper snake case name to give the
// environment variable that also sets it.
const envPrefix = "TRIGGERD_"

// config is everything triggerd is started with.
type config struct {
	HTTPAddr         string
	DataDir          string
	NATSListen       string
	NATSURL          string
	NATSURLVar       string // the variable NATSURL came from; "" when from the command line
	NATSDropBehind   bool
	MaxBodyBytes     int64
	MaxBodyInFlight  int64
	CommitTimeout    time.Duration
	SpoolMaxBytes    int64
	EventRetention   time.Duration
	ArchiveRetention time.Duration
	DedupWindow      time.Duration
	MaxInlineBytes   int
	ShutdownTimeout  time.Duration
	// HTTPReadTimeout bounds reading one request, body included.
	HTTPReadTimeout time.Duration
	GCPercent       int
	LogLevel        string
	LogFormat       string
	DebugAddr       string
	RedisURL        string
	RedisPrefix     string
	// RedisAllowVolatile accepts a Redis without appendonly yes, with a
	// warning, instead of refusing to start.
	RedisAllowVolatile bool
	PublicURL          string
	// publicURLSet is false when PublicURL is derived from where the
	// server listens (see localURL and listeningOn).
	publicURLSet bool
	// ReturnOrigins are the origins of --connect-return-origins; a connect
	// flow's return_to may name those and the public URL's (returnOrigins).
	ReturnOrigins   []string
	EncryptionKey   string // file flag; the key itself comes from TRIGGERD_ENCRYPTION_KEY
	Providers       providerConfig
	Sandbox         bool
	CodeHostSecrets []string
	DeploySecrets   []string
	Dispatch        dispatchConfig
}

// dispatchConfig configures the dispatcher and the webhook registry.
type dispatchConfig struct {
	Workers           bool
	Concurrency       int
	AckWait           time.Duration
	MaxDeliver        int
	StepTimeout       time.Duration
	RunRetention      time.Duration
	ReconcileInterval time.Duration
	PollInterval      time.Duration
	AllowPrivateURLs  bool
}

func (d *dispatchConfig) flags(fs *flag.FlagSet) {
	fs.BoolVar(&d.Workers, "dispatch", true, "run dispatch workers in this process (match events, start agents, run tool steps); false serves only ingest and the API")
	fs.IntVar(&d.Concurrency, "dispatch-concurrency", dispatch.DefaultConcurrency, "events (and, separately, HTTP agent pushes) one process works on at once")
	fs.DurationVar(&d.AckWait, "dispatch-ack-wait", dispatch.DefaultAckWait, "how long a worker may hold an event without a heartbeat before another worker gets it")
	fs.IntVar(&d.MaxDeliver, "dispatch-max-deliver", dispatch.DefaultMaxDeliver, "deliveries of one message before it is dead-lettered")
	fs.DurationVar(&d.StepTimeout, "step-timeout", dispatch.DefaultStepTimeout, "bound on one pipeline tool step")
	fs.DurationVar(&d.RunRetention, "run-retention", dispatch.DefaultRetention, "how long finished runs and the records of why each event did or did not start an agent are kept (at least --event-retention and --archive-retention)")
	fs.DurationVar(&d.ReconcileInterval, "reconcile-interval", 5*time.Minute, "how often registered webhooks are compared with upstream and repaired, and GitHub asked to redeliver what failed to reach triggerd (one process at a time)")
	fs.DurationVar(&d.PollInterval, "poll-interval", time.Minute, "how often polled kinds (new_gist, account-wide new_mention) are polled, one process at a time per account; GitHub's X-Poll-Interval can lengthen it (0: never)")
	fs.BoolVar(&d.AllowPrivateURLs, "allow-private-agent-urls", false, "let HTTP agents' URLs resolve to loopback or private addresses (for agents on the same host or network; off blocks SSRF)")
}

// check refuses settings the dispatcher would otherwise replace by its
// defaults without a word (a zero) or cannot work with (a negative).
func (d *dispatchConfig) check() error {
	for _, f := range []struct {
		name     string
		positive bool
	}{
		{"--dispatch-concurrency", d.Concurrency > 0},
		{"--dispatch-ack-wait", d.AckWait > 0},
		{"--dispatch-max-deliver", d.MaxDeliver > 0},
		{"--step-timeout", d.StepTimeout > 0},
	} {
		if !f.positive {
			return fmt.Errorf("%s must be positive (leave it unset for the default; --dispatch=false runs no workers)", f.name)
		}
	}
	if d.PollInterval < 0 || d.ReconcileInterval < 0 {
		return errors.New("--poll-interval and --reconcile-interval must be 0 (never) or positive")
	}
	return nil
}

// secretSource describes where a secret comes from: an environment
// variable, a file named by a flag, or a file generated once in the data dir.
type secretSource struct {
	env      string // comma-separated secrets
	fileFlag string // flag naming a file holding them
	genFile  string // file name in the data dir, generated when neither is set
}

var (
	codeHostSecret = secretSource{"TRIGGERD_CODEHOST_WEBHOOK_SECRET", "codehost-webhook-secret-file", "codehost_webhook_secret"}
	deploySecret   = secretSource{"TRIGGERD_DEPLOY_WEBHOOK_SECRET", "deploy-webhook-secret-file", "deploy_webhook_secret"}
	// adminKey authenticates tenant creation (POST /v1/tenants).
	adminKey = secretSource{"TRIGGERD_ADMIN_KEY", "", "admin_key"}
	// natsPassword is the embedded NATS's operator password (user
	// bus.OperatorUser): triggerd and triggerctl connect with it, agents
	// with their own.
	natsPassword = secretSource{"TRIGGERD_NATS_PASSWORD", "", "nats_password"}
)

// parseConfig reads flags, then the environment for flags not given. On
// --help it prints the whole flag list and returns flag.ErrHelp; a flag
// error says how to see the flags instead of listing them all.
func parseConfig(args []string, lookup func(string) (string, bool), stderr io.Writer) (config, map[string]string, error) {
	var c config
	env := envflag.Env{Prefix: envPrefix}
	files := map[string]*string{}
	fs := flag.NewFlagSet("triggerd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.HTTPAddr, "http-addr", ":8080", "address the HTTP server (webhooks, probes, metrics) listens on")
	fs.StringVar(&c.DataDir, "data-dir", "./data", "directory for the embedded NATS store, the spool and generated secrets")
	fs.StringVar(&c.NATSListen, "nats-listen", "127.0.0.1:4222", "address the embedded NATS server listens on for agents (not with --nats-url, which embeds none)")
	fs.BoolVar(&c.NATSDropBehind, "nats-drop-behind", bus.DropBehindSupported, "embedded NATS: write each stream's sealed blocks to disk and drop them from the page cache as soon as they are sealed, so the page cache does not grow with every event and new writes reuse its pages (Linux only; older events are then read from disk)")
	fs.StringVar(&c.NATSURL, "nats-url", "", "URL of an external NATS server with JetStream; empty runs an embedded one")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", ingest.DefaultMaxBodyBytes, "largest webhook body accepted, in bytes (413 above)")
	fs.Int64Var(&c.MaxBodyInFlight, "max-body-bytes-in-flight", ingest.DefaultMaxBodyBytesInFlight, "bytes of webhook bodies held at once, signed or not (503 with Retry-After above)")
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", ingest.DefaultCommitTimeout, "how long a delivery may wait for NATS to make it durable before it is spooled to <data-dir>/spool (or, without a spool, answered 503)")
	fs.Int64Var(&c.SpoolMaxBytes, "spool-max-bytes", defaultSpoolMaxBytes, "room on local disk, in bytes, for deliveries NATS cannot take in time (unreachable or slow): they are fsync'd into <data-dir>/spool, answered 202 with \"spooled\": true and published when NATS is back; a full spool answers 503; 0 turns the spool off (503 at once)")
	fs.DurationVar(&c.EventRetention, "event-retention", bus.DefaultEventRetention, "how long trigger events stay in JetStream")
	fs.DurationVar(&c.ArchiveRetention, "archive-retention", bus.DefaultArchiveRetention, "how long raw deliveries are kept for replay and duplicate detection (at least 72h)")
	fs.DurationVar(&c.DedupWindow, "dedup-window", bus.DefaultDedupWindow, "JetStream duplicate window for event ids (covers retries of interrupted deliveries)")
	fs.IntVar(&c.MaxInlineBytes, "max-inline-bytes", bus.DefaultMaxInlineBytes, "payload bytes one delivery's events may carry inline in total; beyond, events carry payload_ref")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "bound on graceful shutdown")
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", 60*time.Second, "bound on reading one HTTP request, body included: a client that sends slower is cut off (a 25 MiB delivery must arrive at 420 KiB/s or faster at the default)")
	fs.IntVar(&c.GCPercent, "gc-percent", defaultGCPercent, "Go's garbage collection target (as GOGC, which wins when set): higher spends memory to save CPU; -1 turns the collector off (then set GOMEMLIMIT)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or console")
	fs.StringVar(&c.RedisURL, "redis-url", "", "Redis for the store (redis://host:6379/0), shared by several triggerd processes; empty keeps the store in <data-dir>/triggerd.db")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", "triggerd:", "prefix of every Redis key triggerd writes")
	fs.BoolVar(&c.RedisAllowVolatile, "redis-allow-volatile", false, "start on a --redis-url server without appendonly yes, with a warning, instead of refusing: a restart of that Redis loses run records (tool steps of redelivered events can run again) and tokens (every account must be connected again); for tests and throwaway setups only")
	fs.StringVar(&c.PublicURL, "public-url", "", "URL at which users' browsers and providers reach this server; OAuth callbacks are <public-url>/v1/connect/<connector>/callback (default: http:// and the address --http-addr binds, on localhost when it names no host)")
	returnOrigins := fs.String("connect-return-origins", "", "comma-separated origins (https://app.example.com) a connect flow's return_to may send the user's browser back to after signing in, besides --public-url's; any other return_to is refused")
	fs.StringVar(&c.EncryptionKey, "encryption-key-file", "", "file holding the token encryption key(s) (base64 or hex of 32 bytes, comma-separated: the first encrypts, both decrypt); overrides a generated one, TRIGGERD_ENCRYPTION_KEY overrides both")
	c.Providers.flags(fs)
	c.Dispatch.flags(fs)
	fs.BoolVar(&c.Sandbox, "sandbox", false, "run in-process fakes of the three providers and connect one account per connector to the default tenant, to try every tool step offline")
	fs.StringVar(&c.DebugAddr, "debug-addr", "", "when set, serve Go's pprof profiles on this address (keep it private, e.g. 127.0.0.1:6060)")
	files[codeHostSecret.fileFlag] = fs.String(codeHostSecret.fileFlag, "", "file holding the code-hosting webhook secret(s), separated by commas or line breaks, read again every 10 s and on SIGHUP; overrides "+codeHostSecret.env)
	files[deploySecret.fileFlag] = fs.String(deploySecret.fileFlag, "", "file holding the deployment webhook secret(s), likewise; overrides "+deploySecret.env)
	fs.Usage = env.Usage(fs, "usage: triggerd [flags]\n\nEvery flag can also be set as TRIGGERD_<FLAG_NAME> (an empty variable counts as unset). Webhook secrets come from "+
		codeHostSecret.env+" and "+deploySecret.env+" (comma-separated for rotation); when unset, one is generated into the data dir.\n")
	src, err := env.Parse(fs, args, lookup)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return c, nil, err
	}
	if err != nil {
		return c, nil, withFlagsHint(err)
	}
	if fs.NArg() > 0 {
		return c, nil, withFlagsHint(fmt.Errorf("unexpected argument %q: triggerd takes only flags", fs.Arg(0)))
	}
	if c.NATSURL != "" {
		c.NATSURLVar = src["nats-url"]
	}
	if err := checkNATSFlags(c, src); err != nil {
		return c, nil, err
	}
	if c.HTTPAddr == "" {
		return c, nil, errors.New("--http-addr is empty: want host:port, such as :8080 or 127.0.0.1:8080")
	}
	if c.MaxBodyBytes <= 0 {
		return c, nil, errors.New("--max-body-bytes must be positive")
	}
	if c.MaxBodyInFlight < c.MaxBodyBytes {
		return c, nil, fmt.Errorf("--max-body-bytes-in-flight %d is less than --max-body-bytes %d: a body of the largest size would never be taken", c.MaxBodyInFlight, c.MaxBodyBytes)
	}
	if c.SpoolMaxBytes < 0 {
		return c, nil, errors.New("--spool-max-bytes must be 0 (no spool) or positive")
	}
	if keep := max(c.EventRetention, c.ArchiveRetention); c.Dispatch.RunRetention < keep {
		return c, nil, fmt.Errorf("--run-retention %s is shorter than the %s events or deliveries are kept (--event-retention, --archive-retention): "+
			"a delivery redelivered after its runs were pruned would start its agents again; set it to %s or more", c.Dispatch.RunRetention, keep, keep)
	}
	if err := c.Dispatch.check(); err != nil {
		return c, nil, err
	}
	if c.CommitTimeout <= 0 || c.ShutdownTimeout <= 0 || c.HTTPReadTimeout <= 0 {
		return c, nil, errors.New("--commit-timeout, --shutdown-timeout and --http-read-timeout must be positive")
	}
	if c.publicURLSet = c.PublicURL != ""; !c.publicURLSet {
		c.PublicURL = localURL(c.HTTPAddr)
	} else if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return c, nil, fmt.Errorf("--public-url %q: want an absolute http(s) URL, such as https://triggerd.example.com", c.PublicURL)
	}
	if c.ReturnOrigins, err = parseOrigins(*returnOrigins); err != nil {
		return c, nil, err
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return c, nil, fmt.Errorf("--log-format %q: want json or console", c.LogFormat)
	}
	fileVals := map[string]string{}
	for k, v := range files {
		fileVals[k] = *v
	}
	return c, fileVals, nil
}

// localURL is the public URL of a triggerd that was given none: where it
// listens, so that hooks registered on a local (or sandboxed) provider
// reach it on whatever --http-addr it was started with.
func localURL(httpAddr string) string {
	host, port, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "http://localhost:8080"
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// listeningOn records the address the HTTP server listens on: a public
// URL derived from --http-addr names the port actually bound (--http-addr
// 127.0.0.1:0 picks one).
func (c *config) listeningOn(addr string) {
	if !c.publicURLSet {
		c.PublicURL = localURL(addr)
	}
}

// returnOrigins are the origins a connect flow's return_to may name: the
// public URL's and those of --connect-return-origins.
func (c config) returnOrigins() []string {
	u, _ := url.Parse(c.PublicURL) // checked by parseConfig
	own, _ := api.Origin(u.Scheme + "://" + u.Host)
	if slices.Contains(c.ReturnOrigins, own) {
		return c.ReturnOrigins
	}
	return append([]string{own}, c.ReturnOrigins...)
}

// parseOrigins returns the origins listed (comma-separated) in
// --connect-return-origins.
func parseOrigins(list string) ([]string, error) {
	var origins []string
	for item := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		o, err := api.Origin(item)
		if err != nil {
			return nil, fmt.Errorf("--connect-return-origins: %w", err)
		}
		if !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	return origins, nil
}

// checkNATSFlags refuses --nats-listen beside --nats-url: with an external
// NATS nothing is embedded, so the listen address would be ignored, and the
// mistake (typically a TRIGGERD_NATS_URL exported for triggerctl) showed
// only later, as a failed connection to a NATS nobody started.
func checkNATSFlags(c config, src envflag.Sources) error {
	if _, listen := src["nats-listen"]; !listen || c.NATSURL == "" {
		return nil
	}
	return fmt.Errorf("%s and %s are both set: --nats-url connects to an external NATS and embeds none, so --nats-listen would be ignored; unset one",
		src.Describe("nats-url"), src.Describe("nats-listen"))
}

// withFlagsHint follows a command-line error with where to find the flags,
// rather than the whole list of them, which would bury the error.
func withFlagsHint(err error) error {
	return fmt.Errorf("%w\nrun \"triggerd --help\" for the flags", err)
}

// externalNATSError says where the URL of an external NATS that failed
// came from: a TRIGGERD_NATS_URL exported for triggerctl also reaches
// triggerd, which then embeds no NATS and ignores --nats-listen. The URL
// itself is left to err (bus.Connect's errors carry it with any password
// redacted).
func externalNATSError(cfg config, err error) error {
	if errors.Is(err, nats.ErrAuthorization) {
		err = fmt.Errorf("%w (another triggerd's embedded NATS takes its operator password: set %s, or copy that triggerd's %s into --data-dir; other servers take the user and password in the URL, nats://user:password@host:port)",
			err, natsPassword.env, natsPassword.genFile)
	}
	if cfg.NATSURLVar != "" {
		return fmt.Errorf("external NATS from %s (--nats-url): %w; check that server, or unset %s to run an embedded NATS", cfg.NATSURLVar, err, cfg.NATSURLVar)
	}
	return fmt.Errorf("external NATS from --nats-url: %w; check that server, or leave out --nats-url to run an embedded NATS", err)
}

// readSecretFile reads the secrets of the file named by --flag: separated
// by commas or line breaks, at least one.
func readSecretFile(flag, path string) ([]string, error) {
	s, err := ingest.ReadSecretFile(path)
	switch {
	case errors.Is(err, ingest.ErrNoSecret):
		return nil, fmt.Errorf("--%s %s holds no secret; write one or more (32+ random characters each), separated by commas or line breaks", flag, path)
	case err != nil:
		return nil, fmt.Errorf("--%s: cannot read the secret file: %w", flag, err)
	}
	return s, nil
}

// externalNATSCredentials returns the user and password triggerd connects
// to an external NATS with: none when the URL carries a user of its own;
// else the embedded NATS's operator credentials, when TRIGGERD_NATS_PASSWORD
// or <dataDir>/nats_password holds them (a second triggerd connecting to
// the first one's NATS); else none (a NATS without users). Unlike the
// embedded server's, the password is never generated here.
func externalNATSCredentials(natsURL, dataDir string, lookup func(string) (string, bool)) (user, pw string, err error) {
	if u, err := url.Parse(natsURL); err == nil && u.User != nil {
		return "", "", nil
	}
	if v, ok := lookup(natsPassword.env); ok && v != "" {
		if s := ingest.SplitSecrets(v); len(s) > 0 {
			return bus.OperatorUser, s[0], nil
		}
	}
	path := filepath.Join(dataDir, natsPassword.genFile)
	s, err := ingest.ReadSecretFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("read the NATS operator password %s: %w (fix it, or set %s)", path, err, natsPassword.env)
	}
	return bus.OperatorUser, s[0], nil
}

// loadSecrets resolves one endpoint's secrets: the file flag, else the
// environment variable, else a secret generated once into the data dir
// (mode 0600) and reused on later starts. It returns the secrets and where
// they came from (never the values).
func loadSecrets(ws secretSource, file string, dataDir string, lookup func(string) (string, bool)) ([]string, string, error) {
	if file != "" {
		s, err := readSecretFile(ws.fileFlag, file)
		if err != nil {
			return nil, "", err
		}
		return s, "file " + file, nil
	}
	// An empty variable counts as unset (compose files pass "" through).
	if v, ok := lookup(ws.env); ok && v != "" {
		s := ingest.SplitSecrets(v)
		if len(s) == 0 {
			return nil, "", fmt.Errorf("%s is set but holds no secret; unset it to have one generated, or set it to a random string", ws.env)
		}
		return s, "environment " + ws.env, nil
	}
	path := filepath.Join(dataDir, ws.genFile)
	s, err := ingest.ReadSecretFile(path)
	switch {
	case err == nil:
		return s, "file " + path, nil
	case errors.Is(err, ingest.ErrNoSecret):
		return nil, "", fmt.Errorf("%s is empty; delete it to have a new secret generated", path)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("read %s: %w", path, err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create data dir: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, "", err
	}
	secret := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process generated it first; use theirs.
		return loadSecrets(ws, "", dataDir, func(string) (string, bool) { return "", false })
	}
	if err != nil {
		return nil, "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.WriteString(secret + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, "", fmt.Errorf("write %s: %w", path, werr)
	}
	return []string{secret}, "generated into " + path + " (set " + ws.env + " to choose your own)", nil
}
