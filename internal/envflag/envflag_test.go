package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := map[string]string{
		"TRIGGERD_HTTP_ADDR":     ":9999",
		"TRIGGERD_NATS_LISTEN":   "127.0.0.1:1",
		"TRIGGERD_WAIT":          "3s",
		"TRIGGERD_UNKNOWN_THING": "x",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addr := fs.String("http-addr", ":8080", "")
	listen := fs.String("nats-listen", "127.0.0.1:4222", "")
	wait := fs.Duration("wait", time.Second, "")
	other := fs.String("other", "d", "")
	if err := Parse(fs, []string{"--nats-listen", "127.0.0.1:2"}, "TRIGGERD_", lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != ":9999" {
		t.Errorf("http-addr = %q, want the environment's :9999", *addr)
	}
	if *listen != "127.0.0.1:2" {
		t.Errorf("nats-listen = %q, want the command line's value", *listen)
	}
	if *wait != 3*time.Second {
		t.Errorf("wait = %v, want 3s", *wait)
	}
	if *other != "d" {
		t.Errorf("other = %q, want default", *other)
	}
}

func TestParseBadEnvValueNamesVariable(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Duration("wait", time.Second, "")
	err := Parse(fs, nil, "TRIGGERD_", func(k string) (string, bool) { return "soon", k == "TRIGGERD_WAIT" })
	if err == nil || !strings.Contains(err.Error(), "TRIGGERD_WAIT") {
		t.Fatalf("err = %v, want one naming TRIGGERD_WAIT", err)
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		pos  []string
	}{
		{"flags first", []string{"--account", "a1", "run", "step.id"}, []string{"run", "step.id"}},
		{"flags last", []string{"run", "step.id", "--account", "a1"}, []string{"run", "step.id"}},
		{"flags between", []string{"run", "--account=a1", "step.id"}, []string{"run", "step.id"}},
		{"double dash ends flags", []string{"run", "--account", "a1", "--", "--not-a-flag"}, []string{"run", "--not-a-flag"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			account := fs.String("account", "", "")
			if err := Parse(fs, tc.args, "TRIGGERD_", func(string) (string, bool) { return "", false }); err != nil {
				t.Fatal(err)
			}
			if *account != "a1" || strings.Join(fs.Args(), " ") != strings.Join(tc.pos, " ") {
				t.Fatalf("account %q, args %q; want a1 and %q", *account, fs.Args(), tc.pos)
			}
		})
	}
}
