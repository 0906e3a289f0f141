package envflag

import (
	"errors"
	"flag"
	"fmt"
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
	if _, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{"--nats-listen", "127.0.0.1:2"}, lookup); err != nil {
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
	_, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, nil, func(k string) (string, bool) { return "soon", k == "TRIGGERD_WAIT" })
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
			if _, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, tc.args, func(string) (string, bool) { return "", false }); err != nil {
				t.Fatal(err)
			}
			if *account != "a1" || strings.Join(fs.Args(), " ") != strings.Join(tc.pos, " ") {
				t.Fatalf("account %q, args %q; want a1 and %q", *account, fs.Args(), tc.pos)
			}
		})
	}
}

// lookupIn returns a lookup function over env.
func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestParseEmptyVariableCountsAsUnset(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addr := fs.String("http-addr", ":8080", "")
	on := fs.Bool("dispatch", true, "")
	wait := fs.Duration("wait", time.Second, "")
	env := lookupIn(map[string]string{"TRIGGERD_HTTP_ADDR": "", "TRIGGERD_DISPATCH": "", "TRIGGERD_WAIT": ""})
	src, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, nil, env)
	if err != nil {
		t.Fatalf("empty variables are an error: %v", err)
	}
	if *addr != ":8080" || !*on || *wait != time.Second {
		t.Errorf("http-addr %q, dispatch %v, wait %v; want the defaults :8080, true, 1s", *addr, *on, *wait)
	}
	if len(src) != 0 {
		t.Errorf("sources = %v, want none: no flag was given", src)
	}
}

func TestParseEmptyCommandLineValueIsKept(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addr := fs.String("http-addr", ":8080", "")
	env := lookupIn(map[string]string{"TRIGGERD_HTTP_ADDR": ":9999"})
	if _, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{"--http-addr", ""}, env); err != nil {
		t.Fatal(err)
	}
	if *addr != "" {
		t.Errorf("http-addr = %q, want the command line's empty value", *addr)
	}
}

// newTypedFlags returns a flag set with one flag of each type the hints know.
func newTypedFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Duration("commit-timeout", time.Second, "")
	fs.Int64("max-body-bytes", 100, "")
	fs.Int("workers", 1, "")
	fs.Uint("retries", 1, "")
	fs.Uint64("limit", 1, "")
	fs.Bool("dispatch", true, "")
	fs.Float64("rate", 0, "")
	return fs
}

func TestParseBadValueSaysWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{nil, map[string]string{"TRIGGERD_COMMIT_TIMEOUT": "5"}, []string{"TRIGGERD_COMMIT_TIMEOUT", `"5"`, "want a duration such as 5s, 2m or 1h30m"}},
		{[]string{"--commit-timeout", "5"}, nil, []string{"commit-timeout", "want a duration such as 5s, 2m or 1h30m"}},
		{[]string{"--max-body-bytes", "1MB"}, nil, []string{"max-body-bytes", `"1MB"`, "want a whole number, such as 100"}},
		{nil, map[string]string{"TRIGGERD_WORKERS": "many"}, []string{"TRIGGERD_WORKERS", "want a whole number, such as 100"}},
		{[]string{"--retries=-1"}, nil, []string{"retries", "want a whole number of 0 or more"}},
		{nil, map[string]string{"TRIGGERD_LIMIT": "x"}, []string{"TRIGGERD_LIMIT", "want a whole number of 0 or more"}},
		{[]string{"--dispatch=maybe"}, nil, []string{"dispatch", "want true or false"}},
		{nil, map[string]string{"TRIGGERD_DISPATCH": "yes"}, []string{"TRIGGERD_DISPATCH", "want true or false"}},
		{[]string{"--rate", "fast"}, nil, []string{"rate", "want a number"}},
		{[]string{"--workers", "99999999999999999999"}, nil, []string{"out of range", "want a whole number"}},
	} {
		fs := newTypedFlags()
		var out strings.Builder
		fs.SetOutput(&out)
		_, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, tc.args, lookupIn(tc.env))
		if err == nil {
			t.Errorf("%q %v: no error", tc.args, tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: error %q does not say %q", tc.args, tc.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "parse error") {
			t.Errorf("%q %v: error %q still says only parse error", tc.args, tc.env, err)
		}
		if out.Len() != 0 {
			t.Errorf("%q %v: Parse wrote %q; the caller reports errors", tc.args, tc.env, out.String())
		}
	}
}

// listValue is a flag.Value without Get whose Set fails on "bad".
type listValue []string

func (l *listValue) String() string { return strings.Join(*l, ",") }
func (l *listValue) Set(v string) error {
	if v == "bad" {
		return errors.New("no bad entries")
	}
	*l = append(*l, v)
	return nil
}

func TestParseKeepsOtherErrorsAndValues(t *testing.T) {
	fs := newTypedFlags()
	fs.SetOutput(io.Discard)
	var l listValue
	fs.Var(&l, "file", "")
	_, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{"--file", "bad"}, lookupIn(nil))
	if err == nil || !strings.HasSuffix(err.Error(), ": no bad entries") {
		t.Errorf("err = %v, want the value's own error unchanged", err)
	}

	fs = newTypedFlags()
	if _, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{"--dispatch=false", "--commit-timeout", "3s"}, lookupIn(nil)); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("commit-timeout").Value.(flag.Getter).Get(); got != 3*time.Second {
		t.Errorf("Get() = %v, want 3s through the wrapper", got)
	}
	if got := fs.Lookup("dispatch").Value.(flag.Getter).Get(); got != false {
		t.Errorf("dispatch Get() = %v, want false", got)
	}
	// A boolean flag still needs no value.
	fs = newTypedFlags()
	fs.Bool("all", false, "")
	if _, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{"--all", "pos"}, lookupIn(nil)); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("all").Value.String(); got != "true" || strings.Join(fs.Args(), " ") != "pos" {
		t.Errorf("--all = %s, args %q; want true and [pos]", got, fs.Args())
	}
}

func TestParseHelpPrintsNothing(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		fs := newTypedFlags()
		var out strings.Builder
		fs.SetOutput(&out)
		called := false
		fs.Usage = func() { called = true }
		_, err := (Env{Prefix: "TRIGGERD_"}).Parse(fs, []string{arg}, lookupIn(nil))
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: err = %v, want flag.ErrHelp", arg, err)
		}
		if called || out.Len() != 0 {
			t.Errorf("%s: usage called %v, output %q; the caller shows usage", arg, called, out.String())
		}
		// The caller's usage and output are back in place.
		fs.Usage()
		fmt.Fprint(fs.Output(), "x")
		if !called || out.String() != "x" {
			t.Errorf("%s: usage or output not restored after Parse", arg)
		}
	}
}

func TestOnly(t *testing.T) {
	e := Env{Prefix: "TRIGGERD_", Only: []string{"url", "data-dir", "not-defined-here"}}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	url := fs.String("url", "http://default", "root URL")
	dataDir := fs.String("data-dir", "./data", "")
	delivery := fs.String("delivery", "", "fixed delivery id")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	env := lookupIn(map[string]string{
		"TRIGGERD_URL": "http://env", "TRIGGERD_DATA_DIR": "/env", "TRIGGERD_DELIVERY": "d-1", "TRIGGERD_TIMEOUT": "soon",
	})
	src, err := e.Parse(fs, []string{"--data-dir", "/cli"}, env)
	if err != nil {
		t.Fatalf("a variable of an unbound flag was read: %v", err)
	}
	if *url != "http://env" || *dataDir != "/cli" || *delivery != "" || *timeout != 10*time.Second {
		t.Errorf("url %q, data-dir %q, delivery %q, timeout %v; want http://env, /cli, the defaults", *url, *dataDir, *delivery, *timeout)
	}
	if len(src) != 2 || src["url"] != "TRIGGERD_URL" || src["data-dir"] != "" {
		t.Errorf("sources = %v, want url from TRIGGERD_URL and data-dir from the command line", src)
	}
	if v, ok := e.Var("delivery"); ok {
		t.Errorf("Var(delivery) = %q, true; want unbound", v)
	}

	var out strings.Builder
	fs.SetOutput(&out)
	e.Usage(fs, "usage: replay")()
	for _, want := range []string{"usage: replay\n", "--url (env TRIGGERD_URL, default \"http://default\")\n    \troot URL\n", "--delivery (default \"\")\n    \tfixed delivery id\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage does not contain %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "TRIGGERD_DELIVERY") || strings.Contains(out.String(), "TRIGGERD_TIMEOUT") {
		t.Errorf("usage offers variables that are not read:\n%s", out.String())
	}
}

func TestUsageBindsEveryFlagByDefault(t *testing.T) {
	fs := newTypedFlags()
	var out strings.Builder
	fs.SetOutput(&out)
	(Env{Prefix: "TRIGGERD_"}).Usage(fs, "usage: t")()
	if want := "  --commit-timeout (env TRIGGERD_COMMIT_TIMEOUT, default \"1s\")\n"; !strings.Contains(out.String(), want) {
		t.Errorf("usage does not contain %q:\n%s", want, out.String())
	}
	if n := strings.Count(out.String(), "(env TRIGGERD_"); n != 7 {
		t.Errorf("usage names %d variables, want one per flag (7):\n%s", n, out.String())
	}
}

func TestSourcesDescribe(t *testing.T) {
	s := Sources{"nats-url": "TRIGGERD_NATS_URL", "nats-listen": ""}
	for name, want := range map[string]string{
		"nats-url":    "--nats-url (from TRIGGERD_NATS_URL)",
		"nats-listen": "--nats-listen (on the command line)",
		"http-addr":   "--http-addr",
	} {
		if got := s.Describe(name); got != want {
			t.Errorf("Describe(%s) = %q, want %q", name, got, want)
		}
	}
}
