package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/triggers"
)

// commitDeploy archives the project's canceled-deployment capture, whose
// delivery id is its envelope id, and returns that id.
func commitDeploy(t *testing.T, b *bus.Bus) string {
	t.Helper()
	body, err := os.ReadFile("../../testdata/webhooks/vercel/deployment.canceled.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.Deploy, ReceivedAt: time.Now(), Payload: body})
	if err != nil {
		t.Fatal(err)
	}
	c := triggers.Capture{Connector: triggers.Deploy, DeliveryID: res.DeliveryID, ReceivedAt: time.Now(),
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Commit(ctx, c, res.Events); err != nil {
		t.Fatal(err)
	}
	return res.DeliveryID
}

func TestDeliveryPrintsArchivedDeliveries(t *testing.T) {
	emb, b := startNATS(t)
	deployID := commitDeploy(t, b)
	url := emb.ClientURL()

	// By delivery id, without --connector: found in whichever archive holds it.
	var out, errOut bytes.Buffer
	if code := run([]string{"delivery", "--nats-url", url, "d-1", deployID}, &out, &errOut); code != 0 {
		t.Fatalf("delivery exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("delivery printed %d lines, want 2: %s", len(lines), out.String())
	}
	var first, second deliveryOut
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first.Connector != triggers.CodeHost || first.DeliveryID != "d-1" || first.Header["X-Github-Event"][0] != "issues" {
		t.Fatalf("first delivery: %+v", first)
	}
	var want bytes.Buffer
	json.Compact(&want, []byte(natsIssue))
	if string(first.Body) != want.String() {
		t.Fatalf("first body = %s, want %s", first.Body, want.String())
	}
	if second.Connector != triggers.Deploy || second.DeliveryID != deployID {
		t.Fatalf("second delivery: connector %s id %s, want deploy %s", second.Connector, second.DeliveryID, deployID)
	}

	// By payload_ref, --payload: the webhook JSON exactly as received.
	out.Reset()
	ref := bus.ArchiveSubject(triggers.CodeHost, "d-1")
	if code := run([]string{"delivery", "--nats-url", url, "--payload", ref}, &out, &errOut); code != 0 {
		t.Fatalf("delivery --payload exit %d: %s", code, errOut.String())
	}
	if out.String() != natsIssue+"\n" {
		t.Fatalf("delivery --payload %s printed %q, want the body as received", ref, out.String())
	}

	// Errors name what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"no-such-delivery"}, "looked in the code-hosting and deployment archives"},
		{[]string{"--connector", "deploy", ref}, "names a codehost delivery"},
		{[]string{"deliveries.codehost.a.b"}, "is not a payload_ref"},
	} {
		errOut.Reset()
		args := append([]string{"delivery", "--nats-url", url}, tc.args...)
		if code := run(args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("delivery %v: exit %d, %q; want 1 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestRedeliverFindsTheConnector(t *testing.T) {
	emb, b := startNATS(t)
	deployID := commitDeploy(t, b)
	var out, errOut bytes.Buffer
	if code := run([]string{"redeliver", "--nats-url", emb.ClientURL(), deployID}, &out, &errOut); code != 0 {
		t.Fatalf("redeliver of a deployment id without --connector: exit %d: %s", code, errOut.String())
	}
	var line redeliverLine
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if line.Kind != triggers.DeploymentCanceled || line.Published {
		t.Fatalf("redelivery: %+v, want deployment_canceled, published false", line)
	}
}
