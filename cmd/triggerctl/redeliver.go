package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/triggers"
)

// redeliverLine is the JSON line printed per event of a redelivery.
type redeliverLine struct {
	DeliveryID string        `json:"delivery_id"`
	EventID    string        `json:"event_id"`
	Kind       triggers.Kind `json:"kind"`
	Subject    string        `json:"subject"`
	// Published is false when the stream already held the event (same id,
	// within the dedup window), so nothing new reached subscribers.
	Published bool `json:"published"`
}

// redeliver implements "triggerctl redeliver DELIVERY_ID...": it reads each
// archived delivery, runs it through the current mapper again and publishes
// the events. Event ids are the same as the first time, so within the
// stream's dedup window (--dedup-window) events it still holds are not
// published twice, while kinds the mapper now yields for the first time
// are. Past the window the stream takes them again, under the same ids,
// which consumers deduplicate on (the dispatcher starts no trigger twice
// for one event). --as-new gives the events fresh ids, to start their
// triggers again on purpose.
func redeliver(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redeliver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	af := addArchiveFlags(fs, "bound on each delivery's redelivery")
	asNew := fs.Bool("as-new", false, "give the events fresh ids, so subscribers see them as new events")
	output := addLinesOutputFlag(fs)
	synopsis := "usage: triggerctl redeliver [flags] DELIVERY_ID...\n\n" +
		"Maps archived deliveries again and publishes their events, printing each event: a table on a terminal,\n" +
		"JSON lines otherwise, an event a line (-o).\n" +
		"Events keep their ids: within the stream's dedup window (triggerd's --dedup-window, default 2h)\n" +
		"those the stream still holds are not published again (\"published\": false); past it they are,\n" +
		"and consumers deduplicate on the event id. --as-new gives them fresh ids instead.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	format, err := linesFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	p := &listPrinter{stdout: stdout, stderr: stderr, format: format, name: "redelivered_events"}
	code := af.each(ctx, fs, stderr, "name one or more delivery ids (the X-GitHub-Delivery header, or the deployment envelope's id)",
		func(ctx context.Context, b *bus.Bus, capture triggers.Capture) error {
			return redeliverOne(ctx, b, capture, *asNew, p)
		})
	if code == 2 || (code != 0 && p.n == 0) {
		return code // each said what failed
	}
	if err := p.flush(); err != nil {
		fmt.Fprintf(stderr, "triggerctl redeliver: %v\n", err)
		return 1
	}
	return code
}

func redeliverOne(ctx context.Context, b *bus.Bus, capture triggers.Capture, asNew bool, p *listPrinter) error {
	c, key := capture.Connector, capture.Key()
	payload, err := capture.Payload()
	if err != nil {
		return err
	}
	d := triggers.Delivery{Connector: c, ReceivedAt: capture.ReceivedAt, Payload: payload, Scope: capture.Scope}
	if c == triggers.CodeHost {
		d.ID = capture.DeliveryID
		if ev := capture.Header["X-Github-Event"]; len(ev) > 0 {
			d.Event = ev[0]
		}
	}
	res, err := triggers.Map(d)
	if err != nil {
		return err
	}
	if len(res.Events) == 0 {
		return fmt.Errorf("maps to no event (%s), so there is nothing to publish; \"triggerctl delivery\" shows what it holds", res.Ignored)
	}
	if asNew {
		nonce := uuid.NewString()
		seen := map[triggers.Kind]int{}
		for i := range res.Events {
			e := &res.Events[i]
			e.ID = triggers.EventID(c, key+"#redelivery-"+nonce, e.Kind, seen[e.Kind])
			seen[e.Kind]++
		}
	}
	acks, err := b.PublishEvents(ctx, res.Events, bus.ArchiveSubject(c, key))
	if err != nil {
		return err
	}
	for i, e := range res.Events {
		if err := p.add(redeliverLine{DeliveryID: capture.DeliveryID, EventID: e.ID, Kind: e.Kind, Subject: e.Subject(), Published: !acks[i].Duplicate}); err != nil {
			return err
		}
	}
	return nil
}
