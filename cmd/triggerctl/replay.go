package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
)

// replayOptions are the replay flags that shape each request.
type replayOptions struct {
	baseURL   string
	connector string // auto, codehost or deploy
	event     string // X-GitHub-Event; empty: from the file name
	delivery  string // fixed delivery id; empty: a fresh UUID per file
	form      bool   // send codehost payloads form-encoded
	// hook is a tenant's hook or deployment endpoint id: deliveries go to
	// /webhooks/<connector>/<hook>, signed with hookSecret.
	hook       string
	hookSecret []byte
}

// signedDelivery is one webhook delivery, signed and ready to post.
type signedDelivery struct {
	connector string
	id        string
	header    http.Header
	body      []byte
	// secretSource says where the signing secret came from.
	secretSource string
	// guessedEvent is the code-hosting event taken from the file's name
	// ("" when --event gave it).
	guessedEvent string
}

// replayLine is the JSON line printed for each file the server answered.
type replayLine struct {
	File       string          `json:"file"`
	Status     int             `json:"status"`
	DeliveryID string          `json:"delivery_id"`
	Response   json.RawMessage `json:"response"`
	// signedWith says where the signing secret came from, for a 401.
	signedWith string
	// guessedEvent is the event taken from the file's name, for a
	// delivery triggerd ignored.
	guessedEvent string
}

// replay implements "triggerctl replay": it signs each payload file as its
// sender would, posts it to triggerd and prints the answer as a JSON line.
// It fails (1) when any file cannot be sent or is answered with a non-2xx
// status, and names those files on stderr.
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o replayOptions
	fs.StringVar(&o.baseURL, "url", defaultURL, "root URL of triggerd")
	fs.StringVar(&o.connector, "connector", "auto", "auto, codehost or deploy; auto picks deploy for a JSON object with string \"id\", string \"type\" and object \"payload\", else codehost")
	fs.StringVar(&o.event, "event", "", "X-GitHub-Event of codehost deliveries (default: the file name up to its first dot, issues.opened.json → issues)")
	fs.StringVar(&o.delivery, "delivery", "", "fixed delivery id: X-GitHub-Delivery, or the deploy envelope's \"id\" (default: a fresh random UUID per file)")
	fs.BoolVar(&o.form, "form", false, "send codehost payloads as application/x-www-form-urlencoded payload=<json>")
	fs.StringVar(&o.hook, "hook", "", "post to a tenant's hook or an agent's deployment endpoint, /webhooks/<connector>/<ID>, instead of the shared endpoint; needs --secret-file")
	secretFile := fs.String("secret-file", "", "with --hook: file holding that hook's or endpoint's secret (triggerctl agents endpoint AGENT prints a deployment endpoint's generated one, until agents set-secrets replaces it)")
	dataDir := fs.String("data-dir", "./data", "directory where triggerd keeps generated webhook secrets, read when TRIGGERD_<CONNECTOR>_WEBHOOK_SECRET is unset")
	timeout := fs.Duration("timeout", 10*time.Second, "timeout of each request")
	output := fs.String("o", "", "output format: table (the default on a terminal), jsonl (one JSON line per file, as it is answered; the default otherwise) or json (one document: the list of answers)")
	synopsis := "usage: triggerctl replay [flags] FILE...\n\n" +
		"Signs each captured webhook payload file and posts it to triggerd, printing triggerd's answer to each:\n" +
		"its status, delivery id and the events it published (their ids are what triggerctl events get takes).\n" +
		"With --hook ID and --secret-file, posts to a tenant's hook or an agent's deployment endpoint instead.\n" +
		"Secrets, where triggerd reads them: the file named by TRIGGERD_CODEHOST_WEBHOOK_SECRET_FILE /\n" +
		"TRIGGERD_DEPLOY_WEBHOOK_SECRET_FILE, else TRIGGERD_CODEHOST_WEBHOOK_SECRET / TRIGGERD_DEPLOY_WEBHOOK_SECRET\n" +
		"(the first of a list signs), else <data-dir>/codehost_webhook_secret / <data-dir>/deploy_webhook_secret.\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	switch o.connector {
	case "auto", connectorCodeHost, connectorDeploy:
	default:
		return usageError(fs, "--connector is %q: use auto, codehost or deploy", o.connector)
	}
	switch {
	case (o.hook == "") != (*secretFile == ""):
		return usageError(fs, "--hook and --secret-file go together: the hook's deliveries are signed with its own secret")
	case o.hook != "":
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return usageError(fs, "--secret-file: %v", err)
		}
		if o.hookSecret = bytes.TrimSpace(b); len(o.hookSecret) == 0 {
			return usageError(fs, "--secret-file %s is empty: write the hook's secret into it", *secretFile)
		}
	}
	if fs.NArg() == 0 {
		return usageError(fs, "no payload files given: name one or more files to replay")
	}
	if *timeout <= 0 {
		return usageError(fs, "--timeout must be positive, not %v", *timeout)
	}
	// Piped, JSON lines: what scripts piping replay have always read.
	format, err := linesFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}

	client := &http.Client{Timeout: *timeout}
	secrets := &secretCache{dataDir: *dataDir}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	var failed []string
	// answered are the lines a table or a json document prints at the end.
	var answered []replayLine
	defer func() {
		var err error
		switch format {
		case outputTable:
			err = writeReplayTable(stdout, answered)
		case outputJSON:
			if answered == nil {
				answered = []replayLine{}
			}
			err = writeJSON(stdout, answered, "  ")
		}
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl replay: write the results: %v\n", err)
		}
	}()
	for _, file := range fs.Args() {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "triggerctl replay: interrupted")
			return 1
		}
		line, err := replayFile(ctx, client, o, secrets, file)
		if err != nil {
			fmt.Fprintf(stderr, "triggerctl replay: %s: %v\n", file, err)
			failed = append(failed, file)
			continue
		}
		if format != outputJSONL {
			answered = append(answered, line)
		} else if err := enc.Encode(line); err != nil {
			fmt.Fprintf(stderr, "triggerctl replay: write the result: %v\n", err)
			return 1
		}
		if line.guessedEvent != "" && line.Status == http.StatusAccepted && ignored(line.Response) {
			fmt.Fprintf(stderr, "triggerctl replay: %s: triggerd ignored it as a %q event, taken from the file name (EVENT.ACTION.json); pass --event if it holds another\n", file, line.guessedEvent)
		}
		signature := line.Status == http.StatusUnauthorized && signatureRefused(line.Response)
		if signature && o.hook != "" {
			fmt.Fprintf(stderr, "triggerctl replay: %s: triggerd answered 401 Unauthorized: --secret-file does not hold hook %s's secret "+
				"(triggerctl agents endpoint AGENT prints a deployment endpoint's generated one; after agents set-secrets, "+
				"only the secrets set are accepted)\n", file, o.hook)
			failed = append(failed, file)
		} else if signature {
			fmt.Fprintf(stderr, "triggerctl replay: %s: triggerd answered 401 Unauthorized to the signature made with the secret from %s; "+
				"triggerd takes --<connector>-webhook-secret-file, else TRIGGERD_<CONNECTOR>_WEBHOOK_SECRET, else the secret it generated "+
				"into its data dir: give triggerctl the same (the variables, or --data-dir)\n", file, line.signedWith)
			failed = append(failed, file)
		} else if line.Status < 200 || line.Status > 299 {
			// Not a webhook endpoint's refusal of the signature (--url
			// names something else, or a proxy before triggerd refused
			// it): say what answered, not which secret signed.
			fmt.Fprintf(stderr, "triggerctl replay: %s: %s answered %d %s: %s\n", file, o.baseURL, line.Status, http.StatusText(line.Status), answerMessage(line.Response))
			failed = append(failed, file)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "triggerctl replay: %d of %d files failed: %q\n", len(failed), fs.NArg(), failed)
		return 1
	}
	return 0
}

// replayFile reads, signs and posts one file and returns the server's answer.
func replayFile(ctx context.Context, client *http.Client, o replayOptions, secrets *secretCache, file string) (replayLine, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return replayLine{}, err
	}
	d, err := buildDelivery(file, raw, o, secrets)
	if err != nil {
		return replayLine{}, err
	}
	target := endpointURL(o.baseURL, d.connector)
	if o.hook != "" {
		target += "/" + url.PathEscape(o.hook)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.body))
	if err != nil {
		return replayLine{}, fmt.Errorf("build the request (check --url): %w", err)
	}
	req.Header = d.header
	resp, err := client.Do(req)
	if err != nil {
		return replayLine{}, fmt.Errorf("post to triggerd (is it running at --url %s?): %w", o.baseURL, err)
	}
	answer, err := readAll(resp.Body)
	if err != nil {
		return replayLine{}, fmt.Errorf("read triggerd's answer (status %d): %w", resp.StatusCode, err)
	}
	return replayLine{File: file, Status: resp.StatusCode, DeliveryID: d.id, Response: asJSON(answer), signedWith: d.secretSource, guessedEvent: d.guessedEvent}, nil
}

// buildDelivery turns a payload file's bytes into a signed delivery for the
// connector o names (or the one detectConnector picks).
func buildDelivery(file string, raw []byte, o replayOptions, secrets *secretCache) (*signedDelivery, error) {
	connector := o.connector
	if connector == "auto" {
		connector = detectConnector(raw)
	}
	id := o.delivery
	if id == "" {
		id = uuid.NewString()
	}
	d := &signedDelivery{connector: connector, id: id, header: http.Header{}}
	d.header.Set("User-Agent", "triggerctl")
	switch connector {
	case connectorDeploy:
		if o.form {
			return nil, fmt.Errorf("--form applies to codehost payloads only; drop it or pass --connector codehost")
		}
		env, err := splitEnvelope(raw)
		if err != nil {
			return nil, err
		}
		d.body = env.withID(id)
		d.header.Set("Content-Type", "application/json")
	default:
		event := o.event
		if event == "" {
			var err error
			if event, err = eventFromFile(file); err != nil {
				return nil, err
			}
			d.guessedEvent = event
		}
		d.header.Set("X-GitHub-Event", event)
		d.header.Set("X-GitHub-Delivery", id)
		if o.form {
			d.body = []byte(url.Values{"payload": {string(raw)}}.Encode())
			d.header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			d.body = raw
			d.header.Set("Content-Type", "application/json")
		}
	}
	secret, source := o.hookSecret, "--secret-file"
	if o.hook == "" {
		var err error
		if secret, source, err = secrets.get(connector); err != nil {
			return nil, err
		}
	}
	d.secretSource = source
	s := scheme(connector)
	d.header.Set(s.Header, s.Sign(secret, d.body))
	return d, nil
}

// ignored reports whether triggerd's answer says the delivery mapped to no
// trigger kind.
// signatureRefused reports whether answer is a webhook endpoint's refusal
// of a delivery's signature (missing_signature, invalid_signature).
func signatureRefused(answer json.RawMessage) bool {
	var a struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(answer, &a) == nil && (a.Error.Code == "invalid_signature" || a.Error.Code == "missing_signature")
}

// answerMessage returns an error answer's message, or the answer itself,
// cut short, when it is not triggerd's error JSON.
func answerMessage(answer json.RawMessage) string {
	var a struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(answer, &a) == nil && a.Error.Message != "" {
		return a.Error.Message
	}
	s := string(answer)
	_ = json.Unmarshal(answer, &s) // a text answer, kept as a JSON string
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func ignored(answer json.RawMessage) bool {
	var a struct {
		Ignored string `json:"ignored"`
	}
	return json.Unmarshal(answer, &a) == nil && a.Ignored != ""
}

// asJSON returns body as a JSON value: itself when it is JSON, as a JSON
// string when it is not (a proxy's HTML error page, say), null when empty.
func asJSON(body []byte) json.RawMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(body) {
		return body
	}
	s, _ := json.Marshal(string(body))
	return s
}

// writeReplayTable writes replay's answers as a table: a row per file with
// its status, delivery id and what became of it (the events published, as
// kind and id, or why there were none).
func writeReplayTable(w io.Writer, lines []replayLine) error {
	if len(lines) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSTATUS\tDELIVERY\tEVENTS")
	for _, l := range lines {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", filepath.Base(l.File), l.Status, l.DeliveryID, replayOutcome(l.Response))
	}
	return tw.Flush()
}

// replayOutcome says in a few words what an answer reports: the events
// published ("new_issue 01f2…"), a duplicate, why it was ignored, or the
// error.
func replayOutcome(raw json.RawMessage) string {
	var a struct {
		Events []struct {
			ID   string `json:"id"`
			Kind string `json:"kind"`
		} `json:"events"`
		Ignored   string `json:"ignored"`
		Duplicate bool   `json:"duplicate"`
		Message   string `json:"message"`
		Error     *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &a) != nil {
		return cell(string(raw))
	}
	switch {
	case a.Error != nil:
		return cell(a.Error.Code + ": " + a.Error.Message)
	case a.Duplicate:
		return cell("duplicate: " + a.Message)
	case a.Ignored != "":
		return cell("none: " + a.Ignored)
	case len(a.Events) == 0:
		return "none"
	}
	parts := make([]string, len(a.Events))
	for i, e := range a.Events {
		parts[i] = e.Kind + " " + e.ID
	}
	return strings.Join(parts, ", ")
}
