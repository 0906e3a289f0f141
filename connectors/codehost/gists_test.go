package codehost_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// GitHub lists only public gists at GET /users/{u}/gists, even to their
// owner: the account's own secret gists come from GET /gists.
func TestListGistsForAUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	// run runs step id as the account of tok, whose login is login.
	run := func(tok, login, id, input string) map[string]any {
		t.Helper()
		env := h.env(tok)
		env.Account.Login = login
		out, err := h.runEnv(t.Context(), env, id, input)
		if err != nil {
			t.Fatalf("%s as %s: %v", id, login, err)
		}
		return out
	}
	ids := func(out map[string]any) []string {
		var got []string
		for _, g := range out["gists"].([]any) {
			got = append(got, g.(map[string]any)["id"].(string))
		}
		slices.Sort(got)
		return got
	}
	create := func(tok, login string, public bool) string {
		out := run(tok, login, "create_gist", fmt.Sprintf(`{"public":%v,"files":{"a.txt":{"content":"%s"}}}`, public, login))
		return out["id"].(string)
	}
	mySecret := create(token, "octocat", false)
	hubotSecret := create("hubot", "hubot", false)
	hubotPublic := create("hubot", "hubot", true)

	const own, users = fakecodehost.Route("GET /gists"), fakecodehost.Route("GET /users/{username}/gists")
	for _, username := range []string{"octocat", "OctoCat"} {
		h.fake.ResetLog()
		got := ids(run(token, "octocat", "list_gists_for_a_user", `{"username":"`+username+`"}`))
		want := []string{mySecret, fakecodehost.SeedGistID}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s as octocat: gists %v, want %v (the secret one too)", username, got, want)
		}
		if n, m := len(h.fake.RequestsTo(own)), len(h.fake.RequestsTo(users)); n != 1 || m != 0 {
			t.Errorf("%s as octocat: %d GET /gists and %d GET /users/{username}/gists, want 1 and 0", username, n, m)
		}
	}

	h.fake.ResetLog()
	if got := ids(run(token, "octocat", "list_gists_for_a_user", `{"username":"hubot"}`)); !slices.Equal(got, []string{hubotPublic}) {
		t.Errorf("hubot as octocat: gists %v, want only the public %s (not %s)", got, hubotPublic, hubotSecret)
	}
	if n, m := len(h.fake.RequestsTo(own)), len(h.fake.RequestsTo(users)); n != 0 || m != 1 {
		t.Errorf("hubot as octocat: %d GET /gists and %d GET /users/{username}/gists, want 0 and 1", n, m)
	}

	// An account whose login is unknown asks for the user's gists.
	h.fake.ResetLog()
	env := h.env(token)
	env.Account = connectors.AccountInfo{ID: env.Account.ID}
	if _, err := h.steps["codehost.list_gists_for_a_user"].Run(t.Context(), env, json.RawMessage(`{"username":"octocat"}`)); err != nil {
		t.Fatal(err)
	}
	if n := len(h.fake.RequestsTo(users)); n != 1 {
		t.Errorf("no login: %d GET /users/{username}/gists, want 1", n)
	}
}
