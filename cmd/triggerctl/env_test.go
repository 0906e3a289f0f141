package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPerInvocationVariablesAreIgnored exports a variable for each of
// replay's per-invocation flags: none may change what replay sends.
func TestPerInvocationVariablesAreIgnored(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)
	for k, v := range map[string]string{
		"TRIGGERD_DELIVERY":  "fixed-delivery",
		"TRIGGERD_EVENT":     "push",
		"TRIGGERD_CONNECTOR": "deploy",
		"TRIGGERD_TIMEOUT":   "soon",
		"TRIGGERD_FORM":      "maybe",
	} {
		t.Setenv(k, v)
	}
	for range 2 {
		if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file); code != 0 {
			t.Fatalf("exit %d, stderr: %s", code, stderr)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.connector != connectorCodeHost || r.event != "issues" || r.delivery == "fixed-delivery" || r.contentType != "application/json" {
			t.Errorf("request %+v took a per-invocation setting from the environment", r)
		}
	}
	if reqs[0].delivery == reqs[1].delivery {
		t.Errorf("both replays sent delivery %q, want a fresh id each", reqs[0].delivery)
	}
}

// TestSessionVariablesAreRead checks that --url, --data-dir and --nats-url
// still come from the environment when not given.
func TestSessionVariablesAreRead(t *testing.T) {
	setTestEnv(t)
	f := newFakeTriggerd(t)
	dataDir := t.TempDir()
	writeFile(t, dataDir, "deploy_webhook_secret", testDeploySecret+"\n")
	file := writeFile(t, t.TempDir(), "deploy.json", `{"id":"x","type":"deployment.created","createdAt":1,"payload":{}}`)
	t.Setenv("TRIGGERD_URL", f.srv.URL)
	t.Setenv("TRIGGERD_DATA_DIR", dataDir)
	if code, _, stderr := runCtl("replay", file); code != 0 {
		t.Fatalf("replay with TRIGGERD_URL and TRIGGERD_DATA_DIR: exit %d, stderr: %s", code, stderr)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].connector != connectorDeploy {
		t.Errorf("requests = %+v, want one deploy delivery at TRIGGERD_URL", reqs)
	}

	emb, _ := startNATS(t)
	t.Setenv("TRIGGERD_NATS_URL", emb.ClientURL())
	var out, errOut bytes.Buffer
	if code := run([]string{"redeliver", "d-1"}, &out, &errOut); code != 0 {
		t.Fatalf("redeliver with TRIGGERD_NATS_URL: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), `"new_issue"`) {
		t.Errorf("redeliver printed %q, want the redelivered new_issue", out.String())
	}
}

func TestHelpNamesOnlyTheVariablesRead(t *testing.T) {
	setTestEnv(t)
	code, stdout, _ := runCtl("help", "tail")
	if code != 0 || !strings.Contains(stdout, "--nats-url (env TRIGGERD_NATS_URL,") || !strings.Contains(stdout, "--subject (default \"false\")") {
		t.Errorf("help tail: exit %d, output:\n%s", code, stdout)
	}
	if strings.Contains(stdout, "TRIGGERD_SUBJECT") || strings.Contains(stdout, "TRIGGERD_ALL") {
		t.Errorf("help tail offers variables tail does not read:\n%s", stdout)
	}
	code, stdout, _ = runCtl("help")
	if code != 0 || !strings.Contains(stdout, "TRIGGERD_NATS_URL") || strings.Contains(stdout, "Every flag") {
		t.Errorf("help: exit %d, it should name the variables read:\n%s", code, stdout)
	}
}
