package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
)

// binary is the triggerd built once for the process tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "triggerd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "triggerd")
	build := exec.Command("go", "build", "-race", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building triggerd:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running triggerd.
type proc struct {
	t        *testing.T
	cmd      *exec.Cmd
	httpURL  string
	natsURL  string
	mu       sync.Mutex
	log      bytes.Buffer
	exited   chan struct{}
	exitCode int
}

// testNATSPassword is the embedded NATS's operator password of the
// processes startTriggerd runs, unless their env sets one (an empty one has
// it generated into the data dir).
const testNATSPassword = "test-nats-operator-password"

// asOperator connects to a test process's NATS as its operator.
var asOperator = nats.UserInfo(bus.OperatorUser, testNATSPassword)

// startTriggerd runs the binary and waits until it says it is ready.
func startTriggerd(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startTriggerdUntil(t, "triggerd ready", env, args...)
}

// startTriggerdUntil runs the binary and waits until it logs a message
// starting with readyMsg, which gives its http_addr and nats_url.
func startTriggerdUntil(t *testing.T, readyMsg string, env []string, args ...string) *proc {
	t.Helper()
	p, ready := launchTriggerd(t, readyMsg, env, args...)
	p.waitReady(ready, 60*time.Second)
	return p
}

// waitReady waits for launchTriggerd's ready, failing the test if the
// process exits first or takes longer than d.
func (p *proc) waitReady(ready <-chan struct{}, d time.Duration) {
	p.t.Helper()
	select {
	case <-ready:
	case <-p.exited:
		p.t.Fatalf("triggerd exited with %d before it was ready:\n%s", p.exitCode, p.logs())
	case <-time.After(d):
		p.cmd.Process.Kill()
		p.t.Fatalf("triggerd not ready after %s:\n%s", d, p.logs())
	}
}

// launchTriggerd runs the binary; ready is closed once it logs a message
// starting with readyMsg. The process is killed when the test ends.
func launchTriggerd(t *testing.T, readyMsg string, env []string, args ...string) (*proc, <-chan struct{}) {
	t.Helper()
	p := &proc{t: t, exited: make(chan struct{})}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TRIGGERD_NATS_PASSWORD=") }) {
		env = append(slices.Clip(env), "TRIGGERD_NATS_PASSWORD="+testNATSPassword)
	}
	base := []string{"--http-addr", "127.0.0.1:0"}
	if !externalNATS(env, args) {
		base = append(base, "--nats-listen", "127.0.0.1:0")
	}
	p.cmd = exec.Command(binary, append(base, args...)...)
	p.cmd.Env = append(cleanEnv(), env...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.log.Write(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(line, &rec) == nil && strings.HasPrefix(fmt.Sprint(rec["message"]), readyMsg) {
				p.httpURL = "http://" + rec["http_addr"].(string)
				p.natsURL = rec["nats_url"].(string)
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, stderr)
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p, ready
}

// externalNATS reports whether env or args point triggerd at an external
// NATS, beside which it refuses --nats-listen.
func externalNATS(env, args []string) bool {
	return slices.Contains(args, "--nats-url") ||
		slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TRIGGERD_NATS_URL=") })
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRIGGERD_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// kill sends SIGKILL: the process gets no chance to clean up.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.exited
}

// stop sends SIGTERM and waits for a graceful exit.
func (p *proc) stop() int {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("triggerd did not stop within 30s of SIGTERM:\n%s", p.logs())
	}
	return p.exitCode
}

type delivery struct {
	event, id string
	body      []byte
	header    http.Header // more request headers, if any
}

type reply struct {
	status int
	body   struct {
		DeliveryID string `json:"delivery_id"`
		Duplicate  bool   `json:"duplicate"`
		Spooled    bool   `json:"spooled"`
		Events     []struct {
			ID, Kind, Subject string
		} `json:"events"`
	}
}

// client is the tests' shared HTTP client: an exchange with /v1 or
// /webhooks that disagrees with the OpenAPI document fails, its error
// saying how.
var client = &http.Client{Timeout: 20 * time.Second, Transport: apitest.StrictTransport(nil)}

func post(url, secret string, d delivery) (reply, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/codehost", bytes.NewReader(d.body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", d.event)
	req.Header.Set("X-GitHub-Delivery", d.id)
	req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign([]byte(secret), d.body))
	for k, vs := range d.header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	var r reply
	r.status = resp.StatusCode
	err = json.NewDecoder(resp.Body).Decode(&r.body)
	return r, err
}

// streamEvents reads every message of the events stream and returns how
// often each Nats-Msg-Id occurs, and each id's subject.
func streamEvents(t *testing.T, natsURL string, opts ...nats.Option) (map[string]int, map[string]string) {
	t.Helper()
	nc, err := nats.Connect(natsURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	// Archive records may share the stream; only events count.
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.EventsFilter))
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, n := range info.State.Subjects {
		total += n
	}
	counts, subjects := map[string]int{}, map[string]string{}
	if total == 0 {
		return counts, subjects
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.EventsFilter}})
	if err != nil {
		t.Fatal(err)
	}
	for got := uint64(0); got < total; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			id := m.Headers().Get("Nats-Msg-Id")
			counts[id]++
			subjects[id] = m.Subject()
			got++
		}
		if batch.Error() != nil {
			t.Fatal(batch.Error())
		}
	}
	return counts, subjects
}

// waitSpoolForwarded waits until the spool under dataDir is empty. A
// delivery answered 202 from the spool (its commit timed out under load)
// and not forwarded before the process stopped is forwarded by the next
// one's spool loop: tests wait for it before reading the stream.
func waitSpoolForwarded(t *testing.T, dataDir string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the spool to be forwarded", func() bool {
		files, _ := filepath.Glob(filepath.Join(dataDir, "spool", "*.rec"))
		return len(files) == 0
	})
}

func issueBody(n int) []byte {
	return []byte(fmt.Sprintf(`{"action":"opened","issue":{"id":%d,"number":%d,"title":"issue %d","body":"cc @bob","html_url":"https://example.test/i/%d","state":"open","user":{"login":"alice"},"labels":[]},"repository":{"id":9,"name":"api","full_name":"octo-org/api","owner":{"login":"octo-org"}},"sender":{"login":"alice"}}`, n, n, n, n))
}

// TestKillMidStreamExactlyOnce posts deliveries while triggerd is killed
// with SIGKILL, restarts it on the same data dir, and has the sender retry
// every delivery that got no 2xx, as GitHub's redelivery would. Every
// delivery's events must end up in the stream exactly once.
func TestKillMidStreamExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	const secret = "kill-test-secret"
	env := []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + dir}
	p := startTriggerd(t, env)

	const total = 240
	ds := make([]delivery, total)
	for i := range ds {
		ds[i] = delivery{event: "issues", id: fmt.Sprintf("kill-%03d", i), body: issueBody(i)}
	}
	var (
		mu       sync.Mutex
		accepted = map[string][]string{} // delivery id -> event ids answered
		answered int
	)
	record := func(id string, r reply) {
		mu.Lock()
		defer mu.Unlock()
		if r.status == http.StatusAccepted {
			if _, dup := accepted[id]; dup {
				t.Errorf("delivery %s was accepted twice", id)
			}
			evs := []string{}
			for _, e := range r.body.Events {
				evs = append(evs, e.ID)
			}
			accepted[id] = evs
		}
		answered++
	}
	// Eight concurrent senders; the process is killed once a third of the
	// deliveries have been answered, while requests are in flight.
	work := make(chan delivery)
	var wg sync.WaitGroup
	url := p.httpURL
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				if r, err := post(url, secret, d); err == nil {
					record(d.id, r)
				}
			}
		}()
	}
	killed := false
	for _, d := range ds {
		mu.Lock()
		n := answered
		mu.Unlock()
		if !killed && n >= total/3 {
			p.kill()
			killed = true
		}
		work <- d
	}
	close(work)
	wg.Wait()
	if !killed {
		t.Fatal("the process was never killed; the test proved nothing")
	}
	t.Logf("before the kill: %d deliveries accepted of %d sent", len(accepted), total)

	// Restart on the same data dir; the sender retries every delivery that
	// got no 2xx, and a few that did (a user pressing "redeliver").
	p = startTriggerd(t, env)
	for i, d := range ds {
		mu.Lock()
		_, ok := accepted[d.id]
		mu.Unlock()
		if ok && i%10 != 0 {
			continue
		}
		r, err := post(p.httpURL, secret, d)
		if err != nil {
			t.Fatalf("retry of %s: %v", d.id, err)
		}
		switch {
		case r.status == http.StatusAccepted:
			record(d.id, r)
		case r.status == http.StatusOK && r.body.Duplicate:
			if !ok {
				// Accepted before the kill, but the answer was lost with
				// the process: its events must be in the stream.
				mu.Lock()
				accepted[d.id] = nil
				mu.Unlock()
			}
		default:
			t.Fatalf("retry of %s: status %d", d.id, r.status)
		}
	}
	if len(accepted) != total {
		t.Fatalf("%d deliveries accepted in the end, want %d", len(accepted), total)
	}

	waitSpoolForwarded(t, dir)
	counts, _ := streamEvents(t, p.natsURL, asOperator)
	for id, c := range counts {
		if c != 1 {
			t.Errorf("event %s is in the stream %d times", id, c)
		}
	}
	// Each issue delivery maps to new_issue and a new_mention of @bob.
	if len(counts) != 2*total {
		t.Fatalf("the stream holds %d distinct events, want %d", len(counts), 2*total)
	}
	for id, evs := range accepted {
		for _, e := range evs {
			if counts[e] != 1 {
				t.Fatalf("event %s of accepted delivery %s is missing from the stream", e, id)
			}
		}
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("graceful stop exited %d:\n%s", code, p.logs())
	}
}

// TestSIGTERMUnderLoad stops triggerd gracefully while eight senders keep
// posting (reliability catalogue #25): it must exit 0 within
// --shutdown-timeout, and every delivery it answered 2xx must have its
// events in the stream exactly once; a request it did not answer was not
// accepted.
func TestSIGTERMUnderLoad(t *testing.T) {
	dir := t.TempDir()
	const secret = "sigterm-secret"
	env := []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + dir, "TRIGGERD_SHUTDOWN_TIMEOUT=10s"}
	p := startTriggerd(t, env)
	var (
		mu       sync.Mutex
		accepted = map[string][]string{}
		next     atomic.Int64
		refused  atomic.Int64 // transport errors: never accepted
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1)
				id := fmt.Sprintf("term-%05d", i)
				r, err := post(p.httpURL, secret, delivery{event: "issues", id: id, body: issueBody(int(i))})
				switch {
				case err != nil:
					refused.Add(1)
					if refused.Load() > 50 {
						return // the listener is gone
					}
				case r.status == http.StatusAccepted:
					evs := []string{}
					for _, e := range r.body.Events {
						evs = append(evs, e.ID)
					}
					mu.Lock()
					accepted[id] = evs
					mu.Unlock()
				case r.status != http.StatusServiceUnavailable:
					t.Errorf("%s: status %d during shutdown", id, r.status)
				}
			}
		})
	}
	testenv.Eventually(t, 30*time.Second, "200 deliveries accepted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 200
	})
	start := time.Now()
	code := p.stop()
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("exit %d after SIGTERM under load:\n%s", code, p.logs())
	}
	if took > 15*time.Second {
		t.Fatalf("graceful stop took %s; --shutdown-timeout is 10s", took)
	}
	t.Logf("SIGTERM after %d accepted; exited 0 in %s; %d requests found no listener", len(accepted), took.Round(time.Millisecond), refused.Load())

	p = startTriggerd(t, env)
	waitSpoolForwarded(t, dir)
	counts, _ := streamEvents(t, p.natsURL, asOperator)
	mu.Lock()
	defer mu.Unlock()
	for id, evs := range accepted {
		for _, e := range evs {
			if counts[e] != 1 {
				t.Errorf("event %s of delivery %s, answered 202, is in the stream %d times", e, id, counts[e])
			}
		}
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("event %s is in the stream %d times", id, c)
		}
	}
}

// TestDuplicatesAcrossProcesses runs two triggerd processes on one external
// NATS: a delivery accepted by one is a duplicate at the other.
func TestDuplicatesAcrossProcesses(t *testing.T) {
	natsDir := t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	const secret = "shared-secret"
	env := []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_NATS_URL=" + emb.ClientURL()}
	a := startTriggerd(t, append(env, "TRIGGERD_DATA_DIR="+t.TempDir()))
	b := startTriggerd(t, append(env, "TRIGGERD_DATA_DIR="+t.TempDir()))
	d := delivery{event: "issues", id: "shared-1", body: issueBody(1)}
	r1, err := post(a.httpURL, secret, d)
	if err != nil || r1.status != http.StatusAccepted {
		t.Fatalf("first process: %v %d", err, r1.status)
	}
	r2, err := post(b.httpURL, secret, d)
	if err != nil || r2.status != http.StatusOK || !r2.body.Duplicate {
		t.Fatalf("second process: %v %d %+v, want 200 duplicate", err, r2.status, r2.body)
	}
	counts, _ := streamEvents(t, emb.ClientURL())
	if len(counts) != 2 {
		t.Fatalf("stream holds %d events, want 2", len(counts))
	}
}

// TestReadinessFollowsNATS stops the external NATS under a running triggerd:
// /readyz turns false, deliveries get 503 with Retry-After, and both
// recover when NATS is back.
func TestReadinessFollowsNATS(t *testing.T) {
	natsDir := t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	listen := strings.TrimPrefix(emb.ClientURL(), "nats://")
	const secret = "ready-secret"
	// Without a spool, a delivery NATS cannot take is refused.
	p := startTriggerd(t, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_NATS_URL=" + emb.ClientURL(),
		"TRIGGERD_DATA_DIR=" + t.TempDir(), "TRIGGERD_COMMIT_TIMEOUT=1s", "TRIGGERD_SPOOL_MAX_BYTES=0"})
	ready := func() int {
		resp, err := client.Get(p.httpURL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testenv.Eventually(t, 10*time.Second, "/readyz to answer 200", func() bool { return ready() == 200 })

	emb.Shutdown()
	testenv.Eventually(t, 10*time.Second, "/readyz to answer 503", func() bool { return ready() == 503 })
	req, _ := http.NewRequest(http.MethodPost, p.httpURL+"/webhooks/codehost", bytes.NewReader(issueBody(5)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "during-outage")
	req.Header.Set("X-Hub-Signature-256", ingest.CodeHostScheme.Sign([]byte(secret), issueBody(5)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("delivery during the outage: %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	emb, err = bus.StartEmbedded(bus.EmbeddedOptions{Listen: listen, DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	testenv.Eventually(t, 20*time.Second, "/readyz to answer 200 again", func() bool { return ready() == 200 })
	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "during-outage", body: issueBody(5)})
	if err != nil || r.status != http.StatusAccepted {
		t.Fatalf("the delivery refused during the outage, retried after: %v %d, want 202", err, r.status)
	}
}

// TestNATSOutageDeliveriesAreSpooled stops NATS under a running triggerd
// (reliability catalogue #8): every delivery sent during the outage is
// answered 202 from the spool, and once NATS is back on the same store
// each one's events are in the stream exactly once, the spool is empty,
// and a redelivery is a duplicate.
func TestNATSOutageDeliveriesAreSpooled(t *testing.T) {
	natsDir, dataDir := t.TempDir(), t.TempDir()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	listen := strings.TrimPrefix(emb.ClientURL(), "nats://")
	restartNATS := func() {
		t.Helper()
		if emb, err = bus.StartEmbedded(bus.EmbeddedOptions{Listen: listen, DataDir: natsDir}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emb.Shutdown)
	}
	const secret = "spool-secret"
	env := []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_NATS_URL=" + emb.ClientURL(),
		"TRIGGERD_DATA_DIR=" + dataDir, "TRIGGERD_COMMIT_TIMEOUT=1s", "TRIGGERD_DISPATCH=false"}
	p := startTriggerd(t, env)
	spoolFiles := func() []string {
		files, err := filepath.Glob(filepath.Join(dataDir, "spool", "*.rec"))
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	// want holds the ids of every event triggerd answered with.
	want := map[string]bool{}
	postSpooled := func(d delivery) {
		t.Helper()
		r, err := post(p.httpURL, secret, d)
		if err != nil || r.status != http.StatusAccepted || !r.body.Spooled || len(r.body.Events) != 2 {
			t.Fatalf("%s during an outage: %v %d %+v, want 202 spooled with 2 events", d.id, err, r.status, r.body)
		}
		for _, e := range r.body.Events {
			want[e.ID] = true
		}
	}
	// checkStream waits for the spool to empty, then wants every answered
	// event in the stream exactly once, and nothing else.
	checkStream := func(what string) {
		t.Helper()
		testenv.Eventually(t, 30*time.Second, what, func() bool { return len(spoolFiles()) == 0 })
		counts, _ := streamEvents(t, emb.ClientURL())
		for id := range want {
			if counts[id] != 1 {
				t.Errorf("event %s is in the stream %d times, want once", id, counts[id])
			}
		}
		if len(counts) != len(want) {
			t.Errorf("stream holds %d distinct events, want %d", len(counts), len(want))
		}
	}

	before, err := post(p.httpURL, secret, delivery{event: "issues", id: "before-outage", body: issueBody(1000)})
	if err != nil || before.status != http.StatusAccepted || before.body.Spooled {
		t.Fatalf("before the outage: %v %d spooled=%v, want 202 through NATS", err, before.status, before.body.Spooled)
	}
	for _, e := range before.body.Events {
		want[e.ID] = true
	}

	emb.Shutdown()
	const n = 40
	start := time.Now()
	for i := range n {
		postSpooled(delivery{event: "issues", id: fmt.Sprintf("outage-%d", i), body: issueBody(i)})
	}
	t.Logf("%d deliveries spooled during the outage, %s each on average", n, time.Since(start)/n)
	// A proxy's credentials never reach the spool's files.
	postSpooled(delivery{event: "issues", id: "outage-credentials", body: issueBody(999),
		header: http.Header{"Authorization": {"Bearer proxy-s3cret"}, "X-Api-Key": {"proxy-s3cret"}}})
	for _, f := range spoolFiles() {
		if data, _ := os.ReadFile(f); bytes.Contains(data, []byte("proxy-s3cret")) {
			t.Fatalf("spool file %s holds a credential header", filepath.Base(f))
		}
	}
	// A redelivery during the outage cannot be recognised yet; it is
	// spooled too and forwarded as a duplicate.
	postSpooled(delivery{event: "issues", id: "outage-0", body: issueBody(0)})
	if got := len(spoolFiles()); got != n+2 {
		t.Fatalf("spool holds %d records, want %d", got, n+2)
	}

	restartNATS()
	checkStream("the spool to be forwarded")
	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "outage-7", body: issueBody(7)})
	if err != nil || r.status != http.StatusOK || !r.body.Duplicate {
		t.Fatalf("redelivery after the spool was forwarded: %v %d %+v, want 200 duplicate", err, r.status, r.body)
	}

	// A second outage, and triggerd is killed before NATS is back: the
	// next run forwards what the killed one spooled.
	emb.Shutdown()
	for i := n; i < n+10; i++ {
		postSpooled(delivery{event: "issues", id: fmt.Sprintf("outage-%d", i), body: issueBody(i)})
	}
	p.kill()
	if got := len(spoolFiles()); got != 10 {
		t.Fatalf("spool holds %d records after kill -9, want 10", got)
	}
	restartNATS()
	p = startTriggerd(t, env)
	checkStream("the next run to forward the spool")
	if code := p.stop(); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.logs())
	}
}

func TestBusyNATSPortIsAClearError(t *testing.T) {
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	busy := strings.TrimPrefix(emb.ClientURL(), "nats://")
	cmd := exec.Command(binary, "--http-addr", "127.0.0.1:0", "--nats-listen", busy, "--data-dir", t.TempDir())
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %d (%v), want 1:\n%s", cmd.ProcessState.ExitCode(), err, out)
	}
	if !bytes.Contains(out, []byte("--nats-listen")) || !bytes.Contains(out, []byte("already in use")) {
		t.Fatalf("the error does not name --nats-listen and the cause:\n%s", out)
	}
}

func TestGeneratedSecretsArePrivateAndNeverLogged(t *testing.T) {
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir})
	var secrets []string
	for _, name := range []string{"codehost_webhook_secret", "deploy_webhook_secret"} {
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", name, st.Mode().Perm())
		}
		b, _ := os.ReadFile(path)
		secrets = append(secrets, strings.TrimSpace(string(b)))
		if !strings.Contains(p.logs(), path) {
			t.Fatalf("the log does not say where %s is", name)
		}
	}
	// A signed delivery works with the generated secret; a second start
	// reuses it.
	if r, err := post(p.httpURL, secrets[0], delivery{event: "issues", id: "gen-1", body: issueBody(1)}); err != nil || r.status != 202 {
		t.Fatalf("delivery signed with the generated secret: %v %d", err, r.status)
	}
	p.stop()
	p = startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir})
	if r, err := post(p.httpURL, secrets[0], delivery{event: "issues", id: "gen-2", body: issueBody(2)}); err != nil || r.status != 202 {
		t.Fatalf("after a restart the secret changed: %v %d", err, r.status)
	}
	p.stop()
	for _, s := range secrets {
		if strings.Contains(p.logs(), s) {
			t.Fatal("a webhook secret appears in the log")
		}
	}
}

// TestSecretFileRotationOnSIGHUP rotates the code-hosting secret without a
// restart (reliability catalogue #6): both secrets verify while the file
// holds both, and after the file is rewritten and triggerd gets SIGHUP the
// removed one is refused with 401 while the kept one goes on.
func TestSecretFileRotationOnSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "codehost-secret")
	if err := os.WriteFile(path, []byte("old-rotated-secret\nnew-rotated-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + t.TempDir()}, "--codehost-webhook-secret-file", path)
	n := 0
	send := func(secret string) int {
		t.Helper()
		n++
		r, err := post(p.httpURL, secret, delivery{event: "issues", id: fmt.Sprintf("rot-%d", n), body: issueBody(n)})
		if err != nil && r.status == 0 {
			t.Fatal(err)
		}
		return r.status
	}
	for _, s := range []string{"old-rotated-secret", "new-rotated-secret"} {
		if got := send(s); got != 202 {
			t.Fatalf("signed with %s while the file holds both: %d, want 202", s, got)
		}
	}
	if err := os.WriteFile(path, []byte("new-rotated-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the removed secret to be refused", func() bool { return send("old-rotated-secret") == 401 })
	if got := send("new-rotated-secret"); got != 202 {
		t.Fatalf("signed with the kept secret after the rotation: %d, want 202", got)
	}
	if code := p.stop(); code != 0 {
		t.Fatalf("exit code %d after the rotation, want 0:\n%s", code, p.logs())
	}
	logs := p.logs()
	if !strings.Contains(logs, "webhook secrets reloaded") || strings.Contains(logs, "rotated-secret") {
		t.Fatalf("want a reload logged and no secret in the log:\n%s", logs)
	}
}

// TestSlowClientsDoNotStallDeliveries holds 100 connections that send their
// headers a byte at a time (slowloris) and checks that a real delivery
// still gets its answer promptly.
func TestSlowClientsDoNotStallDeliveries(t *testing.T) {
	const secret = "slow-secret"
	p := startTriggerd(t, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret, "TRIGGERD_DATA_DIR=" + t.TempDir()})
	addr := strings.TrimPrefix(p.httpURL, "http://")
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel: deferred calls run last-in, first-out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dialer net.Dialer
	for i := 0; i < 100; i++ {
		conn, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			head := "POST /webhooks/codehost HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: issues\r\n"
			for j := 0; j < len(head); j++ {
				if _, err := conn.Write([]byte{head[j]}); err != nil {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	start := time.Now()
	r, err := post(p.httpURL, secret, delivery{event: "issues", id: "among-slow-ones", body: issueBody(1)})
	if err != nil || r.status != http.StatusAccepted {
		t.Fatalf("delivery among slow clients: %v %d", err, r.status)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a delivery took %s while slow clients were connected", d)
	}
}

// TestSandboxRunsSteps starts triggerd --sandbox and runs a step of each
// connector through the management API, as the README tells a new user to.
// apiCaller calls triggerd's API as a tenant: method, path and JSON body
// in, status and JSON answer out.
type apiCaller func(method, path, body string) (int, map[string]any)

// sandboxAPI returns a caller of the API of the sandbox process *pp (read
// at each call, so that a restarted process is reached at its new
// address) as the default tenant, and the sandbox accounts' ids by
// connector.
func sandboxAPI(t *testing.T, pp **proc, dir string) (apiCaller, map[string]string) {
	t.Helper()
	keyBytes, err := os.ReadFile(filepath.Join(dir, "default_tenant_key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(keyBytes))
	checked := checkedClient(t)
	api := func(method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, (*pp).httpURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := checked.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	_, body := api(http.MethodGet, "/v1/accounts", "")
	ids := map[string]string{}
	for _, raw := range body["accounts"].([]any) {
		a := raw.(map[string]any)
		ids[a["connector"].(string)] = a["id"].(string)
	}
	if len(ids) != 3 {
		t.Fatalf("sandbox accounts: %v, want one per connector", ids)
	}
	return api, ids
}

func TestSandboxRunsSteps(t *testing.T) {
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)
	for _, tc := range []struct{ connector, step, input, want string }{
		{"codehost", "codehost.create_issue", `{"owner":"octocat","repo":"hello-world","title":"From the sandbox test"}`, "From the sandbox test"},
		{"deploy", "deploy.list_deployments", `{"project":"web","limit":5}`, "deployments"},
		{"analytics", "analytics.run_reports", `{"property":"properties/1002","metrics":["sessions"],"dimensions":["date"],"date_ranges":[{"start_date":"7daysAgo","end_date":"today"}]}`, "rows"},
	} {
		code, out := api(http.MethodPost, "/v1/steps/"+tc.step+"/run", `{"account":"`+ids[tc.connector]+`","input":`+tc.input+`}`)
		b, _ := json.Marshal(out)
		if code != http.StatusOK || !strings.Contains(string(b), tc.want) {
			t.Fatalf("%s: %d %s", tc.step, code, b)
		}
	}
	// A trigger on the sandbox repository: its hook points at this
	// process (started on a random port, with no --public-url).
	code, agent := api(http.MethodPost, "/v1/agents", `{"name": "sandbox-agent"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, agent)
	}
	code, trigger := api(http.MethodPost, "/v1/triggers", `{"kind": "new_issue", "account": "`+ids["codehost"]+`", "agent": "`+agent["id"].(string)+`", "params": {"repositories": ["octocat/hello-world"]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trigger)
	}
	openIssueStartsRun := func(title string, runs int) {
		t.Helper()
		code, out := api(http.MethodPost, "/v1/steps/codehost.create_issue/run", `{"account":"`+ids["codehost"]+`","input":{"owner":"octocat","repo":"hello-world","title":"`+title+`"}}`)
		if code != http.StatusOK {
			t.Fatalf("create issue: %d %v", code, out)
		}
		testenv.Eventually(t, 20*time.Second, fmt.Sprintf("run %d of the trigger, for the issue %q", runs, title), func() bool {
			_, out := api(http.MethodGet, "/v1/runs?trigger="+trigger["id"].(string), "")
			list, _ := out["runs"].([]any)
			return len(list) == runs
		})
	}
	openIssueStartsRun("Opened before the restarts", 1)
	restart := func() {
		t.Helper()
		p.stop()
		p = startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
		_, body := api(http.MethodGet, "/v1/accounts", "")
		if n := len(body["accounts"].([]any)); n != 3 {
			t.Fatalf("after a restart the sandbox has %d accounts, want the same 3", n)
		}
	}
	hookAtNewAddress := func() {
		t.Helper()
		// Upstream, on the fake GitHub: the trigger's own view names
		// the hook's URL from the current public URL whether or not the
		// hook exists there.
		testenv.Eventually(t, 20*time.Second, "the trigger's hook registered again on the fresh fake, at the new address", func() bool {
			_, out := api(http.MethodPost, "/v1/steps/codehost.api_call/run", `{"account":"`+ids["codehost"]+`","input":{"method":"GET","endpoint":"/repos/octocat/hello-world/hooks","headers":{"accept":"application/vnd.codehost+json"}}}`)
			b, _ := json.Marshal(out)
			return strings.Contains(string(b), `"url":"`+p.httpURL+`/webhooks/codehost/`)
		})
	}

	// A restart keeps the same sandbox accounts; the fakes start empty,
	// and the reconcile at start registers the trigger's hook again (at
	// the new port) rather than at the first periodic pass, 5 min later.
	restart()
	hookAtNewAddress()
	openIssueStartsRun("Opened after a restart", 2)

	// Removing the account deactivates the trigger; the next start
	// connects the account again, and its trigger with it.
	if code, out := api(http.MethodDelete, "/v1/accounts/"+ids["codehost"], ""); code != http.StatusOK {
		t.Fatalf("remove account: %d %v", code, out)
	}
	if _, tr := api(http.MethodGet, "/v1/triggers/"+trigger["id"].(string), ""); tr["status"] != "inactive" {
		t.Fatalf("the removed account's trigger is %v, want inactive", tr["status"])
	}
	restart()
	if _, tr := api(http.MethodGet, "/v1/triggers/"+trigger["id"].(string), ""); tr["status"] != "active" {
		t.Fatalf("after a restart the removed account's trigger is %v (%v), want active", tr["status"], tr["status_reason"])
	}
	hookAtNewAddress()
	openIssueStartsRun("Opened after the account came back", 3)
}

// TestDeployEndpointTakesTheProvidersSecret follows a user wiring a
// Vercel webhook to an agent's deployment endpoint: Vercel shows the
// webhook's own secret once and signs with it, so the endpoint must
// accept that secret once the user sets it, and only it.
func TestDeployEndpointTakesTheProvidersSecret(t *testing.T) {
	dir := t.TempDir()
	p := startTriggerd(t, []string{"TRIGGERD_DATA_DIR=" + dir}, "--sandbox")
	api, ids := sandboxAPI(t, &p, dir)
	code, agent := api(http.MethodPost, "/v1/agents", `{"name": "deploy-watcher"}`)
	if code != http.StatusCreated {
		t.Fatalf("create agent: %d %v", code, agent)
	}
	agentID := agent["id"].(string)
	code, trigger := api(http.MethodPost, "/v1/triggers", `{"kind": "deployment_started", "account": "`+ids["deploy"]+`", "agent": "`+agentID+`"}`)
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trigger)
	}
	code, ep := api(http.MethodGet, "/v1/agents/"+agentID+"/endpoint", "")
	if code != http.StatusOK || ep["secret_source"] != "generated" || ep["secret"] == "" {
		t.Fatalf("endpoint: %d %v; want the generated secret shown", code, ep)
	}
	generated := ep["secret"].(string)
	n := 0
	deliver := func(secret string) (int, string) {
		t.Helper()
		n++
		body := fmt.Appendf(nil, `{"id":"evt_s25_%d","type":"deployment.created","createdAt":%d,"payload":{"deployment":{"id":"dpl_%d","url":"web-%d.vercel.app"},"project":{"id":"prj_web"},"target":"production"}}`, n, time.Now().UnixMilli(), n, n)
		req, _ := http.NewRequest(http.MethodPost, ep["url"].(string), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-vercel-signature", ingest.DeployScheme.Sign([]byte(secret), body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		answer, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(answer)
	}
	runs := func() int {
		_, out := api(http.MethodGet, "/v1/runs?trigger="+trigger["id"].(string), "")
		list, _ := out["runs"].([]any)
		return len(list)
	}

	// Signed with the generated secret (a test delivery): taken, and it
	// leaves the process's cache holding that secret.
	if code, answer := deliver(generated); code != http.StatusAccepted {
		t.Fatalf("signed with the generated secret: %d %s", code, answer)
	}
	testenv.Eventually(t, 20*time.Second, "the test delivery's run", func() bool { return runs() == 1 })

	// Vercel signs with its own secret: refused until it is set, with a
	// message that says how.
	const vercel = "pJ7kq2ZQvN4xXw9mHc3tLb8R"
	if code, answer := deliver(vercel); code != http.StatusUnauthorized || !strings.Contains(answer, "set-secrets "+agentID) {
		t.Fatalf("signed with Vercel's secret before it is set: %d %s; want 401 naming triggerctl agents set-secrets", code, answer)
	}
	// The endpoint's view says so: the user sees why nothing started.
	testenv.Eventually(t, 20*time.Second, "the refusal in the endpoint's activity", func() bool {
		_, ep := api(http.MethodGet, "/v1/agents/"+agentID+"/endpoint", "")
		act, _ := ep["activity"].(map[string]any)
		last, _ := act["last_refusal"].(map[string]any)
		return act["refused"] == float64(1) && last["code"] == "invalid_signature" && act["last_accepted_at"] != nil &&
			strings.Contains(fmt.Sprint(last["message"]), "set-secrets")
	})
	if code, out := api(http.MethodPut, "/v1/agents/"+agentID+"/endpoint/secrets", `{"secrets": ["short"]}`); code != http.StatusBadRequest {
		t.Fatalf("a 5-character secret: %d %v, want 400", code, out)
	}
	code, set := api(http.MethodPut, "/v1/agents/"+agentID+"/endpoint/secrets", `{"secrets": ["`+vercel+`"]}`)
	if code != http.StatusOK || set["secret_source"] != "provider" || set["secrets_set_at"] == nil || set["secret"] != nil {
		t.Fatalf("set secrets: %d %v; want the provider's in use, none shown", code, set)
	}
	if code, answer := deliver(vercel); code != http.StatusAccepted {
		t.Fatalf("signed with Vercel's secret once set: %d %s", code, answer)
	}
	testenv.Eventually(t, 20*time.Second, "the Vercel delivery's run", func() bool { return runs() == 2 })
	if code, _ := deliver(generated); code != http.StatusUnauthorized {
		t.Fatalf("signed with the replaced generated secret: %d, want 401", code)
	}
	if code, ep := api(http.MethodGet, "/v1/agents/"+agentID+"/endpoint", ""); code != http.StatusOK || ep["secret"] != nil || ep["secret_source"] != "provider" {
		t.Fatalf("endpoint after setting: %d %v; want no secret shown", code, ep)
	}
	if strings.Contains(p.logs(), vercel) {
		t.Fatal("the provider's secret appears in triggerd's logs")
	}
}
