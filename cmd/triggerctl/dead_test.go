package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/bus"
)

func TestDeadListAndRequeue(t *testing.T) {
	emb, b := startNATS(t)
	ctx := context.Background()
	// An event the dispatcher gave up on, as it dead-letters one.
	subject, data, err := b.EventAt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.DeadLetter(ctx, "dispatch", bus.EventsStream, 1, 8, subject, nil, data, "gave up after 8 deliveries: store down"); err != nil {
		t.Fatal(err)
	}
	var ev struct{ ID, Kind string }
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	url := emb.ClientURL()
	// An empty list says so, on standard error: standard output stays JSON
	// lines (none) for programs.
	var none, noneErr bytes.Buffer
	if code := run([]string{"dead", "list", "--nats-url", url, "--source", "push"}, &none, &noneErr); code != 0 || none.Len() != 0 ||
		!strings.Contains(noneErr.String(), "no dead letters from push") {
		t.Fatalf("an empty dead list: %d stdout %q stderr %q; want nothing on stdout and a sentence saying so", code, none.String(), noneErr.String())
	}
	list := func() []deadLine {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run([]string{"dead", "list", "--nats-url", url}, &out, &errOut); code != 0 {
			t.Fatalf("dead list exit %d: %s", code, errOut.String())
		}
		var lines []deadLine
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			var d deadLine
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			lines = append(lines, d)
		}
		return lines
	}
	got := list()
	if len(got) != 1 {
		t.Fatalf("dead list = %+v, want one", got)
	}
	d := got[0]
	if d.Source != "dispatch" || d.Subject != subject || d.StreamSeq != 1 || d.Deliveries != 8 ||
		d.ID != ev.ID || d.Kind != ev.Kind || !strings.Contains(d.Reason, "store down") || d.Data != nil {
		t.Errorf("dead letter = %+v", d)
	}

	// For people, a table of what tells dead letters apart and why each
	// was given up; -o json, one document; a form it does not know is a
	// usage error naming those it does.
	var table, tableErr bytes.Buffer
	if code := run([]string{"dead", "list", "--nats-url", url, "-o", "table"}, &table, &tableErr); code != 0 {
		t.Fatalf("dead list -o table: exit %d: %s", code, tableErr.String())
	}
	rows := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	if len(rows) != 2 || strings.Join(strings.Fields(rows[0]), " ") != "SEQ AT SOURCE KIND ID DELIVERIES REASON" ||
		!strings.HasPrefix(rows[1], "1 ") || !strings.Contains(rows[1], ev.ID) || !strings.Contains(rows[1], "gave up after 8 deliveries: store down") {
		t.Errorf("dead list -o table:\n%s", table.String())
	}
	var doc bytes.Buffer
	if code := run([]string{"dead", "list", "--nats-url", url, "-o", "json"}, &doc, &tableErr); code != 0 {
		t.Fatalf("dead list -o json: exit %d: %s", code, tableErr.String())
	}
	var asDoc struct {
		DeadLetters []deadLine `json:"dead_letters"`
	}
	if err := json.Unmarshal(doc.Bytes(), &asDoc); err != nil || len(asDoc.DeadLetters) != 1 || asDoc.DeadLetters[0].ID != ev.ID {
		t.Errorf("dead list -o json: %v\n%s", err, doc.String())
	}
	tableErr.Reset()
	if code := run([]string{"dead", "list", "--nats-url", url, "-o", "yaml"}, &doc, &tableErr); code != 2 ||
		!strings.Contains(tableErr.String(), `-o "yaml": want table, json or jsonl`) {
		t.Errorf("dead list -o yaml: exit %d, %q", code, tableErr.String())
	}

	before := streamMsgs(t, b, subject)
	var out, errOut bytes.Buffer
	if code := run([]string{"dead", "requeue", "--nats-url", url, "7777", "x"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), `"x" is not a dead letter's seq`) {
		t.Errorf("requeue of a bad seq: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"dead", "requeue", "--nats-url", url, "7777"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "no dead letter") || !strings.Contains(errOut.String(), `"triggerctl dead list" shows`) {
		t.Errorf("requeue of an unknown seq: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	if code := run([]string{"dead", "requeue", "--nats-url", url, "-o", "table", "1"}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), "SEQ") || !strings.Contains(out.String(), ev.ID) {
		t.Fatalf("requeue: exit %d, %q %q", code, out.String(), errOut.String())
	}
	if after := streamMsgs(t, b, subject); after != before+1 {
		t.Errorf("the events stream holds %d messages on %s, want %d", after, subject, before+1)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("after requeue dead list = %+v, want none", got)
	}
}

// streamMsgs counts the events stream's messages on subject.
func streamMsgs(t *testing.T, b *bus.Bus, subject string) int {
	t.Helper()
	n := 0
	for seq := uint64(1); ; seq++ {
		s, _, err := b.EventAt(context.Background(), seq)
		if err != nil {
			return n
		}
		if s == subject {
			n++
		}
	}
}
