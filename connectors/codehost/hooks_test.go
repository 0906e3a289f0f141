package codehost_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
)

// logins maps test tokens to the fake's seeded users.
func logins(token string) (string, bool) {
	switch token {
	case "hubot", "monalisa":
		return token, true
	case "":
		return "", false
	}
	return "octocat", true
}

func hooksAs(h *harness, tok string) codehost.Hooks {
	return codehost.Hooks{HTTP: h.env(tok).HTTP, BaseURL: h.url}
}

// hookReceiver records the webhook deliveries it gets.
type hookReceiver struct {
	url string
	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, delivery{r.Header.Clone(), b})
		rc.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hooks/codehost"
	return rc
}

func (rc *hookReceiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// checkSignature verifies X-Hub-Signature-256 as a receiver would.
func checkSignature(t *testing.T, secret string, d delivery) {
	t.Helper()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(d.body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if got := d.header.Get("X-Hub-Signature-256"); !hmac.Equal([]byte(got), []byte(want)) {
		t.Errorf("X-Hub-Signature-256 %q, want %q", got, want)
	}
}

func waitDeliveries(t *testing.T, h *harness) {
	t.Helper()
	if err := h.fake.WaitDeliveries(t.Context()); err != nil {
		t.Fatal(err)
	}
}

var repoTarget = codehost.HookTarget{Owner: fakecodehost.SeedOwner, Repo: fakecodehost.SeedRepo}

func TestHooksLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	rc := newHookReceiver(t)
	hooks := hooksAs(h, token)
	ctx := t.Context()
	const secret = "wh-s3cr3t"

	created, err := hooks.Create(ctx, repoTarget, codehost.HookSpec{URL: rc.url, Secret: secret, Events: []string{"issues", "issue_comment"}, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if created.ID == 0 || !created.Active || fmt.Sprint(created.Events) != "[issues issue_comment]" || created.URL != rc.url ||
		created.ContentType != "json" || created.LastResponse.Code != nil || created.LastResponse.Status != "unused" || created.CreatedAt.IsZero() {
		t.Errorf("created %+v", created)
	}
	if fh := h.fake.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(fh) != 1 || fh[0].Secret != secret || fh[0].InsecureSSL != "0" {
		t.Errorf("the fake's hook: %+v", fh)
	}

	// GitHub pings the new hook; the ping verifies with the secret.
	waitDeliveries(t, h)
	got := rc.deliveries()
	if len(got) != 1 || got[0].header.Get("X-GitHub-Event") != "ping" || got[0].header.Get("X-GitHub-Hook-ID") != fmt.Sprint(created.ID) {
		t.Fatalf("ping: %+v", got)
	}
	checkSignature(t, secret, got[0])

	// Any payload through Deliver, and the fake's own issue events.
	ids, err := h.fake.Deliver(ctx, fakecodehost.SeedOwner, fakecodehost.SeedRepo, "issue_comment", []byte(`{"action":"deleted"}`))
	if err != nil || len(ids) != 1 {
		t.Fatalf("Deliver: %v %v", ids, err)
	}
	h.mustRun(t, "create_issue", `{"owner":"octocat","repo":"hello-world","title":"Webhooked"}`)
	waitDeliveries(t, h)
	got = rc.deliveries()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want 3", len(got))
	}
	var opened bool
	for _, d := range got[1:] {
		checkSignature(t, secret, d)
		var p struct {
			Action string `json:"action"`
			Issue  struct {
				Title string `json:"title"`
			} `json:"issue"`
		}
		_ = json.Unmarshal(d.body, &p)
		switch ev := d.header.Get("X-GitHub-Event"); {
		case ev == "issue_comment" && d.header.Get("X-GitHub-Delivery") == ids[0]:
			if string(d.body) != `{"action":"deleted"}` {
				t.Errorf("Deliver's payload: %s", d.body)
			}
		case ev == "issues" && p.Action == "opened" && p.Issue.Title == "Webhooked":
			opened = true
		default:
			t.Errorf("unexpected delivery %s: %s", ev, d.body)
		}
	}
	if !opened {
		t.Error("no issues.opened delivery")
	}

	got1, err := hooks.Get(ctx, repoTarget, created.ID)
	if err != nil || got1.LastResponse.Code == nil || *got1.LastResponse.Code != http.StatusAccepted || got1.LastResponse.Status != "active" {
		t.Errorf("Get after deliveries: %+v %v", got1, err)
	}

	// Drift: switched off upstream, repaired by Update.
	h.fake.SetHookActive(created.ID, false)
	list, err := hooks.List(ctx, repoTarget)
	if err != nil || len(list) != 1 || list[0].Active {
		t.Fatalf("List after the hook was switched off: %+v %v", list, err)
	}
	upd, err := hooks.Update(ctx, repoTarget, created.ID, codehost.HookSpec{URL: rc.url, Secret: "rotated", Events: []string{"push"}, Active: true})
	if err != nil || !upd.Active || fmt.Sprint(upd.Events) != "[push]" {
		t.Fatalf("Update: %+v %v", upd, err)
	}
	if fh := h.fake.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); fh[0].Secret != "rotated" || !fh[0].Active {
		t.Errorf("after Update: %+v", fh[0])
	}

	// Drift: deleted upstream.
	h.fake.DeleteHook(created.ID)
	if _, err := hooks.Get(ctx, repoTarget, created.ID); !errors.Is(err, codehost.ErrHookNotFound) {
		t.Errorf("Get a deleted hook: %v", err)
	}
	if _, err := hooks.Update(ctx, repoTarget, created.ID, codehost.HookSpec{URL: rc.url, Active: true}); !errors.Is(err, codehost.ErrHookNotFound) {
		t.Errorf("Update a deleted hook: %v", err)
	}
	if err := hooks.Delete(ctx, repoTarget, created.ID); err != nil {
		t.Errorf("Delete a deleted hook: %v", err)
	}
	again, err := hooks.Create(ctx, repoTarget, codehost.HookSpec{URL: rc.url, Secret: secret, Events: []string{"issues"}, Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := hooks.Delete(ctx, repoTarget, again.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := hooks.List(ctx, repoTarget); err != nil || len(list) != 0 {
		t.Errorf("List after Delete: %+v %v", list, err)
	}
}

// List walks the Link pages to the end (the fake pages by two here).
func TestHooksListPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins, MaxPerPage: 2}, codehost.ToolkitOptions{})
	hooks := hooksAs(h, token)
	org := codehost.HookTarget{Org: fakecodehost.SeedOrg}
	var want []int64
	for i := range 5 {
		hk, err := hooks.Create(t.Context(), repoTarget, codehost.HookSpec{URL: fmt.Sprintf("https://hooks.example/%d", i), Active: false})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, hk.ID)
		if i < 3 {
			if _, err := hooks.Create(t.Context(), org, codehost.HookSpec{URL: fmt.Sprintf("https://hooks.example/org/%d", i), Events: []string{"*"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.fake.ResetLog()
	list, err := hooks.List(t.Context(), repoTarget)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, hk := range list {
		ids = append(ids, hk.ID)
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) || list[4].URL != "https://hooks.example/4" || fmt.Sprint(list[0].Events) != "[push]" {
		t.Errorf("List: %v, want %v", ids, want)
	}
	reqs := h.fake.RequestsTo("GET /repos/{owner}/{repo}/hooks")
	if len(reqs) != 3 || reqs[0].Query.Get("per_page") != "100" || reqs[2].Query.Get("page") != "3" {
		t.Errorf("%d requests: %+v", len(reqs), reqs)
	}
	orgList, err := hooks.List(t.Context(), org)
	if err != nil || len(orgList) != 3 || len(h.fake.RequestsTo("GET /orgs/{org}/hooks")) != 2 || fmt.Sprint(orgList[2].Events) != "[*]" {
		t.Errorf("org List: %+v %v", orgList, err)
	}
}

func TestHooksErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fakecodehost.Options{Authenticate: logins}, codehost.ToolkitOptions{})
	if err := h.fake.SetOrg(fakecodehost.SeedOrg, map[string]string{"hubot": fakecodehost.OrgMember}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	hooks, hubot := hooksAs(h, token), hooksAs(h, "hubot")
	const secret = "do-not-leak"
	spec := codehost.HookSpec{URL: "https://hooks.example/a", Secret: secret, Active: true}

	// hubot pushes to octocat/hello-world and is a member of octo-org:
	// neither is enough.
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"list repo", func() error { _, err := hubot.List(ctx, repoTarget); return err }()},
		{"create repo", func() error { _, err := hubot.Create(ctx, repoTarget, spec); return err }()},
		{"list org", func() error { _, err := hubot.List(ctx, codehost.HookTarget{Org: fakecodehost.SeedOrg}); return err }()},
		{"create org", func() error {
			_, err := hubot.Create(ctx, codehost.HookTarget{Org: fakecodehost.SeedOrg}, spec)
			return err
		}()},
		{"unknown repo", func() error {
			_, err := hooks.List(ctx, codehost.HookTarget{Owner: "octocat", Repo: "nope"})
			return err
		}()},
	} {
		var ce *connectors.Error
		if !errors.Is(tc.err, codehost.ErrHookPermission) || !errors.As(tc.err, &ce) || ce.Status != 404 ||
			!strings.Contains(tc.err.Error(), "admin rights") || !strings.Contains(tc.err.Error(), "admin:repo_hook") ||
			!strings.Contains(tc.err.Error(), "admin:org_hook") || strings.Contains(tc.err.Error(), secret) {
			t.Errorf("%s: %v", tc.name, tc.err)
		}
	}

	if _, err := hooks.Create(ctx, repoTarget, spec); err != nil {
		t.Fatal(err)
	}
	_, err := hooks.Create(ctx, repoTarget, spec)
	var ce *connectors.Error
	if !errors.Is(err, codehost.ErrHookExists) || errors.Is(err, codehost.ErrHookLimit) || !errors.As(err, &ce) || ce.Status != 422 ||
		strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "Hook already exists") {
		t.Errorf("duplicate: %v", err)
	}
	for i := 1; i < fakecodehost.MaxHooksPerEvent; i++ {
		if _, err := hooks.Create(ctx, repoTarget, codehost.HookSpec{URL: fmt.Sprintf("https://hooks.example/%d", i)}); err != nil {
			t.Fatalf("hook %d: %v", i, err)
		}
	}
	_, err = hooks.Create(ctx, repoTarget, codehost.HookSpec{URL: "https://hooks.example/over", Secret: secret})
	if !errors.Is(err, codehost.ErrHookLimit) || errors.Is(err, codehost.ErrHookExists) || strings.Contains(err.Error(), secret) {
		t.Errorf("limit: %v", err)
	}

	for _, tc := range []struct {
		name string
		t    codehost.HookTarget
		spec codehost.HookSpec
	}{
		{"both", codehost.HookTarget{Org: "o", Owner: "o", Repo: "r"}, spec},
		{"neither", codehost.HookTarget{}, spec},
		{"bad name", codehost.HookTarget{Owner: "o", Repo: "r/x"}, spec},
		{"bad url", repoTarget, codehost.HookSpec{URL: "not a url"}},
	} {
		h.fake.ResetLog()
		_, err := hooks.Create(ctx, tc.t, tc.spec)
		if errCode(err) != connectors.CodeValidation || h.fake.RequestCount() != 0 {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if _, err := (codehost.Hooks{BaseURL: h.url}).List(ctx, repoTarget); errCode(err) != connectors.CodeValidation {
		t.Errorf("no HTTP client: %v", err)
	}
}

// A 403 that is not a rate limit is a permission error, with and without
// the policy in between; a rate limit stays one.
func TestHooks403(t *testing.T) {
	t.Parallel()
	status, body := http.StatusForbidden, `{"message":"Must have admin rights to Repository. echo do-not-leak"}`
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if status == http.StatusUnprocessableEntity {
			w.Header().Set("X-RateLimit-Remaining", "10")
		} else if strings.Contains(body, "rate limit") {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "1")
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	p, err := codehost.NewPolicy(codehost.ToolkitOptions{APIBaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	plain := codehost.Hooks{HTTP: http.DefaultClient, BaseURL: srv.URL}
	wrapped := codehost.Hooks{HTTP: &http.Client{Transport: p.Wrap("a", http.DefaultTransport)}, BaseURL: srv.URL}
	for name, hooks := range map[string]codehost.Hooks{"plain": plain, "policy": wrapped} {
		if _, err := hooks.Create(t.Context(), repoTarget, codehost.HookSpec{URL: "https://x.example/", Secret: "do-not-leak"}); !errors.Is(err, codehost.ErrHookPermission) ||
			strings.Contains(err.Error(), "do-not-leak") {
			t.Errorf("%s: 403: %v", name, err)
		}
		if err := hooks.Delete(t.Context(), codehost.HookTarget{Org: "o"}, 1); !errors.Is(err, codehost.ErrHookPermission) {
			t.Errorf("%s: 403 on delete: %v", name, err)
		}
	}
	mu.Lock()
	status, body = http.StatusForbidden, `{"message":"API rate limit exceeded for user octocat."}`
	mu.Unlock()
	_, err = plain.List(t.Context(), repoTarget)
	if errors.Is(err, codehost.ErrHookPermission) || errCode(err) != connectors.CodeRateLimited {
		t.Errorf("rate limit: %v", err)
	}
	if wait, ok := codehost.RateLimited(fmt.Errorf("registering: %w", err)); !ok || wait < time.Second {
		t.Errorf("RateLimited(%v) = %s, %v; want a wait of a second or more", err, wait, ok)
	}
	if _, ok := codehost.RateLimited(codehost.ErrHookPermission); ok {
		t.Error("a permission refusal is taken for a rate limit")
	}
	// GitHub never echoes the secret, but if it did, errors would not.
	mu.Lock()
	status, body = http.StatusUnprocessableEntity, `{"message":"Validation Failed","errors":[{"resource":"Hook","code":"custom","message":"secret do-not-leak is weak"}]}`
	mu.Unlock()
	_, err = plain.Update(t.Context(), repoTarget, 1, codehost.HookSpec{URL: "https://x.example/", Secret: "do-not-leak"})
	if err == nil || strings.Contains(err.Error(), "do-not-leak") || errCode(err) != connectors.CodeValidation {
		t.Errorf("a 422 echoing the secret: %v", err)
	}
}
