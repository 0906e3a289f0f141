package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/tenants"
)

// request is one management API call a subcommand decided on.
type request struct {
	method, path string
	body         any
}

// apiCommand runs a management API subcommand: it parses the common flags
// (--url, --data-dir) plus those define adds, lets route turn the
// arguments into a request, sends it with the tenant's key and prints the
// JSON answer.
func apiCommand(ctx context.Context, name, synopsis string, args []string, stdout, stderr io.Writer,
	define func(fs *flag.FlagSet), route func(fs *flag.FlagSet) (request, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir, where it wrote default_tenant_key (used when TRIGGERD_API_KEY is unset)")
	output := addOutputFlag(fs)
	if define != nil {
		define(fs)
	}
	if code, ok := parseFlags(fs, args, synopsis+"\n\nUses the tenant key in TRIGGERD_API_KEY, else <data-dir>/default_tenant_key.\n\nflags:"); !ok {
		return code
	}
	format, err := outputFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	req, err := route(fs)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_API_KEY", tenants.DefaultKeyFile, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl %s: %v\n", name, err)
		return 1
	}
	var out json.RawMessage
	if err := callAPI(ctx, req.method, strings.TrimRight(*baseURL, "/")+"/v1"+req.path, key, req.body, &out); err != nil {
		fmt.Fprintf(stderr, "triggerctl %s: %v\n", name, err)
		return 1
	}
	if err := printAnswer(stdout, stderr, format, out); err != nil {
		fmt.Fprintf(stderr, "triggerctl %s: %v\n", name, err)
		return 1
	}
	return 0
}

// jsonArg reads a JSON flag value: inline JSON, or @FILE.
func jsonArg(flagName, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	b := []byte(v)
	if strings.HasPrefix(v, "@") {
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("--%s: %w", flagName, err)
		}
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("--%s is not valid JSON", flagName)
	}
	return b, nil
}

// triggersCmd implements "triggerctl triggers ...".
func triggersCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var kind, account, agent, repos, params, filter *string
	var disabled *bool
	var limit *int
	synopsis := "usage: triggerctl triggers kinds | list | get ID | events ID | enable ID | disable ID | delete ID\n" +
		"       triggerctl triggers create --kind KIND --account ACCOUNT --agent AGENT [--repos owner/repo,...] [--params JSON|@FILE] [--filter CEL] [--disabled]\n" +
		"       triggerctl triggers test ID [--filter CEL] [--limit N]\n" +
		"       triggerctl triggers test --kind KIND --account ACCOUNT --agent AGENT [--repos ...] [--params ...] [--filter CEL] [--limit N]\n\n" +
		"create registers the webhook the trigger needs on each repository (or organisation) through the account;\n" +
		"without --repos, a kind that takes repositories takes every one the account reaches (its coverage says where it lacks rights).\n" +
		"test starts nothing: it shows what a trigger (with --filter in place of its own), or one not created yet,\n" +
		"would have done with the latest --limit events of its kind that the events stream holds, newest first."
	define := func(fs *flag.FlagSet) {
		kind = fs.String("kind", "", "trigger kind (see: triggers kinds)")
		account = fs.String("account", "", "connected account the trigger acts through")
		agent = fs.String("agent", "", "agent the trigger starts")
		repos = fs.String("repos", "", "comma-separated owner/repo list (sets params.repositories)")
		params = fs.String("params", "", "per-kind parameters as JSON, or @FILE")
		filter = fs.String("filter", "", "CEL expression over the event that must be true")
		disabled = fs.Bool("disabled", false, "create the trigger disabled")
		limit = fs.Int("limit", 20, "how many events to list or test (test: at most 100)")
	}
	route := func(fs *flag.FlagSet) (request, error) {
		a := fs.Args()
		switch {
		case len(a) == 1 && a[0] == "kinds":
			return request{http.MethodGet, "/triggers/kinds", nil}, nil
		case len(a) == 1 && a[0] == "list":
			return request{http.MethodGet, "/triggers", nil}, nil
		case len(a) == 2 && a[0] == "get":
			return request{http.MethodGet, "/triggers/" + url.PathEscape(a[1]), nil}, nil
		case len(a) == 2 && a[0] == "events":
			return request{http.MethodGet, fmt.Sprintf("/triggers/%s/events?limit=%d", url.PathEscape(a[1]), *limit), nil}, nil
		case len(a) == 2 && (a[0] == "enable" || a[0] == "disable"):
			return request{http.MethodPatch, "/triggers/" + url.PathEscape(a[1]), map[string]bool{"enabled": a[0] == "enable"}}, nil
		case len(a) == 2 && a[0] == "delete":
			return request{http.MethodDelete, "/triggers/" + url.PathEscape(a[1]), nil}, nil
		case len(a) == 2 && a[0] == "test":
			body := map[string]any{"limit": *limit}
			if flagSet(fs, "filter") {
				body["filter"] = *filter // "" tests the trigger without its filter
			}
			return request{http.MethodPost, "/triggers/" + url.PathEscape(a[1]) + "/test", body}, nil
		case len(a) == 1 && (a[0] == "create" || a[0] == "test"):
			p := map[string]any{}
			raw, err := jsonArg("params", *params)
			if err != nil {
				return request{}, err
			}
			if raw != nil {
				if err := json.Unmarshal(raw, &p); err != nil {
					return request{}, fmt.Errorf("--params must be a JSON object: %w", err)
				}
			}
			if *repos != "" {
				if _, both := p["repositories"]; both {
					return request{}, errors.New("--repos and --params' repositories both name the repositories: give them in one place")
				}
				p["repositories"] = strings.Split(*repos, ",")
			}
			var missing []string
			for _, f := range []struct {
				name, v string
			}{{"--kind", *kind}, {"--account", *account}, {"--agent", *agent}} {
				if f.v == "" {
					missing = append(missing, f.name)
				}
			}
			if len(missing) > 0 {
				return request{}, fmt.Errorf("%s needs --kind, --account and --agent; missing: %s", a[0], strings.Join(missing, ", "))
			}
			body := map[string]any{"kind": *kind, "account": *account, "agent": *agent, "params": p}
			if *filter != "" {
				body["filter"] = *filter
			}
			if a[0] == "test" {
				body["limit"] = *limit
				return request{http.MethodPost, "/triggers/test", body}, nil
			}
			body["enabled"] = !*disabled
			return request{http.MethodPost, "/triggers", body}, nil
		}
		return request{}, errors.New("want: triggers kinds | list | get ID | events ID | enable ID | disable ID | delete ID | create --kind KIND ... | test ID | test --kind KIND ...")
	}
	return apiCommand(ctx, "triggers", synopsis, args, stdout, stderr, define, route)
}

// agentsCmd implements "triggerctl agents ...".
func agentsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var name, target, steps, secretFile *string
	var duplicate *bool
	synopsis := "usage: triggerctl agents list | get ID | endpoint ID | delete ID | nats-password ID\n" +
		"       triggerctl agents create --name NAME [--webhook-url URL] [--steps JSON|@FILE] [--allow-duplicate-name]\n" +
		"       triggerctl agents set-secrets ID --secret-file FILE\n\n" +
		"Without --webhook-url the agent is started over NATS (runs on agents.<id>.runs): it connects to triggerd's NATS\n" +
		"as nats_user with the nats_password printed once at creation (nats-password makes a new one and closes the\n" +
		"connections made with the old). With --webhook-url runs are POSTed\n" +
		"there, signed the Standard Webhooks way with the secret printed once at creation. endpoint prints\n" +
		"the agent's deployment webhook URL (and, until set-secrets, the secret triggerd generated, for test deliveries).\n" +
		"set-secrets makes the endpoint accept the secret the deployment platform showed when its webhook was created\n" +
		"(Vercel shows it once and signs with it), one per line in FILE (/dev/stdin to paste it), and no others."
	define := func(fs *flag.FlagSet) {
		name = fs.String("name", "", "the agent's name")
		target = fs.String("webhook-url", "", "HTTP agent: the URL runs are POSTed to")
		steps = fs.String("steps", "", `tool steps as a JSON list [{"name","step","account","input"}], or @FILE`)
		duplicate = fs.Bool("allow-duplicate-name", false, "create: even if another agent of the tenant has this name (refused otherwise)")
		secretFile = fs.String("secret-file", "", "set-secrets: a file of the deployment platform's webhook secrets, one per line")
	}
	route := func(fs *flag.FlagSet) (request, error) {
		a := fs.Args()
		switch {
		case len(a) == 1 && a[0] == "list":
			return request{http.MethodGet, "/agents", nil}, nil
		case len(a) == 2 && a[0] == "get":
			return request{http.MethodGet, "/agents/" + url.PathEscape(a[1]), nil}, nil
		case len(a) == 2 && a[0] == "endpoint":
			return request{http.MethodGet, "/agents/" + url.PathEscape(a[1]) + "/endpoint", nil}, nil
		case len(a) == 2 && a[0] == "delete":
			return request{http.MethodDelete, "/agents/" + url.PathEscape(a[1]), nil}, nil
		case len(a) == 2 && a[0] == "nats-password":
			return request{http.MethodPost, "/agents/" + url.PathEscape(a[1]) + "/nats-password", nil}, nil
		case len(a) == 2 && a[0] == "set-secrets":
			if *secretFile == "" {
				return request{}, errors.New("set-secrets needs --secret-file FILE: the secret the deployment platform showed for its webhook, one per line (kept off the command line, where other users and shell history see it)")
			}
			secrets, err := ingest.ReadSecretFile(*secretFile)
			if err != nil {
				return request{}, fmt.Errorf("--secret-file %s: %w", *secretFile, err)
			}
			return request{http.MethodPut, "/agents/" + url.PathEscape(a[1]) + "/endpoint/secrets", map[string]any{"secrets": secrets}}, nil
		case len(a) == 1 && a[0] == "create":
			body := map[string]any{"name": *name, "delivery": "nats"}
			if *target != "" {
				body["delivery"], body["url"] = "http", *target
			}
			raw, err := jsonArg("steps", *steps)
			if err != nil {
				return request{}, err
			}
			if raw != nil {
				body["steps"] = raw
			}
			if *duplicate {
				body["allow_duplicate_name"] = true
			}
			return request{http.MethodPost, "/agents", body}, nil
		}
		return request{}, errors.New("want: agents list | get ID | endpoint ID | delete ID | nats-password ID | create --name NAME [flags] | set-secrets ID --secret-file FILE")
	}
	return apiCommand(ctx, "agents", synopsis, args, stdout, stderr, define, route)
}

// runsCmd implements "triggerctl runs list|get".
func runsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var trigger, agent, event, status *string
	var limit *int
	synopsis := "usage: triggerctl runs list [--trigger ID] [--agent ID] [--event ID] [--status S] | get RUN_ID\n\n" +
		"A run is one start of an agent for one event: its status, attempts, and each tool step's input,\noutput or error."
	define := func(fs *flag.FlagSet) {
		trigger = fs.String("trigger", "", "only runs of this trigger")
		agent = fs.String("agent", "", "only runs of this agent")
		event = fs.String("event", "", "only runs for this event")
		status = fs.String("status", "", "only runs in this status (claimed, started, succeeded, failed)")
		limit = fs.Int("limit", 20, "how many runs, newest first")
	}
	route := func(fs *flag.FlagSet) (request, error) {
		a := fs.Args()
		switch {
		case len(a) == 1 && a[0] == "list":
			q := url.Values{}
			for k, v := range map[string]string{"trigger": *trigger, "agent": *agent, "event": *event, "status": *status} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", fmt.Sprint(*limit))
			return request{http.MethodGet, "/runs?" + q.Encode(), nil}, nil
		case len(a) == 2 && a[0] == "get":
			return request{http.MethodGet, "/runs/" + url.PathEscape(a[1]), nil}, nil
		}
		return request{}, errors.New("want: runs list [flags] | get RUN_ID")
	}
	return apiCommand(ctx, "runs", synopsis, args, stdout, stderr, define, route)
}

// eventsCmd implements "triggerctl events get ID".
func eventsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	synopsis := "usage: triggerctl events get EVENT_ID\n\nPrints what became of the event for each candidate trigger of the tenant (started, filtered out\nand by what, disabled, account removed, failed)."
	return apiCommand(ctx, "events", synopsis, args, stdout, stderr, nil, func(fs *flag.FlagSet) (request, error) {
		if a := fs.Args(); len(a) == 2 && a[0] == "get" {
			return request{http.MethodGet, "/events/" + url.PathEscape(a[1]), nil}, nil
		}
		return request{}, errors.New("want: events get EVENT_ID")
	})
}

// replayEventCmd implements "triggerctl replay-event EVENT_ID".
func replayEventCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var trigger *string
	var bypass *bool
	synopsis := "usage: triggerctl replay-event [--trigger ID [--bypass-filter]] EVENT_ID\n\n" +
		"Dispatches a stored event again: to every trigger of the tenant that matches it now, or to one\n" +
		"trigger (--bypass-filter skips its parameters and filter). Each replay starts new runs."
	define := func(fs *flag.FlagSet) {
		trigger = fs.String("trigger", "", "replay to this trigger only")
		bypass = fs.Bool("bypass-filter", false, "with --trigger: skip the trigger's parameters and filter")
	}
	return apiCommand(ctx, "replay-event", synopsis, args, stdout, stderr, define, func(fs *flag.FlagSet) (request, error) {
		if fs.NArg() != 1 {
			return request{}, errors.New("want one EVENT_ID")
		}
		body := map[string]any{"trigger_id": *trigger, "bypass_filter": *bypass}
		return request{http.MethodPost, "/events/" + url.PathEscape(fs.Arg(0)) + "/replay", body}, nil
	})
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
