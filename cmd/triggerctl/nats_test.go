package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/triggers"
)

// natsIssue is pretty-printed, as most providers' payloads are.
const natsIssue = `{
  "action": "opened",
  "issue": {"id": 1, "number": 7, "title": "t", "body": "hi", "html_url": "https://example.test/i/7", "state": "open",
    "user": {"login": "alice"}, "labels": []},
  "repository": {"id": 9, "name": "api", "full_name": "octo-org/api", "owner": {"login": "octo-org"}},
  "sender": {"login": "alice"}
}`

// startNATS runs an embedded NATS with the triggerd streams and one
// archived, committed delivery "d-1".
func startNATS(t *testing.T) (*bus.Embedded, *bus.Bus) {
	t.Helper()
	b, emb := bustest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := triggers.Delivery{Connector: triggers.CodeHost, ID: "d-1", Event: "issues", ReceivedAt: time.Now(), Payload: []byte(natsIssue)}
	res, err := triggers.Map(d)
	if err != nil {
		t.Fatal(err)
	}
	c := triggers.Capture{Connector: triggers.CodeHost, DeliveryID: "d-1", ReceivedAt: d.ReceivedAt,
		Header: map[string][]string{"X-Github-Event": {"issues"}, "Content-Type": {"application/json"}}, Body: []byte(natsIssue)}
	if _, err := b.Commit(ctx, c, res.Events); err != nil {
		t.Fatal(err)
	}
	return emb, b
}

func TestRedeliver(t *testing.T) {
	emb, _ := startNATS(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"redeliver", "--nats-url", emb.ClientURL(), "d-1"}, &out, &errOut); code != 0 {
		t.Fatalf("redeliver exit %d: %s", code, errOut.String())
	}
	var line redeliverLine
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if line.Kind != triggers.NewIssue || line.Published || line.DeliveryID != "d-1" {
		t.Fatalf("redelivery of an event the stream holds: %+v, want d-1's new_issue, published false", line)
	}
	out.Reset()
	if code := run([]string{"redeliver", "--nats-url", emb.ClientURL(), "--as-new", "d-1"}, &out, &errOut); code != 0 {
		t.Fatalf("redeliver --as-new exit %d: %s", code, errOut.String())
	}
	var fresh redeliverLine
	json.Unmarshal(out.Bytes(), &fresh)
	if !fresh.Published || fresh.EventID == line.EventID {
		t.Fatalf("--as-new: %+v, want a fresh id, published", fresh)
	}
	errOut.Reset()
	if code := run([]string{"redeliver", "--nats-url", emb.ClientURL(), "no-such-delivery"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not archived: looked in the code-hosting and deployment archives") {
		t.Fatalf("unknown delivery: exit %d, %q", code, errOut.String())
	}
}

// lineWriter signals when a full line has been written.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(p, []byte("\n")) {
		select {
		case w.lines <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

func TestTail(t *testing.T) {
	emb, b := startNATS(t)
	// A later event of another kind: printed first only if the subject
	// filter were ignored.
	star := []byte("{\n  \"action\": \"created\",\n  \"repository\": {\"id\": 9, \"name\": \"api\", \"full_name\": \"octo-org/api\", \"owner\": {\"login\": \"octo-org\"}},\n  \"sender\": {\"login\": \"bob\"}\n}")
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.CodeHost, ID: "d-star", Event: "star", ReceivedAt: time.Now(), Payload: star})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(context.Background(), triggers.Capture{Connector: triggers.CodeHost, DeliveryID: "d-star", ReceivedAt: time.Now(),
		Header: map[string][]string{"X-Github-Event": {"star"}}, Body: star}, res.Events); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &lineWriter{lines: make(chan struct{}, 1)}
	done := make(chan int)
	var errOut bytes.Buffer
	go func() {
		done <- tail(ctx, []string{"--nats-url", emb.ClientURL(), "--all", "triggers.codehost.new_star.>"}, w, &errOut)
	}()
	select {
	case <-w.lines:
	case <-time.After(10 * time.Second):
		t.Fatal("tail printed nothing within 10s")
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("tail exit %d: %s", code, errOut.String())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// Each event is one line, even though its payload spans several.
	var ev map[string]any
	first, _, _ := bytes.Cut(w.buf.Bytes(), []byte("\n"))
	if err := json.Unmarshal(first, &ev); err != nil || ev["kind"] != "new_star" {
		t.Fatalf("tailed %q (%v), want the new_star event as one JSON line", first, err)
	}
	if p, _ := ev["payload"].(map[string]any); p["action"] != "created" {
		t.Fatalf("tailed event payload %v", ev["payload"])
	}
	if bytes.Contains(w.buf.Bytes(), []byte(`"kind":"new_issue"`)) {
		t.Fatalf("tail of triggers.codehost.new_star.> printed a new_issue event:\n%s", w.buf.Bytes())
	}
}

// TestNATSCommandsConnectAsTheOperator: on an embedded NATS that wants
// users, the commands that read triggerd's NATS connect as its operator,
// with the password where triggerd keeps it, and say where to put it when
// they have none.
func TestNATSCommandsConnectAsTheOperator(t *testing.T) {
	const password = "operator-password-for-triggerctl"
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Auth: &bus.ClientAuth{OperatorPasswords: []string{password}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{Embedded: emb, User: bus.OperatorUser, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)

	deadList := func(dataDir string) (int, string) {
		var out, errOut bytes.Buffer
		code := run([]string{"dead", "list", "--nats-url", emb.ClientURL(), "--data-dir", dataDir}, &out, &errOut)
		return code, errOut.String()
	}
	empty := t.TempDir()
	if code, msg := deadList(empty); code != 1 || !strings.Contains(msg, "TRIGGERD_NATS_PASSWORD") || !strings.Contains(msg, filepath.Join(empty, "nats_password")) {
		t.Errorf("without a password: exit %d, %q; want where to put it", code, msg)
	}
	wrong := t.TempDir()
	writeFile(t, wrong, "nats_password", "not-it\n")
	if code, msg := deadList(wrong); code != 1 || !strings.Contains(msg, filepath.Join(wrong, "nats_password")) || strings.Contains(msg, "not-it") {
		t.Errorf("with a wrong password: exit %d, %q; want the file named, not its content", code, msg)
	}
	dir := t.TempDir()
	writeFile(t, dir, "nats_password", password+"\n")
	if code, msg := deadList(dir); code != 0 {
		t.Errorf("with triggerd's data dir: exit %d, %s", code, msg)
	}
	t.Setenv("TRIGGERD_NATS_PASSWORD", password+",an-older-one")
	if code, msg := deadList(empty); code != 0 {
		t.Errorf("with TRIGGERD_NATS_PASSWORD: exit %d, %s", code, msg)
	}
}
