// Package buildinfo describes the running binary from the build
// information the Go toolchain embeds (runtime/debug.ReadBuildInfo), for the
// binaries' version commands.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Info is what a version command prints.
type Info struct {
	// Module is the main module's path and Version its version ("(devel)"
	// for a build from a work tree).
	Module  string `json:"module"`
	Version string `json:"version"`
	// Revision is the VCS commit, Time the commit's time and Modified
	// whether the tree had uncommitted changes; all empty when the build
	// recorded no VCS information (-buildvcs=false, or no git).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// Read returns the running binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown"}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo returns the Info of bi.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line a version command prints for name.
func (in Info) String(name string) string {
	rev := in.Revision
	switch {
	case rev == "":
		rev = "unknown (built without VCS information)"
	case in.Modified:
		rev += " (with uncommitted changes)"
	}
	when := in.Time
	if when == "" {
		when = "unknown"
	}
	return fmt.Sprintf("%s %s\nmodule:    %s\ncommit:    %s\ncommitted: %s\ngo:        %s\n", name, in.Version, in.Module, rev, when, in.Go)
}
