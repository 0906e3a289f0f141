package dispatch_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// lockedBuffer is a log sink the dispatcher's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the JSON log lines with the given message.
func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// A run that starts and finishes says so at info, and a failed one at
// warn with its error's code: an operator sees in the log that an agent
// was started and how its run ended, without asking the API.
func TestRunLifecycleIsLogged(t *testing.T) {
	var logs lockedBuffer
	h := newHarness(t, dispatch.Options{Logger: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	h.steps.fail["codehost.add_labels"] = connectors.Errorf(connectors.CodePermissionDenied, "the account cannot label issues")
	h.agent("agent-ok", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{"body": "hi"}`)})
	h.agent("agent-bad", store.PipelineStep{Name: "label", Step: "codehost.add_labels", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-ok", "agent-ok", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-bad", "agent-bad", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	ev := h.deliver("d-log", "octo-org/api", 9)
	ok := h.waitRun(dispatch.RunID(ev.ID, "trig-ok", ""))
	bad := h.waitRun(dispatch.RunID(ev.ID, "trig-bad", ""))

	find := func(msg, run string) map[string]any {
		deadline := time.Now().Add(5 * time.Second)
		for {
			for _, l := range logs.lines(t, msg) {
				if l["run"] == run {
					return l
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q line for run %s in the log", msg, run)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	started := find("run started", ok.ID)
	if started["level"] != "info" || started["trigger"] != "trig-ok" || started["agent"] != "agent-ok" || started["event"] != ev.ID {
		t.Errorf("run started line = %v", started)
	}
	done := find("run finished", ok.ID)
	if done["level"] != "info" || done["status"] != "succeeded" || done["duration"] == nil {
		t.Errorf("run finished line = %v", done)
	}
	failed := find("run finished", bad.ID)
	if failed["level"] != "warn" || failed["status"] != "failed" || failed["code"] != "permission_denied" ||
		!strings.Contains(failed["reason"].(string), "cannot label issues") {
		t.Errorf("failed run's line = %v", failed)
	}
	if n := len(logs.lines(t, "run started")); n != 2 {
		t.Errorf("%d run started lines, want one per run (2)", n)
	}
}
