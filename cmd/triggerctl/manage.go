package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/tenants"
)

// managementKey returns the bearer key for the management API: the
// environment variable env, else the file name in dataDir that triggerd
// wrote.
func managementKey(flagKey, env, file, dataDir string) (string, error) {
	if flagKey != "" {
		return flagKey, nil
	}
	if v, ok := os.LookupEnv(env); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	path := filepath.Join(dataDir, file)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no key: set %s, or point --data-dir at triggerd's data dir (looked for %s)", env, path)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// callAPI sends one management API request and decodes the JSON answer into
// out. A non-2xx answer is an error carrying the server's message.
func callAPI(ctx context.Context, method, url, key string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is triggerd running? see --url)", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: status %d", method, url, resp.StatusCode)
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// tenantsCmd implements "triggerctl tenants create NAME": it creates a
// tenant through the management API (with the admin key) and prints the
// tenant and its API key, which is shown only this once.
func tenantsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tenants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir, where it wrote admin_key (used when TRIGGERD_ADMIN_KEY is unset)")
	fs.String("api-key", "", "here, the admin key (default: TRIGGERD_ADMIN_KEY, else <data-dir>/admin_key)")
	synopsis := "usage: triggerctl tenants create [flags] NAME\n\nCreates a tenant and prints its API key (stored hashed; shown only now).\n\nflags:"
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	if fs.NArg() != 2 || fs.Arg(0) != "create" {
		return usageError(fs, "want: tenants create NAME")
	}
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_ADMIN_KEY", "admin_key", *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl tenants: %v\n", err)
		return 1
	}
	// During a rotation the admin key lists several keys, as triggerd
	// reads it; triggerd accepts each, so send the first, not the list.
	if ks := ingest.SplitSecrets(key); len(ks) > 0 {
		key = ks[0]
	}
	var out json.RawMessage
	if err := callAPI(ctx, http.MethodPost, strings.TrimRight(*baseURL, "/")+"/v1/tenants", key, map[string]string{"name": fs.Arg(1)}, &out); err != nil {
		fmt.Fprintf(stderr, "triggerctl tenants: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, string(out))
	return 0
}

// accountsCmd implements "triggerctl accounts list|get|connect|remove":
// thin calls of the management API with a tenant's key.
func accountsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("accounts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseURL := fs.String("url", defaultURL, "root URL of triggerd")
	dataDir := fs.String("data-dir", "./data", "triggerd's data dir, where it wrote default_tenant_key (used when TRIGGERD_API_KEY is unset)")
	synopsis := "usage: triggerctl accounts list | get ID | connect CONNECTOR | remove ID\n\n" +
		"Uses the tenant key in TRIGGERD_API_KEY, else <data-dir>/default_tenant_key. connect prints the URL\n" +
		"to open in a browser to sign in at the provider (codehost, deploy or analytics).\n\nflags:"
	output := addOutputFlag(fs)
	if code, ok := parseFlags(fs, args, synopsis); !ok {
		return code
	}
	format, err := outputFormat(*output, stdout)
	if err != nil {
		return usageError(fs, "%v", err)
	}
	key, err := managementKey(apiKeyFlag(fs), "TRIGGERD_API_KEY", tenants.DefaultKeyFile, *dataDir)
	if err != nil {
		fmt.Fprintf(stderr, "triggerctl accounts: %v\n", err)
		return 1
	}
	root := strings.TrimRight(*baseURL, "/") + "/v1"
	var method, url string
	switch {
	case fs.NArg() == 1 && fs.Arg(0) == "list":
		method, url = http.MethodGet, root+"/accounts"
	case fs.NArg() == 2 && fs.Arg(0) == "get":
		method, url = http.MethodGet, root+"/accounts/"+fs.Arg(1)
	case fs.NArg() == 2 && fs.Arg(0) == "remove":
		method, url = http.MethodDelete, root+"/accounts/"+fs.Arg(1)
	case fs.NArg() == 2 && fs.Arg(0) == "connect":
		method, url = http.MethodGet, root+"/connect/"+fs.Arg(1)+"/start"
	default:
		return usageError(fs, "want: accounts list | get ID | connect CONNECTOR | remove ID")
	}
	var out json.RawMessage
	if err := callAPI(ctx, method, url, key, nil, &out); err != nil {
		fmt.Fprintf(stderr, "triggerctl accounts: %v\n", err)
		return 1
	}
	if err := printAnswer(stdout, stderr, format, out); err != nil {
		fmt.Fprintf(stderr, "triggerctl accounts: %v\n", err)
		return 1
	}
	return 0
}
