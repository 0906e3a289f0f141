package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
)

// DefaultSpoolMaxBytes is the spool's room on disk: about 60,000 spooled
// 11 KB deliveries (a record holds the body base64-encoded, about 17 KB).
const DefaultSpoolMaxBytes = 1 << 30

// config is everything triggerd is started with.
type Config struct {
	HTTPAddr       string
	DataDir        string
	NATSListen     string
	NATSURL        string
	NATSURLVar     string // the variable NATSURL came from; "" when from the command line
	NATSDropBehind bool
	// NATSReplicas is --nats-replicas: the replicas of every stream and
	// bucket triggerd creates; 0 picks 3 on a JetStream cluster of three
	// or more servers, else 1.
	NATSReplicas int
	// NATSClusterListen, NATSRoutes and NATSServerName make the embedded
	// server a member of a JetStream cluster (--nats-cluster-listen,
	// --nats-routes, --nats-server-name).
	NATSClusterListen string
	NATSRoutes        []string
	NATSServerName    string
	MaxBodyBytes      int64
	MaxBodyInFlight   int64
	CommitTimeout     time.Duration
	SpoolMaxBytes     int64
	EventRetention    time.Duration
	ArchiveRetention  time.Duration
	// NoDeliveryLog turns off the delivery log (--delivery-log=false):
	// the console's Deliveries and Events pages stay empty.
	NoDeliveryLog   bool
	DedupWindow     time.Duration
	MaxInlineBytes  int
	ShutdownTimeout time.Duration
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
	// PublicURL is where browsers and providers reach this server; empty,
	// it is derived from where the server listens (listeningOn).
	PublicURL string
	// ReturnOrigins are the origins of --connect-return-origins; a connect
	// flow's return_to may name those and the public URL's (returnOrigins).
	ReturnOrigins []string
	EncryptionKey string // file flag; the key itself comes from TRIGGERD_ENCRYPTION_KEY
	// CodeHostSecretFile and DeploySecretFile name files holding the
	// webhook secrets, read again every 10 s and on SIGHUP.
	CodeHostSecretFile, DeploySecretFile string
	Providers                            ProviderConfig
	Sandbox                              bool
	CodeHostSecrets                      []string
	DeploySecrets                        []string
	Dispatch                             DispatchConfig
}

// DispatchConfig configures the dispatcher and the webhook registry.
type DispatchConfig struct {
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

// Check refuses settings the dispatcher would otherwise replace by its
// defaults without a word (a zero) or cannot work with (a negative).
func (d *DispatchConfig) Check() error {
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

// SecretSource describes where a secret comes from: an environment
// variable, a file named by a flag, or a file generated once in the data dir.
type SecretSource struct {
	Env      string // comma-separated secrets
	FileFlag string // flag naming a file holding them
	GenFile  string // file name in the data dir, generated when neither is set
}

var (
	CodeHostSecret = SecretSource{"TRIGGERD_CODEHOST_WEBHOOK_SECRET", "codehost-webhook-secret-file", "codehost_webhook_secret"}
	DeploySecret   = SecretSource{"TRIGGERD_DEPLOY_WEBHOOK_SECRET", "deploy-webhook-secret-file", "deploy_webhook_secret"}
	// AdminKey authenticates tenant creation (POST /v1/tenants).
	AdminKey = SecretSource{"TRIGGERD_ADMIN_KEY", "", "admin_key"}
	// NATSPassword is the embedded NATS's operator password (user
	// bus.OperatorUser): triggerd and triggerctl connect with it, agents
	// with their own.
	NATSPassword = SecretSource{"TRIGGERD_NATS_PASSWORD", "", "nats_password"}
)

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

// listeningOn records the address the HTTP server listens on: a Config
// without a public URL takes this one, so hooks registered on a local (or
// sandboxed) provider reach the port actually bound (--http-addr
// 127.0.0.1:0 picks one).
func (c *Config) listeningOn(addr string) {
	if c.PublicURL == "" {
		c.PublicURL = localURL(addr)
	}
}

// ConnectReturnOrigins are the origins a connect flow's return_to may name: the
// public URL's and those of --connect-return-origins.
func (c Config) ConnectReturnOrigins() []string {
	u, _ := url.Parse(c.PublicURL) // checked by parseConfig
	own, _ := api.Origin(u.Scheme + "://" + u.Host)
	if slices.Contains(c.ReturnOrigins, own) {
		return c.ReturnOrigins
	}
	return append([]string{own}, c.ReturnOrigins...)
}

// externalNATSError says where the URL of an external NATS that failed
// came from: a TRIGGERD_NATS_URL exported for triggerctl also reaches
// triggerd, which then embeds no NATS and ignores --nats-listen. The URL
// itself is left to err (bus.Connect's errors carry it with any password
// redacted).
func externalNATSError(cfg Config, err error) error {
	if bus.Unauthorized(err) {
		err = fmt.Errorf("%w (another triggerd's embedded NATS takes its operator password: set %s, or copy that triggerd's %s into --data-dir; other servers take the user and password in the URL, nats://user:password@host:port)",
			err, NATSPassword.Env, NATSPassword.GenFile)
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
	if v, ok := lookup(NATSPassword.Env); ok && v != "" {
		if s := ingest.SplitSecrets(v); len(s) > 0 {
			return bus.OperatorUser, s[0], nil
		}
	}
	path := filepath.Join(dataDir, NATSPassword.GenFile)
	s, err := ingest.ReadSecretFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("read the NATS operator password %s: %w (fix it, or set %s)", path, err, NATSPassword.Env)
	}
	return bus.OperatorUser, s[0], nil
}

// loadSecrets resolves one endpoint's secrets: the file flag, else the
// environment variable, else a secret generated once into the data dir
// (mode 0600) and reused on later starts. It returns the secrets and where
// they came from (never the values).
func loadSecrets(ws SecretSource, file string, dataDir string, lookup func(string) (string, bool)) ([]string, string, error) {
	if file != "" {
		s, err := readSecretFile(ws.FileFlag, file)
		if err != nil {
			return nil, "", err
		}
		return s, "file " + file, nil
	}
	// An empty variable counts as unset (compose files pass "" through).
	if v, ok := lookup(ws.Env); ok && v != "" {
		s := ingest.SplitSecrets(v)
		if len(s) == 0 {
			return nil, "", fmt.Errorf("%s is set but holds no secret; unset it to have one generated, or set it to a random string", ws.Env)
		}
		return s, "environment " + ws.Env, nil
	}
	path := filepath.Join(dataDir, ws.GenFile)
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
	return []string{secret}, "generated into " + path + " (set " + ws.Env + " to choose your own)", nil
}

// Check refuses a configuration triggerd could only find wrong once it
// has started (the bus's retention floors, the providers' base URLs), so
// that a mistake is reported before anything is written into the data
// dir. Run calls it first; cmd/triggerd calls it after reading flags.
func (c Config) Check() error {
	if c.ArchiveRetention > 0 && c.ArchiveRetention < bus.MinArchiveRetention {
		return fmt.Errorf("--archive-retention %s is shorter than the promised %s: duplicates and replays must stay available that long; set it to %s or more",
			c.ArchiveRetention, bus.MinArchiveRetention, bus.MinArchiveRetention)
	}
	if c.DedupWindow > 0 && c.EventRetention > 0 && c.DedupWindow > c.EventRetention {
		return fmt.Errorf("--dedup-window %s exceeds --event-retention %s: JetStream requires the window to fit in the retention", c.DedupWindow, c.EventRetention)
	}
	return c.Providers.checkURLs()
}
