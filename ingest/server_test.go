package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/triggers"
)

const (
	testCodeHostSecret = "codehost-test-secret"
	testDeploySecret   = "deploy-test-secret"
)

// fakeCommitter records commits; it remembers delivery ids to answer
// duplicates, and fails while err is set.
type fakeCommitter struct {
	mu      sync.Mutex
	seen    map[string]bool
	commits []triggers.Capture
	events  [][]triggers.Event
	err     error
}

func (f *fakeCommitter) Commit(_ context.Context, c triggers.Capture, events []triggers.Event) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	key := string(c.Connector) + "/" + c.Key()
	if f.seen[key] {
		return true, nil
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[key] = true
	f.commits = append(f.commits, c)
	f.events = append(f.events, events)
	return false, nil
}

func (f *fakeCommitter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.commits)
}

type harness struct {
	t *testing.T
	// check holds every exchange to the OpenAPI document.
	check *apitest.Checker
	s     *Server
	e     *echo.Echo
	fc    *fakeCommitter
	reg   *prometheus.Registry
}

func newHarness(t *testing.T, mutate func(*Options)) *harness {
	t.Helper()
	ch, _ := NewVerifier(CodeHostScheme, testCodeHostSecret)
	dp, _ := NewVerifier(DeployScheme, testDeploySecret)
	h := &harness{t: t, check: apitest.New(t), fc: &fakeCommitter{}, reg: prometheus.NewRegistry()}
	o := Options{Committer: h.fc, CodeHost: ch, Deploy: dp, Logger: zerolog.Nop(), Registerer: h.reg}
	if mutate != nil {
		mutate(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h.e, h.s = echo.New(), s
	s.Register(h.e)
	return h
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (h *harness) do(req *http.Request) answer {
	h.t.Helper()
	rec := h.check.Serve(h.e, req)
	a := answer{status: rec.Code, header: rec.Header()}
	if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil {
		h.t.Fatalf("answer %d is not JSON: %q", rec.Code, rec.Body.String())
	}
	return a
}

func codeHostRequest(event, delivery string, body []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/codehost", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte(testCodeHostSecret), body))
	return req
}

func deployRequest(body []byte) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/deploy", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-vercel-signature", DeployScheme.Sign([]byte(testDeploySecret), body))
	return req
}

func errorCode(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

const issueOpened = `{"action":"opened","issue":{"id":1,"number":7,"title":"t","body":"hi","html_url":"https://example.test/i/7","state":"open","user":{"login":"alice"},"labels":[]},"repository":{"id":9,"name":"api","full_name":"octo-org/api","owner":{"login":"octo-org"}},"sender":{"login":"alice"}}`

func TestAcceptedDelivery(t *testing.T) {
	h := newHarness(t, nil)
	a := h.do(codeHostRequest("issues", "d-1", []byte(issueOpened)))
	if a.status != http.StatusAccepted {
		t.Fatalf("status %d %v, want 202", a.status, a.body)
	}
	events := a.body["events"].([]any)
	if a.body["delivery_id"] != "d-1" || len(events) != 1 {
		t.Fatalf("answer %v", a.body)
	}
	ev := events[0].(map[string]any)
	if ev["kind"] != "new_issue" || ev["subject"] != "triggers.codehost.new_issue.octo-org.api" {
		t.Fatalf("event %v", ev)
	}
	c := h.fc.commits[0]
	if string(c.Body) != issueOpened || c.DeliveryID != "d-1" || c.Header["X-Github-Event"][0] != "issues" {
		t.Fatalf("committed capture %+v", c)
	}
	// The answer names the event that was made durable, by its id.
	if id := h.fc.events[0][0].ID; id == "" || ev["id"] != id {
		t.Fatalf("answered event id %v, want the committed event's %q", ev["id"], id)
	}
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("triggerd_ingest_events_published_total{kind=\"new_issue\"} = %v, want 1", got)
	}
	if got := h.latencies("codehost"); got != 1 {
		t.Fatalf("triggerd_ingest_latency_seconds{source=\"codehost\"} holds %d samples, want 1", got)
	}

	// The same delivery again is a duplicate.
	a = h.do(codeHostRequest("issues", "d-1", []byte(issueOpened)))
	if a.status != http.StatusOK || a.body["duplicate"] != true || a.body["delivery_id"] != "d-1" {
		t.Fatalf("redelivery: %d %v, want 200 duplicate of d-1", a.status, a.body)
	}
	if got := h.published("new_issue"); got != 1 {
		t.Fatalf("a duplicate counted as published: %v, want 1", got)
	}
	if msg, _ := a.body["message"].(string); !strings.Contains(msg, "/replay") {
		t.Errorf("redelivery message %q does not say how to run a trigger again", msg)
	}
	if got := (h.deliveries("codehost", "issues", "duplicate")); got != 1 {
		t.Fatalf("duplicate counter = %v", got)
	}
	if got := (h.deliveries("codehost", "issues", "accepted")); got != 1 {
		t.Fatalf("accepted counter = %v", got)
	}
}

// deliveries returns the value of triggerd_ingest_deliveries_total for one
// source, event and outcome.
func (h *harness) deliveries(source, event, outcome string) float64 {
	h.t.Helper()
	return h.counter("triggerd_ingest_deliveries_total", map[string]string{"source": source, "event": event, "outcome": outcome})
}

// published returns triggerd_ingest_events_published_total for kind.
func (h *harness) published(kind string) float64 {
	h.t.Helper()
	return h.counter("triggerd_ingest_events_published_total", map[string]string{"kind": kind})
}

// latencies returns the number of samples triggerd_ingest_latency_seconds
// holds for source.
func (h *harness) latencies(source string) uint64 {
	h.t.Helper()
	return findMetric(h.t, h.reg, "triggerd_ingest_latency_seconds", map[string]string{"source": source}).GetHistogram().GetSampleCount()
}

// counter returns the counter name with the labels want, or 0.
func (h *harness) counter(name string, want map[string]string) float64 {
	h.t.Helper()
	return findMetric(h.t, h.reg, name, want).GetCounter().GetValue()
}

// findMetric returns the metric name that reg gathers with exactly the
// labels want, or nil (whose getters return zero values).
func findMetric(t testing.TB, reg prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := true
			for _, lp := range m.GetLabel() {
				if want[lp.GetName()] != lp.GetValue() {
					match = false
				}
			}
			if match {
				return m
			}
		}
	}
	return nil
}

func TestRejectionsNeverReachTheMapper(t *testing.T) {
	panicky := func(triggers.Delivery) (triggers.Result, error) {
		panic("the mapper ran on a delivery that should have been refused first")
	}
	body := []byte(issueOpened)
	for _, tc := range []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"missing event header", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Del("X-GitHub-Event")
			return r
		}, 400, "missing_header"},
		{"missing delivery header", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Del("X-GitHub-Delivery")
			return r
		}, 400, "missing_header"},
		{"delivery id with a space", func() *http.Request { return codeHostRequest("issues", "a b", body) }, 400, "invalid_header"},
		{"text/plain", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, 415, "unsupported_media_type"},
		{"no content type", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Del("Content-Type")
			return r
		}, 415, "unsupported_media_type"},
		{"missing signature", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Del("X-Hub-Signature-256")
			return r
		}, 401, "missing_signature"},
		{"tampered body", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Body = io.NopCloser(strings.NewReader(strings.Replace(issueOpened, `"number":7`, `"number":8`, 1)))
			return r
		}, 401, "invalid_signature"},
		{"sha1 signature", func() *http.Request {
			r := codeHostRequest("issues", "d", body)
			r.Header.Set("X-Hub-Signature-256", "sha1=0123456789abcdef0123456789abcdef01234567")
			return r
		}, 401, "invalid_signature"},
		{"deploy missing signature", func() *http.Request {
			r := deployRequest([]byte(`{"id":"x","type":"deployment.created","payload":{}}`))
			r.Header.Del("x-vercel-signature")
			return r
		}, 401, "missing_signature"},
		{"deploy signed with the code-hosting secret", func() *http.Request {
			b := []byte(`{"id":"x","type":"deployment.created","payload":{}}`)
			r := deployRequest(b)
			r.Header.Set("x-vercel-signature", DeployScheme.Sign([]byte(testCodeHostSecret), b))
			return r
		}, 401, "invalid_signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.Map = panicky })
			a := h.do(tc.req())
			if a.status != tc.status || errorCode(a) != tc.code {
				t.Fatalf("got %d %v, want %d %s", a.status, a.body, tc.status, tc.code)
			}
			if msg := a.body["error"].(map[string]any)["message"].(string); msg == "" {
				t.Fatal("the error has no message")
			}
			if h.fc.count() != 0 {
				t.Fatal("a refused delivery was committed")
			}
			source := "codehost"
			if strings.HasPrefix(tc.name, "deploy") {
				source = "deploy"
			}
			if got := h.deliveries(source, "unverified", tc.code); got != 1 {
				t.Fatalf("triggerd_ingest_deliveries_total{source=%q,event=\"unverified\",outcome=%q} = %v, want 1", source, tc.code, got)
			}
		})
	}
}

func TestMalformedPayload(t *testing.T) {
	h := newHarness(t, nil)
	for _, body := range []string{`{"action":`, `[1,2]`, `"text"`} {
		a := h.do(codeHostRequest("issues", "d", []byte(body)))
		if a.status != 400 || errorCode(a) != "malformed_payload" {
			t.Fatalf("body %q: %d %v, want 400 malformed_payload", body, a.status, a.body)
		}
	}
	a := h.do(deployRequest([]byte(`{"type":"deployment.created","payload":{}}`)))
	if a.status != 400 || errorCode(a) != "malformed_payload" {
		t.Fatalf("deploy without id: %d %v, want 400 malformed_payload", a.status, a.body)
	}
	if h.fc.count() != 0 {
		t.Fatal("a malformed delivery was committed")
	}
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxBodyBytes = 1 << 10 })
	big := []byte(`{"x":"` + strings.Repeat("a", 2<<10) + `"}`)
	a := h.do(codeHostRequest("issues", "d", big))
	if a.status != 413 || errorCode(a) != "payload_too_large" {
		t.Fatalf("declared oversize: %d %v, want 413", a.status, a.body)
	}
	// Without a Content-Length the limit still holds, after reading at most
	// one byte past it.
	src := &countingReader{r: bytes.NewReader(append(big, bytes.Repeat([]byte(" "), 1<<20)...))}
	req := codeHostRequest("issues", "d", big)
	req.Body = io.NopCloser(src)
	req.ContentLength = -1
	a = h.do(req)
	if a.status != 413 {
		t.Fatalf("chunked oversize: %d %v, want 413", a.status, a.body)
	}
	if src.n > 1<<10+1+32<<10 {
		t.Fatalf("read %d bytes of an oversize body; it should stop near the 1 KiB limit", src.n)
	}
}

// TestDeclaredLengthIsNotAllocatedUpFront: a client that declares a body
// of nearly the limit and sends one byte, as one holding many connections
// open to exhaust memory would, gets no buffer of the declared size. The
// body is read into what the reader is handed, so its largest read shows
// what was set aside.
func TestDeclaredLengthIsNotAllocatedUpFront(t *testing.T) {
	h := newHarness(t, nil)
	src := &widestReader{r: strings.NewReader("{")}
	req := codeHostRequest("issues", "d-declared", []byte("{"))
	req.Body = io.NopCloser(src)
	req.ContentLength = 20 << 20
	if a := h.do(req); a.status != 400 || errorCode(a) != "malformed_payload" {
		t.Fatalf("one byte of a declared 20 MiB: %d %v, want 400 malformed_payload", a.status, a.body)
	}
	if src.widest > 1<<20 {
		t.Fatalf("the body was read into %d bytes set aside for a declared 20 MiB; at most 1 MiB should be set aside before the body arrives", src.widest)
	}
	// A body that is as large as declared still arrives whole.
	big := []byte(`{"x":"` + strings.Repeat("a", 3<<20) + `"}`)
	if a := h.do(codeHostRequest("issues", "d-big", big)); a.status != 202 {
		t.Fatalf("a 3 MiB body: %d %v, want 202", a.status, a.body)
	}
}

type widestReader struct {
	r      io.Reader
	widest int
}

func (w *widestReader) Read(p []byte) (int, error) {
	w.widest = max(w.widest, len(p))
	return w.r.Read(p)
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestFormEncoded(t *testing.T) {
	h := newHarness(t, nil)
	form := []byte("payload=" + url.QueryEscape(issueOpened))
	req := codeHostRequest("issues", "d-form", form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	a := h.do(req)
	if a.status != 202 || len(a.body["events"].([]any)) != 1 {
		t.Fatalf("form delivery: %d %v", a.status, a.body)
	}
	if !bytes.Equal(h.fc.commits[0].Body, form) {
		t.Fatal("the archive should keep the raw form body the signature covers")
	}
	if string(h.fc.events[0][0].Payload) != issueOpened {
		t.Fatalf("event payload = %s, want the JSON from the form field", h.fc.events[0][0].Payload)
	}

	// A signature over the extracted JSON instead of the form body fails.
	req = codeHostRequest("issues", "d-form2", form)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Hub-Signature-256", CodeHostScheme.Sign([]byte(testCodeHostSecret), []byte(issueOpened)))
	if a := h.do(req); a.status != 401 {
		t.Fatalf("signature over the JSON, not the form: %d, want 401", a.status)
	}
	req = codeHostRequest("issues", "d-form3", []byte("other=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if a := h.do(req); a.status != 400 {
		t.Fatalf("form without payload: %d, want 400", a.status)
	}
}

func TestPingAndIgnored(t *testing.T) {
	h := newHarness(t, nil)
	a := h.do(codeHostRequest("ping", "d-ping", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)))
	if a.status != 200 || len(a.body["events"].([]any)) != 0 {
		t.Fatalf("ping: %d %v, want 200 with no events", a.status, a.body)
	}
	a = h.do(codeHostRequest("future_thing", "d-future", []byte(`{"action":"happened"}`)))
	if a.status != 202 || len(a.body["events"].([]any)) != 0 || a.body["ignored"] == "" || a.body["ignored"] == nil {
		t.Fatalf("unknown event: %d %v, want 202 ignored", a.status, a.body)
	}
	a = h.do(codeHostRequest("star", "d-unstar", []byte(`{"action":"deleted","repository":{"name":"a","full_name":"o/a","owner":{"login":"o"}},"sender":{"login":"s"}}`)))
	if a.status != 202 || a.body["ignored"] == nil {
		t.Fatalf("unstar: %d %v, want 202 ignored", a.status, a.body)
	}
	// Ignored deliveries are still archived, so they can be replayed later.
	if h.fc.count() != 3 {
		t.Fatalf("%d deliveries committed, want all 3 archived", h.fc.count())
	}
	if got := (h.deliveries("codehost", "other", "ignored")); got != 1 {
		t.Fatalf("an unknown event should count as event=other, outcome=ignored; got %v", got)
	}
}

func TestDeployDelivery(t *testing.T) {
	h := newHarness(t, nil)
	body := []byte(`{"id":"uev_1","type":"deployment.created","createdAt":1,"payload":{"team":{"id":"team_1"},"user":{"id":"u1"},"project":{"id":"prj_1"},"deployment":{"id":"dpl_1","url":"x.vercel.app","name":"x","meta":{}},"target":"production","links":{"deployment":"https://v/dpl_1"}}}`)
	a := h.do(deployRequest(body))
	if a.status != 202 || a.body["delivery_id"] != "uev_1" {
		t.Fatalf("deploy: %d %v", a.status, a.body)
	}
	ev := a.body["events"].([]any)[0].(map[string]any)
	if ev["kind"] != "deployment_started" || ev["subject"] != "triggers.deploy.deployment_started.team_1.prj_1" {
		t.Fatalf("event %v", ev)
	}
	if a := h.do(deployRequest(body)); a.body["duplicate"] != true {
		t.Fatalf("deploy redelivery: %v, want duplicate", a.body)
	}
	// Other types are ignored with 202, and archived all the same.
	other := []byte(`{"id":"uev_2","type":"deployment.promoted","createdAt":1,"payload":{"team":{"id":"team_1"},"project":{"id":"prj_1"},"deployment":{"id":"dpl_1"}}}`)
	a = h.do(deployRequest(other))
	if ignored, _ := a.body["ignored"].(string); a.status != 202 || a.body["delivery_id"] != "uev_2" || len(a.body["events"].([]any)) != 0 || ignored == "" {
		t.Fatalf("deployment.promoted: %d %v, want 202 ignored with no events", a.status, a.body)
	}
	if h.fc.count() != 2 {
		t.Fatalf("%d deliveries committed, want 2", h.fc.count())
	}
}

func TestUnavailableIs503WithRetryAfter(t *testing.T) {
	h := newHarness(t, nil)
	h.fc.err = errors.New("nats: no responders")
	a := h.do(codeHostRequest("issues", "d-503", []byte(issueOpened)))
	if a.status != 503 || errorCode(a) != "unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("got %d %v Retry-After=%q, want 503 unavailable with Retry-After", a.status, a.body, a.header.Get("Retry-After"))
	}
	if strings.Contains(a.body["error"].(map[string]any)["message"].(string), "nats") {
		t.Fatal("the answer leaks internal error text")
	}
	// Once the store is back the same delivery is accepted, not a duplicate.
	h.fc.err = nil
	if a := h.do(codeHostRequest("issues", "d-503", []byte(issueOpened))); a.status != 202 {
		t.Fatalf("after recovery: %d %v, want 202", a.status, a.body)
	}
}

func TestCommitTimeoutBoundsTheAnswer(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.CommitTimeout = 50 * time.Millisecond
		o.Committer = blockingCommitter{}
	})
	start := time.Now()
	a := h.do(codeHostRequest("issues", "d-slow", []byte(issueOpened)))
	if a.status != 503 {
		t.Fatalf("status %d, want 503", a.status)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("answer took %s; the commit timeout is 50ms", time.Since(start))
	}
}

type blockingCommitter struct{}

func (blockingCommitter) Commit(ctx context.Context, _ triggers.Capture, _ []triggers.Event) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}

func TestReadyz(t *testing.T) {
	ready := false
	h := newHarness(t, func(o *Options) { o.Ready = func() bool { return ready } })
	get := func() answer { return h.do(httptest.NewRequest(http.MethodGet, "/readyz", nil)) }
	if a := get(); a.status != 503 || a.body["ready"] != false {
		t.Fatalf("readyz while NATS is down: %d %v", a.status, a.body)
	}
	ready = true
	if a := get(); a.status != 200 || a.body["ready"] != true {
		t.Fatalf("readyz while NATS is up: %d %v", a.status, a.body)
	}
	if a := h.do(httptest.NewRequest(http.MethodGet, "/healthz", nil)); a.status != 200 {
		t.Fatalf("healthz: %d", a.status)
	}
}

func TestCorpusThroughTheServer(t *testing.T) {
	requireCorpus(t)
	h := newHarness(t, nil)
	files, _ := filepath.Glob(filepath.Join(corpusDir, "github", "*.json"))
	if len(files) == 0 {
		t.Fatal("no corpus files")
	}
	for i, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		event, _, _ := strings.Cut(filepath.Base(f), ".")
		a := h.do(codeHostRequest(event, "corpus-"+strconv.Itoa(i), body))
		if a.status != 202 && a.status != 200 {
			t.Errorf("%s: %d %v", filepath.Base(f), a.status, a.body)
		}
	}
}

// TestBodiesHeldAtOnceAreBounded: a body is read before its signature can
// be checked, so bodies from anyone (signed or not) could otherwise fill
// memory 25 MiB per connection. Past the budget a delivery is refused with
// 503 and Retry-After, and the budget comes back as bodies are released.
func TestBodiesHeldAtOnceAreBounded(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxBodyBytesInFlight = 64 << 10 })
	// A sender holding 60 KiB of an unsigned body, still sending.
	pr, pw := io.Pipe()
	held := codeHostRequest("issues", "d-held", []byte("{}"))
	held.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	held.Body, held.ContentLength = pr, -1
	done := make(chan answer, 1)
	go func() { done <- h.do(held) }()
	if _, err := pw.Write(bytes.Repeat([]byte(" "), 60<<10)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the held body counted", func() bool { return h.s.bodyBytes.Load() >= 60<<10 })
	body := []byte(`{"x":"` + strings.Repeat("a", 8<<10) + `"}`)
	a := h.do(codeHostRequest("issues", "d-2", body))
	if a.status != http.StatusServiceUnavailable || errorCode(a) != "unavailable" || a.header.Get("Retry-After") == "" {
		t.Fatalf("a body past the budget: %d %v %v, want 503 with Retry-After", a.status, a.header, a.body)
	}
	if msg, _ := a.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "--max-body-bytes-in-flight") {
		t.Errorf("message %q does not name the setting", msg)
	}
	pw.Close()
	if a := <-done; a.status != http.StatusUnauthorized {
		t.Fatalf("the unsigned body: %d %v, want 401", a.status, a.body)
	}
	// Released, the refused body's part and the unsigned one's: the
	// budget is whole again.
	if n := h.s.bodyBytes.Load(); n != 0 {
		t.Fatalf("%d bytes still held after every request was answered", n)
	}
	for i := range 3 {
		if a := h.do(codeHostRequest("issues", "d-ok-"+strconv.Itoa(i), []byte(issueOpened))); a.status != http.StatusAccepted {
			t.Fatalf("after the release: %d %v, want 202", a.status, a.body)
		}
	}
}

// TestDeliveriesAreLoggedAtDebugOnly: one line per delivery at debug, with
// its id and outcome; none at info, where a busy hook would flood the log.
func TestDeliveriesAreLoggedAtDebugOnly(t *testing.T) {
	for _, level := range []zerolog.Level{zerolog.DebugLevel, zerolog.InfoLevel} {
		var logs bytes.Buffer
		h := newHarness(t, func(o *Options) { o.Logger = zerolog.New(&logs).Level(level) })
		if a := h.do(codeHostRequest("issues", "d-log", []byte(issueOpened))); a.status != 202 {
			t.Fatalf("answer %d", a.status)
		}
		if a := h.do(codeHostRequest("issues", "d-log", []byte(issueOpened))); a.status != 200 {
			t.Fatalf("repeat: answer %d, want 200 duplicate", a.status)
		}
		got := logs.String()
		if level == zerolog.InfoLevel {
			if got != "" {
				t.Errorf("at info, ingest logged %q; want nothing per delivery", got)
			}
			continue
		}
		for _, want := range []string{`"delivery_id":"d-log"`, `"outcome":"accepted"`, `"outcome":"duplicate"`, `"events":1`, `"message":"delivery"`} {
			if !strings.Contains(got, want) {
				t.Errorf("at debug, the log lacks %s:\n%s", want, got)
			}
		}
	}
}

// outcomes keeps what the server tells its DeliveryLog.
type outcomes struct {
	mu  sync.Mutex
	all []DeliveryOutcome
}

func (o *outcomes) Record(d DeliveryOutcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all = append(o.all, d)
}

// Deliveries to the shared endpoints reach the delivery log too, with no
// hook and no scope: accepted, duplicate and refused alike.
func TestSharedEndpointDeliveriesAreLogged(t *testing.T) {
	log := &outcomes{}
	h := newHarness(t, func(o *Options) { o.Deliveries = log })
	h.do(codeHostRequest("issues", "d-1", []byte(issueOpened)))
	h.do(codeHostRequest("issues", "d-1", []byte(issueOpened)))
	bad := codeHostRequest("issues", "d-2", []byte(issueOpened))
	bad.Header.Set("X-Hub-Signature-256", "sha256=00")
	h.do(bad)
	log.mu.Lock()
	defer log.mu.Unlock()
	var got []string
	for _, o := range log.all {
		if o.Hook != "" || o.Scope != nil || o.Connector != triggers.CodeHost {
			t.Errorf("outcome %+v: want a shared code-hosting endpoint's (no hook, no scope)", o)
		}
		got = append(got, o.DeliveryID+" "+o.Answer)
	}
	if want := []string{"d-1 accepted", "d-1 duplicate", "d-2 refused"}; !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
	if ev := log.all[0].Events; len(ev) != 1 || ev[0].Summary() != "#7 t" {
		t.Errorf("accepted outcome's events %+v: want the issue, summarised #7 t", ev)
	}
}
