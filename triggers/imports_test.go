package triggers

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDependsOnNoProjectNATSOrHTTPPackage holds the package to its place in
// the design: kinds, envelope, mapping and subjects in pure Go, depending
// on nothing of the project and on no NATS or HTTP library, directly or
// through another package.
func TestDependsOnNoProjectNATSOrHTTPPackage(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const self = "github.com/triggerd/triggerd/triggers"
	forbidden := []string{
		"github.com/triggerd/triggerd/", // the rest of the project
		"github.com/nats-io/",
		"github.com/labstack/",
		"net/http",
		"github.com/redis/",
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != self {
		t.Fatalf("go list -deps printed %d packages, not ending with %s: the test checked nothing", len(deps), self)
	}
	for _, dep := range deps[:len(deps)-1] {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("package triggers depends on %s: it must depend on nothing of the project and on no NATS, HTTP or store library", dep)
			}
		}
	}
}
