package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/triggerd/triggerd/bus"
)

// tail implements "triggerctl tail [SUBJECT]": it prints trigger events as
// JSON lines, one per event, as they are published. SUBJECT is a NATS
// subject filter (default "triggers.>", every event); --all starts with the
// events the stream still holds.
func tail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	natsURL := fs.String("nats-url", defaultNATSURL, "NATS server triggerd publishes to")
	all := fs.Bool("all", false, "start with every event the stream still holds, not only new ones")
	withSubject := fs.Bool("subject", false, "prefix each line with the event's subject and a tab")
	synopsis := "usage: triggerctl tail [flags] [SUBJECT]\n\n" +
		"Prints trigger events as JSON lines. SUBJECT filters them, e.g. triggers.codehost.new_issue.>\n" +
		"or triggers.*.*.octo-org.api (owner and repo are lower-case; '.' in names is %2E).\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return usageError(fs, "give at most one subject filter, not %d", fs.NArg())
	}
	b, err := connectBus(ctx, *natsURL)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl tail: %v\n", err)
		return 1
	}
	defer b.Close()
	from := bus.FromNew
	if *all {
		from = bus.FromAll
	}
	w := bufio.NewWriter(stdout)
	var line bytes.Buffer
	err = b.Tail(ctx, fs.Arg(0), from, func(subject string, data []byte) error {
		if *withSubject {
			w.WriteString(subject)
			w.WriteByte('\t')
		}
		// The event keeps the provider's payload byte for byte, often
		// pretty-printed; compact it so each event is one line.
		line.Reset()
		if err := json.Compact(&line, data); err != nil {
			return fmt.Errorf("event on %s is not valid JSON: %w", subject, err)
		}
		line.WriteByte('\n')
		w.Write(line.Bytes())
		return w.Flush()
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "triggerctl tail: %v\n", err)
		return 1
	}
	return 0
}
