package match

import (
	"reflect"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/triggers"
)

func TestParamsFor(t *testing.T) {
	cases := map[triggers.Kind][]string{
		triggers.NewIssue:                 {"repositories", "labels"},
		triggers.NewPullRequest:           {"repositories", "branches", "labels"},
		triggers.WorkflowRunCompleted:     {"repositories", "branches", "conclusions"},
		triggers.NewProjectCard:           {"repositories", "column_id"},
		triggers.NewPullRequestReview:     {"repositories", "review_states"},
		triggers.NewStar:                  {"repositories"},
		triggers.NewGist:                  nil,
		triggers.NewRepository:            {"organization"},
		triggers.ProjectItemStatusChanged: {"organization"},
		triggers.DeploymentFailed:         {"environments"},
		"no_such_kind":                    nil,
	}
	for k, want := range cases {
		if got := ParamsFor(k); !reflect.DeepEqual(got, want) {
			t.Errorf("ParamsFor(%s) = %v, want %v", k, got, want)
		}
	}
	// Every known kind is in the catalogue, and the result is a copy.
	for _, info := range triggers.Kinds() {
		if _, ok := kindParams[info.Kind]; !ok {
			t.Errorf("kind %s missing from the parameter catalogue", info.Kind)
		}
	}
	ps := ParamsFor(triggers.NewIssue)
	ps[0] = "mutated"
	if ParamsFor(triggers.NewIssue)[0] != "repositories" {
		t.Error("ParamsFor returned the catalogue's own slice")
	}
}

func TestValidateParams(t *testing.T) {
	cases := []struct {
		name string
		kind triggers.Kind
		p    Params
		err  string // substring; "" for valid
	}{
		{"empty", triggers.NewStar, Params{}, ""},
		{"full pr", triggers.NewPullRequest, Params{Repositories: []string{"octo-org/api", "Octo_Org/my.repo"},
			Branches: []string{"main", "release/*"}, Labels: []string{"bug"}}, ""},
		{"workflow", triggers.WorkflowJobCompleted, Params{Conclusions: []string{"Failure", "timed_out"}}, ""},
		{"review", triggers.NewPullRequestReview, Params{ReviewStates: []string{"approved"}}, ""},
		{"deploy", triggers.DeploymentCompleted, Params{Environments: []string{"production"}}, ""},
		{"card", triggers.NewProjectCard, Params{ColumnID: 42}, ""},
		{"unknown kind", "new_thing", Params{}, `unknown trigger kind "new_thing"`},
		{"labels on star", triggers.NewStar, Params{Labels: []string{"bug"}},
			"labels do not apply to new_star; they apply to new_issue, updated_issue, new_issue_label, new_pull_request, updated_pull_request"},
		{"column on issue", triggers.NewIssue, Params{ColumnID: 3}, "column_id does not apply to new_issue; it applies to new_project_card"},
		{"repos on gist", triggers.NewGist, Params{Repositories: []string{"a/b"}}, "repositories do not apply to new_gist; they apply to new_fork"},
		{"repos on deploy", triggers.DeploymentStarted, Params{Repositories: []string{"a/b"}}, "repositories do not apply to deployment_started"},
		{"branches on issue", triggers.NewIssue, Params{Branches: []string{"main"}}, "branches do not apply to new_issue"},
		{"environments on push", triggers.NewPush, Params{Environments: []string{"production"}}, "environments do not apply to new_push; they apply to deployment_started"},
		{"bare repo", triggers.NewIssue, Params{Repositories: []string{"api"}}, `repository "api" does not look like owner/repo`},
		{"three parts", triggers.NewIssue, Params{Repositories: []string{"a/b/c"}}, `repository "a/b/c" does not look like owner/repo`},
		{"url", triggers.NewIssue, Params{Repositories: []string{"https://github.com/a/b"}}, "does not look like owner/repo"},
		{"empty owner", triggers.NewIssue, Params{Repositories: []string{"/b"}}, "does not look like owner/repo"},
		{"dotdot", triggers.NewIssue, Params{Repositories: []string{"a/.."}}, "does not look like owner/repo"},
		{"ref branch", triggers.NewPush, Params{Branches: []string{"refs/heads/main"}}, `must be a bare branch name ("main")`},
		{"bad glob", triggers.NewPush, Params{Branches: []string{"release/["}}, `branch pattern "release/[" is malformed`},
		{"empty label", triggers.NewIssue, Params{Labels: []string{" "}}, "labels must not hold an empty value"},
		{"negative column", triggers.NewProjectCard, Params{ColumnID: -1}, "not a positive column id"},
		{"bad conclusion", triggers.WorkflowRunCompleted, Params{Conclusions: []string{"passed"}},
			`conclusions: "passed" is not one of success, failure, cancelled`},
		{"bad review state", triggers.NewPullRequestReview, Params{ReviewStates: []string{"dismissed"}},
			`review_states: "dismissed" is not one of approved, changes_requested, commented`},
		{"bad environment", triggers.DeploymentFailed, Params{Environments: []string{"prod"}},
			`environments: "prod" is not one of production, preview, staging, development`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateParams(tc.kind, tc.p)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("error %q does not contain %q", err, tc.err)
			}
		})
	}
}

func TestValidateParamsReportsEveryProblem(t *testing.T) {
	err := ValidateParams(triggers.NewStar, Params{Labels: []string{"x"}, Branches: []string{"main"}})
	if err == nil || !strings.Contains(err.Error(), "labels do not apply") || !strings.Contains(err.Error(), "branches do not apply") {
		t.Fatalf("error %v: want both labels and branches reported", err)
	}
}
