package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/envflag"
)

// envPrefix is the prefix of the environment variables that set flags
// (those ctlEnv binds) and of the secrets and keys triggerctl reads.
const envPrefix = "TRIGGERD_"

// defaultURL is where a locally started triggerd listens.
const defaultURL = "http://127.0.0.1:8080"

// The connectors triggerd accepts webhooks for; each is also the last path
// segment of its endpoint, /webhooks/<connector>.
const (
	connectorCodeHost = "codehost"
	connectorDeploy   = "deploy"
)

// ctlEnv binds only the flags a user exports once for a shell to the
// environment. The others change from one run to the next, and a variable
// exported for one run would silently change every later one (an exported
// TRIGGERD_DELIVERY makes every replay a duplicate) or collide between
// commands (TRIGGERD_TIMEOUT is replay's 10s and redeliver's 30s,
// TRIGGERD_SUBJECT would be tail's boolean --subject).
func ctlEnv() envflag.Env {
	return envflag.Env{Prefix: envPrefix, Only: []string{"url", "nats-url", "data-dir"}}
}

// parseFlags parses args into fs, then fills unset flags that read the
// environment (see ctlEnv) from it. It installs fs's usage (synopsis
// followed by the flags) and writes errors to fs's output. ok is false when
// the command should stop and return code: 0 after -h, which prints the
// whole usage, and 2 on a usage error, which prints the error and where to
// find the flags.
func parseFlags(fs *flag.FlagSet, args []string, synopsis string) (code int, ok bool) {
	addCommonFlags(fs)
	env := ctlEnv()
	fs.Usage = env.Usage(fs, synopsis)
	_, err := env.Parse(fs, args, os.LookupEnv)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return 0, false
	default:
		return usageError(fs, "%v", err), false
	}
}

// addCommonFlags adds to fs the flags every subcommand accepts, those it
// does not define itself: --url, --nats-url, --data-dir and --api-key. A
// user exporting a shell's settings, or a script passing the same flags to
// every call, need not know which commands talk HTTP and which NATS (as
// kubectl's and gh's global flags, and nats's --server, are taken by every
// subcommand); a command that does not use one ignores it.
func addCommonFlags(fs *flag.FlagSet) {
	for _, f := range []struct{ name, def, what string }{
		{"url", defaultURL, "root URL of triggerd"},
		{"nats-url", defaultNATSURL, "triggerd's NATS"},
		{"data-dir", "./data", "triggerd's data dir"},
	} {
		if fs.Lookup(f.name) == nil {
			fs.String(f.name, f.def, f.what+" (accepted by every command; this one does not use it)")
		}
	}
	if fs.Lookup("api-key") == nil {
		fs.String("api-key", "", "the tenant's API key for the management API (default: TRIGGERD_API_KEY, else <data-dir>/default_tenant_key); the variable keeps the key out of the process list")
	}
}

// apiKeyFlag returns --api-key's value after parseFlags ("" when unset).
func apiKeyFlag(fs *flag.FlagSet) string {
	if f := fs.Lookup("api-key"); f != nil {
		return strings.TrimSpace(f.Value.String())
	}
	return ""
}

// usageError reports a usage problem of fs's command and returns exit code 2.
func usageError(fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(fs.Output(), "triggerctl %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fmt.Fprintf(fs.Output(), "run \"triggerctl help %s\" for its flags\n", fs.Name())
	return 2
}

// endpointURL returns the webhook endpoint of connector under base, the
// server's root URL.
func endpointURL(base, connector string) string {
	return strings.TrimRight(base, "/") + "/webhooks/" + connector
}

// scheme returns the signature scheme of connector.
func scheme(connector string) ingest.Scheme {
	if connector == connectorDeploy {
		return ingest.DeployScheme
	}
	return ingest.CodeHostScheme
}

// loadSecret returns the secret to sign connector's webhooks with, looked
// up where triggerd looks, in the same order: the file named by
// TRIGGERD_<CONNECTOR>_WEBHOOK_SECRET_FILE (as --<connector>-webhook-secret-file),
// else TRIGGERD_<CONNECTOR>_WEBHOOK_SECRET, else <dataDir>/<connector>_webhook_secret,
// which triggerd writes when it generates a secret; the first of a list
// signs. It also returns where the secret came from, for a refusal to
// name. The secret never appears in an error.
func loadSecret(connector, dataDir string) (secret []byte, source string, err error) {
	base := connector + "_webhook_secret"
	env := envflag.Name(envPrefix, base)
	fileEnv := envflag.Name(envPrefix, base+"_file")
	if path, ok := os.LookupEnv(fileEnv); ok && path != "" {
		list, err := ingest.ReadSecretFile(path)
		switch {
		case errors.Is(err, ingest.ErrNoSecret):
			return nil, "", fmt.Errorf("the %s webhook secret file %s (from %s) holds no secret", connector, path, fileEnv)
		case err != nil:
			return nil, "", fmt.Errorf("read the %s webhook secret file named by %s: %w", connector, fileEnv, err)
		}
		return []byte(list[0]), "the file " + path + " (" + fileEnv + ")", nil
	}
	if v, ok := os.LookupEnv(env); ok {
		if list := ingest.SplitSecrets(v); len(list) > 0 {
			return []byte(list[0]), env, nil
		}
	}
	path := filepath.Join(dataDir, base)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	list, err := ingest.ReadSecretFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", fmt.Errorf("no %s webhook secret: set %s or %s (the first of a list signs), "+
			"or point --data-dir at the directory where triggerd wrote %s (looked for %s)", connector, fileEnv, env, base, path)
	case errors.Is(err, ingest.ErrNoSecret):
		return nil, "", fmt.Errorf("the %s webhook secret file %s is empty: write the secret triggerd uses into it, or set %s", connector, path, env)
	case err != nil:
		return nil, "", fmt.Errorf("read the %s webhook secret: %w; fix the file or set %s", connector, err, env)
	}
	return []byte(list[0]), "the file " + path, nil
}

// secretCache loads each connector's secret once.
type secretCache struct {
	dataDir string
	loaded  map[string]loadedSecret
	failed  map[string]error
}

type loadedSecret struct {
	secret []byte
	source string
}

// get returns connector's signing secret and where it came from, loading
// it on first use.
func (c *secretCache) get(connector string) ([]byte, string, error) {
	if s, ok := c.loaded[connector]; ok {
		return s.secret, s.source, nil
	}
	if err, ok := c.failed[connector]; ok {
		return nil, "", err
	}
	s, source, err := loadSecret(connector, c.dataDir)
	if err != nil {
		if c.failed == nil {
			c.failed = map[string]error{}
		}
		c.failed[connector] = err
		return nil, "", err
	}
	if c.loaded == nil {
		c.loaded = map[string]loadedSecret{}
	}
	c.loaded[connector] = loadedSecret{s, source}
	return s, source, nil
}

// eventFromFile returns the code-hosting event a payload file holds, by the
// corpus naming rule: the file name's first dot-separated segment
// (issues.opened.json → issues).
func eventFromFile(path string) (string, error) {
	name := filepath.Base(path)
	event, _, _ := strings.Cut(name, ".")
	if event == "" {
		return "", fmt.Errorf("cannot tell the event from the file name %q: pass --event", name)
	}
	return event, nil
}

// detectConnector guesses which connector a payload belongs to: deploy when
// it is a JSON object with a string "id", a string "type" and an object
// "payload" (the deployment platform's envelope), else codehost.
func detectConnector(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return connectorCodeHost
	}
	// The values are valid JSON without surrounding space, so the first
	// byte tells the type.
	first := func(key string) byte {
		if v := top[key]; len(v) > 0 {
			return v[0]
		}
		return 0
	}
	if first("id") == '"' && first("type") == '"' && first("payload") == '{' {
		return connectorDeploy
	}
	return connectorCodeHost
}

// envelope is a deployment webhook body cut around the value of its
// top-level "id", so that a body with a new id costs one concatenation.
type envelope struct {
	head, tail []byte
}

// splitEnvelope decodes the top level of a deployment webhook body and
// re-encodes it with a hole where the "id" value goes (adding "id" if it was
// missing), and "createdAt" set to now: a body with a new id is a new
// delivery, and triggerd refuses one dated older than its archive's
// retention, as it could be a replay. Keys come out sorted and the top
// level loses its white space; every other value, the nested "payload"
// above all, keeps its bytes exactly as in body.
func splitEnvelope(body []byte) (envelope, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return envelope{}, fmt.Errorf("a deploy payload must be a JSON object (the {\"id\",\"type\",\"createdAt\",\"payload\"} envelope): %w", err)
	}
	if top == nil {
		return envelope{}, errors.New("a deploy payload must be a JSON object (the {\"id\",\"type\",\"createdAt\",\"payload\"} envelope), not null")
	}
	top["id"] = nil
	top["createdAt"] = strconv.AppendInt(nil, time.Now().UnixMilli(), 10)
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	// json.Marshal would compact (and HTML-escape) raw values, so the
	// object is written by hand.
	var b bytes.Buffer
	var e envelope
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return envelope{}, err
		}
		b.Write(key)
		b.WriteByte(':')
		if k == "id" {
			e.head = bytes.Clone(b.Bytes())
			b.Reset()
			continue
		}
		b.Write(top[k])
	}
	b.WriteByte('}')
	e.tail = bytes.Clone(b.Bytes())
	return e, nil
}

// withID returns the envelope's body with id as its top-level "id".
func (e envelope) withID(id string) []byte {
	q, _ := json.Marshal(id) // a string always marshals
	b := make([]byte, 0, len(e.head)+len(q)+len(e.tail))
	b = append(b, e.head...)
	b = append(b, q...)
	return append(b, e.tail...)
}

// fileList is a repeatable flag of file names that also takes
// comma-separated lists.
type fileList []string

// String returns the files as a comma-separated list.
func (f *fileList) String() string { return strings.Join(*f, ",") }

// Set adds the comma-separated files in v.
func (f *fileList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*f = append(*f, name)
		}
	}
	return nil
}

// readAll reads the whole body and closes it.
func readAll(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}
