package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/triggers"
)

// tail implements "triggerctl tail [SUBJECT]": it prints trigger events as
// JSON lines, one per event, as they are published. SUBJECT is a NATS
// subject filter (default "triggers.>", every event); --all starts with the
// events the stream still holds.
func tail(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf := addNATSFlags(fs)
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
	if err := checkTailFilter(fs.Arg(0)); err != nil {
		return usageError(fs, "%v", err)
	}
	b, err := nf.connect(ctx)
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

// checkTailFilter reports a subject filter that is malformed or can match
// no event, which would otherwise leave tail waiting silently for ever.
// Event subjects are triggers.<connector>.<kind>.<owner>.<repo>.
func checkTailFilter(filter string) error {
	if filter == "" {
		return nil
	}
	toks := strings.Split(filter, ".")
	for i, tok := range toks {
		switch {
		case tok == "":
			return fmt.Errorf("subject filter %q has an empty token: tokens are separated by single dots", filter)
		case strings.ContainsAny(tok, " \t\r\n"):
			return fmt.Errorf("subject filter %q contains white space", filter)
		case tok == ">" && i != len(toks)-1:
			return fmt.Errorf("subject filter %q: '>' may only be the last token", filter)
		}
	}
	literal := func(i int) (string, bool) {
		if i >= len(toks) || toks[i] == "*" || toks[i] == ">" {
			return "", false
		}
		return toks[i], true
	}
	if tok, ok := literal(0); ok && tok != triggers.SubjectPrefix {
		return fmt.Errorf("subject filter %q matches no event: event subjects are %s.<connector>.<kind>.<owner>.<repo>", filter, triggers.SubjectPrefix)
	}
	if len(toks) > 5 || len(toks) < 5 && toks[len(toks)-1] != ">" {
		return fmt.Errorf("subject filter %q matches no event: event subjects have 5 tokens, %s.<connector>.<kind>.<owner>.<repo> (end with '>' to match the rest)", filter, triggers.SubjectPrefix)
	}
	conn, connOK := literal(1)
	if connOK && !triggers.Connector(conn).Valid() {
		return fmt.Errorf("subject filter %q: no connector %q (codehost or deploy)", filter, conn)
	}
	if kind, ok := literal(2); ok {
		k := triggers.Kind(kind)
		if !k.Valid() {
			return fmt.Errorf("subject filter %q: no trigger kind %q (triggerctl triggers kinds lists them)", filter, kind)
		}
		if connOK && k.Connector() != triggers.Connector(conn) {
			return fmt.Errorf("subject filter %q: %s is a %s kind, not a %s one", filter, kind, k.Connector(), conn)
		}
	}
	// Code-hosting owners and repositories are lower-cased in subjects
	// (GitHub's names are case-insensitive); deployment ids keep their case.
	if connOK && triggers.Connector(conn) == triggers.CodeHost {
		fixed := slices.Clone(toks)
		for i := 3; i < len(fixed); i++ {
			fixed[i] = lowerToken(fixed[i])
		}
		if want := strings.Join(fixed, "."); want != filter {
			return fmt.Errorf("subject filter %q matches no event: code-hosting owners and repositories are lower-case in subjects; use %q", filter, want)
		}
	}
	return nil
}

// lowerToken lower-cases an encoded subject token, leaving the hex digits of
// its escapes ("%2E") as EncodeToken writes them.
func lowerToken(tok string) string {
	b := []byte(tok)
	for i := 0; i < len(b); i++ {
		if b[i] == '%' {
			i += 2
			continue
		}
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}
