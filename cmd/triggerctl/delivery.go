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
	Connector  triggers.Connector  `json:"connector"`
	DeliveryID string              `json:"delivery_id"`
	Key        string              `json:"key,omitempty"` // when it differs from the id: "<hook>/<id>"
	ReceivedAt time.Time           `json:"received_at"`
	Header     map[string][]string `json:"header"`
	Scope      *triggers.Scope     `json:"scope,omitempty"`
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
	payload := fs.Bool("payload", false, "print only the webhook JSON (the event's payload), one document per delivery")
	synopsis := "usage: triggerctl delivery [flags] DELIVERY_ID|PAYLOAD_REF...\n\n" +
		"Prints archived deliveries (headers and body as received) as JSON lines. An argument is a delivery id\n" +
		"(X-GitHub-Delivery, or the deployment envelope's id; one that came through a tenant's hook is found by it too,\n" +
		"and printed with its key, <hook id>/<delivery id>) or an event's payload_ref (deliveries.<connector>.<id>).\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	return af.each(ctx, fs, stdout, stderr, "name one or more delivery ids or payload_ref subjects",
		func(_ context.Context, _ *bus.Bus, capture triggers.Capture, enc *json.Encoder) error {
			return printDelivery(capture, *payload, stdout, enc)
		})
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
// arguments should be), 1 when anything failed. fn's encoder writes JSON
// lines to stdout, with ids printed as the HTTP answers print them.
func (af archiveFlags) each(ctx context.Context, fs *flag.FlagSet, stdout, stderr io.Writer, missing string,
	fn func(ctx context.Context, b *bus.Bus, capture triggers.Capture, enc *json.Encoder) error) int {
	c := triggers.Connector(*af.connector)
	if c != "" && !c.Valid() {
		return usageError(fs, "--connector is %q: use codehost or deploy, or leave it out to look in both", c)
	}
	if fs.NArg() == 0 {
		return usageError(fs, "%s", missing)
	}
	b, err := af.nats.connect(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl %s: %v\n", fs.Name(), err)
		return 1
	}
	defer b.Close()
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	code := 0
	for _, arg := range fs.Args() {
		actx, cancel := context.WithTimeout(ctx, *af.timeout)
		capture, err := findDelivery(actx, b, c, arg)
		if err == nil {
			err = fn(actx, b, capture, enc)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl %s %s: %v\n", fs.Name(), arg, err)
			code = 1
		}
	}
	return code
}

func printDelivery(capture triggers.Capture, payloadOnly bool, stdout io.Writer, enc *json.Encoder) error {
	if payloadOnly {
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
	out := deliveryOut{
		Connector: capture.Connector, DeliveryID: capture.DeliveryID, ReceivedAt: capture.ReceivedAt,
		Header: capture.Header, Scope: capture.Scope, Body: capture.Body,
	}
	if key := capture.Key(); key != capture.DeliveryID {
		out.Key = key
	}
	if !json.Valid(capture.Body) {
		out.Body, _ = json.Marshal(string(capture.Body)) // a string cannot fail to encode
	}
	return enc.Encode(out)
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
			where = "the " + string(c) + " archive"
		}
		return triggers.Capture{}, fmt.Errorf("delivery %s: %w (looked in %s, by id and on every hook)", arg, bus.ErrNotArchived, where)
	case found[0].Connector != found[1].Connector:
		return triggers.Capture{}, fmt.Errorf("delivery %s is in both the code-hosting and the deployment archive: choose one with --connector", arg)
	}
	keys := make([]string, len(found))
	for i := range found {
		keys[i] = found[i].Key()
	}
	return triggers.Capture{}, fmt.Errorf("delivery %s reached several hooks: name one by its key, %s", arg, strings.Join(keys, " or "))
}
