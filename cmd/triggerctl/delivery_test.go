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
	if first.Connector != triggers.CodeHost || first.DeliveryID != "d-1" || first.Header["X-Github-Event"][0] != "issues" ||
		first.Event != "issues.opened" || first.Bytes != len(natsIssue) {
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

	if second.Event != "deployment.canceled" {
		t.Fatalf("second delivery's event = %q, want deployment.canceled", second.Event)
	}

	// For people: several deliveries as a table, one whole, with its
	// headers and body.
	out.Reset()
	if code := run([]string{"delivery", "--nats-url", url, "-o", "table", "d-1", deployID}, &out, &errOut); code != 0 {
		t.Fatalf("delivery -o table exit %d: %s", code, errOut.String())
	}
	rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(rows) != 3 || strings.Join(strings.Fields(rows[0]), " ") != "DELIVERY ID CONNECTOR EVENT RECEIVED AT BYTES" ||
		!strings.HasPrefix(rows[1], "d-1 ") || !strings.Contains(rows[1], "issues.opened") || !strings.Contains(rows[2], "deployment.canceled") {
		t.Fatalf("delivery -o table:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"delivery", "--nats-url", url, "-o", "table", "d-1"}, &out, &errOut); code != 0 {
		t.Fatalf("delivery -o table of one: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"delivery_id: d-1\n", "event:       issues.opened\n", "header:\n", "body:\n", `"title": "t"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("delivery -o table of one lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Index(out.String(), "body:\n") < strings.Index(out.String(), "header:\n") {
		t.Errorf("delivery -o table of one shows the body before the headers:\n%s", out.String())
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
		{[]string{"no-such-delivery"}, "not archived: looked in the code-hosting and deployment archives, by id and on every hook; check the id"},
		{[]string{"--connector", "deploy", ref}, "names a codehost delivery"},
		{[]string{"deliveries.codehost.a.b"}, "is not a payload_ref"},
	} {
		errOut.Reset()
		args := append([]string{"delivery", "--nats-url", url}, tc.args...)
		if code := run(args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("delivery %v: exit %d, %q; want 1 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	errOut.Reset()
	if code := run([]string{"delivery", "--nats-url", url, "--payload", "-o", "table", "d-1"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "--payload prints each webhook body as it was received") {
		t.Errorf("delivery --payload -o table: exit %d, %q; want a usage error", code, errOut.String())
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
	out.Reset()
	if code := run([]string{"redeliver", "--nats-url", emb.ClientURL(), "-o", "table", deployID}, &out, &errOut); code != 0 {
		t.Fatalf("redeliver -o table: exit %d: %s", code, errOut.String())
	}
	rows := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(rows) != 2 || strings.Join(strings.Fields(rows[0]), " ") != "DELIVERY ID KIND EVENT ID PUBLISHED SUBJECT" ||
		!strings.Contains(rows[1], "deployment_canceled") || !strings.Contains(rows[1], " false ") {
		t.Fatalf("redeliver -o table:\n%s", out.String())
	}
}

// TestDeliveryOnAHookIsFoundByItsID: a delivery on a tenant's hook is
// archived as <hook>/<id>, and found by the id alone, which is what the
// sender's delivery log shows: in the delivery index (events carrying the
// body) and among archive records (a delivery mapping to no event). An id
// found on two hooks is answered with both keys to choose from.
func TestDeliveryOnAHookIsFoundByItsID(t *testing.T) {
	emb, b := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit := func(hook, id, event, body string) {
		t.Helper()
		scope := &triggers.Scope{Tenant: "t_1", Hook: hook}
		res, err := triggers.Map(triggers.Delivery{Connector: triggers.CodeHost, ID: id, Event: event, ReceivedAt: time.Now(), Payload: []byte(body), Scope: scope})
		if err != nil {
			t.Fatal(err)
		}
		c := triggers.Capture{Connector: triggers.CodeHost, DeliveryID: id, ReceivedAt: time.Now(), Scope: scope,
			Header: map[string][]string{"X-Github-Event": {event}, "X-Github-Delivery": {id}}, Body: []byte(body)}
		if _, err := b.Commit(ctx, c, res.Events); err != nil {
			t.Fatal(err)
		}
	}
	commit("h_indexed", "guid-1", "issues", natsIssue)
	commit("h_record", "guid-2", "gollum", `{"pages":[]}`) // maps to no kind: an archive record
	commit("h_a", "guid-3", "issues", natsIssue)
	commit("h_b", "guid-3", "gollum", `{"pages":[]}`)

	for id, key := range map[string]string{"guid-1": "h_indexed/guid-1", "guid-2": "h_record/guid-2"} {
		var out, errOut bytes.Buffer
		if code := run([]string{"delivery", "--nats-url", emb.ClientURL(), id}, &out, &errOut); code != 0 {
			t.Fatalf("delivery %s: exit %d: %s", id, code, errOut.String())
		}
		var got deliveryOut
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("delivery %s printed %q: %v", id, out.String(), err)
		}
		if got.DeliveryID != id || got.Key != key || got.Scope == nil || got.Scope.Hook != strings.Split(key, "/")[0] {
			t.Fatalf("delivery %s: %+v, want key %s and its hook", id, got, key)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"delivery", "--nats-url", emb.ClientURL(), "guid-3"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "h_a/guid-3 or h_b/guid-3") {
		t.Fatalf("an id on two hooks: exit %d, %q; want 1 naming both keys", code, errOut.String())
	}
}
