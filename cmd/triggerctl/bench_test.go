package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBenchJSON(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	f.keep = false
	dir := t.TempDir()
	files := writeFile(t, dir, "issues.opened.json", codeHostPayload) + "," + writeFile(t, dir, "push.json", `{"ref":"refs/heads/main"}`)

	// The fake serves from this process, so it is the server to sample.
	code, stdout, stderr := runCtl("bench", "--url", f.srv.URL, "--data-dir", dataDir, "--file", files,
		"--concurrency", "4", "--duration", "1s", "--warmup", "200ms", "--json", "--server-pid", strconv.Itoa(os.Getpid()))
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s\nstdout: %s", code, stderr, stdout)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json output is not one JSON object: %v\n%s", err, stdout)
	}
	if r.Requests == 0 || r.OK != r.Requests || len(r.Errors) != 0 {
		t.Errorf("requests %d ok %d errors %v; want all ok", r.Requests, r.OK, r.Errors)
	}
	if r.Events != 2*r.OK {
		t.Errorf("events %d, want 2 per answer = %d", r.Events, 2*r.OK)
	}
	if r.Concurrency != 4 || r.DurationS != 1 || r.ThroughputRPS <= 0 || r.BytesPerRequest <= 0 {
		t.Errorf("report %+v has wrong settings or no throughput", r)
	}
	if l := r.LatencyMS; l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max {
		t.Errorf("latencies %+v are not ordered", l)
	}
	// Server and bench are one process here, sampled microseconds apart:
	// about the same figure, and a second of four busy workers cannot have
	// cost nothing.
	if sc, cc := r.ServerCPUUSPerRequest, r.ClientCPUUSPerRequest; sc == nil || cc == nil || *sc <= 0 || *cc < 0.8**sc || *cc > 1.25**sc {
		t.Errorf("cpu per request: server %v, bench %v; want about the same positive figure", sc, cc)
	}
	if pf := r.ServerFaultsPerRequest; pf == nil || *pf < 0 {
		t.Errorf("page faults per request: %v; want a figure, zero or more", pf)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rejected != 0 {
		t.Errorf("the fake rejected %d signatures", f.rejected)
	}
	if len(f.seen) != f.delivered || f.delivered < r.Requests {
		t.Errorf("the fake saw %d distinct delivery ids in %d deliveries (report: %d); want all distinct", len(f.seen), f.delivered, r.Requests)
	}
}

func TestBenchCompactSignsTheMinifiedBody(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	f.keep = false
	indented := "{\n    \"action\": \"opened\",\n    \"issue\": {\"number\": 1}\n}\n"
	file := writeFile(t, t.TempDir(), "issues.opened.json", indented)
	code, stdout, stderr := runCtl("bench", "--url", f.srv.URL, "--data-dir", dataDir, "--file", file, "--compact",
		"--concurrency", "2", "--duration", "300ms", "--warmup", "0s", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s\nstdout: %s", code, stderr, stdout)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	// The fake checks each signature against the body it receives.
	if r.Requests == 0 || r.OK != r.Requests {
		t.Errorf("requests %d ok %d, first error %q; want all accepted", r.Requests, r.OK, r.FirstError)
	}
	if want := int64(len(`{"action":"opened","issue":{"number":1}}`)); r.BytesPerRequest != want {
		t.Errorf("bytes per request %d; want %d, the minified body", r.BytesPerRequest, want)
	}

	bad := writeFile(t, t.TempDir(), "issues.opened.json", "{not json")
	if code, _, stderr := runCtl("bench", "--url", f.srv.URL, "--data-dir", dataDir, "--file", bad, "--compact", "--duration", "100ms"); code == 0 || !strings.Contains(stderr, "--compact needs JSON") {
		t.Errorf("--compact of a file that is not JSON: exit %d, stderr %q", code, stderr)
	}
}

func TestBenchDeployText(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	f.keep = false
	file := writeFile(t, t.TempDir(), "deployment.created.json", deployEnvelope)

	code, stdout, stderr := runCtl("bench", "--url", f.srv.URL, "--data-dir", dataDir, "--connector", "deploy",
		"--file", file, "--concurrency", "4", "--duration", "300ms", "--warmup", "0s")
	if code != 0 {
		t.Fatalf("exit %d, stderr: %s\nstdout: %s", code, stderr, stdout)
	}
	for _, want := range []string{"throughput:", "p99", "non-2xx: 0", "transport errors: 0"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rejected != 0 || f.delivered == 0 || len(f.seen) != f.delivered {
		t.Errorf("rejected %d, delivered %d, distinct ids %d; want every deploy delivery signed with a fresh envelope id", f.rejected, f.delivered, len(f.seen))
	}
}

func TestBenchReportsFailures(t *testing.T) {
	dataDir := setTestEnv(t)
	f := newFakeTriggerd(t)
	f.keep = false
	f.status = 503
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)

	code, stdout, _ := runCtl("bench", "--url", f.srv.URL, "--data-dir", dataDir, "--file", file,
		"--concurrency", "2", "--duration", "200ms", "--warmup", "0s")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(stdout, "non-2xx: ") || strings.Contains(stdout, "non-2xx: 0") || !strings.Contains(stdout, "event bus is down") {
		t.Errorf("report does not show the failures and the first error body:\n%s", stdout)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	setTestEnv(t)
	for _, args := range [][]string{
		{"bench"},
		{"bench", "--file", "x.json", "--connector", "nope"},
		{"bench", "--file", "x.json", "--concurrency", "0"},
		{"bench", "--file", "x.json", "extra"},
		{"bench", "--file", "x.json", "--server-pid", "-1"},
		{"bench", "--file", "x.json", "--server-pid", "999999999"},
	} {
		if code, _, stderr := runCtl(args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a message", args, code, stderr)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{0.5: 50, 0.9: 90, 0.99: 99, 1: 100} {
		if got := percentile(d, p); got != want {
			t.Errorf("percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if got := percentile(d[:1], 0.5); got != 1 {
		t.Errorf("percentile of one = %v", got)
	}
}

// startBaseline runs "bench-baseline" with args until the test ends and
// returns its root URL.
func startBaseline(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := benchBaseline(ctx, append([]string{"--listen", "127.0.0.1:0"}, args...), io.Discard, pw)
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("exit %d after shutdown, want 0", code)
			}
		case <-time.After(10 * time.Second):
			t.Error("bench-baseline did not stop within 10s of cancellation")
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case base := <-addr:
		return base
	case code := <-done:
		done <- code
		t.Fatalf("bench-baseline exited %d before listening", code)
	case <-time.After(10 * time.Second):
		t.Fatal("bench-baseline printed no listening address within 10s")
	}
	return ""
}

// postSigned posts body to the code-hosting endpoint under base, signed
// with secret, and returns the status.
func postSigned(t *testing.T, base, secret, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/codehost", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "d-"+strconv.Itoa(len(body)))
	req.Header.Set("X-Hub-Signature-256", scheme(connectorCodeHost).Sign([]byte(secret), []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestBenchBaseline(t *testing.T) {
	setTestEnv(t)
	base := startBaseline(t)
	if got := postSigned(t, base, "any", codeHostPayload); got != http.StatusNoContent {
		t.Errorf("status %d, want 204", got)
	}
}

func TestBenchBaselineNaive(t *testing.T) {
	dataDir := setTestEnv(t)
	base := startBaseline(t, "--naive", "--data-dir", dataDir)
	if got := postSigned(t, base, testCodeHostSecret, codeHostPayload); got != http.StatusAccepted {
		t.Errorf("signed delivery: status %d, want 202 once published", got)
	}
	if got := postSigned(t, base, "wrong-secret", codeHostPayload); got != http.StatusUnauthorized {
		t.Errorf("wrong signature: status %d, want 401", got)
	}
	if got := postSigned(t, base, testCodeHostSecret, `{"action":`); got != http.StatusBadRequest {
		t.Errorf("malformed payload: status %d, want 400", got)
	}
	file := writeFile(t, t.TempDir(), "issues.opened.json", codeHostPayload)
	code, stdout, stderr := runCtl("bench", "--url", base, "--data-dir", dataDir, "--file", file,
		"--concurrency", "4", "--duration", "300ms", "--warmup", "0s", "--json")
	var r benchReport
	if err := json.Unmarshal([]byte(stdout), &r); code != 0 || err != nil || r.Requests == 0 || r.OK != r.Requests {
		t.Errorf("bench against the naive receiver: exit %d, %+v (%v)\nstderr: %s", code, r, err, stderr)
	}
}

// The publish-only floor makes the body durable and checks nothing else.
func TestBenchBaselinePublishOnly(t *testing.T) {
	setTestEnv(t)
	base := startBaseline(t, "--publish-only")
	for _, body := range []string{codeHostPayload, `{"action":`} {
		if got := postSigned(t, base, "any-secret", body); got != http.StatusAccepted {
			t.Errorf("status %d for %q, want 202: the floor verifies and decodes nothing", got, body)
		}
	}
	code, _, stderr := runCtl("bench-baseline", "--naive", "--publish-only")
	if code != 2 || !strings.Contains(stderr, "pick one") {
		t.Errorf("--naive --publish-only: exit %d, %q; want a usage error", code, stderr)
	}
	dropping := startBaseline(t, "--publish-only", "--nats-drop-behind")
	if got := postSigned(t, dropping, "any-secret", codeHostPayload); got != http.StatusAccepted {
		t.Errorf("status %d from the floor with drop-behind, want 202", got)
	}
	code, _, stderr = runCtl("bench-baseline", "--verify")
	if code != 2 || !strings.Contains(stderr, "--verify goes with --publish-only") {
		t.Errorf("--verify alone: exit %d, %q; want a usage error", code, stderr)
	}
}

// The verifying floor checks the signature, then makes the body durable
// without decoding it.
func TestBenchBaselinePublishOnlyVerify(t *testing.T) {
	setTestEnv(t)
	base := startBaseline(t, "--publish-only", "--verify")
	for _, body := range []string{codeHostPayload, `{"action":`} {
		if got := postSigned(t, base, testCodeHostSecret, body); got != http.StatusAccepted {
			t.Errorf("status %d for %q signed with the secret, want 202: it decodes nothing", got, body)
		}
	}
	if got := postSigned(t, base, "wrong-secret", codeHostPayload); got != http.StatusUnauthorized {
		t.Errorf("wrong signature: status %d, want 401", got)
	}
}

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses; minflt 1000, majflt 7,
	// utime 250, stime 50.
	line := "4242 (tri) (gger d) S 1 4242 4242 0 -1 4194560 1000 0 7 0 250 50 0 0 20 0 12 0 100 0 0\n"
	want := usage{CPU: 3 * time.Second, MinorFaults: 1000}
	if got, err := parseProcStat(line); err != nil || got != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range []string{"", "4242 tri S 1", "4242 (tri) S 1 2 3", "4242 (t) S 1 1 1 0 -1 0 0 0 0 0 x 5 0", "4242 (t) S 1 1 1 0 -1 0 x 0 0 0 4 5 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) accepted a malformed line", bad)
		}
	}
}
