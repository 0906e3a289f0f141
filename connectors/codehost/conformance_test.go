package codehost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/connectors/connectortest"
	"github.com/triggerd/triggerd/internal/oascheck"
	"github.com/triggerd/triggerd/internal/specfetch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
)

// GitHub's REST description as @octokit/openapi publishes it (it is
// github/rest-api-description, built): api.github.com for every account,
// ghec for organisations on GitHub Enterprise Cloud. The version is
// pinned, so that a new release of the description changes the test only
// when this line does.
const (
	octokitOpenAPI  = "@octokit/openapi"
	octokitVersion  = "23.0.2"
	githubDotcom    = "generated/api.github.com.json"
	githubEnterpris = "generated/ghec.json"
)

// githubDescription fetches (or reads from the cache) and parses one of
// GitHub's descriptions. Without the registry the test is skipped loudly,
// and fails under CI=true; a download that does not match the registry's
// checksum always fails.
func githubDescription(t *testing.T, file string) *oascheck.Description {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	raw, err := (&specfetch.Fetcher{}).NPM(ctx, octokitOpenAPI, octokitVersion, file)
	if errors.Is(err, specfetch.ErrIntegrity) {
		t.Fatal(err)
	}
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("GitHub's REST description (%s@%s %s, from registry.npmjs.org)", octokitOpenAPI, octokitVersion, file), err)
	}
	d, err := oascheck.Parse(fmt.Sprintf("GitHub's REST description (%s@%s %s)", octokitOpenAPI, octokitVersion, file), raw)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// recordedEnv is h.env with every exchange recorded by rec.
func recordedEnv(h *harness, rec *oascheck.Recorder, tok string) connectors.Env {
	rec.Base = http.DefaultTransport
	return connectors.Env{
		HTTP: &http.Client{
			Transport:     h.tk.Wrap("acct-"+tok, connectortest.Bearer{Token: tok, Base: rec}),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Account: connectors.AccountInfo{ID: "acct-" + tok, Login: "octocat"},
	}
}

// provocation is one way the connector client makes the fake answer:
// steps run in order on a fresh fake; fails says the last one fails
// (which error each answer gives is TestSteps' and the fake's tests'
// concern; here only what the fake answers).
type provocation struct {
	name   string
	opts   fakecodehost.Options
	before func(t *testing.T, h *harness)
	steps  [][2]string
	fails  bool
}

// errorProvocations make the fake answer the errors the client meets.
func errorProvocations() []provocation {
	return []provocation{
		{name: "missing issue", steps: [][2]string{{"get_issue", `{` + hw + `,"issue_number":99}`}}, fails: true},
		{name: "existing branch", steps: [][2]string{{"create_branch", `{` + hw + `,"branch":"feature"}`}}, fails: true},
		{name: "existing repository", steps: [][2]string{{"create_repository", `{"name":"hello-world"}`}}, fails: true},
		{name: "internal outside Enterprise Cloud", steps: [][2]string{{"create_repository", `{"name":"inner","org":"octo-org","visibility":"internal"}`}},
			fails: true},
		{name: "internal on Enterprise Cloud", opts: fakecodehost.Options{EnterpriseOrgs: []string{"octo-org"}},
			steps: [][2]string{{"create_repository", `{"name":"inner","org":"octo-org","visibility":"internal"}`}}},
		{name: "stale merge head", steps: [][2]string{{"merge_pull_request", `{` + hw + `,"pull_number":4,"sha":"` + strings.Repeat("0", 40) + `"}`}},
			fails: true},
		{name: "merge twice", steps: [][2]string{{"merge_pull_request", `{` + hw + `,"pull_number":4}`}, {"merge_pull_request", `{` + hw + `,"pull_number":4}`}},
			fails: true},
		{name: "private repository", steps: [][2]string{{"get_issue", `{"owner":"monalisa","repo":"secret","issue_number":1}`}}, fails: true},
		{name: "spent budget", before: func(t *testing.T, h *harness) { h.fake.SetRemaining(token, fakecodehost.ResourceCore, 0) },
			steps: [][2]string{{"get_repository_info", `{` + hw + `}`}}, fails: true},
		{name: "secondary limit", before: func(t *testing.T, h *harness) {
			if err := h.fake.SecondaryLimitNext("GET /repos/{owner}/{repo}/issues/{issue_number}", 1, time.Second); err != nil {
				t.Fatal(err)
			}
		}, steps: [][2]string{{"get_issue", `{` + hw + `,"issue_number":1}`}}, fails: true},
	}
}

// TestConformsToGitHubsDescription holds every answer of the fake that
// the connector client can provoke, and every request of the client, to
// GitHub's own REST description: the steps (each case of TestSteps), the
// errors they meet, the webhook calls, deliveries, the polled reads and
// the reads of what an account reaches (with their Link pages).
//
// Rules where the description and GitHub differ:
//   - a renamed repository's requests are redirected to
//     /repositories/{id}/..., which GitHub serves and documents in prose
//     but not as paths; those exchanges are held to the
//     /repos/{owner}/{repo}/... operation they alias;
//   - visibility "internal" exists only for organisations on GitHub
//     Enterprise Cloud: requests carrying it are held to the Enterprise
//     Cloud description (ghec), everything else to api.github.com's;
//   - GitHub answers a spent or secondary rate limit with 403 (or 429)
//     on every endpoint, which the description lists for some
//     operations only: such answers are held to GitHub's rate-limit
//     documentation (a basic-error body; x-ratelimit-remaining 0, or a
//     documentation_url ending #secondary-rate-limits) instead;
//   - POST /graphql is GitHub's GraphQL API, which no OpenAPI describes;
//   - descriptionDefects lists what the description's schemas refuse
//     although its own text prescribes it.
func TestConformsToGitHubsDescription(t *testing.T) {
	dotcom := githubDescription(t, githubDotcom)
	enterprise := githubDescription(t, githubEnterpris)

	rec := &oascheck.Recorder{}
	provokeSteps(t, rec)
	provokeErrors(t, rec)
	provokeHooks(t, rec)
	provokePolls(t, rec)
	provokeIdentify(t, rec)
	provokeReach(t, rec)
	provokeOAuthUser(t, rec)

	var forDotcom, forEnterprise []oascheck.Exchange
	for _, ex := range rec.Exchanges() {
		if p := linkProblems(ex); len(p) > 0 {
			t.Errorf("%s %s: %s", ex.Request.Method, ex.Request.URL, strings.Join(p, "; "))
		}
		ex = unalias(ex)
		if ex.Request.URL.Path == "/graphql" {
			continue
		}
		if limit, err := rateLimitAnswer(ex); limit {
			if err != nil {
				t.Errorf("%s %s: rate limit answer %d: %v", ex.Request.Method, ex.Request.URL.Path, ex.Response.StatusCode, err)
			}
			continue
		}
		if visibilityInternal(ex.RequestBody) {
			forEnterprise = append(forEnterprise, ex)
			continue
		}
		forDotcom = append(forDotcom, ex)
	}
	if len(forEnterprise) == 0 {
		t.Error("no request carried visibility internal: the Enterprise Cloud rule checked nothing")
	}
	for _, c := range []struct {
		d   *oascheck.Description
		exs []oascheck.Exchange
	}{{dotcom, forDotcom}, {enterprise, forEnterprise}} {
		report, err := c.d.Check(c.exs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d exchanges, %d operations", len(report), len(report.Operations()))
		fails := report.Failures()
		for _, op := range report.Operations() {
			var left []string
			for _, f := range fails[op] {
				if !slices.Contains(descriptionDefects[op], f) {
					left = append(left, f)
				}
			}
			if len(left) > 0 {
				t.Errorf("%s does not conform:\n    %s", op, strings.Join(left, "\n    "))
			}
		}
	}
}

// provokeSteps runs every case of TestSteps, each on a fresh fake.
func provokeSteps(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	for _, tc := range stepCases() {
		h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
		env := recordedEnv(h, rec, token)
		for _, s := range append(tc.setup, [2]string{tc.id, tc.input}) {
			if _, err := h.runEnv(t.Context(), env, s[0], s[1]); err != nil {
				t.Fatalf("%s: %s %s: %v", tc.name, s[0], s[1], err)
			}
		}
	}
}

// provokeErrors runs errorProvocations.
func provokeErrors(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	for _, p := range errorProvocations() {
		h := newHarness(t, p.opts, codehost.ToolkitOptions{})
		if p.before != nil {
			p.before(t, h)
		}
		env := recordedEnv(h, rec, token)
		var err error
		for _, s := range p.steps {
			_, err = h.runEnv(t.Context(), env, s[0], s[1])
		}
		if (err != nil) != p.fails {
			t.Fatalf("%s: error %v, want one: %v", p.name, err, p.fails)
		}
	}
}

// provokeHooks manages a repository's and an organisation's webhooks,
// reads and redelivers their deliveries, and meets their errors.
func provokeHooks(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	ctx := t.Context()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	rc := newHookReceiver(t)
	hooks := codehost.Hooks{HTTP: recordedEnv(h, rec, token).HTTP, BaseURL: h.url}
	hubot := codehost.Hooks{HTTP: recordedEnv(h, rec, "hubot").HTTP, BaseURL: h.url}
	for _, target := range []codehost.HookTarget{repoTarget, {Org: "octo-org"}} {
		spec := codehost.HookSpec{URL: rc.url, Secret: "s", Events: []string{"issues"}, Active: true}
		hk, err := hooks.Create(ctx, target, spec)
		if err != nil {
			t.Fatalf("%s: Create: %v", target, err)
		}
		if _, err := hooks.Create(ctx, target, spec); !errors.Is(err, codehost.ErrHookExists) {
			t.Fatalf("%s: Create again: %v, want ErrHookExists", target, err)
		}
		if _, err := hubot.List(ctx, target); !errors.Is(err, codehost.ErrHookPermission) {
			t.Fatalf("%s: List as hubot: %v, want ErrHookPermission", target, err)
		}
		if _, err := hooks.List(ctx, target); err != nil {
			t.Fatalf("%s: List: %v", target, err)
		}
		if _, err := hooks.Get(ctx, target, hk.ID); err != nil {
			t.Fatalf("%s: Get: %v", target, err)
		}
		if _, err := hooks.Get(ctx, target, hk.ID+1000); !errors.Is(err, codehost.ErrHookNotFound) {
			t.Fatalf("%s: Get a missing hook: %v, want ErrHookNotFound", target, err)
		}
		spec.Events = []string{"issues", "pull_request"}
		if _, err := hooks.Update(ctx, target, hk.ID, spec); err != nil {
			t.Fatalf("%s: Update: %v", target, err)
		}
		waitDeliveries(t, h)
		ds, err := hooks.Deliveries(ctx, target, hk.ID, time.Time{})
		if err != nil || len(ds.Attempts) == 0 {
			t.Fatalf("%s: Deliveries: %+v %v", target, ds, err)
		}
		if err := hooks.Redeliver(ctx, target, hk.ID, ds.Attempts[0].ID); err != nil {
			t.Fatalf("%s: Redeliver: %v", target, err)
		}
		waitDeliveries(t, h)
		if err := hooks.Delete(ctx, target, hk.ID); err != nil {
			t.Fatalf("%s: Delete: %v", target, err)
		}
	}
}

// provokePolls reads gists and notifications, changed and unchanged.
func provokePolls(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	ctx := t.Context()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	hooks := codehost.Hooks{HTTP: recordedEnv(h, rec, token).HTTP, BaseURL: h.url}
	hubot := codehost.Hooks{HTTP: recordedEnv(h, rec, "hubot").HTTP, BaseURL: h.url}
	_, etag, _, err := hooks.ListGists(ctx, time.Time{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, notModified, err := hooks.ListGists(ctx, time.Time{}, etag); err != nil || !notModified {
		t.Fatalf("ListGists unchanged: %v %v", notModified, err)
	}
	h.mustRun(t, "create_issue", `{`+hw+`,"title":"Review please","body":"cc @hubot"}`)
	_, lm, _, _, err := hubot.Notifications(ctx, "", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, notModified, err := hubot.Notifications(ctx, lm, time.Time{}); err != nil || !notModified {
		t.Fatalf("Notifications unchanged: %v %v", notModified, err)
	}
	if _, _, _, _, err := hubot.Notifications(ctx, "", h.clock.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
}

// descriptionDefects are problems Check reports, per operation, where
// the description's schema refuses what its own text prescribes.
var descriptionDefects = map[string][]string{
	// "To delete a file, set the whole file to null" (the files
	// property's description); its schema allows objects only.
	"PATCH /gists/{gist_id}": {"request: $.files['hello_world.rb']: got null, want object"},
	// "use null to remove the current milestone": the schema is a
	// nullable oneOf of string and integer, and OpenAPI 3.0's nullable
	// does not reach into oneOf's alternatives.
	"PATCH /repos/{owner}/{repo}/issues/{issue_number}": {
		"request: $.milestone: got null, want integer",
		"request: $.milestone: got null, want string",
	},
}

// rateLimitAnswer reports whether ex's answer is a rate limit (403 or
// 429 with x-ratelimit-remaining 0, or a secondary limit's
// documentation_url) and, if so, whether its body is GitHub's
// basic-error.
func rateLimitAnswer(ex oascheck.Exchange) (bool, error) {
	if ex.Response.StatusCode != http.StatusForbidden && ex.Response.StatusCode != http.StatusTooManyRequests {
		return false, nil
	}
	var body struct {
		Message          *string `json:"message"`
		DocumentationURL *string `json:"documentation_url"`
	}
	err := json.Unmarshal(ex.ResponseBody, &body)
	secondary := err == nil && body.DocumentationURL != nil && strings.HasSuffix(*body.DocumentationURL, "#secondary-rate-limits")
	if ex.Response.Header.Get("X-Ratelimit-Remaining") != "0" && !secondary {
		return false, nil
	}
	if err != nil || body.Message == nil || body.DocumentationURL == nil {
		return true, fmt.Errorf("the body is not {message, documentation_url}: %s", ex.ResponseBody)
	}
	return true, nil
}

// provokeIdentify reads the signed-in user, as connecting an account
// does.
func provokeIdentify(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	h := newHarness(t, fakecodehost.Options{}, codehost.ToolkitOptions{})
	rec.Base = http.DefaultTransport
	p, err := codehost.New(codehost.Config{ClientID: "Iv1.conformance", ClientSecret: "secret", RedirectURL: "http://127.0.0.1/callback",
		APIBaseURL: h.url, HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := p.Identify(t.Context(), &oauth2.Token{AccessToken: token}); err != nil || id.Login != "octocat" {
		t.Fatalf("Identify: %+v %v", id, err)
	}
}

// provokeOAuthUser reads the signed-in user from the OAuth fake
// (sandbox/fakeoauth), as connecting an account does there: with the
// scopes triggerd asks for (GitHub's public profile) and with the user
// scope besides (its private profile), for a user with and without a
// name and public e-mail.
func provokeOAuthUser(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	for _, c := range []struct {
		user   fakeoauth.GitHubUser
		scopes []string
	}{
		{fakeoauth.GitHubUser{ID: 583231, Login: "octocat", Name: "The Octocat"}, requested},
		{fakeoauth.GitHubUser{ID: 42, Login: "hubot"}, requested},
		{fakeoauth.GitHubUser{ID: 7, Login: "monalisa", Name: "Mona Lisa", Email: "mona@example.com"}, append([]string{"user"}, requested...)},
	} {
		gh := fakeoauth.NewGitHub(t)
		gh.SetUser(c.user)
		gh.SetGrantedScopes(c.scopes...)
		tok := connectortest.ConnectPKCE(t, gh, gh.Provider(redirect), redirect, c.scopes...)
		cfg := gh.Config(redirect)
		rec.Base = http.DefaultTransport
		cfg.HTTPClient = &http.Client{Transport: rec}
		p, err := codehost.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if id, err := p.Identify(t.Context(), tok); err != nil || id.Login != c.user.Login {
			t.Fatalf("Identify %s: %+v %v", c.user.Login, id, err)
		}
	}
}

// provokeReach reads what an account reaches, as a trigger on all
// repositories and the new_repository poller do: its repositories
// (every page, several of them), its organisation memberships, its own
// newest repositories (changed and unchanged). GET /orgs/{org}/repos,
// which the fake serves for API Call steps and sandbox users but no
// connector call sends, is read as a client would, with each parameter.
func provokeReach(t *testing.T, rec *oascheck.Recorder) {
	t.Helper()
	ctx := t.Context()
	// Two a page, so that every list spans pages with Link headers.
	h := newHarness(t, fakecodehost.Options{Authenticate: logins, MaxPerPage: 2}, codehost.ToolkitOptions{})
	for _, in := range []string{`{"name":"tools","org":"octo-org"}`, `{"name":"infra","org":"octo-org","private":true}`,
		`{"name":"dotfiles"}`, `{"name":"notes","private":true}`} {
		h.mustRun(t, "create_repository", in)
	}
	if err := h.fake.SetCollaborator(fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo, "octocat", "push"); err != nil {
		t.Fatal(err)
	}
	for _, org := range []string{"acme", "globex"} {
		if err := h.fake.SetOrg(org, map[string]string{"octocat": fakecodehost.OrgMember}); err != nil {
			t.Fatal(err)
		}
	}
	env := recordedEnv(h, rec, token)
	hooks := codehost.Hooks{HTTP: env.HTTP, BaseURL: h.url}
	repos, err := hooks.Repositories(ctx)
	if err != nil || len(repos) < 6 {
		t.Fatalf("Repositories: %d, %v; want the 6 octocat reaches", len(repos), err)
	}
	if ms, err := hooks.OrgMemberships(ctx); err != nil || len(ms) != 3 {
		t.Fatalf("OrgMemberships: %+v, %v; want octo-org, acme and globex", ms, err)
	}
	_, etag, _, err := hooks.OwnRepositories(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, notModified, err := hooks.OwnRepositories(ctx, etag); err != nil || !notModified {
		t.Fatalf("OwnRepositories unchanged: %v %v", notModified, err)
	}
	// Each parameter the description gives these reads, as an API Call
	// step may send it, and the refusals it documents.
	since := h.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/orgs/" + fakecodehost.SeedOrg + "/repos", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=all", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=public", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=private", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=forks", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=sources", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?type=member", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?sort=full_name", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?sort=pushed&direction=asc", 200},
		{"/orgs/" + fakecodehost.SeedOrg + "/repos?sort=updated&per_page=1&page=2", 200},
		{"/user/repos?visibility=private", 200},
		{"/user/repos?type=owner", 200},
		{"/user/repos?type=member&sort=pushed&direction=desc", 200},
		{"/user/repos?since=" + since + "&before=" + h.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339), 200},
		{"/user/repos?per_page=1&page=3", 200},
		{"/user/repos?type=owner&affiliation=owner", 422},
		{"/user/repos?affiliation=owner,outside", 422},
		{"/user/memberships/orgs?state=pending", 200},
		{"/user/memberships/orgs?per_page=1&page=2", 200},
	} {
		resp, err := env.HTTP.Get(h.url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("GET %s: %d, want %d", c.path, resp.StatusCode, c.status)
		}
	}
}

// linkProblems holds a Link header to GitHub's pagination: comma-separated
// <URL>; rel="..." entries, rel one of prev, next, first and last (each
// once), every URL on the request's host and path with a page number, and
// next and last present unless on the last page.
func linkProblems(ex oascheck.Exchange) []string {
	h := ex.Response.Header.Get("Link")
	if h == "" {
		return nil
	}
	var out []string
	rels := map[string]int{}
	for part := range strings.SplitSeq(h, ",") {
		m := linkEntry.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			out = append(out, fmt.Sprintf("Link entry %q is not <URL>; rel=\"...\"", strings.TrimSpace(part)))
			continue
		}
		u, err := url.Parse(m[1])
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("Link URL %q: %v", m[1], err))
			continue
		case u.Host != ex.Request.URL.Host || u.Path != ex.Request.URL.Path:
			out = append(out, fmt.Sprintf("Link rel=%s goes to %s%s, not %s%s", m[2], u.Host, u.Path, ex.Request.URL.Host, ex.Request.URL.Path))
		}
		if n, err := strconv.Atoi(u.Query().Get("page")); err != nil || n < 1 {
			out = append(out, fmt.Sprintf("Link rel=%s has no page number: %s", m[2], m[1]))
		} else {
			rels[m[2]] = n
		}
		for k, vs := range ex.Request.URL.Query() {
			if k != "page" && k != "per_page" && !slices.Equal(u.Query()[k], vs) {
				out = append(out, fmt.Sprintf("Link rel=%s drops or changes the request's %s: %s", m[2], k, m[1]))
			}
		}
	}
	if _, next := rels["next"]; next != (rels["last"] != 0) {
		out = append(out, "Link has one of next and last without the other: "+h)
	}
	if _, prev := rels["prev"]; prev != (rels["first"] != 0) {
		out = append(out, "Link has one of prev and first without the other: "+h)
	}
	return out
}

// linkEntry is one entry of a Link header as GitHub writes it.
var linkEntry = regexp.MustCompile(`^<([^>]+)>; rel="(prev|next|first|last)"$`)

// repositoriesPath is the path GitHub redirects a renamed repository's
// requests to.
var repositoriesPath = regexp.MustCompile(`^/repositories/[0-9]+(/.*)?$`)

// unalias returns ex with a /repositories/{id}/... request path written
// as the /repos/{owner}/{repo}/... path it aliases.
func unalias(ex oascheck.Exchange) oascheck.Exchange {
	m := repositoriesPath.FindStringSubmatch(ex.Request.URL.EscapedPath())
	if m == nil {
		return ex
	}
	u := *ex.Request.URL
	u.RawPath = "/repos/" + fakecodehost.SeedOwner + "/" + fakecodehost.SeedRepo + m[1]
	u.Path, _ = url.PathUnescape(u.RawPath)
	ex.Request = ex.Request.Clone(ex.Request.Context())
	ex.Request.URL = &u
	return ex
}

// visibilityInternal reports whether a request body asks for visibility
// internal.
func visibilityInternal(body []byte) bool {
	var v struct {
		Visibility string `json:"visibility"`
	}
	return json.Unmarshal(body, &v) == nil && v.Visibility == "internal"
}
