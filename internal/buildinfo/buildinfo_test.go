package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	in := FromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/triggerd/triggerd", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	s := in.String("triggerd")
	for _, want := range []string{"triggerd v1.2.3\n", "abc123 (with uncommitted changes)", "2026-12-01T00:00:00Z", "go1.26.8"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	bare := FromBuildInfo(&debug.BuildInfo{Main: debug.Module{Path: "m"}}).String("x")
	if !strings.Contains(bare, "x (devel)") || !strings.Contains(bare, "built without VCS information") || !strings.HasSuffix(bare, "\n") {
		t.Errorf("without VCS: %q", bare)
	}
	if got := Read(); got.Go == "" {
		t.Errorf("Read: %+v", got)
	}
}
