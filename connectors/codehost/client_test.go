package codehost_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

func TestPagination(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	for i := range 226 {
		h.mustRun(t, "create_issue", fmt.Sprintf(`{"owner":"octocat","repo":"hello-world","title":"bulk %d"}`, i))
	}
	route := fakecodehost.Route("GET /repos/{owner}/{repo}/issues")
	for _, tc := range []struct {
		max, count, pages int
		more              bool
	}{
		{0, 30, 1, true}, // the default max_items
		{100, 100, 1, true},
		{150, 150, 2, true},
		{1000, 230, 3, false},
	} {
		h.fake.ResetLog()
		in := `{"owner":"octocat","repo":"hello-world","state":"all"`
		if tc.max > 0 {
			in += fmt.Sprintf(`,"max_items":%d`, tc.max)
		}
		out := h.mustRun(t, "list_issues", in+`}`)
		issues, _ := out["issues"].([]any)
		if out["count"] != float64(tc.count) || len(issues) != tc.count || out["has_more"] != tc.more {
			t.Errorf("max_items %d: count %v (%d issues), has_more %v", tc.max, out["count"], len(issues), out["has_more"])
		}
		reqs := h.fake.RequestsTo(route)
		if len(reqs) != tc.pages {
			t.Errorf("max_items %d: %d pages fetched, want %d", tc.max, len(reqs), tc.pages)
		}
		for i, r := range reqs {
			if r.Query.Get("per_page") != "100" || (i > 0 && r.Query.Get("page") != fmt.Sprint(i+1)) {
				t.Errorf("page %d query %v", i+1, r.Query)
			}
		}
		if len(issues) > 0 {
			last := issues[len(issues)-1].(map[string]any)
			if want := float64(231 - tc.count); last["number"] != want {
				t.Errorf("max_items %d: last issue #%v, want #%v (newest first, no gaps)", tc.max, last["number"], want)
			}
		}
	}
}

// A server that answers GitHub-like pages whose Link points elsewhere.
func TestPaginationRefusesAnotherHost(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", `<https://evil.example/repos/o/r/releases?page=2>; rel="next", <https://evil.example/repos/o/r/releases?page=9>; rel="last"`)
		items := make([]string, 100)
		for i := range items {
			items[i] = fmt.Sprintf(`{"id":%d,"tag_name":"v%d"}`, i, i)
		}
		fmt.Fprintf(w, "[%s]", strings.Join(items, ","))
	}))
	defer srv.Close()
	tk := codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: srv.URL})
	step := stepOf(t, tk.Steps, "codehost.list_releases")
	env := connectors.Env{HTTP: &http.Client{Transport: tk.Wrap("a", http.DefaultTransport)}}
	if _, err := step.Run(t.Context(), env, []byte(`{"owner":"o","repo":"r","max_items":150}`)); errCode(err) != connectors.CodeUpstream ||
		!strings.Contains(err.Error(), "not on 127.0.0.1") {
		t.Errorf("a next link to another host: %v", err)
	}
	// Within one page there is nothing to follow.
	if out, err := step.Run(t.Context(), env, []byte(`{"owner":"o","repo":"r","max_items":100}`)); err != nil {
		t.Errorf("one page: %v", err)
	} else if fmt.Sprint(out) == "" {
		t.Error("no output")
	}
}

func TestAPIBaseURLWithPath(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath())
		fmt.Fprint(w, `{"name":"feature/x","protected":false,"commit":{"sha":"abc"}}`)
	}))
	defer srv.Close()
	tk := codehost.NewToolkit(codehost.ToolkitOptions{APIBaseURL: srv.URL + "/api/v3/"})
	env := connectors.Env{HTTP: &http.Client{Transport: tk.Wrap("a", http.DefaultTransport)}}
	if _, err := stepOf(t, tk.Steps, "codehost.get_branch").Run(t.Context(), env, []byte(`{"owner":"o","repo":"r","branch":"feature/x"}`)); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "/api/v3/repos/o/r/branches/feature%2Fx" {
		t.Errorf("paths %v", got)
	}
}
