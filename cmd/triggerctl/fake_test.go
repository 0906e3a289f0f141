package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/ingest"
)

// Secrets the tests sign with. The code-hosting variable lists two, and the
// fake accepts only the first, so a test fails if triggerctl signs with
// another.
const (
	testCodeHostSecret = "codehost-secret-1"
	testDeploySecret   = "deploy-secret"
	testHookID         = "h_test"
	testHookSecret     = "hook-secret"
)

// fakeRequest is one delivery the fake triggerd accepted.
type fakeRequest struct {
	connector   string
	event       string
	delivery    string
	contentType string
	signature   string
	body        []byte // raw body, as signed
	payload     []byte // the JSON: body, or a form body's payload field
}

// fakeTriggerd stands in for triggerd: it verifies signatures as triggerd
// does, records what it accepted and answers like it.
type fakeTriggerd struct {
	t        *testing.T
	srv      *httptest.Server
	codehost *ingest.Verifier
	deploy   *ingest.Verifier
	// status, when set, is the answer to every delivery with a good
	// signature, with an error body.
	status int
	// keep records full requests; off for benchmarks.
	keep bool

	mu        sync.Mutex
	reqs      []fakeRequest
	seen      map[string]int
	rejected  int
	delivered int
}

// newFakeTriggerd starts a fake triggerd and stops it when t ends.
func newFakeTriggerd(t *testing.T) *fakeTriggerd {
	t.Helper()
	f := &fakeTriggerd{t: t, keep: true, seen: map[string]int{}}
	var err error
	if f.codehost, err = ingest.NewVerifier(ingest.CodeHostScheme, testCodeHostSecret); err != nil {
		t.Fatal(err)
	}
	if f.deploy, err = ingest.NewVerifier(ingest.DeployScheme, testDeploySecret); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/{connector}", f.serve)
	mux.HandleFunc("POST /webhooks/{connector}/{hook}", f.serve)
	// triggerctl's requests, and the fake's answers, are held to the
	// OpenAPI document, as triggerd's own are in its tests.
	f.srv = httptest.NewServer(apitest.New(t).Handler(mux))
	t.Cleanup(f.srv.Close)
	return f
}

// serve handles one webhook like triggerd.
func (f *fakeTriggerd) serve(w http.ResponseWriter, r *http.Request) {
	connector := r.PathValue("connector")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", err.Error())
		return
	}
	var v *ingest.Verifier
	var sch ingest.Scheme
	switch connector {
	case connectorCodeHost:
		v, sch = f.codehost, ingest.CodeHostScheme
	case connectorDeploy:
		v, sch = f.deploy, ingest.DeployScheme
	default:
		writeError(w, http.StatusNotFound, "no_connector", connector)
		return
	}
	if hook := r.PathValue("hook"); hook != "" {
		// A tenant's hook or an agent's endpoint, with its own secret.
		if hook != testHookID {
			writeError(w, http.StatusNotFound, "unknown_hook", hook)
			return
		}
		if v, err = ingest.NewVerifier(sch, testHookSecret); err != nil {
			writeError(w, http.StatusInternalServerError, "verifier", err.Error())
			return
		}
	}
	sig := r.Header.Get(sch.Header)
	if !v.Verify(sig, body) {
		f.mu.Lock()
		f.rejected++
		f.mu.Unlock()
		writeError(w, http.StatusUnauthorized, "invalid_signature", "signature does not match")
		return
	}
	req := fakeRequest{
		connector:   connector,
		event:       r.Header.Get("X-GitHub-Event"),
		contentType: r.Header.Get("Content-Type"),
		signature:   sig,
		body:        body,
		payload:     body,
	}
	if connector == connectorCodeHost {
		req.delivery = r.Header.Get("X-GitHub-Delivery")
		if req.contentType == "application/x-www-form-urlencoded" {
			form, err := url.ParseQuery(string(body))
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad_form", err.Error())
				return
			}
			req.payload = []byte(form.Get("payload"))
		}
	} else {
		var env struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			writeError(w, http.StatusBadRequest, "bad_json", err.Error())
			return
		}
		req.delivery = env.ID
	}
	if !json.Valid(req.payload) {
		writeError(w, http.StatusBadRequest, "bad_json", "payload is not JSON")
		return
	}
	f.mu.Lock()
	f.seen[req.delivery]++
	f.delivered++
	if f.keep {
		f.reqs = append(f.reqs, req)
	}
	status := f.status
	f.mu.Unlock()
	if status != 0 {
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5") // as triggerd's
		}
		writeError(w, status, "unavailable", "the event bus is down")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	if connector == connectorCodeHost && strings.Contains(req.event, "-") {
		// As triggerd answers an event it maps to no kind (GitHub's
		// event names have no hyphen).
		fmt.Fprintf(w, `{"delivery_id":%q,"events":[],"ignored":"event %s maps to no trigger kind"}`, req.delivery, req.event)
		return
	}
	fmt.Fprintf(w, `{"delivery_id":%q,"events":[{"id":"ev-1","kind":"fake","subject":"a"},{"id":"ev-2","kind":"fake","subject":"b"}]}`, req.delivery)
}

// writeError answers like triggerd's errors.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// requests returns a copy of the accepted requests.
func (f *fakeTriggerd) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

// setTestEnv clears every TRIGGERD_ variable for the test (restoring them
// after) and sets the code-hosting secret list; the deploy secret is left
// to a file under the returned data directory.
func setTestEnv(t *testing.T) (dataDir string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			t.Setenv(k, "") // registers the restore
			os.Unsetenv(k)
		}
	}
	t.Setenv("TRIGGERD_CODEHOST_WEBHOOK_SECRET", " "+testCodeHostSecret+" , codehost-secret-2")
	dataDir = t.TempDir()
	writeFile(t, dataDir, "deploy_webhook_secret", "\n  "+testDeploySecret+"\n")
	return dataDir
}

// writeFile writes content to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCtl runs triggerctl with args and returns its exit code and output.
func runCtl(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// replayLines decodes replay's JSON lines.
func replayLines(t *testing.T, stdout string) []replayLine {
	t.Helper()
	var lines []replayLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var rl replayLine
		if err := json.Unmarshal([]byte(l), &rl); err != nil {
			t.Fatalf("replay printed a line that is not JSON: %q: %v", l, err)
		}
		lines = append(lines, rl)
	}
	return lines
}
