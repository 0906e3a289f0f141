package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/triggers"
)

// deliveryOut is what "triggerctl delivery" prints per delivery.
type deliveryOut struct {
	Connector  triggers.Connector `json:"connector"`
	DeliveryID string             `json:"delivery_id"`
	Key        string             `json:"key,omitempty"` // when it differs from the id: "<hook>/<id>"
	ReceivedAt time.Time          `json:"received_at"`
	// Event says what the delivery was: the code-hosting event and its
	// action ("issues.opened"), or the deployment envelope's type
	// ("deployment.created").
	Event string `json:"event,omitempty"`
	// Bytes is the body's size as received.
	Bytes  int                 `json:"bytes"`
	Header map[string][]string `json:"header"`
	Scope  *triggers.Scope     `json:"scope,omitempty"`
	// Body is the body as received: JSON as it was, anything else (a form)
	// as a string.
	Body json.RawMessage `json:"body"`
}

// delivery implements "triggerctl delivery ID|PAYLOAD_REF...": it prints
// archived deliveries, read from triggerd's NATS. An event whose payload
// was too large to travel inline names its delivery in payload_ref; with
// --payload this prints the webhook JSON that payload would have held.
func delivery(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("delivery", flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := addArchiveFlags(fs, "bound on reading each delivery")
	payload := fs.Bool("payload", false, "print only the webhook JSON (the event's payload), one document per delivery, whatever the terminal (no -o)")
	output := addLinesOutputFlag(fs)
	synopsis := "usage: triggerctl delivery [flags] DELIVERY_ID|PAYLOAD_REF...\n\n" +
		"Prints archived deliveries (headers and body as received). An argument is a delivery id\n" +
		"(X-GitHub-Delivery, or the deployment envelope's id; one that came through a tenant's hook is found by it too,\n" +
		"and printed with its key, <hook id>/<delivery id>) or an event's payload_ref (deliveries.<connector>.<id>).\n" +
		"On a terminal, one delivery is shown whole (fields, then headers and body) and several as a table;\n" +
		"otherwise they are JSON lines, a delivery a line (-o).\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if *payload && *output != "" {
		return usageError(fs, "--payload prints each webhook body as it was received, in no other form: drop -o, or drop --payload for -o %s", *output)
	}
	format, err := linesFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	p := &listPrinter{stdout: stdout, stderr: stderr, format: format, name: "deliveries"}
	var one *deliveryOut
	code := af.each(ctx, fs, stderr, "name one or more delivery ids or payload_ref subjects",
		func(_ context.Context, _ *bus.Bus, capture triggers.Capture) error {
			if *payload {
				return printPayload(capture, stdout)
			}
			out := deliveryOutOf(capture)
			one = &out
			return p.add(out)
		})
	if code == 2 || *payload || (code != 0 && p.n == 0) {
		return code
	}
	var err2 error
	if format == outputTable && p.n == 1 {
		// One delivery is read whole: its headers and body, which a
		// table row cannot show.
		raw, _ := json.Marshal(one) // a deliveryOut always encodes
		err2 = printAnswer(stdout, stderr, format, raw)
	} else {
		err2 = p.flush()
	}
	if err2 != nil {
		fmt.Fprintf(stderr, "triggerctl delivery: %v\n", err2)
		return 1
	}
	return code
}

// archiveFlags are the flags of the commands that work on archived
// deliveries (delivery, redeliver).
type archiveFlags struct {
	nats      natsFlags
	connector *string
	timeout   *time.Duration
}

func addArchiveFlags(fs *flag.FlagSet, timeoutUsage string) archiveFlags {
	return archiveFlags{
		nats:      addNATSFlags(fs),
		connector: fs.String("connector", "", "codehost or deploy: whose delivery ids these are (default: look in both)"),
		timeout:   fs.Duration("timeout", 30*time.Second, timeoutUsage),
	}
}

// each checks the flags, connects to triggerd's NATS, finds the archived
// delivery each argument names (findDelivery) and calls fn with it, under
// the argument's own timeout, reporting each failure on stderr. It
// returns the exit code: 2 on a usage error (missing names what the
// arguments should be), 1 when anything failed.
func (af archiveFlags) each(ctx context.Context, fs *flag.FlagSet, stderr io.Writer, missing string,
	fn func(ctx context.Context, b *bus.Bus, capture triggers.Capture) error) int {
	c := triggers.Connector(*af.connector)
	if c != "" && !c.Valid() {
		return usageError(fs, "--connector is %q: use codehost or deploy, or leave it out to look in both", c)
	}
	if fs.NArg() == 0 {
		return usageError(fs, "%s", missing)
	}
	if *af.timeout <= 0 {
		return usageError(fs, "--timeout must be positive, not %v", *af.timeout)
	}
	b, err := af.nats.connect(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl %s: %v\n", fs.Name(), err)
		return 1
	}
	defer b.Close()
	code := 0
	for _, arg := range fs.Args() {
		actx, cancel := context.WithTimeout(ctx, *af.timeout)
		capture, err := findDelivery(actx, b, c, arg)
		if err == nil {
			err = fn(actx, b, capture)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl %s %s: %v\n", fs.Name(), arg, err)
			code = 1
		}
	}
	return code
}

// printPayload writes a delivery's webhook JSON, as received, and a
// newline after it.
func printPayload(capture triggers.Capture, stdout io.Writer) error {
	p, err := capture.Payload()
	if err != nil {
		return err
	}
	if _, err := stdout.Write(p); err != nil {
		return err
	}
	if len(p) == 0 || p[len(p)-1] != '\n' {
		_, err = io.WriteString(stdout, "\n")
	}
	return err
}

// deliveryOutOf is what "triggerctl delivery" prints of capture.
func deliveryOutOf(capture triggers.Capture) deliveryOut {
	out := deliveryOut{
		Connector: capture.Connector, DeliveryID: capture.DeliveryID, ReceivedAt: capture.ReceivedAt,
		Event: deliveryEvent(capture), Bytes: len(capture.Body),
		Header: capture.Header, Scope: capture.Scope, Body: capture.Body,
	}
	if key := capture.Key(); key != capture.DeliveryID {
		out.Key = key
	}
	if !json.Valid(capture.Body) {
		out.Body, _ = json.Marshal(string(capture.Body)) // a string cannot fail to encode
	}
	return out
}

// deliveryEvent says what a delivery was: "issues.opened" (the
// code-hosting event and the payload's action), "deployment.created"
// (the deployment envelope's type); "" when its body says nothing.
func deliveryEvent(capture triggers.Capture) string {
	var body struct {
		Action string `json:"action"`
		Type   string `json:"type"`
	}
	if p, err := capture.Payload(); err == nil {
		_ = json.Unmarshal(p, &body) // a body that is no object says nothing
	}
	if capture.Connector == triggers.Deploy {
		return body.Type
	}
	event := ""
	if ev := capture.Header["X-Github-Event"]; len(ev) > 0 {
		event = ev[0]
	}
	if event != "" && body.Action != "" {
		event += "." + body.Action
	}
	return event
}

// findDelivery reads an archived delivery named by arg: a payload_ref
// subject, or a delivery key of connector c, or, when c is empty, of
// whichever connector holds it. Its key (the archive's) is
// capture.Key().
func findDelivery(ctx context.Context, b *bus.Bus, c triggers.Connector, arg string) (triggers.Capture, error) {
	if strings.HasPrefix(arg, bus.DeliveriesPrefix+".") {
		rc, key, ok := bus.ParseArchiveSubject(arg)
		if !ok {
			return triggers.Capture{}, fmt.Errorf("%q is not a payload_ref: want deliveries.<codehost|deploy>.<encoded delivery id>", arg)
		}
		if c != "" && c != rc {
			return triggers.Capture{}, fmt.Errorf("payload_ref %s names a %s delivery, not a %s one (--connector)", arg, rc, c)
		}
		return b.Delivery(ctx, rc, key)
	}
	connectors := []triggers.Connector{triggers.CodeHost, triggers.Deploy}
	if c != "" {
		connectors = []triggers.Connector{c}
	}
	// Code-hosting ids are GUIDs and deployment ids "uev_…": a delivery
	// id is in one archive at most, in practice. Should it be in both,
	// say so rather than pick one.
	var found []triggers.Capture
	for _, rc := range connectors {
		capture, err := b.Delivery(ctx, rc, arg)
		if errors.Is(err, bus.ErrNotArchived) {
			continue
		}
		if err != nil {
			return triggers.Capture{}, err
		}
		found = append(found, capture)
	}
	if len(found) == 0 {
		// A delivery on a tenant's hook is archived as <hook>/<id>; the
		// sender's delivery log shows only the id.
		for _, rc := range connectors {
			hooked, err := b.HookDeliveries(ctx, rc, arg)
			if err != nil {
				return triggers.Capture{}, err
			}
			found = append(found, hooked...)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0:
		where := "the code-hosting and deployment archives"
		if c != "" {
			where = "the " + string(c) + " archive (--connector)"
		}
		return triggers.Capture{}, notArchivedError{fmt.Sprintf("not archived: looked in %s, by id and on every hook; "+
			"check the id (the X-GitHub-Delivery header, the deployment envelope's id, or an event's payload_ref), "+
			"and that the delivery is younger than triggerd's --archive-retention", where)}
	case found[0].Connector != found[1].Connector:
		return triggers.Capture{}, fmt.Errorf("delivery %s is in both the code-hosting and the deployment archive: choose one with --connector", arg)
	}
	keys := make([]string, len(found))
	for i := range found {
		keys[i] = found[i].Key()
	}
	return triggers.Capture{}, fmt.Errorf("delivery %s reached several hooks: name one by its key, %s", arg, strings.Join(keys, " or "))
}

// notArchivedError is findDelivery's answer for a delivery no archive
// holds: its message says where it looked and what to check, and it
// matches bus.ErrNotArchived.
type notArchivedError struct{ msg string }

func (e notArchivedError) Error() string { return e.msg }
func (e notArchivedError) Unwrap() error { return bus.ErrNotArchived }
