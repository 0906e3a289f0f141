package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/triggerd/triggerd/internal/testenv"
)

// A code-hosting payload with white space a re-encoder would lose.
const codeHostPayload = "{\n  \"action\": \"opened\",\n  \"issue\": {\"number\": 7, \"title\": \"a <b> & c\"}\n}\n"

// A deployment envelope; deployPayload is its "payload" exactly as written.
const (
	deployPayload  = "{ \"deployment\": {\"id\": \"dpl_1\", \"url\": \"x.vercel.app\"},\n      \"target\":   \"production\", \"note\": \"<&>\" }"
	deployEnvelope = "\n  {\n  \"id\": \"uev_original\",\n  \"type\": \"deployment.created\",\n  \"createdAt\": 1592335604941,\n  \"payload\": " + deployPayload + "\n}\n"
)

func TestReplayCodeHost(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)

	var ids []string
	for range 2 {
		code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file)
		if code != 0 {
			t.Fatalf("exit %d, stderr: %s", code, stderr)
		}
		lines := replayLines(t, stdout)
		if len(lines) != 1 {
			t.Fatalf("got %d lines, want 1: %s", len(lines), stdout)
		}
		l := lines[0]
		if l.File != file || l.Status != 202 {
			t.Errorf("line = %+v, want file %s status 202", l, file)
		}
		var answer struct {
			DeliveryID string            `json:"delivery_id"`
			Events     []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(l.Response, &answer); err != nil {
			t.Fatalf("response %s: %v", l.Response, err)
		}
		if answer.DeliveryID != l.DeliveryID || len(answer.Events) != 2 {
			t.Errorf("response %s does not echo delivery %s with 2 events", l.Response, l.DeliveryID)
		}
		if _, err := uuid.Parse(l.DeliveryID); err != nil {
			t.Errorf("delivery id %q is not a UUID: %v", l.DeliveryID, err)
		}
		ids = append(ids, l.DeliveryID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two runs sent the same delivery id %s; want a fresh one per run", ids[0])
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("fake got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.connector != connectorCodeHost || r.event != "issues" || r.delivery != ids[i] {
			t.Errorf("request %d: connector %q event %q delivery %q, want codehost issues %s", i, r.connector, r.event, r.delivery, ids[i])
		}
		if r.contentType != "application/json" {
			t.Errorf("request %d: content type %q", i, r.contentType)
		}
		if string(r.body) != codeHostPayload {
			t.Errorf("request %d: body %q, want the file byte for byte", i, r.body)
		}
	}
}

func TestReplayOverrides(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "issues.opened.json", codeHostPayload)
	b := writeFile(t, dir, "other.json", codeHostPayload)

	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir,
		"--event", "push", "--delivery", "fixed-delivery-1", a, b)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	for _, l := range replayLines(t, stdout) {
		if l.DeliveryID != "fixed-delivery-1" {
			t.Errorf("%s: delivery_id %q, want fixed-delivery-1", l.File, l.DeliveryID)
		}
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("fake got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.event != "push" || r.delivery != "fixed-delivery-1" {
			t.Errorf("event %q delivery %q, want push fixed-delivery-1", r.event, r.delivery)
		}
	}
}

func TestReplayForm(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)

	code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--form", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.contentType != "application/x-www-form-urlencoded" {
		t.Errorf("content type %q, want form", r.contentType)
	}
	if !bytes.HasPrefix(r.body, []byte("payload=")) {
		t.Errorf("body %q is not payload=<json>", r.body)
	}
	// The fake verified the signature over r.body, the form body.
	if string(r.payload) != codeHostPayload {
		t.Errorf("payload field %q, want the file", r.payload)
	}
}

func TestReplayDeploy(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "deployment.created.json", deployEnvelope)

	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	lines := replayLines(t, stdout)
	reqs := f.requests()
	if len(reqs) != 1 || len(lines) != 1 {
		t.Fatalf("fake got %d requests, replay printed %d lines; want 1 each", len(reqs), len(lines))
	}
	r := reqs[0]
	if r.connector != connectorDeploy {
		t.Fatalf("posted to %q, want the deploy endpoint (auto-detection)", r.connector)
	}
	if r.delivery == "uev_original" || r.delivery != lines[0].DeliveryID {
		t.Errorf("envelope id %q, printed %q: want a fresh id in both", r.delivery, lines[0].DeliveryID)
	}
	if _, err := uuid.Parse(r.delivery); err != nil {
		t.Errorf("envelope id %q is not a UUID", r.delivery)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &top); err != nil {
		t.Fatal(err)
	}
	if string(top["payload"]) != deployPayload {
		t.Errorf("payload bytes changed:\n got %s\nwant %s", top["payload"], deployPayload)
	}
	if string(top["type"]) != `"deployment.created"` || len(top) != 4 {
		t.Errorf("envelope %s lost or changed fields", r.body)
	}
	// A new delivery is created now: triggerd refuses one dated older than
	// its archive's retention.
	if ms, err := strconv.ParseInt(string(top["createdAt"]), 10, 64); err != nil || time.Since(time.UnixMilli(ms)).Abs() > time.Hour {
		t.Errorf("envelope createdAt %s, want the time it was sent", top["createdAt"])
	}

	// A fixed --delivery becomes the envelope id.
	code, _, stderr = runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--delivery", "uev_fixed", file)
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	if got := f.requests()[1].delivery; got != "uev_fixed" {
		t.Errorf("envelope id %q, want uev_fixed", got)
	}
}

func TestDetectConnector(t *testing.T) {
	for body, want := range map[string]string{
		deployEnvelope:  connectorDeploy,
		codeHostPayload: connectorCodeHost,
		`{"id":"x","type":"t","payload":"not an object"}`: connectorCodeHost,
		`{"id":1,"type":"t","payload":{}}`:                connectorCodeHost,
		`{"type":"t","payload":{}}`:                       connectorCodeHost,
		`[1,2]`:                                           connectorCodeHost,
		`not json`:                                        connectorCodeHost,
	} {
		if got := detectConnector([]byte(body)); got != want {
			t.Errorf("detectConnector(%s) = %s, want %s", body, got, want)
		}
	}
}

func TestReplayMissingSecret(t *testing.T) {
	setTestEnv(t)
	os.Unsetenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET") // setTestEnv registered the restore
	f := newFakeTriggerd(t)
	empty := t.TempDir()
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)

	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", empty, file)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, stderr)
	}
	for _, want := range []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET", filepath.Join(empty, "codehost_webhook_secret")} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not name %s:\n%s", want, stderr)
		}
	}
	if stdout != "" || len(f.requests()) != 0 {
		t.Errorf("sent something without a secret: stdout %q, %d requests", stdout, len(f.requests()))
	}
}

func TestReplaySecretFromDataDir(t *testing.T) {
	setTestEnv(t)
	os.Unsetenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET")
	f := newFakeTriggerd(t)
	dataDir := t.TempDir()
	writeFile(t, dataDir, "codehost_webhook_secret", testCodeHostSecret+"\n")
	file := writeFile(t, t.TempDir(), "ping.json", `{"zen":"x"}`)
	// --data-dir from the environment, as envflag maps it.
	t.Setenv("TRIGGERD_DATA_DIR", dataDir)

	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, file); code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].event != "ping" {
		t.Errorf("requests = %+v, want one ping", reqs)
	}
}

func TestReplayNon2xx(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	f.status = 503
	dir := t.TempDir()
	file := writeFile(t, dir, "issues.opened.json", codeHostPayload)

	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr, file) || !strings.Contains(stderr, "503") {
		t.Errorf("stderr does not say which file failed with 503:\n%s", stderr)
	}
	lines := replayLines(t, stdout)
	if len(lines) != 1 || lines[0].Status != 503 || !strings.Contains(string(lines[0].Response), "unavailable") {
		t.Errorf("lines = %+v, want the 503 and its error body", lines)
	}

	// A wrong secret is a 401, and the message says which secret signed.
	f.status = 0
	t.Setenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET", "wrong")
	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file); code != 1 || !strings.Contains(stderr, "401") ||
		!strings.Contains(stderr, "the secret from TRIGGERD_CODEHOST_WEBHOOK_SECRET;") || strings.Contains(stderr, "wrong") {
		t.Errorf("exit %d, stderr %q; want 1 naming the 401 and where the secret came from, not the secret", code, stderr)
	}

	// A 401 that is not the signature's (a proxy asking for its own
	// credentials, say) says what answered, and blames no secret.
	t.Setenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET", testCodeHostSecret)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="gateway"`)
		http.Error(w, "proxy authentication required by the gateway", http.StatusUnauthorized)
	}))
	defer proxy.Close()
	code, _, stderr = runCtl("replay", "--url", proxy.URL, "--data-dir", dataDir, file)
	if code != 1 || !strings.Contains(stderr, proxy.URL+" answered 401") || !strings.Contains(stderr, "proxy authentication required") ||
		strings.Contains(stderr, "secret") {
		t.Errorf("exit %d, stderr %q; want 1 naming what answered 401 and its message, not the secret", code, stderr)
	}
}

// TestReplaySignsWithTheSecretFile checks that replay finds the secret
// where triggerd does: a file named by TRIGGERD_*_WEBHOOK_SECRET_FILE wins
// over the variable and the generated file, as --*-webhook-secret-file
// does for triggerd.
func TestReplaySignsWithTheSecretFile(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	t.Setenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET", "not-the-one-triggerd-reads")
	secretFile := writeFile(t, t.TempDir(), "codehost-secret", testCodeHostSecret+"\nolder-secret\n")
	t.Setenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET_FILE", secretFile)
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)
	if code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file); code != 0 {
		t.Fatalf("exit %d, stdout %s, stderr %s; want the delivery signed with the file's first secret", code, stdout, stderr)
	}
	os.Remove(secretFile)
	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file); code != 1 || !strings.Contains(stderr, "TRIGGERD_CODEHOST_WEBHOOK_SECRET_FILE") {
		t.Errorf("secret file gone: exit %d, stderr %q; want 1 naming the variable", code, stderr)
	}
}

func TestReplayUsageErrors(t *testing.T) {
	dataDir := setTestEnv(t)
	for _, args := range [][]string{
		{"replay"},
		{"replay", "--connector", "nope", "x.json"},
		{"replay", "--no-such-flag"},
	} {
		if code, _, stderr := runCtl(args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a message", args, code, stderr)
		}
	}
	// A bad value says what the flag wants, then where the flags are
	// listed, not the whole list.
	code, _, stderr := runCtl("replay", "--data-dir", dataDir, "--timeout", "soon", "x.json")
	want := "triggerctl replay: invalid value \"soon\" for flag -timeout: want a duration such as 5s, 2m or 1h30m\n" +
		"run \"triggerctl help replay\" for its flags\n"
	if code != 2 || stderr != want {
		t.Errorf("bad --timeout: exit %d, stderr:\n%s\nwant 2 and:\n%s", code, stderr, want)
	}
}

// TestReplayCorpus replays real captured payloads from the shared corpus.
func TestReplayCorpus(t *testing.T) {
	corpus := testenv.Corpus(t)
	files := map[string]string{
		"github/issues.opened.json":                     connectorCodeHost,
		"vercel/deployment.created.sentry-fixture.json": connectorDeploy,
	}
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	for name, connector := range files {
		path := filepath.Join(corpus, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, path)
		if code != 0 {
			t.Fatalf("%s: exit %d, stderr: %s", name, code, stderr)
		}
		reqs := f.requests()
		r := reqs[len(reqs)-1]
		if r.connector != connector {
			t.Errorf("%s: went to %s, want %s", name, r.connector, connector)
		}
		if connector == connectorCodeHost && (!bytes.Equal(r.body, raw) || r.event != "issues") {
			t.Errorf("%s: event %q or body changed", name, r.event)
		}
		if connector == connectorDeploy {
			var in, out map[string]json.RawMessage
			if err := json.Unmarshal(raw, &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(r.body, &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in["payload"], out["payload"]) {
				t.Errorf("%s: payload bytes changed", name)
			}
		}
	}
}

// TestReplayHintsAtTheEventOfAnIgnoredFile checks that a file whose name
// does not say its event, answered "ignored" as the event its name gave,
// gets a hint to pass --event; a file replayed with --event does not.
func TestReplayHintsAtTheEventOfAnIgnoredFile(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "my-capture.json", codeHostPayload)
	code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, file)
	if code != 0 || !strings.Contains(stderr, `triggerd ignored it as a "my-capture" event, taken from the file name (EVENT.ACTION.json); pass --event`) {
		t.Errorf("exit %d, stderr %q; want 0 and a hint to pass --event", code, stderr)
	}
	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--event", "my-capture", file); code != 0 || stderr != "" {
		t.Errorf("with --event: exit %d, stderr %q; want 0 and no hint", code, stderr)
	}
	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)); code != 0 || stderr != "" {
		t.Errorf("a mapped event: exit %d, stderr %q; want 0 and no hint", code, stderr)
	}
}

// TestReplayToAHook checks that --hook posts to /webhooks/<connector>/<id>
// signed with --secret-file's secret, how a deployment trigger's endpoint
// is tried, and that a wrong secret file gets a 401 saying which.
func TestReplayToAHook(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	file := writeFile(t, t.TempDir(), "deployment.created.json", deployEnvelope)
	secret := writeFile(t, t.TempDir(), "endpoint.secret", testHookSecret+"\n")
	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--hook", testHookID, "--secret-file", secret, file)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if lines := replayLines(t, stdout); len(lines) != 1 || lines[0].Status != 202 {
		t.Fatalf("lines %+v, want one 202", lines)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].connector != "deploy" {
		t.Fatalf("requests %+v, want one to the deploy hook", reqs)
	}
	wrong := writeFile(t, t.TempDir(), "wrong.secret", testDeploySecret)
	code, _, stderr = runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--hook", testHookID, "--secret-file", wrong, file)
	if code != 1 || !strings.Contains(stderr, "--secret-file does not hold hook h_test's secret") || strings.Contains(stderr, testDeploySecret) {
		t.Errorf("wrong secret: exit %d, stderr %q; want 1 saying the secret file is not the hook's, without the secret", code, stderr)
	}
	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "--hook", testHookID, file); code != 2 || !strings.Contains(stderr, "--hook and --secret-file go together") {
		t.Errorf("--hook alone: exit %d, stderr %q; want 2", code, stderr)
	}
}

// replay -o table prints a row per file with the events published (kind
// and id); -o json one document, the list of answers; a bad -o is a usage
// error.
func TestReplayOutputFormats(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "issues.opened.json", codeHostPayload)
	b := writeFile(t, dir, "issues.labeled.json", codeHostPayload)

	code, stdout, stderr := runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "-o", "table", a, b)
	if code != 0 {
		t.Fatalf("-o table: exit %d, stderr: %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "FILE") || !strings.Contains(rows[0], "EVENTS") {
		t.Fatalf("-o table: want a header and a row per file, got:\n%s", stdout)
	}
	for i, name := range []string{"issues.opened.json", "issues.labeled.json"} {
		if fields := strings.Fields(rows[i+1]); len(fields) < 5 || fields[0] != name || fields[1] != "202" || strings.Contains(rows[i+1], "{") {
			t.Errorf("-o table row %q: want the file, 202, its delivery id and its events' kinds and ids", rows[i+1])
		}
	}

	code, stdout, stderr = runCtl("replay", "--url", f.srv.URL, "--data-dir", dataDir, "-o", "json", a, b)
	var doc []replayLine
	if code != 0 || json.Unmarshal([]byte(stdout), &doc) != nil || len(doc) != 2 || doc[0].Status != 202 || doc[1].File != b {
		t.Fatalf("-o json: exit %d, want one document listing both answers: %s %s", code, stdout, stderr)
	}

	if code, _, stderr := runCtl("replay", "--url", f.srv.URL, "-o", "yaml", a); code != 2 || !strings.Contains(stderr, "want table, json or jsonl") {
		t.Fatalf("-o yaml: exit %d, stderr %q; want 2 naming the formats", code, stderr)
	}
}
