package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/bus"
)

// deadLine is what "triggerctl dead list" prints per dead letter.
type deadLine struct {
	// Seq is the dead letter's sequence, which "dead requeue" takes.
	Seq    uint64 `json:"seq"`
	Source string `json:"source"`
	// Subject, Stream and StreamSeq say where the message was.
	Subject    string    `json:"subject"`
	Stream     string    `json:"stream"`
	StreamSeq  uint64    `json:"stream_seq"`
	Deliveries int       `json:"deliveries"`
	At         time.Time `json:"at"`
	Reason     string    `json:"reason"`
	// ID and Kind are read from the message: an event's id and kind, a
	// run's id.
	ID   string `json:"id,omitempty"`
	Kind string `json:"kind,omitempty"`
	// Data is the message itself, with --data.
	Data json.RawMessage `json:"data,omitempty"`
}

// dead implements "triggerctl dead list|requeue": the messages the
// dispatcher (or an agent) gave up on, from the dead-letter stream, and
// handing them back to their consumers.
func dead(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dead", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
	source := fs.String("source", "", "list only this consumer's dead letters (dispatch, push, results, replay, resume, or an agent's)")
	from := fs.Uint64("from", 0, "list from this dead-letter sequence on")
	limit := fs.Int("limit", 100, "list at most this many")
	withData := fs.Bool("data", false, "print each message's data too (in the json and jsonl forms)")
	output := addLinesOutputFlag(fs)
	synopsis := "usage: triggerctl dead list [flags]\n       triggerctl dead requeue SEQ...\n\n" +
		"list prints the dead letters, messages a consumer gave up on (an event whose triggers could not be\n" +
		"dispatched, a run an HTTP agent kept refusing), oldest first, with the reason: a table on a terminal,\n" +
		"JSON lines otherwise (-o).\n" +
		"requeue gives each named dead letter back to its consumer as a new message and removes it from the\n" +
		"list; what was already done for it (a run started, a step run) is not done again.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	format, err := linesFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	verb := fs.Arg(0)
	switch {
	case verb == "list" && fs.NArg() == 1:
	case verb == "requeue" && fs.NArg() > 1:
	case verb == "requeue":
		return usageError(fs, "name the dead letters to requeue by their seq (from \"triggerctl dead list\")")
	default:
		return usageError(fs, "want: dead list, or dead requeue SEQ...")
	}
	if *limit < 1 {
		return usageError(fs, "--limit is %d: list at least 1", *limit)
	}
	var seqs []uint64
	for _, a := range fs.Args()[1:] {
		seq, err := strconv.ParseUint(a, 10, 64)
		if err != nil || seq == 0 {
			return usageError(fs, "%q is not a dead letter's seq: use the seq field of \"triggerctl dead list\"", a)
		}
		seqs = append(seqs, seq)
	}
	b, err := nf.connect(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl dead: %v\n", err)
		return 1
	}
	defer b.Close()
	if verb == "list" {
		// What was read before a failure is printed, then the failure.
		ds, lerr := b.ListDead(ctx, *source, *from, *limit)
		// An empty list is told on standard error, as gh does: standard
		// output stays what the form promises (no lines, for jsonl).
		none := "no dead letters" + deadScope(*source, *from)
		if lerr != nil {
			none = "" // the failure is what to tell
		}
		p := &listPrinter{stdout: stdout, stderr: stderr, format: format, name: "dead_letters", none: none}
		for _, d := range ds {
			if err := p.add(deadLineOf(d, *withData)); err != nil {
				fmt.Fprintf(stderr, "triggerctl dead: %v\n", err)
				return 1
			}
		}
		if len(ds) > 0 || lerr == nil {
			if err := p.flush(); err != nil {
				fmt.Fprintf(stderr, "triggerctl dead: %v\n", err)
				return 1
			}
		}
		if lerr != nil {
			fmt.Fprintf(stderr, "triggerctl dead: %v\n", lerr)
			return 1
		}
		return 0
	}
	p := &listPrinter{stdout: stdout, stderr: stderr, format: format, name: "requeued", none: "no dead letter requeued"}
	code := 0
	for _, seq := range seqs {
		d, err := b.Requeue(ctx, seq)
		if errors.Is(err, bus.ErrNotDead) {
			err = fmt.Errorf("%w: \"triggerctl dead list\" shows the dead letters' seqs (one requeued already has left the list)", err)
		}
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl dead requeue %d: %v\n", seq, err)
			code = 1
			continue
		}
		if err := p.add(requeuedLine{true, deadLineOf(d, false)}); err != nil {
			fmt.Fprintf(stderr, "triggerctl dead: %v\n", err)
			return 1
		}
	}
	if err := p.flush(); err != nil {
		fmt.Fprintf(stderr, "triggerctl dead: %v\n", err)
		return 1
	}
	return code
}

// requeuedLine is what "triggerctl dead requeue" prints per dead letter
// handed back.
type requeuedLine struct {
	Requeued bool `json:"requeued"`
	deadLine
}

func deadLineOf(d bus.Dead, withData bool) deadLine {
	l := deadLine{
		Seq: d.Seq, Source: d.Source, Subject: d.Subject, Stream: d.Stream, StreamSeq: d.StreamSeq,
		Deliveries: d.Deliveries, At: d.At, Reason: d.Reason,
	}
	var ids struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	if json.Unmarshal(d.Data, &ids) == nil {
		l.ID, l.Kind = ids.ID, ids.Kind
	}
	if withData {
		l.Data = d.Data
		if !json.Valid(d.Data) {
			l.Data, _ = json.Marshal(string(d.Data)) // a string cannot fail to encode
		}
	}
	return l
}

// deadScope says which dead letters an empty list covered.
func deadScope(source string, from uint64) string {
	var parts []string
	if source != "" {
		parts = append(parts, "from "+source)
	}
	if from > 1 {
		parts = append(parts, fmt.Sprintf("at or after seq %d", from))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, ", ")
}
