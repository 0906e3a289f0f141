package main

import (
	"strings"
	"testing"
)

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		inStdout bool
	}{
		{nil, 2, false},
		{[]string{"help"}, 0, true},
		{[]string{"--help"}, 0, true},
		{[]string{"frobnicate"}, 2, false},
		{[]string{"help", "frobnicate"}, 2, false},
	} {
		code, stdout, stderr := runCtl(tc.args...)
		out := stderr
		if tc.inStdout {
			out = stdout
		}
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, code, tc.code)
		}
		for _, name := range []string{"replay", "bench", "bench-baseline"} {
			if !strings.Contains(out, name) {
				t.Errorf("%q: usage does not list %s:\n%s", tc.args, name, out)
			}
		}
	}
}

func TestHelpCommand(t *testing.T) {
	setTestEnv(t)
	// Help asked for is the answer: it goes to standard output.
	code, stdout, _ := runCtl("help", "replay")
	if code != 0 || !strings.Contains(stdout, "--delivery") || !strings.Contains(stdout, "TRIGGERD_DATA_DIR") {
		t.Errorf("help replay: exit %d, output:\n%s", code, stdout)
	}
	// --delivery is per invocation: it reads no variable, and help offers none.
	if strings.Contains(stdout, "TRIGGERD_DELIVERY") {
		t.Errorf("help replay offers TRIGGERD_DELIVERY, which replay does not read:\n%s", stdout)
	}
}
