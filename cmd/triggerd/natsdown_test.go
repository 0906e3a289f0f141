package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
)

// unreachableMsg begins the warning triggerd logs when its external NATS
// cannot be reached at startup, once it serves webhooks anyway.
const unreachableMsg = "NATS cannot be reached"

// getStatus answers path's status code and its decoded JSON body, if any.
func getStatus(t *testing.T, url string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, resp.Header, body
}

// TestNATSDownAtStartupDeliveriesAreSpooled starts triggerd while its
// external NATS is down. Instead of exiting (and, under a supervisor,
// leaving the port closed while deliveries are lost), it serves webhooks
// from the start: answered 202 from the spool, /readyz and the management
// API 503. Once a NATS comes up on that address, triggerd is ready, the
// spooled delivery's events are in the stream exactly once, the spool is
// empty, and the next delivery goes straight to NATS.
func TestNATSDownAtStartupDeliveriesAreSpooled(t *testing.T) {
	addr, dataDir := closedAddr(t), t.TempDir()
	const secret, natsPass = "startup-secret", "url-pa55word"
	// The URL's password is never logged: not while NATS is awaited, nor
	// once it is reached.
	p := startTriggerdUntil(t, unreachableMsg, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + dataDir},
		"--nats-url", "nats://someone:"+natsPass+"@"+addr)
	spoolFiles := func() []string {
		files, err := filepath.Glob(filepath.Join(dataDir, "spool", "*.rec"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}

	if code, _, body := getStatus(t, p.httpURL+"/readyz"); code != http.StatusServiceUnavailable || body["ready"] != false {
		t.Errorf("/readyz with NATS down: %d %v, want 503 not ready", code, body)
	}
	if code, _, _ := getStatus(t, p.httpURL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with NATS down: %d, want 200", code)
	}
	if code, _, _ := getStatus(t, p.httpURL+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics with NATS down: %d, want 200", code)
	}
	code, header, body := getStatus(t, p.httpURL+"/v1/accounts")
	apiErr, _ := body["error"].(map[string]any)
	if code != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || apiErr["code"] != "unavailable" {
		t.Errorf("management API with NATS down: %d Retry-After=%q %v, want 503 unavailable with Retry-After", code, header.Get("Retry-After"), body)
	}
	// Hooks are resolved from the store, not NATS: an unknown one is
	// answered as such, not with a 404 for the route.
	req, _ := http.NewRequest(http.MethodPost, p.httpURL+"/webhooks/codehost/h_nosuchhook", bytes.NewReader(issueBody(2)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "to-no-hook")
	req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign([]byte("any"), issueBody(2)))
	if resp, err := client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var b map[string]map[string]any
		json.NewDecoder(resp.Body).Decode(&b)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || b["error"]["code"] != "unknown_hook" {
			t.Errorf("delivery to an unknown hook with NATS down: %d %v, want 404 unknown_hook", resp.StatusCode, b)
		}
	}

	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "while-down", body: issueBody(1)})
	if err != nil || r.status != http.StatusAccepted || !r.body.Spooled || len(r.body.Events) != 2 {
		t.Fatalf("delivery with NATS down: %v %d %+v, want 202 spooled with 2 events", err, r.status, r.body)
	}
	if n := len(spoolFiles()); n != 1 {
		t.Fatalf("spool holds %d records, want 1", n)
	}

	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: addr, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	testenv.Eventually(t, 60*time.Second, "/readyz to answer 200 once NATS is up", func() bool {
		code, _, _ := getStatus(t, p.httpURL+"/readyz")
		return code == http.StatusOK
	})
	testenv.Eventually(t, 30*time.Second, "the spool to be forwarded", func() bool { return len(spoolFiles()) == 0 })

	r2, err := post(p.httpURL, secret, delivery{event: "issues", id: "after-up", body: issueBody(3)})
	if err != nil || r2.status != http.StatusAccepted || r2.body.Spooled {
		t.Fatalf("delivery once NATS is up: %v %d %+v, want 202 through NATS", err, r2.status, r2.body)
	}
	// Both deliveries' events, each once (read once: a read of the stream
	// waits out its fetch for the last batch).
	counts, _ := streamEvents(t, emb.ClientURL())
	want := append(r.body.Events, r2.body.Events...)
	for _, e := range want {
		if counts[e.ID] != 1 {
			t.Errorf("event %s is in the stream %d times, want once", e.ID, counts[e.ID])
		}
	}
	if len(counts) != len(want) {
		t.Errorf("stream holds %d distinct events, want %d", len(counts), len(want))
	}
	if code, _, body := getStatus(t, p.httpURL+"/v1/accounts"); code != http.StatusUnauthorized {
		t.Errorf("management API once NATS is up, without a key: %d %v, want 401 (it serves)", code, body)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.logs())
	}
	if strings.Contains(p.logs(), natsPass) {
		t.Errorf("the NATS URL's password is in the logs:\n%s", p.logs())
	}
}

// TestStopWhileNATSIsUnreachable stops a triggerd that never reached its
// NATS: it exits cleanly, and what it spooled waits for the next start.
func TestStopWhileNATSIsUnreachable(t *testing.T) {
	dataDir := t.TempDir()
	const secret = "stop-secret"
	p := startTriggerdUntil(t, unreachableMsg, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + dataDir},
		"--nats-url", "nats://"+closedAddr(t), "--shutdown-timeout", "5s")
	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "never-published", body: issueBody(1)})
	if err != nil || r.status != http.StatusAccepted || !r.body.Spooled {
		t.Fatalf("delivery with NATS down: %v %d %+v, want 202 spooled", err, r.status, r.body)
	}
	start := time.Now()
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.logs())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s to stop, past --shutdown-timeout 5s", d)
	}
	if files, _ := filepath.Glob(filepath.Join(dataDir, "spool", "*.rec")); len(files) != 1 {
		t.Errorf("spool holds %d records after the stop, want the 1 delivery", len(files))
	}
}

// TestHookActivityKeptWhenStoppedBeforeNATS: deliveries to a tenant's hook
// taken (spooled) or refused while NATS is unreachable show in the hook's
// activity even when triggerd stops before it ever reaches NATS.
func TestHookActivityKeptWhenStoppedBeforeNATS(t *testing.T) {
	v := newE2E(t)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "triage"}`, http.StatusCreated)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
		v.account, ag["id"]), http.StatusCreated)
	hooks := v.gh.Hooks("octocat", "hello-world")
	if len(hooks) != 1 {
		t.Fatalf("hooks on the fake: %+v", hooks)
	}
	if code := v.p.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// The same data dir, with a NATS that does not answer.
	var args []string
	for i := 0; i < len(v.args); i++ {
		if v.args[i] == "--nats-listen" {
			i++
			continue
		}
		args = append(args, v.args[i])
	}
	down := startTriggerdUntil(t, unreachableMsg, v.env, append(args, "--nats-url", "nats://"+closedAddr(t))...)
	body := issueBody(3)
	req, _ := http.NewRequest(http.MethodPost, hooks[0].URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "while-down")
	req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign([]byte(hooks[0].Secret), body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery to the hook with NATS down: %d, want 202 (spooled)", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, hooks[0].URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "forged")
	req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign([]byte("not-the-secret"), body))
	if resp, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged delivery: %d, want 401", resp.StatusCode)
	}
	if code := down.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, down.logs())
	}

	v.start()
	_, view := v.api(http.MethodGet, "/v1/triggers/"+tr["id"].(string), "", http.StatusOK)
	hv, _ := view["hooks"].([]any)
	if len(hv) != 1 {
		t.Fatalf("trigger view hooks: %v", view)
	}
	act, _ := hv[0].(map[string]any)["activity"].(map[string]any)
	refusal, _ := act["last_refusal"].(map[string]any)
	if act["last_accepted_at"] == nil || act["refused"] != float64(1) || refusal["code"] != "invalid_signature" {
		t.Errorf("hook activity after a stop before NATS: %v; want the spooled delivery's acceptance and the forged one's refusal", act)
	}
}
