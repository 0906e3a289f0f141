package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors/analytics"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/deploy"
	"github.com/triggerd/triggerd/daemon"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/envflag"
)

// envPrefix is prepended to a flag's upper snake case name to give the
// environment variable that also sets it.
const envPrefix = "TRIGGERD_"

func dispatchFlags(fs *flag.FlagSet, d *daemon.DispatchConfig) {
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

// parseConfig reads flags, then the environment for flags not given. On
// --help it prints the flags, by group, to stdout and returns flag.ErrHelp; a flag
// error says how to see the flags instead of listing them all.
func parseConfig(args []string, lookup func(string) (string, bool), stdout io.Writer) (daemon.Config, error) {
	var c daemon.Config
	env := envflag.Env{Prefix: envPrefix}
	fs, returnOrigins := newFlagSet(&c, env)
	fs.SetOutput(stdout) // --help; errors are returned
	src, err := env.Parse(fs, args, lookup)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return c, err
	}
	if err != nil {
		return c, withFlagsHint(err)
	}
	if fs.NArg() > 0 {
		return c, withFlagsHint(fmt.Errorf("unexpected argument %q: triggerd takes only flags", fs.Arg(0)))
	}
	if c.NATSURL != "" {
		c.NATSURLVar = src["nats-url"]
	}
	if err := checkNATSFlags(c, src); err != nil {
		return c, err
	}
	if c.HTTPAddr == "" {
		return c, errors.New("--http-addr is empty: want host:port, such as :8080 or 127.0.0.1:8080")
	}
	if c.MaxBodyBytes <= 0 {
		return c, errors.New("--max-body-bytes must be positive")
	}
	if c.MaxBodyInFlight < c.MaxBodyBytes {
		return c, fmt.Errorf("--max-body-bytes-in-flight %d is less than --max-body-bytes %d: a body of the largest size would never be taken", c.MaxBodyInFlight, c.MaxBodyBytes)
	}
	if c.SpoolMaxBytes < 0 {
		return c, errors.New("--spool-max-bytes must be 0 (no spool) or positive")
	}
	if keep := max(c.EventRetention, c.ArchiveRetention); c.Dispatch.RunRetention < keep {
		return c, fmt.Errorf("--run-retention %s is shorter than the %s events or deliveries are kept (--event-retention, --archive-retention): "+
			"a delivery redelivered after its runs were pruned would start its agents again; set it to %s or more", c.Dispatch.RunRetention, keep, keep)
	}
	if err := c.Dispatch.Check(); err != nil {
		return c, err
	}
	if c.CommitTimeout <= 0 || c.ShutdownTimeout <= 0 || c.HTTPReadTimeout <= 0 {
		return c, errors.New("--commit-timeout, --shutdown-timeout and --http-read-timeout must be positive")
	}
	// Without --public-url, triggerd derives it from the address it binds.
	if u, err := url.Parse(c.PublicURL); c.PublicURL != "" && (err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "") {
		return c, fmt.Errorf("--public-url %q: want an absolute http(s) URL, such as https://triggerd.example.com", c.PublicURL)
	}
	if c.ReturnOrigins, err = parseOrigins(*returnOrigins); err != nil {
		return c, err
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		return c, fmt.Errorf("--log-format %q: want json or console", c.LogFormat)
	}
	if err := c.Check(); err != nil {
		return c, err
	}
	return c, nil
}

// newFlagSet defines triggerd's flags on a new flag set, each writing
// into c, except --connect-return-origins, which parseConfig checks and
// returns itself. docs/configuration.md is generated from it (see
// reference_test.go).
func newFlagSet(c *daemon.Config, env envflag.Env) (fs *flag.FlagSet, returnOrigins *string) {
	fs = flag.NewFlagSet("triggerd", flag.ContinueOnError)
	fs.StringVar(&c.HTTPAddr, "http-addr", ":8080", "address the HTTP server (webhooks, probes, metrics) listens on")
	fs.StringVar(&c.DataDir, "data-dir", "./data", "directory for the embedded NATS store, the spool and generated secrets")
	fs.StringVar(&c.NATSListen, "nats-listen", "127.0.0.1:4222", "address the embedded NATS server listens on for agents (not with --nats-url, which embeds none)")
	fs.BoolVar(&c.NATSDropBehind, "nats-drop-behind", bus.DropBehindSupported, "embedded NATS: write each stream's sealed blocks to disk and drop them from the page cache as soon as they are sealed, so the page cache does not grow with every event and new writes reuse its pages (Linux only; older events are then read from disk)")
	fs.StringVar(&c.NATSURL, "nats-url", "", "URL of an external NATS server with JetStream; empty runs an embedded one")
	fs.StringVar(&c.NATSClusterListen, "nats-cluster-listen", "", "embedded NATS: host:port it takes routes from the other members of a JetStream cluster on (with --nats-routes)")
	fs.Func("nats-routes", "embedded NATS: comma-separated route URLs (nats://host:port) of every member of its JetStream cluster, its own may be included; three triggerd processes so joined hold each stream on three servers (the members must share TRIGGERD_NATS_PASSWORD, which their routes authenticate with)", func(v string) error {
		c.NATSRoutes = nil
		for r := range strings.SplitSeq(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.NATSRoutes = append(c.NATSRoutes, r)
			}
		}
		return nil
	})
	fs.StringVar(&c.NATSServerName, "nats-server-name", "", "embedded NATS in a cluster: this server's name, unique in the cluster and the same across restarts (default: the host name and the cluster port)")
	fs.IntVar(&c.NATSReplicas, "nats-replicas", 0, "replicas of every stream and bucket triggerd creates (1 to 5, at most the JetStream servers of the cluster); 0 picks 3 on a cluster of three or more servers, else 1. A stream given more replicas by an operator keeps them")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", ingest.DefaultMaxBodyBytes, "largest webhook body accepted, in bytes (413 above)")
	fs.Int64Var(&c.MaxBodyInFlight, "max-body-bytes-in-flight", ingest.DefaultMaxBodyBytesInFlight, "bytes of webhook bodies held at once, signed or not (503 with Retry-After above)")
	fs.DurationVar(&c.CommitTimeout, "commit-timeout", ingest.DefaultCommitTimeout, "how long a delivery may wait for NATS to make it durable before it is spooled to <data-dir>/spool (or, without a spool, answered 503)")
	fs.Int64Var(&c.SpoolMaxBytes, "spool-max-bytes", daemon.DefaultSpoolMaxBytes, "room on local disk, in bytes, for deliveries NATS cannot take in time (unreachable or slow): they are fsync'd into <data-dir>/spool, answered 202 with \"spooled\": true and published when NATS is back; a full spool answers 503; 0 turns the spool off (503 at once)")
	fs.DurationVar(&c.EventRetention, "event-retention", bus.DefaultEventRetention, "how long trigger events stay in JetStream")
	fs.DurationVar(&c.ArchiveRetention, "archive-retention", bus.DefaultArchiveRetention, "how long raw deliveries are kept for replay and duplicate detection (at least 72h)")
	fs.Var(invertedBool{&c.NoDeliveryLog}, "delivery-log", "record every webhook delivery and triggerd's answer in the store, for the console's Deliveries and Events pages and its Overview's delivery chart (kept as long as --archive-retention); false leaves them empty")
	fs.DurationVar(&c.DedupWindow, "dedup-window", bus.DefaultDedupWindow, "JetStream duplicate window for event ids (covers retries of interrupted deliveries)")
	fs.IntVar(&c.MaxInlineBytes, "max-inline-bytes", bus.DefaultMaxInlineBytes, "payload bytes one delivery's events may carry inline in total; beyond, events carry payload_ref")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "bound on graceful shutdown")
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", 60*time.Second, "bound on reading one HTTP request, body included: a client that sends slower is cut off (a 25 MiB delivery must arrive at 420 KiB/s or faster at the default)")
	fs.IntVar(&c.GCPercent, "gc-percent", defaultGCPercent, "Go's garbage collection target (as GOGC, which wins when set): higher spends memory to save CPU; -1 turns the collector off (then set GOMEMLIMIT)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "json", "json or console")
	fs.StringVar(&c.RedisURL, "redis-url", "", "Redis for the store (redis://host:6379/0), shared by several triggerd processes; or Redis Sentinels, with master_name: redis://[user:password@]sentinel1:26379/0?master_name=mymaster&addr=sentinel2:26379&addr=sentinel3:26379 (the user and password serve the sentinels and the master); empty keeps the store in <data-dir>/triggerd.db")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", "triggerd:", "prefix of every Redis key triggerd writes")
	fs.BoolVar(&c.RedisAllowVolatile, "redis-allow-volatile", false, "start on a --redis-url server without appendonly yes, with a warning, instead of refusing: a restart of that Redis loses run records (tool steps of redelivered events can run again) and tokens (every account must be connected again); for tests and throwaway setups only")
	fs.StringVar(&c.PublicURL, "public-url", "", "URL at which users' browsers and providers reach this server; OAuth callbacks are <public-url>/v1/connect/<connector>/callback (default: http:// and the address --http-addr binds, on localhost when it names no host)")
	returnOrigins = fs.String("connect-return-origins", "", "comma-separated origins (https://app.example.com) a connect flow's return_to may send the user's browser back to after signing in, besides --public-url's; any other return_to is refused")
	fs.StringVar(&c.EncryptionKey, "encryption-key-file", "", "file holding the token encryption key(s) (base64 or hex of 32 bytes, comma-separated: the first encrypts, both decrypt); overrides a generated one, TRIGGERD_ENCRYPTION_KEY overrides both")
	providerFlags(fs, &c.Providers)
	dispatchFlags(fs, &c.Dispatch)
	fs.BoolVar(&c.Sandbox, "sandbox", false, "run in-process fakes of the three providers and connect one account per connector to the default tenant, to try every tool step offline")
	fs.StringVar(&c.DebugAddr, "debug-addr", "", "when set, serve Go's pprof profiles on this address (keep it private, e.g. 127.0.0.1:6060)")
	fs.StringVar(&c.CodeHostSecretFile, daemon.CodeHostSecret.FileFlag, "", "file holding the code-hosting webhook secret(s), separated by commas or line breaks, read again every 10 s and on SIGHUP; overrides "+daemon.CodeHostSecret.Env)
	fs.StringVar(&c.DeploySecretFile, daemon.DeploySecret.FileFlag, "", "file holding the deployment webhook secret(s), likewise; overrides "+daemon.DeploySecret.Env)
	fs.Usage = env.UsageGroups(fs, "usage: triggerd [flags]\n\nEvery flag can also be set as TRIGGERD_<FLAG_NAME> (an empty variable counts as unset). Webhook secrets come from "+
		daemon.CodeHostSecret.Env+" and "+daemon.DeploySecret.Env+" (comma-separated for rotation); when unset, one is generated into the data dir.", flagGroups)
	return fs, returnOrigins
}

// invertedBool is a boolean flag, true by default, over a field that
// says the opposite (false by default, as a zero Config has it).
type invertedBool struct{ off *bool }

func (b invertedBool) String() string {
	return strconv.FormatBool(b.off == nil || !*b.off)
}

func (b invertedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	*b.off = !v
	return nil
}

func (b invertedBool) IsBoolFlag() bool { return true }

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
func checkNATSFlags(c daemon.Config, src envflag.Sources) error {
	if c.NATSURL != "" {
		for _, name := range []string{"nats-routes", "nats-cluster-listen", "nats-server-name"} {
			if _, set := src[name]; set {
				return fmt.Errorf("%s and %s are both set: --nats-url connects to an external NATS and embeds none, so --%s would be ignored; unset one",
					src.Describe("nats-url"), src.Describe(name), name)
			}
		}
	}
	if (len(c.NATSRoutes) > 0) != (c.NATSClusterListen != "") {
		return errors.New("--nats-routes and --nats-cluster-listen go together: the members' route URLs, and the address this member takes routes on")
	}
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

// providerFlags are the connect-flow and API settings of the three
// connectors.
func providerFlags(fs *flag.FlagSet, p *daemon.ProviderConfig) {
	fs.StringVar(&p.CodeHostClientID, "codehost-client-id", "", "code-hosting OAuth app client id (secret: TRIGGERD_CODEHOST_CLIENT_SECRET); empty disables connecting code-hosting accounts")
	fs.StringVar(&p.CodeHostAuthBaseURL, "codehost-auth-base-url", codehost.DefaultAuthBaseURL, "code-hosting sign-in and token base URL")
	fs.StringVar(&p.CodeHostAPIBaseURL, "codehost-api-base-url", codehost.DefaultAPIBaseURL, "code-hosting REST API base URL")
	fs.StringVar(&p.DeployClientID, "deploy-client-id", "", "deployment-platform integration client id (secret: TRIGGERD_DEPLOY_CLIENT_SECRET)")
	fs.StringVar(&p.DeployIntegrationSlug, "deploy-integration-slug", "", "deployment-platform integration slug (its install URL is <auth base>/integrations/<slug>/new)")
	fs.StringVar(&p.DeployAuthBaseURL, "deploy-auth-base-url", deploy.DefaultAuthBaseURL, "deployment-platform install base URL")
	fs.StringVar(&p.DeployAPIBaseURL, "deploy-api-base-url", deploy.DefaultAPIBaseURL, "deployment-platform REST API base URL")
	fs.StringVar(&p.AnalyticsClientID, "analytics-client-id", "", "analytics (Google) OAuth client id (secret: TRIGGERD_ANALYTICS_CLIENT_SECRET)")
	fs.StringVar(&p.AnalyticsAuthURL, "analytics-auth-url", analytics.DefaultAuthBaseURL, "Google authorization endpoint")
	fs.StringVar(&p.AnalyticsTokenURL, "analytics-token-url", analytics.DefaultTokenURL, "Google token endpoint")
	fs.StringVar(&p.AnalyticsUserInfoURL, "analytics-userinfo-url", analytics.DefaultUserInfoURL, "Google userinfo endpoint")
	fs.StringVar(&p.AnalyticsAdminAPIURL, "analytics-admin-api-base-url", analytics.DefaultAdminAPIBaseURL, "Analytics Admin API base URL")
	fs.StringVar(&p.AnalyticsRevokeURL, "analytics-revoke-url", analytics.DefaultRevokeURL, "Google token revocation endpoint")
	fs.StringVar(&p.AnalyticsDataAPIURL, "analytics-data-api-base-url", analytics.DefaultDataAPIBaseURL, "Analytics Data API base URL")
	fs.BoolVar(&p.AllowPrivateURLs, "allow-private-provider-urls", false, "let requests to the providers (sign-in, tokens, API calls, hooks) connect to loopback, private or link-local addresses, for a provider inside your network (a GitHub Enterprise Server) or a local fake; off, the dial guard refuses them, whatever the URL or DNS answer, so that no token or client secret is sent inside the network (--sandbox turns it on)")
	fs.StringVar(&p.CodeHostMediaType, "codehost-media-type", "application/vnd.codehost+json", "the accept value the code-hosting API Call step requires (application/vnd.github+json for servers that want it)")
}

// flagGroups orders triggerd --help: first what a newcomer sets, then the
// rest by area. A new flag belongs in one of them (TestEveryFlagIsGrouped).
var flagGroups = []envflag.Group{
	{Title: "Start here", Flags: []string{"http-addr", "data-dir", "nats-listen", "nats-url", "sandbox", "public-url", "redis-url"}},
	{Title: "Webhooks", Flags: []string{"codehost-webhook-secret-file", "deploy-webhook-secret-file", "max-body-bytes", "max-body-bytes-in-flight",
		"http-read-timeout", "commit-timeout", "spool-max-bytes"}},
	{Title: "NATS and retention", Flags: []string{"nats-drop-behind", "nats-replicas", "event-retention", "archive-retention", "delivery-log", "dedup-window", "max-inline-bytes"}},
	{Title: "NATS cluster of triggerd processes (embedded servers)", Flags: []string{"nats-cluster-listen", "nats-routes", "nats-server-name"}},
	{Title: "Dispatch and agents", Flags: []string{"dispatch", "dispatch-concurrency", "dispatch-ack-wait", "dispatch-max-deliver", "step-timeout",
		"run-retention", "reconcile-interval", "poll-interval", "allow-private-agent-urls"}},
	{Title: "Store and keys", Flags: []string{"redis-prefix", "redis-allow-volatile", "encryption-key-file"}},
	{Title: "Connected accounts (OAuth clients and provider URLs)", Flags: []string{"connect-return-origins",
		"codehost-client-id", "codehost-auth-base-url", "codehost-api-base-url", "codehost-media-type",
		"deploy-client-id", "deploy-integration-slug", "deploy-auth-base-url", "deploy-api-base-url",
		"analytics-client-id", "analytics-auth-url", "analytics-token-url", "analytics-userinfo-url",
		"analytics-admin-api-base-url", "analytics-data-api-base-url", "analytics-revoke-url", "allow-private-provider-urls"}},
	{Title: "Operations", Flags: []string{"shutdown-timeout", "log-level", "log-format", "gc-percent", "debug-addr"}},
}
