package triggers

import (
	"testing"
)

func TestEncodeToken(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty is the missing token", in: "", want: "~"},
		{name: "safe unchanged", in: "Hello_World-1", want: "Hello_World-1"},
		{name: "dot", in: "socket.io", want: "socket%2Eio"},
		{name: "wildcards", in: "*>", want: "%2A%3E"},
		{name: "white space", in: "a b\tc\n", want: "a%20b%09c%0A"},
		{name: "tilde", in: "~", want: "%7E"},
		{name: "percent", in: "100%", want: "100%25"},
		{name: "slash", in: "org/team", want: "org%2Fteam"},
		{name: "utf-8", in: "é", want: "%C3%A9"},
		{name: "invalid utf-8", in: "\xff", want: "%FF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeToken(tc.in)
			if got != tc.want {
				t.Errorf("EncodeToken(%q) = %q, want %q", tc.in, got, tc.want)
			}
			back, ok := DecodeToken(got)
			if !ok || back != tc.in {
				t.Errorf("DecodeToken(%q) = %q, %v; want %q", got, back, ok, tc.in)
			}
		})
	}
}

func TestDecodeTokenRejects(t *testing.T) {
	tests := []struct {
		name string
		tok  string
	}{
		{name: "empty", tok: ""},
		{name: "dot", tok: "a.b"},
		{name: "wildcard", tok: "*"},
		{name: "tilde inside", tok: "a~"},
		{name: "short escape", tok: "%2"},
		{name: "short escape at end", tok: "ab%"},
		{name: "bad hex", tok: "%zz"},
		{name: "lower-case hex", tok: "%2e"},
		{name: "escaped safe byte", tok: "%41"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := DecodeToken(tc.tok); ok {
				t.Errorf("DecodeToken(%q) = %q, true; want false", tc.tok, got)
			}
		})
	}
}

func TestSubject(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{name: "code host, lower-cased",
			ev:   Event{Connector: CodeHost, Kind: NewIssue, Repository: &Repository{Owner: "Codertocat", Name: "Hello-World"}},
			want: "triggers.codehost.new_issue.codertocat.hello-world"},
		{name: "dotted repository",
			ev:   Event{Connector: CodeHost, Kind: NewPush, Repository: &Repository{Owner: "socketio", Name: "socket.io"}},
			want: "triggers.codehost.new_push.socketio.socket%2Eio"},
		{name: "no repository: the account, no repo",
			ev:   Event{Connector: CodeHost, Kind: ProjectItemStatusChanged, Account: "Octo-Org"},
			want: "triggers.codehost.project_item_status_changed.octo-org.~"},
		{name: "nothing at all",
			ev:   Event{Connector: CodeHost, Kind: NewStar},
			want: "triggers.codehost.new_star.~.~"},
		{name: "deploy, team and project ids kept as they are",
			ev:   Event{Connector: Deploy, Kind: DeploymentCompleted, Account: "team_AbC", Resource: Resource{Project: "prj_XyZ"}},
			want: "triggers.deploy.deployment_completed.team_AbC.prj_XyZ"},
		{name: "deploy ignores the Git repository",
			ev: Event{Connector: Deploy, Kind: DeploymentStarted, Account: "usr1", Repository: &Repository{Owner: "o", Name: "r"},
				Resource: Resource{Project: "Qm.1"}},
			want: "triggers.deploy.deployment_started.usr1.Qm%2E1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ev.Subject(); got != tc.want {
				t.Errorf("Subject() = %q, want %q", got, tc.want)
			}
			checkSubject(t, tc.ev.Subject())
			if c, k, ok := ParseSubject(tc.ev.Subject()); c != tc.ev.Connector || k != tc.ev.Kind || !ok {
				t.Errorf("ParseSubject = %q, %q, %v; want %q, %q, true", c, k, ok, tc.ev.Connector, tc.ev.Kind)
			}
		})
	}
}

func TestRepositorySubject(t *testing.T) {
	if got, want := RepositorySubject(NewIssue, "Codertocat", "Hello.World"), "triggers.codehost.new_issue.codertocat.hello%2Eworld"; got != want {
		t.Errorf("RepositorySubject = %q, want %q", got, want)
	}
	if got, want := RepositorySubject("", "o", "r"), "triggers.codehost.*.o.r"; got != want {
		t.Errorf("RepositorySubject = %q, want %q", got, want)
	}
}

func TestParseSubjectRejects(t *testing.T) {
	for _, s := range []string{
		"", "triggers", "triggers.codehost", "deliveries.codehost.new_issue.a.b",
		"triggers.codehost.no_such_kind.a.b", "triggers.deploy.new_issue.a.b",
		"triggers.codehost.deployment_failed.a.b", "xtriggers.codehost.new_issue.a.b",
	} {
		if c, k, ok := ParseSubject(s); ok {
			t.Errorf("ParseSubject(%q) = %q, %q, true; want false", s, c, k)
		}
	}
}
