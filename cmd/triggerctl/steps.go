package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/triggerd/triggerd/tenants"
)

// stepsCmd implements "triggerctl steps list [QUERY] | show ID | run ID":
// the tool step catalogue and runs, through the management API with a
// tenant key.
func stepsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("steps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir, where it wrote default_tenant_key (used when TRIGGERD_API_KEY is unset)")
	account := fs.String("account", "", "connected account to run the step as (run)")
	input := fs.String("input", "{}", "the step's input as a JSON object, or @FILE (run)")
	output := addOutputFlag(fs)
	synopsis := "usage: triggerctl steps list [QUERY] | show ID | run ID --account ACCOUNT --input JSON|@FILE\n\n" +
		"Lists and searches the tool steps, shows one step's input and output schemas, or runs a step as a\n" +
		"connected account and prints its output.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	format, err := outputFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_API_KEY", tenants.DefaultKeyFile, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl steps: %v\n", err)
		return 1
	}
	root := strings.TrimRight(*baseURL, "/") + "/v1/steps"
	var (
		method = http.MethodGet
		target string
		body   any
	)
	switch {
	case fs.NArg() >= 1 && fs.NArg() <= 2 && fs.Arg(0) == "list":
		target = root
		if fs.NArg() == 2 {
			target += "?q=" + url.QueryEscape(fs.Arg(1))
		}
	case fs.NArg() == 2 && fs.Arg(0) == "show":
		target = root + "/" + url.PathEscape(fs.Arg(1))
	case fs.NArg() == 2 && fs.Arg(0) == "run":
		in, err := jsonArg("input", *input)
		if err != nil {
			return usageError(fs, "%v: give the step's input as an object, e.g. --input '{\"owner\":\"o\"}', or @FILE", err)
		}
		method, target = http.MethodPost, root+"/"+url.PathEscape(fs.Arg(1))+"/run"
		body = map[string]any{"account": *account, "input": in}
	default:
		return usageError(fs, "want: steps list [QUERY] | show ID | run ID --account ACCOUNT --input JSON")
	}
	var out json.RawMessage
	if err := callAPI(ctx, method, target, key, body, &out); err != nil {
		fmt.Fprintf(stderr, "triggerctl steps: %v\n", err)
		return 1
	}
	if err := printAnswer(stdout, stderr, format, out); err != nil {
		fmt.Fprintf(stderr, "triggerctl steps: %v\n", err)
		return 1
	}
	return 0
}
