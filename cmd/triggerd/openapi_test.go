package main

import (
	"bytes"
	"flag"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/triggerd/triggerd/api"
	"github.com/triggerd/triggerd/api/apitest"
	"github.com/triggerd/triggerd/daemon"
)

// The OpenAPI document holds every step of the catalogue triggerd serves,
// with the input and output schemas GET /v1/steps/{id} answers: its
// generated part (api/openapi-steps.json) is what api.StepsDocument makes
// of the catalogue now. UPDATE_OPENAPI=1 rewrites the file instead of
// failing.
func TestOpenAPIStepsDocument(t *testing.T) {
	// The catalogue a triggerd started with the default flags serves.
	var p daemon.ProviderConfig
	providerFlags(flag.NewFlagSet("defaults", flag.ContinueOnError), &p)
	steps, err := daemon.StepCatalog(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 50 {
		t.Fatalf("the catalogue has %d steps", len(steps))
	}
	want, err := api.StepsDocument(steps)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(api.EmbeddedStepsDocument(), want) {
		return
	}
	path := filepath.Join("..", "..", "api", api.StepsDocumentFile)
	if os.Getenv("UPDATE_OPENAPI") == "1" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: rebuild and run the tests again", path)
		return
	}
	t.Fatalf("api/%s is not the step catalogue's: a step or its schemas changed. Run\n\tUPDATE_OPENAPI=1 go test ./cmd/triggerd -run TestOpenAPIStepsDocument\nand commit the file", api.StepsDocumentFile)
}

// checkedClient is an HTTP client for a test whose exchanges with /v1 and
// /webhooks are checked against the OpenAPI document.
func checkedClient(t *testing.T) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 20 * time.Second, Transport: apitest.New(t).Transport(nil)}
}

// "triggerd version" prints the build's version and exits at once, without
// touching a data dir.
func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		cmd := exec.Command(binary, arg)
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "triggerd ") || !strings.Contains(string(out), "module:    github.com/triggerd/triggerd") {
			t.Fatalf("triggerd %s: %v %q", arg, err, out)
		}
		if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
			t.Fatalf("triggerd %s wrote %v", arg, entries)
		}
	}
}
