// Command triggerctl is the operator's tool for triggerd: it replays captured
// webhook payloads, signed as the real senders sign them, watches the events
// triggerd publishes, redelivers archived deliveries, and benchmarks the
// ingest endpoints.
//
// Usage:
//
//	triggerctl replay [flags] FILE...
//	triggerctl bench [flags]
//	triggerctl bench-baseline [--listen 127.0.0.1:8099]
//	triggerctl bench-dispatch [flags]
//	triggerctl tail [flags] [SUBJECT]
//	triggerctl delivery [flags] DELIVERY_ID|PAYLOAD_REF...
//	triggerctl redeliver [flags] DELIVERY_ID...
//	triggerctl tenants create NAME
//	triggerctl keys list | create --name NAME | revoke KEY_ID
//	triggerctl accounts list | get ID | connect CONNECTOR | remove ID
//	triggerctl steps list [QUERY] | show ID | run ID --account ACCOUNT --input JSON
//	triggerctl agents list | get ID | endpoint ID | delete ID | create --name NAME [--webhook-url URL] [--steps JSON]
//	triggerctl triggers kinds | list | get ID | events ID | enable ID | disable ID | delete ID | create ...
//	triggerctl runs list [flags] | get RUN_ID
//	triggerctl events get EVENT_ID
//	triggerctl replay-event [--trigger ID [--bypass-filter]] EVENT_ID
//	triggerctl dead list [flags] | requeue SEQ...
//	triggerctl mcp [--url URL]
//	triggerctl version
//
// The settings one exports once for a shell, --url, --nats-url and
// --data-dir, can also be set from the environment as TRIGGERD_URL,
// TRIGGERD_NATS_URL and TRIGGERD_DATA_DIR (an empty variable counts as
// unset); the command line wins. The other flags, which change from one run
// to the next, are read from the command line only. Webhook secrets and API
// keys come from their own variables (TRIGGERD_CODEHOST_WEBHOOK_SECRET,
// TRIGGERD_API_KEY, ...). Run "triggerctl help COMMAND" for a command's
// flags.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"text/tabwriter"

	"github.com/triggerd/triggerd/internal/buildinfo"
)

// command is one triggerctl subcommand.
type command struct {
	// summary is the one-line description shown in the usage listing.
	summary string
	// run executes the command with the arguments after its name and
	// returns the process exit code: 0 ok, 1 failure, 2 usage error.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run dispatches args[0] to its subcommand and returns the exit code. The
// command's context is cancelled on SIGINT or SIGTERM.
func run(args []string, stdout, stderr io.Writer) int {
	commands := allCommands()
	if len(args) == 0 {
		printUsage(stderr, commands)
		return 2
	}
	return runCommand(commands, args, stdout, stderr)
}

// allCommands returns the subcommands by name.
func allCommands() map[string]command {
	return map[string]command{
		"replay":         {summary: "sign and post captured webhook payload files to triggerd", run: replay},
		"bench":          {summary: "load-test a webhook endpoint with signed payloads and report latency", run: bench},
		"bench-baseline": {summary: "serve a bare echo endpoint that discards bodies, to benchmark against", run: benchBaseline},
		"tail":           {summary: "print trigger events from NATS as JSON lines", run: tail},
		"redeliver":      {summary: "map archived deliveries again and publish their events", run: redeliver},
		"delivery":       {summary: "print archived deliveries, by delivery id or an event's payload_ref", run: delivery},
		"tenants":        {summary: "create a tenant and print its API key (needs the admin key)", run: tenantsCmd},
		"keys":           {summary: "list, create and revoke the tenant's API keys, to rotate one", run: keysCmd},
		"accounts":       {summary: "list, inspect, connect and remove connected accounts", run: accountsCmd},
		"steps":          {summary: "list, show and run tool steps as a connected account", run: stepsCmd},
		"agents":         {summary: "create, list, inspect and delete agents (NATS or HTTP)", run: agentsCmd},
		"triggers":       {summary: "create, list, enable, disable and delete triggers; list kinds; an event log per trigger", run: triggersCmd},
		"runs":           {summary: "list runs and show one run with its steps", run: runsCmd},
		"events":         {summary: "show what became of an event for each candidate trigger", run: eventsCmd},
		"bench-dispatch": {summary: "measure webhook receipt → agent run latency through a real trigger", run: benchDispatch},
		"replay-event":   {summary: "dispatch a stored event again, to all matching triggers or one", run: replayEventCmd},
		"dead":           {summary: "list the messages the dispatcher gave up on, and requeue them", run: dead},
		"mcp":            {summary: "bridge an MCP client on stdin/stdout to triggerd's MCP endpoint", run: mcpCmd},
		"version":        {summary: "print triggerctl's version, commit and Go version", run: version},
	}
}

// runCommand runs the command args name with its arguments.
func runCommand(commands map[string]command, args []string, stdout, stderr io.Writer) int {
	name, rest := args[0], args[1:]
	help := false
	if name == "help" || name == "-h" || name == "-help" || name == "--help" {
		if len(rest) == 0 {
			printUsage(stdout, commands)
			return 0
		}
		name, rest, help = rest[0], []string{"-h"}, true
	}
	if name == "--version" || name == "-version" {
		name = "version"
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "triggerctl: unknown command %q\n\n", name)
		printUsage(stderr, commands)
		return 2
	}
	if help || slices.ContainsFunc(rest, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" }) {
		// Help asked for is the answer, so it goes to standard output (as
		// kubectl's and gh's does), with the command's examples.
		cmd.run(context.Background(), []string{"-h"}, stdout, stdout)
		if ex := examples[name]; ex != "" {
			fmt.Fprintf(stdout, "\nexamples:\n%s", ex)
		}
		fmt.Fprint(stdout, exitCodes)
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd.run(ctx, rest, stdout, stderr)
}

// exitCodes ends every help text.
const exitCodes = `
exit status:
  0  done
  1  failed: triggerd or NATS refused the request or could not be reached
     (the message on standard error says why)
  2  usage error: unknown command, flag or arguments
`

// version implements "triggerctl version".
func version(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "text", "output format: text or json")
	if code, ok := parseFlags(fs, args, "usage: triggerctl version [-o json]\n\nPrints the module version, the commit it was built from and the Go version (from the build information).\n\nflags:"); !ok {
		return code
	}
	in := buildinfo.Read()
	switch *output {
	case "json":
		b, _ := json.MarshalIndent(in, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	case "text":
		fmt.Fprint(stdout, in.String("triggerctl"))
	default:
		return usageError(fs, "-o %q: want text or json", *output)
	}
	return 0
}

// printUsage writes the command listing to w.
func printUsage(w io.Writer, commands map[string]command) {
	fmt.Fprintln(w, "usage: triggerctl COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands[name].summary)
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "triggerctl help COMMAND" for a command's flags. --url, --nats-url and`)
	fmt.Fprintln(w, "--data-dir can also be set from the environment as TRIGGERD_URL, TRIGGERD_NATS_URL")
	fmt.Fprintln(w, "and TRIGGERD_DATA_DIR; the other flags only on the command line. Every command")
	fmt.Fprintln(w, "accepts --url, --nats-url, --data-dir and --api-key, whether it uses them or not.")
	fmt.Fprint(w, exitCodes)
}
