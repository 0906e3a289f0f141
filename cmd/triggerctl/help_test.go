package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Help asked for goes to standard output, ends with a newline, and has
// examples and the exit codes, for every command.
func TestHelpOnStandardOutput(t *testing.T) {
	for name := range allCommands() {
		for _, args := range [][]string{{"help", name}, {name, "--help"}} {
			var out, errOut bytes.Buffer
			if code := run(args, &out, &errOut); code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
			}
			help := out.String()
			if errOut.Len() != 0 || !strings.HasSuffix(help, "\n") || !strings.Contains(help, "usage: triggerctl "+name) ||
				!strings.Contains(help, "examples:\n  ") || !strings.Contains(help, "exit status:") {
				t.Errorf("%v: stdout %q, stderr %q; want the usage, examples and exit codes on stdout, ending in a newline", args, help, errOut.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "exit status:") || !strings.Contains(out.String(), "version") {
		t.Fatalf("help: %d %q", code, out.String())
	}
}

// Every command takes --url, --nats-url, --data-dir and --api-key, whether
// it uses them or not.
func TestEveryCommandTakesTheCommonFlags(t *testing.T) {
	for name, cmd := range allCommands() {
		var out bytes.Buffer
		args := []string{"--url", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:1", "--data-dir", t.TempDir(), "--api-key", "k", "-h"}
		if code := cmd.run(context.Background(), args, &out, &out); code != 0 {
			t.Errorf("%s %v: exit %d: %s", name, args, code, out.String())
		}
	}
}

// --api-key wins over the environment and the data dir.
func TestAPIKeyFlagWins(t *testing.T) {
	t.Setenv("TRIGGERD_API_KEY", "from-env")
	if k, err := managementKey("from-flag", "TRIGGERD_API_KEY", "default_tenant_key", t.TempDir()); err != nil || k != "from-flag" {
		t.Fatalf("managementKey = %q, %v", k, err)
	}
	if k, err := managementKey("", "TRIGGERD_API_KEY", "default_tenant_key", t.TempDir()); err != nil || k != "from-env" {
		t.Fatalf("managementKey = %q, %v", k, err)
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "triggerctl ") || !strings.Contains(out.String(), "commit:") {
		t.Fatalf("version: %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"version", "-o", "json"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), `"module": "github.com/triggerd/triggerd"`) {
		t.Fatalf("version -o json: %d %q", code, out.String())
	}
}
