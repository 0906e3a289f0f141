package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/daemon"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/envflag"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   int
		wantOK bool
	}{
		{"default", nil, nil, defaultGCPercent, true},
		{"flag", []string{"--gc-percent", "150"}, nil, 150, true},
		{"variable", nil, map[string]string{"TRIGGERD_GC_PERCENT": "-1"}, -1, true},
		{"GOGC wins", []string{"--gc-percent", "150"}, map[string]string{"GOGC": "50"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			cfg, err := parseConfig(tc.args, lookup, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := gcPercent(cfg, lookup); got != tc.want || ok != tc.wantOK {
				t.Errorf("gcPercent = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// runTriggerd runs triggerd in-process with env as its whole environment
// and returns its exit code and what it wrote to stdout and stderr
// together. GOGC is set so that run leaves the test binary's collector
// alone.
func runTriggerd(t *testing.T, env map[string]string, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := runTriggerdSplit(t, env, args...)
	return code, stdout + stderr
}

// runTriggerdSplit is runTriggerd with stdout and stderr apart.
func runTriggerdSplit(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	all := map[string]string{"GOGC": "100"}
	maps.Copy(all, env)
	var out, errs strings.Builder
	code = run(context.Background(), args, func(k string) (string, bool) { v, ok := all[k]; return v, ok }, &out, &errs)
	return code, out.String(), errs.String()
}

func TestEmptyVariableKeepsTheDefault(t *testing.T) {
	env := map[string]string{"TRIGGERD_HTTP_ADDR": "", "TRIGGERD_DISPATCH": "", "TRIGGERD_COMMIT_TIMEOUT": "", "TRIGGERD_NATS_URL": ""}
	cfg, err := parseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatalf("empty variables are an error: %v", err)
	}
	if cfg.HTTPAddr != ":8080" || !cfg.Dispatch.Workers || cfg.CommitTimeout <= 0 || cfg.NATSURL != "" {
		t.Errorf("http-addr %q, dispatch %v, commit-timeout %v, nats-url %q; want the defaults", cfg.HTTPAddr, cfg.Dispatch.Workers, cfg.CommitTimeout, cfg.NATSURL)
	}
}

func TestEmptyHTTPAddrIsAnError(t *testing.T) {
	_, err := parseConfig([]string{"--http-addr", ""}, func(string) (string, bool) { return "", false }, io.Discard)
	want := "--http-addr is empty: want host:port, such as :8080 or 127.0.0.1:8080"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestBadFlagIsShortAndSaysWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--max-body-bytes", "1MB"}, nil, `triggerd: invalid value "1MB" for flag -max-body-bytes: want a whole number, such as 100`},
		{nil, map[string]string{"TRIGGERD_COMMIT_TIMEOUT": "5"}, `triggerd: environment variable TRIGGERD_COMMIT_TIMEOUT="5": want a duration such as 5s, 2m or 1h30m`},
		{[]string{"--no-such-flag"}, nil, "triggerd: flag provided but not defined: -no-such-flag"},
		{[]string{"extra"}, nil, `triggerd: unexpected argument "extra": triggerd takes only flags`},
	} {
		code, stderr := runTriggerd(t, tc.env, tc.args...)
		want := tc.want + "\n" + `run "triggerd --help" for the flags` + "\n"
		if code != 2 || stderr != want {
			t.Errorf("%q %v: exit %d, stderr:\n%s\nwant exit 2 and:\n%s", tc.args, tc.env, code, stderr, want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		code, stdout, errs := runTriggerdSplit(t, nil, arg)
		if code != 0 || errs != "" {
			t.Errorf("%s: exit %d, stderr %q; want 0 and the help on stdout", arg, code, errs)
		}
		stderr := stdout
		for _, want := range []string{
			"usage: triggerd [flags]",
			"  --http-addr (env TRIGGERD_HTTP_ADDR, default \":8080\")\n",
			"  --commit-timeout (env TRIGGERD_COMMIT_TIMEOUT, default \"" + ingest.DefaultCommitTimeout.String() + "\")\n",
			"  --dispatch (env TRIGGERD_DISPATCH, default \"true\")\n",
			"  --deploy-webhook-secret-file (env TRIGGERD_DEPLOY_WEBHOOK_SECRET_FILE, default \"\")\n",
		} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: help does not contain %q:\n%s", arg, want, stderr)
			}
		}
		if n := strings.Count(stderr, "\n  --"); n < 40 {
			t.Errorf("%s: help lists %d flags, want all of them", arg, n)
		}
	}
}

func TestNATSURLVariableIsRecorded(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"TRIGGERD_NATS_URL": "nats://127.0.0.1:4558"}, "TRIGGERD_NATS_URL"},
		{[]string{"--nats-url", "nats://127.0.0.1:4558"}, map[string]string{"TRIGGERD_NATS_URL": "nats://other:4222"}, ""},
	} {
		cfg, err := parseConfig(tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.NATSURL != "nats://127.0.0.1:4558" || cfg.NATSURLVar != tc.want {
			t.Errorf("%q %v: nats-url %q from %q, want nats://127.0.0.1:4558 from %q", tc.args, tc.env, cfg.NATSURL, cfg.NATSURLVar, tc.want)
		}
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// An external NATS that refuses triggerd, or a URL that cannot be right,
// is an error at startup that names where the URL came from: no wait
// would cure it (unlike a NATS that cannot be reached yet, which triggerd
// waits for).
func TestRefusingExternalNATSNamesItsSource(t *testing.T) {
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Auth: &bus.ClientAuth{OperatorPasswords: []string{"the-operator-password"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	addr := strings.TrimPrefix(emb.ClientURL(), "nats://")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"variable", nil, map[string]string{"TRIGGERD_NATS_URL": "nats://agent:hunter2@" + addr},
			[]string{"external NATS from TRIGGERD_NATS_URL (--nats-url)", addr, "Authorization Violation", "unset TRIGGERD_NATS_URL to run an embedded NATS"}},
		{"flag", []string{"--nats-url", "nats://agent:hunter2@" + addr}, nil,
			[]string{"external NATS from --nats-url", addr, "Authorization Violation", "leave out --nats-url to run an embedded NATS"}},
		{"wrong operator password", nil, map[string]string{"TRIGGERD_NATS_URL": emb.ClientURL(), "TRIGGERD_NATS_PASSWORD": "hunter2"},
			[]string{"external NATS from TRIGGERD_NATS_URL (--nats-url)", "Authorization Violation", "operator password"}},
		{"bad port", []string{"--nats-url", "nats://127.0.0.1:99999"}, nil,
			[]string{"external NATS from --nats-url", "invalid port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--http-addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-format", "console"}, tc.args...)
			env := map[string]string{"GOGC": "100"}
			maps.Copy(env, tc.env)
			// Bounded: a triggerd that waited for this NATS would run on.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stderr strings.Builder
			code := run(ctx, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard, &stderr)
			if code != 1 || ctx.Err() != nil {
				t.Fatalf("exit %d (deadline: %v), want 1 at once:\n%s", code, ctx.Err(), stderr.String())
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("the error does not say %q:\n%s", want, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("the NATS password reached the log:\n%s", stderr.String())
			}
		})
	}
}

func TestNATSListenBesideNATSURLIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"variable and flag", []string{"--nats-listen", "127.0.0.1:4558"}, map[string]string{"TRIGGERD_NATS_URL": "nats://127.0.0.1:4558"},
			"--nats-url (from TRIGGERD_NATS_URL) and --nats-listen (on the command line) are both set"},
		{"both flags", []string{"--nats-url", "nats://127.0.0.1:4558", "--nats-listen", "127.0.0.1:4558"}, nil,
			"--nats-url (on the command line) and --nats-listen (on the command line) are both set"},
		{"both variables", nil, map[string]string{"TRIGGERD_NATS_URL": "nats://127.0.0.1:4558", "TRIGGERD_NATS_LISTEN": "127.0.0.1:4558"},
			"--nats-url (from TRIGGERD_NATS_URL) and --nats-listen (from TRIGGERD_NATS_LISTEN) are both set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := runTriggerd(t, tc.env, tc.args...)
			want := "triggerd: " + tc.want + ": --nats-url connects to an external NATS and embeds none, so --nats-listen would be ignored; unset one\n"
			if code != 2 || stderr != want {
				t.Errorf("exit %d, stderr:\n%s\nwant 2 and:\n%s", code, stderr, want)
			}
		})
	}
	// Each alone is fine, and so is an explicitly empty --nats-url, which
	// embeds a NATS.
	for _, args := range [][]string{{"--nats-url", "nats://127.0.0.1:4558"}, {"--nats-listen", "127.0.0.1:4558"}, {"--nats-url", "", "--nats-listen", "127.0.0.1:4558"}} {
		if _, err := parseConfig(args, func(string) (string, bool) { return "", false }, io.Discard); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// Runs must outlive what could start them again: a retention shorter than
// the events' or the archive's is refused with the length to use.
func TestRunRetentionShorterThanTheArchiveIsAnError(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	_, err := parseConfig([]string{"--run-retention", "100h"}, none, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--run-retention 100h0m0s is shorter than the 168h0m0s") || !strings.Contains(err.Error(), "set it to 168h0m0s or more") {
		t.Fatalf("err = %v", err)
	}
	cfg, err := parseConfig([]string{"--run-retention", "72h", "--event-retention", "72h", "--archive-retention", "72h"}, none, io.Discard)
	if err != nil || cfg.Dispatch.RunRetention != 72*time.Hour {
		t.Fatalf("run retention %s, err %v; want 72h accepted", cfg.Dispatch.RunRetention, err)
	}
}

// TestZeroDispatchSettingsAreRefused: a zero the dispatcher would
// silently replace by its default, or a negative, is an error naming the
// flag; 0 where it means "never" is taken.
func TestZeroDispatchSettingsAreRefused(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{
		{"--dispatch-concurrency", "0"}, {"--dispatch-ack-wait", "0s"}, {"--dispatch-max-deliver", "0"},
		{"--step-timeout", "0s"}, {"--dispatch-concurrency", "-2"}, {"--poll-interval", "-1s"}, {"--reconcile-interval", "-1m"},
	} {
		_, err := parseConfig(args, none, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: err %v, want one naming %s", args, err, args[0])
		}
	}
	cfg, err := parseConfig([]string{"--poll-interval", "0", "--reconcile-interval", "0"}, none, io.Discard)
	if err != nil || cfg.Dispatch.PollInterval != 0 || cfg.Dispatch.ReconcileInterval != 0 {
		t.Fatalf("0 for never: %+v, %v", cfg.Dispatch, err)
	}
}

// TestConsoleLogsHaveNoColourOffATerminal: --log-format console into a
// file or pipe writes no escape codes.
func TestConsoleLogsHaveNoColourOffATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "triggerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log, err := newLogger(daemon.Config{LogLevel: "info", LogFormat: "console"}, f)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Str("delivery_id", "d-1").Msg("spooled")
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "spooled") || strings.Contains(string(data), "\x1b[") {
		t.Fatalf("console log in a file: %q, want the message without escape codes", data)
	}
}

// TestIssueDefaults: with nothing set, triggerd runs as the issue says,
// and each of these flags is read from TRIGGERD_ + its upper snake name.
func TestIssueDefaults(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := parseConfig(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != ":8080" || cfg.DataDir != "./data" || cfg.NATSListen != "127.0.0.1:4222" || cfg.NATSURL != "" || cfg.MaxBodyBytes != 25<<20 {
		t.Errorf("defaults: http-addr %q data-dir %q nats-listen %q nats-url %q max-body-bytes %d",
			cfg.HTTPAddr, cfg.DataDir, cfg.NATSListen, cfg.NATSURL, cfg.MaxBodyBytes)
	}
	env := map[string]string{"TRIGGERD_HTTP_ADDR": "127.0.0.1:9", "TRIGGERD_DATA_DIR": "/d", "TRIGGERD_NATS_LISTEN": "127.0.0.1:7",
		"TRIGGERD_MAX_BODY_BYTES": "1024"}
	cfg, err = parseConfig(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9" || cfg.DataDir != "/d" || cfg.NATSListen != "127.0.0.1:7" || cfg.MaxBodyBytes != 1024 {
		t.Errorf("from the environment: http-addr %q data-dir %q nats-listen %q max-body-bytes %d",
			cfg.HTTPAddr, cfg.DataDir, cfg.NATSListen, cfg.MaxBodyBytes)
	}
}

func TestConnectReturnOrigins(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	env := map[string]string{"TRIGGERD_CONNECT_RETURN_ORIGINS": "https://App.Example.com/, http://localhost:3000"}
	cfg, err := parseConfig([]string{"--public-url", "https://hooks.example.com/triggerd"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
	want := []string{"https://hooks.example.com", "https://app.example.com", "http://localhost:3000"}
	if err != nil || !slices.Equal(cfg.ConnectReturnOrigins(), want) {
		t.Fatalf("origins %q, err %v; want %q", cfg.ConnectReturnOrigins(), err, want)
	}
	for _, bad := range []string{"app.example.com", "https://app.example.com/done", "https://app.example.com?x=1", "ftp://app.example.com"} {
		_, err := parseConfig([]string{"--connect-return-origins", bad}, none, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--connect-return-origins: origin") || !strings.Contains(err.Error(), "https://app.example.com") {
			t.Errorf("--connect-return-origins %q: err %v, want one naming the flag and an example", bad, err)
		}
	}
}

// TestConfigErrorsWriteNothing: a configuration error is reported, with
// exit code 2, before triggerd writes anything into its data dir (it used
// to generate its secrets first, then fail on --archive-retention 1h).
func TestConfigErrorsWriteNothing(t *testing.T) {
	for _, args := range [][]string{
		{"--archive-retention", "1h"},
		{"--dedup-window", "3h", "--event-retention", "2h"},
		{"--deploy-api-base-url", "vercel.example"},
	} {
		data := filepath.Join(t.TempDir(), "data")
		var stderr bytes.Buffer
		code := run(t.Context(), append(args, "--data-dir", data, "--http-addr", "127.0.0.1:0"), func(string) (string, bool) { return "", false }, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), args[0]) {
			t.Errorf("%v: exit %d, %q; want 2 and an error naming %s", args, code, stderr.String(), args[0])
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the data dir was created (%v); nothing may be written before the configuration is checked", args, err)
		}
	}
}

// TestEveryFlagIsGrouped: --help shows a newcomer's flags first, then the
// rest by area; a new flag must be placed in a group, not left to "Other".
func TestEveryFlagIsGrouped(t *testing.T) {
	_, stdout, _ := runTriggerdSplit(t, nil, "--help")
	if strings.Contains(stdout, "Other flags:") {
		t.Errorf("flags outside every group of flagGroups (cmd/triggerd/flags.go):\n%s", stdout[strings.Index(stdout, "Other flags:"):])
	}
	first := strings.Index(stdout, "\n  --")
	for _, name := range []string{"--http-addr", "--data-dir", "--nats-listen", "--nats-url", "--sandbox", "--public-url", "--redis-url"} {
		if i := strings.Index(stdout, "  "+name+" "); i < 0 || i > strings.Index(stdout, "\nWebhooks:") || i < first {
			t.Errorf("%s is not listed first, under Start here", name)
		}
	}
	seen := map[string]int{}
	for _, g := range flagGroups {
		for _, f := range g.Flags {
			seen[f]++
		}
	}
	for f, n := range seen {
		if n > 1 {
			t.Errorf("--%s is in %d groups", f, n)
		}
	}
}

func TestDeliveryLogFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
	}{
		{nil, false},
		{[]string{"--delivery-log=false"}, true},
		{[]string{"--delivery-log"}, false},
	} {
		var c daemon.Config
		fs, _ := newFlagSet(&c, envflag.Env{Prefix: envPrefix})
		fs.SetOutput(io.Discard)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.NoDeliveryLog != tc.off {
			t.Errorf("%v: NoDeliveryLog %v, want %v", tc.args, c.NoDeliveryLog, tc.off)
		}
	}
}
