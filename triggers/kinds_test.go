package triggers

import (
	"slices"
	"testing"
)

func TestKinds(t *testing.T) {
	all := Kinds()
	if len(all) != 30 {
		t.Errorf("%d kinds, want 26 code-hosting + 4 deployment", len(all))
	}
	for _, k := range all {
		if !k.Kind.Valid() || k.Kind.Connector() != k.Connector || !k.Connector.Valid() {
			t.Errorf("kind %+v: inconsistent", k)
		}
	}
	if Kind("new_thing").Valid() || Kind("new_thing").Connector() != "" {
		t.Errorf("unknown kind reported valid")
	}
	// Only a kind that may never fire carries a note: the classic project
	// card, since Projects (classic) left github.com.
	for _, k := range all {
		if got := k.Note != ""; got != (k.Kind == NewProjectCard) {
			t.Errorf("kind %s: note %q", k.Kind, k.Note)
		}
	}
	// The catalogue is the caller's to modify, Sources included.
	all[0].Sources[0] = "changed"
	if got := Kinds()[0].Sources[0]; got == "changed" {
		t.Errorf("modifying Kinds() changed the catalogue")
	}
}

func TestHookEvents(t *testing.T) {
	cases := map[Kind][]string{
		NewIssue:                 {"issues"},
		NewMention:               {"commit_comment", "discussion", "discussion_comment", "issue_comment", "issues", "pull_request", "pull_request_review", "pull_request_review_comment"},
		NewTag:                   {"create"},
		NewCommit:                {"push"},
		ProjectItemStatusChanged: {"projects_v2_item"},
		NewGist:                  nil,
		DeploymentCompleted:      {"deployment.ready", "deployment.succeeded"},
		"nope":                   nil,
	}
	for k, want := range cases {
		if got := k.HookEvents(); !slices.Equal(got, want) {
			t.Errorf("%s.HookEvents() = %v, want %v", k, got, want)
		}
	}
}
