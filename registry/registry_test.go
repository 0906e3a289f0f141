package registry_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

const helloWorld = fakecodehost.SeedOwner + "/" + fakecodehost.SeedRepo

func TestCreateTriggerRegistersOneHook(t *testing.T) {
	h := newHarness(t)
	// GitHub delivers as soon as a hook exists: the dispatchers must
	// already know the trigger by then.
	toldBeforeHook := -1
	before := func() { toldBeforeHook = h.notes.total() }
	h.faults.beforeCreate.Store(&before)
	tr := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.faults.beforeCreate.Store(nil)
	if toldBeforeHook != 1 {
		t.Errorf("%d changes broadcast when the hook was created, want the new trigger's 1", toldBeforeHook)
	}

	if tr.Status != store.TriggerActive || !tr.Enabled || tr.AccountID != h.octo.ID || tr.AgentID != h.agent.ID {
		t.Errorf("trigger = %+v, want active, enabled, of the account and agent", tr)
	}
	if got := h.notes.count(tr.ID); got != 1 {
		t.Errorf("%d changes broadcast for the new trigger, want 1", got)
	}
	up := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	rec := h.record(h.octo, store.HookRepository, helloWorld)
	h.checkHook(up, rec, triggers.NewIssue.HookEvents())
	if recs := h.records(); len(recs) != 1 {
		t.Errorf("%d hook records, want 1: %+v", len(recs), recs)
	}
	hooks, err := h.reg.HooksOf(h.ctx, tr)
	if err != nil || len(hooks) != 1 || hooks[0].ID != rec.ID {
		t.Errorf("HooksOf = %+v, %v; want the record %s", hooks, err, rec.ID)
	}

	// GitHub pings a new hook: signed with the secret ingest verifies.
	if err := h.gh.WaitDeliveries(h.ctx); err != nil {
		t.Fatal(err)
	}
	_, secrets, _ := h.hookSecrets("codehost", rec.ID)
	secret := secrets[0]
	var pinged bool
	for _, d := range h.gh.Deliveries() {
		if d.HookID != up.ID || d.Event != "ping" {
			continue
		}
		pinged = true
		if d.URL != h.reg.HookURL(rec) {
			t.Errorf("ping went to %s, want %s", d.URL, h.reg.HookURL(rec))
		}
		if got, want := d.Header.Get("X-Hub-Signature-256"), fakecodehost.Sign(secret, d.Body); got != want {
			t.Errorf("ping signature %q, want %q (the hook's secret)", got, want)
		}
	}
	if !pinged {
		t.Error("the new hook was not pinged")
	}
}

func TestSecondTriggerWidensTheSameHook(t *testing.T) {
	h := newHarness(t)
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	first := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	firstRec := h.record(h.octo, store.HookRepository, helloWorld)

	// Another kind, the repository spelt differently.
	h.mustCreate(triggers.NewPush, h.octo, repos("Octocat/Hello-World"))
	up := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	rec := h.record(h.octo, store.HookRepository, helloWorld)
	if up.ID != first.ID || rec.ID != firstRec.ID {
		t.Errorf("hook %d (record %s) replaced by %d (%s); want it widened", first.ID, firstRec.ID, up.ID, rec.ID)
	}
	if up.Secret != first.Secret {
		t.Error("widening the hook changed its secret")
	}
	h.checkHook(up, rec, eventsOf(triggers.NewIssue, triggers.NewPush))
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 1 {
		t.Errorf("%d hooks created upstream, want 1", n)
	}

	// A third trigger of a kind already covered changes nothing upstream.
	h.mustCreate(triggers.UpdatedIssue, h.octo, repos(helloWorld))
	up = h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	h.checkHook(up, h.record(h.octo, store.HookRepository, helloWorld), eventsOf(triggers.NewIssue, triggers.NewPush))
}

func TestTriggersOnTwoRepositoriesMakeTwoHooks(t *testing.T) {
	h := newHarness(t)
	h.createRepo("octocat", "second")
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.mustCreate(triggers.NewStar, h.octo, repos("octocat/second"))

	a, b := h.onlyHook("octocat", "hello-world"), h.onlyHook("octocat", "second")
	ra, rb := h.record(h.octo, store.HookRepository, helloWorld), h.record(h.octo, store.HookRepository, "octocat/second")
	h.checkHook(a, ra, triggers.NewIssue.HookEvents())
	h.checkHook(b, rb, triggers.NewStar.HookEvents())
	if ra.ID == rb.ID || a.Secret == b.Secret || a.URL == b.URL {
		t.Errorf("the two hooks share an id, secret or URL: %+v %+v", a, b)
	}

	// One trigger on both repositories reuses both hooks.
	h.mustCreate(triggers.NewFork, h.octo, repos(helloWorld, "octocat/second", "OCTOCAT/second"))
	h.checkHook(h.onlyHook("octocat", "hello-world"), h.record(h.octo, store.HookRepository, helloWorld),
		eventsOf(triggers.NewIssue, triggers.NewFork))
	h.checkHook(h.onlyHook("octocat", "second"), h.record(h.octo, store.HookRepository, "octocat/second"),
		eventsOf(triggers.NewStar, triggers.NewFork))
	if recs := h.records(); len(recs) != 2 {
		t.Errorf("%d hook records, want 2", len(recs))
	}
}

func TestDeletingTriggersNarrowsThenRemovesTheHook(t *testing.T) {
	h := newHarness(t)
	issues := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	push := h.mustCreate(triggers.NewPush, h.octo, repos(helloWorld))
	id := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo).ID

	h.mustDelete(push)
	up := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	if up.ID != id {
		t.Errorf("narrowing replaced hook %d by %d", id, up.ID)
	}
	h.checkHook(up, h.record(h.octo, store.HookRepository, helloWorld), triggers.NewIssue.HookEvents())
	if h.notes.count(push.ID) != 2 {
		t.Errorf("%d changes broadcast for the created then deleted trigger, want 2", h.notes.count(push.ID))
	}

	h.mustDelete(issues)
	if hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(hs) != 0 {
		t.Errorf("hooks left upstream after the last trigger went: %+v", hs)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records left: %+v", recs)
	}
	if _, _, err := h.hookSecrets("codehost", "h_gone"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("ReadHookSecrets of an unknown hook: %v, want ErrNotFound", err)
	}
	if err := h.reg.DeleteTrigger(h.ctx, tenant, issues.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("deleting a deleted trigger: %v, want ErrNotFound", err)
	}
	if _, err := h.reg.GetTrigger(h.ctx, tenant, issues.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("GetTrigger of a deleted trigger: %v, want ErrNotFound", err)
	}
}

func TestExistingHookWithOurURLIsAdopted(t *testing.T) {
	h := newHarness(t)
	// A process registered the hook upstream and died before recording
	// GitHub's id: the record exists without ExternalID, and upstream a
	// hook has its URL (here disabled, with other events and secret).
	key := store.HookKey{TenantID: tenant, AccountID: h.octo.ID, Connector: "codehost", Scope: store.HookRepository, Target: helloWorld}
	rec, err := h.reg.NewHookRecord(h.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	tgt := codehost.HookTarget{Owner: fakecodehost.SeedOwner, Repo: fakecodehost.SeedRepo}
	pre, err := h.hooksAs("octocat").Create(h.ctx, tgt, codehost.HookSpec{
		URL: h.reg.HookURL(rec), Secret: "stale", Events: []string{"push"}, Active: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's hook on the repository is left alone.
	other, err := h.hooksAs("octocat").Create(h.ctx, tgt, codehost.HookSpec{URL: "https://ci.example.com/hook", Events: []string{"push"}, Active: true})
	if err != nil {
		t.Fatal(err)
	}

	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	if len(hs) != 2 {
		t.Fatalf("%d hooks upstream, want ours adopted and the other one: %+v", len(hs), hs)
	}
	var ours fakecodehost.Hook
	for _, up := range hs {
		switch up.ID {
		case pre.ID:
			ours = up
		case other.ID:
			if up.URL != "https://ci.example.com/hook" || !slices.Equal(up.Events, []string{"push"}) {
				t.Errorf("the other hook was changed: %+v", up)
			}
		default:
			t.Errorf("a duplicate hook was created: %+v", up)
		}
	}
	h.checkHook(ours, h.record(h.octo, store.HookRepository, helloWorld), triggers.NewIssue.HookEvents())
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 2 {
		t.Errorf("%d hook creations upstream, want only the test's 2", n)
	}
}

func TestAccountWithoutAdminRightsKeepsNothing(t *testing.T) {
	h := newHarness(t)
	// hubot may push to octocat/hello-world but not administer it.
	hubot := h.account("hubot", "codehost")
	_, err := h.create(triggers.NewIssue, hubot, repos(helloWorld))
	if !errors.Is(err, registry.ErrHookRights) {
		t.Fatalf("CreateTrigger without admin rights: %v, want ErrHookRights", err)
	}
	for _, want := range []string{"repository " + helloWorld, "admin:repo_hook", hubot.ID} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if ts := h.triggers(); len(ts) != 0 {
		t.Errorf("triggers kept: %+v", ts)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records kept: %+v", recs)
	}
	if hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(hs) != 0 {
		t.Errorf("hooks upstream: %+v", hs)
	}
	// Told when it was stored (before its hook), and again when it was
	// deleted, so that no dispatcher keeps it.
	if n := h.notes.total(); n != 2 {
		t.Errorf("%d changes broadcast for a trigger never kept, want 2 (stored, deleted)", n)
	}
}

func TestPartlyRegisteredTriggerIsUndone(t *testing.T) {
	h := newHarness(t)
	issues := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.createRepo("octocat", "second")
	// octocat administers its repositories but not monalisa's: the hooks
	// on its own are widened or made, then undone.
	_, err := h.create(triggers.NewPush, h.octo, repos(helloWorld, "octocat/second", "monalisa/octo-app"))
	if !errors.Is(err, registry.ErrHookRights) || !strings.Contains(err.Error(), "1 of 3 webhooks could not be registered") ||
		!strings.Contains(err.Error(), "repository monalisa/octo-app: ") {
		t.Fatalf("CreateTrigger: %v, want ErrHookRights counting 1 failure of 3 and naming monalisa/octo-app", err)
	}
	if ts := h.triggers(); len(ts) != 1 || ts[0].ID != issues.ID {
		t.Errorf("triggers = %+v, want only the first", ts)
	}
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld),
		triggers.NewIssue.HookEvents())
	if hs := h.gh.Hooks("octocat", "second"); len(hs) != 0 {
		t.Errorf("hooks left on octocat/second: %+v", hs)
	}
	if recs := h.records(); len(recs) != 1 {
		t.Errorf("hook records = %+v, want hello-world's", recs)
	}
}

func TestCancelledCreateTriggerLeavesNothing(t *testing.T) {
	h := newHarness(t)
	// Registering the hook upstream hangs until the caller gives up (the
	// API client went away).
	if err := h.gh.HangNext(repoHooksCreate, 1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.reg.CreateTrigger(ctx, tenant, registry.TriggerInput{
			Kind: string(triggers.NewIssue), Account: h.octo.ID, Agent: h.agent.ID, Params: []byte(repos(helloWorld)),
		})
		done <- err
	}()
	testenv.Eventually(t, 10*time.Second, "the hook creation to reach the fake", func() bool { return len(h.gh.RequestsTo(repoHooksCreate)) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("CreateTrigger succeeded although its context was cancelled")
	}
	if ts := h.triggers(); len(ts) != 0 {
		t.Errorf("a trigger whose hook was never registered was kept: %+v", ts)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records kept: %+v", recs)
	}
}

func TestLostCreateAnswerLeavesNoOrphanHook(t *testing.T) {
	h := newHarness(t)
	// GitHub creates the hook but its answer is lost: the trigger fails,
	// and the hook made upstream must not stay behind (it would deliver to
	// a hook id nobody knows, and count towards GitHub's limit).
	h.faults.lostCreates.Store(1)
	_, err := h.create(triggers.NewIssue, h.octo, repos(helloWorld))
	if !errors.Is(err, registry.ErrUpstream) || !strings.Contains(err.Error(), helloWorld) {
		t.Fatalf("CreateTrigger = %v, want ErrUpstream naming the repository", err)
	}
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 1 {
		t.Fatalf("%d hook creations reached GitHub, want 1", n)
	}
	if ts := h.triggers(); len(ts) != 0 {
		t.Errorf("triggers kept: %+v", ts)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records kept: %+v", recs)
	}
	if hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(hs) != 0 {
		t.Errorf("orphan hooks upstream: %+v", hs)
	}
	// Trying again works, with one hook.
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld), triggers.NewIssue.HookEvents())
}

func TestOrganisationHooks(t *testing.T) {
	h := newHarness(t)
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgAdmin, "hubot": fakecodehost.OrgMember}); err != nil {
		t.Fatal(err)
	}
	repo := h.mustCreate(triggers.NewRepository, h.octo, org("Acme"))
	up := h.onlyOrgHook("acme")
	rec := h.record(h.octo, store.HookOrganization, "acme")
	h.checkHook(up, rec, triggers.NewRepository.HookEvents())
	if _, err := h.create(triggers.NewRepository, h.octo, org("octo-org")); err != nil {
		t.Fatalf("a trigger on another organisation: %v", err)
	}
	h.onlyOrgHook("acme")
	h.checkHook(h.onlyOrgHook("octo-org"), h.record(h.octo, store.HookOrganization, "octo-org"), triggers.NewRepository.HookEvents())
	if n := len(h.gh.RequestsTo(orgHooksCreate)); n != 2 {
		t.Errorf("%d organisation hooks created, want 2", n)
	}

	// A member who is no owner cannot.
	hubot := h.account("hubot", "codehost")
	_, err := h.create(triggers.NewRepository, hubot, org("acme"))
	if !errors.Is(err, registry.ErrHookRights) {
		t.Fatalf("CreateTrigger as a member: %v, want ErrHookRights", err)
	}
	for _, want := range []string{"organisation acme", "admin:org_hook"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if len(h.triggers()) != 2 || len(h.records()) != 2 {
		t.Errorf("after the refused trigger: %d triggers, %d hook records; want 2 and 2", len(h.triggers()), len(h.records()))
	}
	h.checkHook(h.onlyOrgHook("acme"), h.record(h.octo, store.HookOrganization, "acme"), triggers.NewRepository.HookEvents())

	h.mustDelete(repo)
	if hs := h.gh.OrgHooks("acme"); len(hs) != 0 {
		t.Errorf("organisation hooks left: %+v", hs)
	}
	if recs := h.records(); len(recs) != 1 || recs[0].Target != "octo-org" {
		t.Errorf("hook records = %+v, want octo-org's", recs)
	}
}

func TestOrganisationKindsShareTheOrganisationHook(t *testing.T) {
	h := newHarness(t)
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
	// GitHub accepts projects_v2_item, digit and all, as an organisation
	// hook's event; so does the fake.
	created := len(h.gh.RequestsTo(orgHooksCreate))

	repo := h.mustCreate(triggers.NewRepository, h.octo, org("acme"))
	items := h.mustCreate(triggers.ProjectItemStatusChanged, h.octo, org("ACME"))
	h.checkHook(h.onlyOrgHook("acme"), h.record(h.octo, store.HookOrganization, "acme"),
		eventsOf(triggers.NewRepository, triggers.ProjectItemStatusChanged))
	if n := len(h.gh.RequestsTo(orgHooksCreate)) - created; n != 1 {
		t.Errorf("%d organisation hooks created, want 1", n)
	}
	h.mustDelete(repo)
	h.checkHook(h.onlyOrgHook("acme"), h.record(h.octo, store.HookOrganization, "acme"), triggers.ProjectItemStatusChanged.HookEvents())
	h.mustDelete(items)
	if hs := h.gh.OrgHooks("acme"); len(hs) != 0 {
		t.Errorf("organisation hooks left: %+v", hs)
	}
}

func TestInvalidTriggers(t *testing.T) {
	h := newHarness(t)
	deploy := h.account("vercel-team", "deploy")
	removed := h.account("monalisa", "codehost")
	h.setAccountStatus(removed, store.StatusNeedsReauth)
	cases := []struct {
		name    string
		in      registry.TriggerInput
		mention []string
	}{
		{"unknown kind", registry.TriggerInput{Kind: "new_thing", Account: h.octo.ID, Agent: h.agent.ID}, []string{"new_thing"}},
		{"project kind without organization", registry.TriggerInput{Kind: "project_item_status_changed", Account: h.octo.ID, Agent: h.agent.ID},
			[]string{"organization", "organisation hook"}},
		{"organisation kind with repositories", registry.TriggerInput{Kind: "new_repository", Account: h.octo.ID, Agent: h.agent.ID,
			Params: []byte(`{"organization":"octo-org","repositories":["octocat/hello-world"]}`)}, []string{"repositories"}},
		{"bad repository", registry.TriggerInput{Kind: "new_issue", Account: h.octo.ID, Agent: h.agent.ID, Params: []byte(repos("hello-world"))},
			[]string{"owner/repo"}},
		{"unknown parameter", registry.TriggerInput{Kind: "new_issue", Account: h.octo.ID, Agent: h.agent.ID, Params: []byte(`{"repos":["a/b"]}`)},
			[]string{"repos"}},
		{"account of another connector", registry.TriggerInput{Kind: "new_issue", Account: deploy.ID, Agent: h.agent.ID, Params: []byte(repos(helloWorld))},
			[]string{deploy.ID, "codehost"}},
		{"code-hosting account for a deploy kind", registry.TriggerInput{Kind: "deployment_failed", Account: h.octo.ID, Agent: h.agent.ID},
			[]string{"deploy"}},
		{"unknown account", registry.TriggerInput{Kind: "new_issue", Account: "acc-nope", Agent: h.agent.ID, Params: []byte(repos(helloWorld))},
			[]string{`account "acc-nope": no such account in this tenant (triggerctl accounts list shows them)`}},
		{"account needing reauthorisation", registry.TriggerInput{Kind: "new_issue", Account: removed.ID, Agent: h.agent.ID, Params: []byte(repos(helloWorld))},
			[]string{"reconnect"}},
		{"unknown agent", registry.TriggerInput{Kind: "new_issue", Account: h.octo.ID, Agent: "agent-nope", Params: []byte(repos(helloWorld))},
			[]string{`agent "agent-nope": no such agent in this tenant (triggerctl agents list shows them)`}},
		{"filter that does not compile", registry.TriggerInput{Kind: "new_issue", Account: h.octo.ID, Agent: h.agent.ID,
			Params: []byte(repos(helloWorld)), Filter: "event.title =="}, []string{"filter does not compile:"}},
		{"filter that is not boolean", registry.TriggerInput{Kind: "new_issue", Account: h.octo.ID, Agent: h.agent.ID,
			Params: []byte(repos(helloWorld)), Filter: "1 + 1"}, []string{"filter must be a boolean expression"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.reg.CreateTrigger(h.ctx, tenant, c.in)
			if !errors.Is(err, registry.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			// The trigger being created has no id its author knows yet.
			if regexp.MustCompile(`trigger [0-9a-f]{8}-`).MatchString(err.Error()) {
				t.Errorf("error %q names a trigger", err)
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	if ts := h.triggers(); len(ts) != 0 {
		t.Errorf("invalid triggers stored: %+v", ts)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records stored: %+v", recs)
	}
	if n := h.gh.RequestCount(); n != 0 {
		t.Errorf("%d requests reached GitHub for invalid triggers", n)
	}
}

func TestDeployEndpointPerAgent(t *testing.T) {
	h := newHarness(t)
	vercel := h.account("vercel-team", "deploy")
	other := h.newAgent("other")

	started := h.mustCreate(triggers.DeploymentStarted, vercel, "")
	failed := h.mustCreate(triggers.DeploymentFailed, vercel, `{"environments":["production"]}`)
	ep, ok, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil || !ok {
		t.Fatalf("AgentEndpoint = %v, %v", ok, err)
	}
	want := eventsOf(triggers.DeploymentStarted, triggers.DeploymentFailed)
	if ep.Scope != store.HookAgentEndpoint || ep.Target != h.agent.ID || ep.Connector != "deploy" || ep.AccountID != "" ||
		!slices.Equal(ep.Events, want) || ep.ExternalID != 0 {
		t.Errorf("endpoint = %+v, want the agent's, events %v", ep, want)
	}
	if got, wantURL := h.reg.HookURL(ep), publicURL+"/webhooks/deploy/"+ep.ID; got != wantURL {
		t.Errorf("HookURL = %s, want %s", got, wantURL)
	}
	secret, err := h.reg.EndpointSecret(h.ctx, ep)
	if err != nil || secret == "" {
		t.Fatalf("EndpointSecret = %q, %v", secret, err)
	}
	scope, s2, err := h.hookSecrets("deploy", ep.ID)
	if err != nil || !slices.Equal(s2, []string{secret}) {
		t.Errorf("ReadHookSecrets = %q, %v; want the endpoint's secret", s2, err)
	}
	if wantScope := (triggers.Scope{Hook: ep.ID, Tenant: tenant, Agent: h.agent.ID}); scope != wantScope {
		t.Errorf("scope = %+v, want %+v", scope, wantScope)
	}
	if _, _, err := h.hookSecrets("codehost", ep.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("the endpoint as a code-hosting hook: %v, want ErrNotFound", err)
	}
	for _, tr := range []store.Trigger{started, failed} {
		if hs, err := h.reg.HooksOf(h.ctx, tr); err != nil || len(hs) != 1 || hs[0].ID != ep.ID {
			t.Errorf("HooksOf(%s) = %+v, %v; want the endpoint", tr.Kind, hs, err)
		}
	}

	// Another agent gets its own endpoint.
	otherTr, err := h.createFor(other, triggers.DeploymentCompleted, vercel, "")
	if err != nil {
		t.Fatal(err)
	}
	oep, ok, err := h.reg.AgentEndpoint(h.ctx, tenant, other.ID)
	if err != nil || !ok || oep.ID == ep.ID || !slices.Equal(oep.Events, triggers.DeploymentCompleted.HookEvents()) {
		t.Errorf("other agent's endpoint = %+v, %v, %v", oep, ok, err)
	}
	if len(h.records()) != 2 {
		t.Errorf("%d records, want an endpoint per agent", len(h.records()))
	}

	h.mustDelete(started)
	ep2, ok, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil || !ok || ep2.ID != ep.ID || !slices.Equal(ep2.Events, triggers.DeploymentFailed.HookEvents()) {
		t.Errorf("after deleting one trigger the endpoint = %+v, %v, %v; want the same, narrowed", ep2, ok, err)
	}
	if s, _ := h.reg.EndpointSecret(h.ctx, ep2); s != secret {
		t.Error("narrowing the endpoint changed its secret")
	}
	h.mustDelete(failed)
	if _, ok, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID); ok || err != nil {
		t.Errorf("the endpoint outlived the agent's last deployment trigger (%v, %v)", ok, err)
	}
	h.mustDelete(otherTr)
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("records left: %+v", recs)
	}
	if n := h.gh.RequestCount(); n != 0 {
		t.Errorf("%d requests reached GitHub for deployment triggers", n)
	}
	if _, err := h.reg.EndpointSecret(h.ctx, store.Hook{ID: "h_x", Scope: store.HookRepository}); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("EndpointSecret of a repository hook: %v, want ErrInvalid", err)
	}
}

func TestDeployEndpointOutlivesAccountRemoval(t *testing.T) {
	h := newHarness(t)
	vercel := h.account("vercel-team", "deploy")
	other := h.account("vercel-other", "deploy")
	failed := h.mustCreate(triggers.DeploymentFailed, vercel, "")
	ep, _, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := h.reg.EndpointSecret(h.ctx, ep)

	if err := h.reg.AccountRemoving(h.ctx, tenant, vercel); err != nil {
		t.Fatal(err)
	}
	if got := h.trigger(failed.ID); got.Status != store.TriggerInactive || got.StatusCode != registry.CodeAccountRemoved {
		t.Errorf("trigger after removal: %s %s", got.Status, got.StatusCode)
	}
	// A deployment trigger of another account comes and goes while the
	// first is inactive: the endpoint the user pasted stays.
	started := h.mustCreate(triggers.DeploymentStarted, other, "")
	h.mustDelete(started)
	h.vercelEndpointIs(ep, secret, triggers.DeploymentFailed.HookEvents())

	h.setAccountStatus(vercel, store.StatusRemoved)
	h.setAccountStatus(vercel, store.StatusActive)
	if err := h.reg.AccountConnected(h.ctx, tenant, vercel.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.trigger(failed.ID); got.Status != store.TriggerActive {
		t.Errorf("trigger after reconnecting: %s", got.Status)
	}
	h.vercelEndpointIs(ep, secret, triggers.DeploymentFailed.HookEvents())
	h.mustDelete(failed)
	if _, ok, _ := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID); ok {
		t.Error("the endpoint outlived the agent's last deployment trigger")
	}
}

// vercelEndpointIs checks that the agent's endpoint is still ep, with its
// secret, for events.
func (h *harness) vercelEndpointIs(ep store.Hook, secret string, events []string) {
	h.t.Helper()
	got, ok, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil || !ok {
		h.t.Fatalf("the agent's endpoint is gone (%v, %v)", ok, err)
	}
	if got.ID != ep.ID {
		h.t.Errorf("endpoint %s replaced by %s: the URL pasted into the project's settings no longer works", ep.ID, got.ID)
	}
	if s, _ := h.reg.EndpointSecret(h.ctx, got); s != secret {
		h.t.Error("the endpoint's secret changed")
	}
	if !slices.Equal(got.Events, events) {
		h.t.Errorf("endpoint events = %v, want %v", got.Events, events)
	}
}

func TestSetEndpointSecrets(t *testing.T) {
	h := newHarness(t)
	vercel := h.account("vercel-team", "deploy")
	started := h.mustCreate(triggers.DeploymentStarted, vercel, "")
	failed := h.mustCreate(triggers.DeploymentFailed, vercel, "")
	ep, _, err := h.reg.AgentEndpoint(h.ctx, tenant, h.agent.ID)
	if err != nil {
		t.Fatal(err)
	}
	generated, _ := h.reg.EndpointSecret(h.ctx, ep)

	// Vercel shows its own secret once; the user sets it, with the
	// secret of a second team's webhook.
	team, other := "pJ7kq2ZQvN4xXw9mHc3tLb8R", "Zm8nV4pQ2rT6yW1xK9cB3dF5"
	set, err := h.reg.SetEndpointSecrets(h.ctx, tenant, h.agent.ID, []string{team, other})
	if err != nil {
		t.Fatal(err)
	}
	if set.ID != ep.ID || set.SecretsSetAt.IsZero() {
		t.Errorf("after setting secrets the endpoint = %s set at %v; want %s, with the time set", set.ID, set.SecretsSetAt, ep.ID)
	}
	if _, got, err := h.hookSecrets("deploy", ep.ID); err != nil || !slices.Equal(got, []string{team, other}) {
		t.Errorf("ReadHookSecrets = %q, %v; want the two set, and not the generated one", got, err)
	}
	if s, err := h.reg.EndpointSecret(h.ctx, set); s != "" || err != nil {
		t.Errorf("EndpointSecret after setting = %q, %v; want none shown", s, err)
	}
	if got := h.notes.hookChanges(); !slices.Equal(got, []string{"deploy/" + ep.ID}) {
		t.Errorf("hook changes broadcast = %v; want the endpoint's, once, for every process's cache", got)
	}

	// Narrowing the endpoint keeps them.
	h.mustDelete(started)
	if _, got, _ := h.hookSecrets("deploy", ep.ID); !slices.Equal(got, []string{team, other}) {
		t.Errorf("after narrowing ReadHookSecrets = %q; want the secrets set", got)
	}
	if _, err := h.reg.SetEndpointSecrets(h.ctx, tenant, h.agent.ID, []string{team}); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := h.hookSecrets("deploy", ep.ID); !slices.Equal(got, []string{team}) {
		t.Errorf("after setting one ReadHookSecrets = %q; want it alone", got)
	}

	bad := "has a space " + generated
	for _, tc := range []struct {
		name    string
		secrets []string
		want    string
	}{
		{"none", nil, "secrets is empty"},
		{"too short", []string{"abc"}, "secret 1 is 3 characters long"},
		{"a space", []string{team, bad}, "secret 2 has a space"},
		{"a comma", []string{"abcdefgh,ijkl"}, "secret 1 has a space, comma"},
		{"twice", []string{team, team}, "secret 2 is given twice"},
		{"too many", slices.Repeat([]string{team}, registry.MaxEndpointSecrets+1), "at most 10"},
	} {
		_, err := h.reg.SetEndpointSecrets(h.ctx, tenant, h.agent.ID, tc.secrets)
		switch {
		case !errors.Is(err, registry.ErrInvalid):
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %q, want it to say %q", tc.name, err, tc.want)
		case strings.Contains(err.Error(), team) || strings.Contains(err.Error(), generated):
			t.Errorf("%s: the error %q shows a secret", tc.name, err)
		}
	}
	if _, got, _ := h.hookSecrets("deploy", ep.ID); !slices.Equal(got, []string{team}) {
		t.Errorf("refused sets changed the secrets: %q", got)
	}
	if n := len(h.notes.hookChanges()); n != 2 {
		t.Errorf("%d hook changes broadcast after two sets and six refused; want 2", n)
	}

	other2 := h.newAgent("no-endpoint")
	if _, err := h.reg.SetEndpointSecrets(h.ctx, tenant, other2.ID, []string{team}); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("secrets for an agent without an endpoint: %v, want ErrNotFound", err)
	}
	h.mustDelete(failed)
	if got := h.notes.hookChanges(); len(got) != 3 || got[2] != "deploy/"+ep.ID {
		t.Errorf("hook changes broadcast = %v; want the endpoint's removal last", got)
	}
}

func TestPolledKindsRegisterNoHook(t *testing.T) {
	h := newHarness(t)
	gist := h.mustCreate(triggers.NewGist, h.octo, "")
	mention := h.mustCreate(triggers.NewMention, h.octo, "")
	for _, tr := range []store.Trigger{gist, mention} {
		if !registry.Polled(tr) {
			t.Errorf("%s is not polled", tr.Kind)
		}
		if hs, err := h.reg.HooksOf(h.ctx, tr); err != nil || len(hs) != 0 {
			t.Errorf("HooksOf(%s) = %+v, %v", tr.Kind, hs, err)
		}
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records: %+v", recs)
	}
	if n := h.gh.RequestCount(); n != 0 {
		t.Errorf("%d requests reached GitHub for polled triggers", n)
	}

	// Mentions in named repositories come through their hook.
	inRepo := h.mustCreate(triggers.NewMention, h.octo, repos(helloWorld))
	if registry.Polled(inRepo) {
		t.Error("new_mention with repositories is polled")
	}
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld),
		triggers.NewMention.HookEvents())
	h.mustDelete(gist)
	h.mustDelete(mention)
	h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
}

func TestReconcileRepairsDrift(t *testing.T) {
	h := newHarness(t)
	h.createRepo("octocat", "second")
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.mustCreate(triggers.NewPush, h.octo, repos("octocat/second"))
	a := h.onlyHook("octocat", "hello-world")
	b := h.onlyHook("octocat", "second")

	rep, err := h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Checked: 2}) {
		t.Fatalf("Reconcile with nothing to repair = %+v, %v", rep, err)
	}

	// Deleted upstream: registered again.
	if !h.gh.DeleteHook(a.ID) {
		t.Fatal("no hook to delete")
	}
	rep, err = h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Checked: 2, Repaired: 1}) {
		t.Errorf("Reconcile after a deletion = %+v, %v; want 2 checked, 1 repaired", rep, err)
	}
	a2 := h.onlyHook("octocat", "hello-world")
	ra := h.record(h.octo, store.HookRepository, helloWorld)
	if a2.ID == a.ID {
		t.Errorf("hook id %d unchanged", a.ID)
	}
	h.checkHook(a2, ra, triggers.NewIssue.HookEvents())
	if !ra.CheckedAt.After(time.Time{}) {
		t.Error("CheckedAt not set")
	}

	// Disabled, its events and secret changed in GitHub's settings: put
	// back.
	if _, err := h.hooksAs("octocat").Update(h.ctx, codehost.HookTarget{Owner: "octocat", Repo: "second"}, b.ID,
		codehost.HookSpec{URL: b.URL, Secret: "tampered", Events: []string{"star"}, Active: true}); err != nil {
		t.Fatal(err)
	}
	if !h.gh.SetHookActive(b.ID, false) {
		t.Fatal("no hook to disable")
	}
	rep, err = h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Checked: 2, Repaired: 1}) {
		t.Errorf("Reconcile after disabling = %+v, %v; want 2 checked, 1 repaired", rep, err)
	}
	b2 := h.onlyHook("octocat", "second")
	if b2.ID != b.ID {
		t.Errorf("the disabled hook %d was replaced by %d; want it enabled again", b.ID, b2.ID)
	}
	h.checkHook(b2, h.record(h.octo, store.HookRepository, "octocat/second"), triggers.NewPush.HookEvents())

	// Pointed elsewhere (a --public-url that changed since, or a hand
	// edit): its deliveries would never arrive; pointed back.
	if _, err := h.hooksAs("octocat").Update(h.ctx, codehost.HookTarget{Owner: "octocat", Repo: "second"}, b.ID,
		codehost.HookSpec{URL: "https://old.example.com/webhooks/codehost/x", Secret: "tampered", Events: b.Events, Active: true}); err != nil {
		t.Fatal(err)
	}
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep != (registry.ReconcileReport{Checked: 2, Repaired: 1}) {
		t.Errorf("Reconcile after a URL change = %+v, %v; want 2 checked, 1 repaired", rep, err)
	}
	if b3 := h.onlyHook("octocat", "second"); b3.ID != b.ID || b3.URL != b.URL {
		t.Errorf("hook %d at %s after reconciling, want %d at %s", b3.ID, b3.URL, b.ID, b.URL)
	}

	// Only disabled.
	h.gh.SetHookActive(b.ID, false)
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep.Repaired != 1 || !h.onlyHook("octocat", "second").Active {
		t.Errorf("Reconcile after only disabling = %+v, %v; hook active: %v", rep, err, h.onlyHook("octocat", "second").Active)
	}

	// A record no trigger needs (left by a crash) is removed.
	stray, err := h.reg.NewHookRecord(h.ctx, store.HookKey{TenantID: tenant, AccountID: h.octo.ID, Connector: "codehost",
		Scope: store.HookRepository, Target: "octocat/third"})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Checked: 3, Removed: 1}) {
		t.Errorf("Reconcile with a stray record = %+v, %v; want 3 checked, 1 removed", rep, err)
	}
	if _, err := h.st.GetHook(h.ctx, stray.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("stray record: %v, want it deleted", err)
	}
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep != (registry.ReconcileReport{Checked: 2}) {
		t.Errorf("final Reconcile = %+v, %v", rep, err)
	}
}

func TestReconcileRecordsLostRights(t *testing.T) {
	h := newHarness(t)
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
	h.mustCreate(triggers.NewRepository, h.octo, org("acme"))
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgMember}); err != nil {
		t.Fatal(err)
	}
	rep, err := h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Checked: 1, Failed: 1}) {
		t.Errorf("Reconcile without rights = %+v, %v; want 1 failed", rep, err)
	}
	rec := h.record(h.octo, store.HookOrganization, "acme")
	if rec.Status != store.HookFailing || !strings.Contains(rec.StatusReason, "admin:org_hook") {
		t.Errorf("record = %s (%s), want failing, saying what to fix", rec.Status, rec.StatusReason)
	}
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep.Failed != 0 {
		t.Errorf("Reconcile with rights back = %+v, %v", rep, err)
	}
	h.checkHook(h.onlyOrgHook("acme"), h.record(h.octo, store.HookOrganization, "acme"), triggers.NewRepository.HookEvents())
}

func TestReconcileSkipsWhileAnotherHoldsTheLease(t *testing.T) {
	h := newHarness(t)
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	id := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo).ID
	h.gh.DeleteHook(id)

	release, held, err := h.st.TryLock(h.ctx, "registry:reconcile", time.Minute)
	if err != nil || !held {
		t.Fatalf("TryLock = %v, %v", held, err)
	}
	rep, err := h.reg.Reconcile(h.ctx)
	if err != nil || rep != (registry.ReconcileReport{Skipped: true}) {
		t.Errorf("Reconcile while the lease is held = %+v, %v; want skipped", rep, err)
	}
	if hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(hs) != 0 {
		t.Errorf("a skipped reconcile changed hooks: %+v", hs)
	}
	release()
	rep, err = h.reg.Reconcile(h.ctx)
	if err != nil || rep.Skipped || rep.Repaired != 1 {
		t.Errorf("Reconcile after release = %+v, %v", rep, err)
	}
	// The lease is given back after a pass.
	if release, held, err := h.st.TryLock(h.ctx, "registry:reconcile", time.Minute); err != nil || !held {
		t.Errorf("the reconcile kept its lease: %v, %v", held, err)
	} else {
		release()
	}
}

func TestConcurrentReconcilesRunOnce(t *testing.T) {
	h := newHarness(t)
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	h.gh.DeleteHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo).ID)
	// Hold the hook's request so that the first pass is surely in
	// progress when the second starts.
	if err := h.gh.HangNext(repoHooksCreate, 1); err != nil {
		t.Fatal(err)
	}
	created := len(h.gh.RequestsTo(repoHooksCreate))
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	first := make(chan registry.ReconcileReport, 1)
	go func() {
		rep, _ := h.reg.Reconcile(ctx)
		first <- rep
	}()
	testenv.Eventually(t, 10*time.Second, "the first reconcile to reach GitHub", func() bool { return len(h.gh.RequestsTo(repoHooksCreate)) == created+1 })
	rep, err := h.reg.Reconcile(h.ctx)
	if err != nil || !rep.Skipped {
		t.Errorf("second Reconcile = %+v, %v; want skipped", rep, err)
	}
	cancel()
	if rep := <-first; rep.Skipped || rep.Checked != 1 || rep.Failed != 1 {
		t.Errorf("first Reconcile = %+v; want one hook checked and failed", rep)
	}
	if rep, err := h.reg.Reconcile(h.ctx); err != nil || rep.Repaired != 1 {
		t.Errorf("next Reconcile = %+v, %v", rep, err)
	}
	h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
}

func TestAccountRemovedThenConnectedAgain(t *testing.T) {
	h := newHarness(t)
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
	mona := h.account("monalisa", "codehost")
	issues := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	push := h.mustCreate(triggers.NewPush, h.octo, repos(helloWorld))
	newRepo := h.mustCreate(triggers.NewRepository, h.octo, org("acme"))
	gist := h.mustCreate(triggers.NewGist, h.octo, "")
	monas := h.mustCreate(triggers.NewIssue, mona, repos("monalisa/octo-app"))
	before := map[string]int{}
	for _, tr := range []store.Trigger{issues, push, newRepo, gist} {
		before[tr.ID] = h.notes.count(tr.ID)
	}

	if err := h.reg.AccountRemoving(h.ctx, tenant, h.octo); err != nil {
		t.Fatalf("AccountRemoving: %v", err)
	}
	for _, tr := range []store.Trigger{issues, push, newRepo, gist} {
		got := h.trigger(tr.ID)
		if got.Status != store.TriggerInactive || got.StatusCode != registry.CodeAccountRemoved ||
			!strings.Contains(got.StatusReason, h.octo.ID) || !strings.Contains(got.StatusReason, "reconnect") {
			t.Errorf("%s after removal: %s %q %q; want inactive, %s, with a reason", tr.Kind, got.Status, got.StatusCode, got.StatusReason, registry.CodeAccountRemoved)
		}
		if h.notes.count(tr.ID) <= before[tr.ID] {
			t.Errorf("deactivating %s was not broadcast", tr.Kind)
		}
	}
	if hs := h.gh.Hooks(fakecodehost.SeedOwner, fakecodehost.SeedRepo); len(hs) != 0 {
		t.Errorf("repository hooks left upstream: %+v", hs)
	}
	if hs := h.gh.OrgHooks("acme"); len(hs) != 0 {
		t.Errorf("organisation hooks left upstream: %+v", hs)
	}
	if recs := h.records(); len(recs) != 1 || recs[0].AccountID != mona.ID {
		t.Errorf("records = %+v, want monalisa's only", recs)
	}
	// Another account's trigger and hook are untouched.
	if got := h.trigger(monas.ID); got.Status != store.TriggerActive {
		t.Errorf("monalisa's trigger is %s", got.Status)
	}
	h.checkHook(h.onlyHook("monalisa", "octo-app"), h.record(mona, store.HookRepository, "monalisa/octo-app"), triggers.NewIssue.HookEvents())

	// The account is removed, then connected again.
	h.setAccountStatus(h.octo, store.StatusRemoved)
	if _, err := h.create(triggers.NewStar, h.octo, repos(helloWorld)); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("a trigger on a removed account: %v, want ErrInvalid", err)
	}
	h.octo = h.setAccountStatus(h.octo, store.StatusActive)
	h.gh.ResetLog()
	if err := h.reg.AccountConnected(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatalf("AccountConnected: %v", err)
	}
	// Each hook is synced once for all its triggers: created with every
	// event at once, not created for one trigger and widened for the next.
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 1 {
		t.Errorf("reconnecting created %d repository hooks, want 1", n)
	}
	if n := len(h.gh.RequestsTo(repoHookUpdate)); n != 0 {
		t.Errorf("reconnecting updated repository hooks %d times, want 0", n)
	}
	if n := len(h.gh.RequestsTo(orgHooksCreate)); n != 1 {
		t.Errorf("reconnecting created %d organisation hooks, want 1", n)
	}
	if n := len(h.gh.RequestsTo(orgHookUpdate)); n != 0 {
		t.Errorf("reconnecting updated organisation hooks %d times, want 0", n)
	}
	for _, tr := range []store.Trigger{issues, push, newRepo, gist} {
		if got := h.trigger(tr.ID); got.Status != store.TriggerActive || got.StatusCode != "" || got.StatusReason != "" {
			t.Errorf("%s after reconnecting: %s %q %q; want active", tr.Kind, got.Status, got.StatusCode, got.StatusReason)
		}
	}
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld),
		eventsOf(triggers.NewIssue, triggers.NewPush))
	h.checkHook(h.onlyOrgHook("acme"), h.record(h.octo, store.HookOrganization, "acme"), triggers.NewRepository.HookEvents())

	// Connecting again changes nothing.
	if err := h.reg.AccountConnected(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	h.onlyOrgHook("acme")
	if len(h.records()) != 3 {
		t.Errorf("%d records, want 3", len(h.records()))
	}
}

func TestAccountRemovalKeepsDisabledTriggersDisabled(t *testing.T) {
	h := newHarness(t)
	tr := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	if _, err := h.reg.SetEnabled(h.ctx, tenant, tr.ID, false); err != nil {
		t.Fatal(err)
	}
	// A disabled trigger keeps its hook.
	h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	if err := h.reg.AccountRemoving(h.ctx, tenant, h.octo); err != nil {
		t.Fatal(err)
	}
	if err := h.reg.AccountConnected(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	got := h.trigger(tr.ID)
	if got.Enabled || got.Status != store.TriggerActive {
		t.Errorf("trigger after reconnecting: enabled %v, %s; want disabled and active", got.Enabled, got.Status)
	}
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld), triggers.NewIssue.HookEvents())
}

func TestConcurrentTriggersOnOneRepositoryShareOneHook(t *testing.T) {
	h := newHarness(t)
	kinds := []triggers.Kind{triggers.NewIssue, triggers.NewPush, triggers.NewStar, triggers.NewFork, triggers.NewRelease}
	start := make(chan struct{})
	errs := make(chan error, len(kinds))
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := h.create(k, h.octo, repos(helloWorld))
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("CreateTrigger: %v", err)
		}
	}
	up := h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo)
	h.checkHook(up, h.record(h.octo, store.HookRepository, helloWorld), eventsOf(kinds...))
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 1 {
		t.Errorf("%d hooks created upstream, want 1", n)
	}
	if len(h.triggers()) != len(kinds) || len(h.records()) != 1 {
		t.Errorf("%d triggers and %d records, want %d and 1", len(h.triggers()), len(h.records()), len(kinds))
	}
}

func TestSetEnabled(t *testing.T) {
	h := newHarness(t)
	tr := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	n := h.notes.count(tr.ID)
	got, err := h.reg.SetEnabled(h.ctx, tenant, tr.ID, false)
	if err != nil || got.Enabled || got.Version <= tr.Version {
		t.Fatalf("SetEnabled(false) = %+v, %v", got, err)
	}
	if h.notes.count(tr.ID) != n+1 {
		t.Error("disabling was not broadcast")
	}
	if again, err := h.reg.SetEnabled(h.ctx, tenant, tr.ID, false); err != nil || again.Version != got.Version {
		t.Errorf("disabling twice wrote the trigger again: %+v, %v", again, err)
	}
	if _, err := h.reg.SetEnabled(h.ctx, "other-tenant", tr.ID, true); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("SetEnabled from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := h.reg.GetTrigger(h.ctx, "other-tenant", tr.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("GetTrigger from another tenant: %v, want ErrNotFound", err)
	}
	// Disabled triggers keep their hook's events.
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld), triggers.NewIssue.HookEvents())
}

func TestCreateAgent(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{checkAgentURL: func(raw string) error {
		if strings.Contains(raw, "169.254.") {
			return errors.New("link-local addresses are refused")
		}
		return nil
	}})
	vercel := h.account("vercel-team", "deploy")
	step := func(name, stepID, account, input string) store.PipelineStep {
		s := store.PipelineStep{Name: name, Step: stepID, Account: account}
		if input != "" {
			s.Input = []byte(input)
		}
		return s
	}
	good := step("comment", commentStep, h.octo.ID, `{"owner":"octocat","body":"Thanks {{ .sender }}"}`)
	cases := []struct {
		name    string
		in      registry.AgentInput
		mention string
	}{
		{"no name", registry.AgentInput{Name: "  "}, "name"},
		{"long name", registry.AgentInput{Name: strings.Repeat("n", 201)}, "name"},
		{"http without url", registry.AgentInput{Name: "a", Delivery: store.DeliverHTTP}, "url"},
		{"nats with url", registry.AgentInput{Name: "a", URL: "https://agent.example.com"}, "url"},
		{"unknown delivery", registry.AgentInput{Name: "a", Delivery: "smtp"}, "smtp"},
		{"url refused", registry.AgentInput{Name: "a", Delivery: store.DeliverHTTP, URL: "http://169.254.169.254/x"}, "link-local"},
		{"step name starting with a digit", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("1st", commentStep, h.octo.ID, "")}}, "1st"},
		{"step name with a dot", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("a.b", commentStep, h.octo.ID, "")}}, "a.b"},
		{"empty step name", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("", commentStep, h.octo.ID, "")}}, "steps[0]"},
		{"step names twice", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{good, good}}, "twice"},
		{"unknown step", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{good, step("x", "codehost.launch_rocket", h.octo.ID, "")}}, "steps[1]"},
		{"account of the wrong connector", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, vercel.ID, "")}}, vercel.ID},
		{"unknown account", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, "acc-nope", "")}}, "acc-nope"},
		{"template that does not parse", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, h.octo.ID, `{"body":"{{ .event.subject "}`)}}, "body"},
		{"template reading a field the event lacks", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, h.octo.ID, `{"body":"{{ .resource.nmber }}"}`)}}, `no field "nmber"`},
		{"template reading a later step", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, h.octo.ID, `{"body":"{{ .steps.d.output.x }}"}`)}}, `no earlier step is named "d"`},
		{"input that is not JSON", registry.AgentInput{Name: "a", Steps: []store.PipelineStep{step("c", commentStep, h.octo.ID, `{"body":`)}}, "steps[0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, secret, err := h.reg.CreateAgent(h.ctx, tenant, c.in)
			if !errors.Is(err, registry.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Errorf("error %q does not mention %q", err, c.mention)
			}
			if secret != "" {
				t.Error("a secret came with the error")
			}
		})
	}
	// Characters, not bytes.
	if _, _, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: strings.Repeat("é", 200)}); err != nil {
		t.Errorf("a 200-character name: %v", err)
	}
	if as, err := h.reg.ListAgents(h.ctx, tenant); err != nil || len(as) != 2 {
		t.Errorf("agents = %d, %v; want the harness's and the long-named one", len(as), err)
	}

	a, secret, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: " deployer ", Delivery: store.DeliverHTTP,
		URL: "https://agent.example.com/runs", Steps: []store.PipelineStep{good}})
	if err != nil {
		t.Fatalf("CreateAgent: %v", err)
	}
	if a.Name != "deployer" || a.Delivery != store.DeliverHTTP || len(a.Steps) != 1 || secret == "" {
		t.Errorf("agent = %+v, secret %q", a, secret)
	}
	opened, err := h.vault.Open(a.SealedSecret, "agent:"+a.ID)
	if err != nil || string(opened) != secret {
		t.Errorf("the sealed secret opens to %q, %v; want the secret shown", opened, err)
	}
	got, err := h.reg.GetAgent(h.ctx, tenant, a.ID)
	if err != nil || got.ID != a.ID {
		t.Errorf("GetAgent = %+v, %v", got, err)
	}
	if _, err := h.reg.GetAgent(h.ctx, "other-tenant", a.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("GetAgent from another tenant: %v, want ErrNotFound", err)
	}
}

func TestCreateAgentWithoutURLCheckStillWantsHTTP(t *testing.T) {
	h := newHarness(t) // no CheckAgentURL: any http(s) URL is accepted
	for _, raw := range []string{"ftp://agent.example.com/runs", "agent.example.com/runs", "https://", "javascript:alert(1)"} {
		if _, _, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: "a", Delivery: store.DeliverHTTP, URL: raw}); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("url %q: %v, want ErrInvalid", raw, err)
		}
	}
	for _, raw := range []string{"http://10.0.0.7:8080/runs", "https://agent.example.com/runs"} {
		if _, _, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: "agent at " + raw, Delivery: store.DeliverHTTP, URL: raw}); err != nil {
			t.Errorf("url %q: %v", raw, err)
		}
	}
}

func TestDeleteAgent(t *testing.T) {
	h := newHarness(t)
	tr := h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	err := h.reg.DeleteAgent(h.ctx, tenant, h.agent.ID)
	if !errors.Is(err, registry.ErrConflict) || !strings.Contains(err.Error(), tr.ID) {
		t.Fatalf("DeleteAgent with a trigger: %v, want ErrConflict naming %s", err, tr.ID)
	}
	// The message is the detail alone: the API's code already says conflict.
	if want := "agent " + h.agent.ID + " is started by triggers " + tr.ID + "; delete them first"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if _, err := h.reg.GetAgent(h.ctx, tenant, h.agent.ID); err != nil {
		t.Fatalf("the agent is gone: %v", err)
	}
	h.mustDelete(tr)
	if err := h.reg.DeleteAgent(h.ctx, tenant, h.agent.ID); err != nil {
		t.Fatalf("DeleteAgent: %v", err)
	}
	if _, err := h.reg.GetAgent(h.ctx, tenant, h.agent.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("GetAgent after delete: %v, want ErrNotFound", err)
	}
	if err := h.reg.DeleteAgent(h.ctx, tenant, h.agent.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("DeleteAgent twice: %v, want ErrNotFound", err)
	}
	if _, err := h.create(triggers.NewIssue, h.octo, repos(helloWorld)); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("a trigger for a deleted agent: %v, want ErrInvalid", err)
	}
}

func TestAgentNATSPasswords(t *testing.T) {
	h := newHarness(t)
	passwords := registry.AgentPasswords{Store: h.st}
	a, pw, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: "nats agent"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pw, agent.NATSPasswordPrefix) || len(pw) < len(agent.NATSPasswordPrefix)+40 {
		t.Fatalf("password %q: want %s and 32 random bytes", pw, agent.NATSPasswordPrefix)
	}
	if bytes.Contains(a.NATSPasswordHash, []byte(pw)) || len(a.NATSPasswordHash) != 32 || a.NATSPasswordSetAt.IsZero() {
		t.Fatalf("stored %x at %s: want the password's SHA-256 and when", a.NATSPasswordHash, a.NATSPasswordSetAt)
	}
	if err := passwords.AuthenticateAgent(h.ctx, a.ID, pw); err != nil {
		t.Fatalf("the agent's own password: %v", err)
	}
	// Refusals say why, and never carry what was given.
	httpAgent, _, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: "h", Delivery: store.DeliverHTTP, URL: "https://agent.example.com/runs"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, pw, mention string }{
		{a.ID, pw + "x", "wrong password"},
		{a.ID, "", "wrong password"},
		{"no-such-agent", pw, "no such agent"},
		{httpAgent.ID, pw, "over http"},
		{h.agent.ID, pw, "wrong password"},
	} {
		err := passwords.AuthenticateAgent(h.ctx, c.id, c.pw)
		if err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("agent %s: %v, want an error mentioning %q", c.id, err, c.mention)
		} else if strings.Contains(err.Error(), pw) {
			t.Errorf("the refusal carries the password: %v", err)
		}
	}
	if _, _, err := h.reg.ResetNATSPassword(h.ctx, tenant, httpAgent.ID); !errors.Is(err, registry.ErrInvalid) {
		t.Errorf("a NATS password for an HTTP agent: %v, want ErrInvalid", err)
	}
	if _, _, err := h.reg.ResetNATSPassword(h.ctx, "other-tenant", a.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("another tenant's agent: %v, want ErrNotFound", err)
	}
	if got := h.notes.agentChanges(); len(got) != 0 {
		t.Fatalf("credential changes %v before any", got)
	}

	// A new password replaces the old at once, and the old one's
	// connections are told to close.
	_, pw2, err := h.reg.ResetNATSPassword(h.ctx, tenant, a.ID)
	if err != nil || pw2 == pw || pw2 == "" {
		t.Fatalf("ResetNATSPassword = %q, %v", pw2, err)
	}
	if err := passwords.AuthenticateAgent(h.ctx, a.ID, pw); err == nil {
		t.Error("the old password still works")
	}
	if err := passwords.AuthenticateAgent(h.ctx, a.ID, pw2); err != nil {
		t.Errorf("the new password: %v", err)
	}
	if got := h.notes.agentChanges(); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("credential changes %v, want %s", got, a.ID)
	}

	// An agent stored before agents had passwords is told how to get one.
	old := a
	old.ID, old.NATSPasswordHash, old.NATSPasswordSetAt = "old-agent", nil, time.Time{}
	if _, err := h.st.CreateAgent(h.ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := passwords.AuthenticateAgent(h.ctx, old.ID, ""); err == nil || !strings.Contains(err.Error(), "/v1/agents/old-agent/nats-password") {
		t.Errorf("an agent without a password: %v, want the route that makes one", err)
	}
	if _, pw3, err := h.reg.ResetNATSPassword(h.ctx, tenant, old.ID); err != nil {
		t.Fatal(err)
	} else if err := passwords.AuthenticateAgent(h.ctx, old.ID, pw3); err != nil {
		t.Errorf("its first password: %v", err)
	}

	// Deleting the agent closes its connections too, and refuses it.
	if err := h.reg.DeleteAgent(h.ctx, tenant, a.ID); err != nil {
		t.Fatal(err)
	}
	if got := h.notes.agentChanges(); !slices.Equal(got, []string{a.ID, old.ID, a.ID}) {
		t.Errorf("credential changes %v, want %s, %s, %s", got, a.ID, old.ID, a.ID)
	}
	if err := passwords.AuthenticateAgent(h.ctx, a.ID, pw2); err == nil || !strings.Contains(err.Error(), "no such agent") {
		t.Errorf("a deleted agent: %v", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	h := newHarness(t)
	// complete has every required option; each case leaves one out, so
	// that each check is the one that refuses it.
	complete := func() registry.Options {
		return registry.Options{
			Store: h.st, Accounts: testAccounts{st: h.st}, Secrets: h.vault,
			HookAPI:        func(*http.Client) registry.HookAPI { return h.hooksAs("octocat") },
			PublicURL:      publicURL,
			NewAgentSecret: func() (string, error) { return "whsec_" + rand.Text(), nil },
		}
	}
	if _, err := registry.New(complete()); err != nil {
		t.Fatalf("New with every option: %v", err)
	}
	for name, edit := range map[string]func(*registry.Options){
		"nothing":          func(o *registry.Options) { *o = registry.Options{} },
		"no store":         func(o *registry.Options) { o.Store = nil },
		"no accounts":      func(o *registry.Options) { o.Accounts = nil },
		"no secrets":       func(o *registry.Options) { o.Secrets = nil },
		"no hook API":      func(o *registry.Options) { o.HookAPI = nil },
		"no public URL":    func(o *registry.Options) { o.PublicURL = "" },
		"no agent secrets": func(o *registry.Options) { o.NewAgentSecret = nil },
	} {
		o := complete()
		edit(&o)
		if _, err := registry.New(o); err == nil {
			t.Errorf("New with %s succeeded", name)
		}
	}
}

// TestMentionTriggersTakeTheAccountsLogin: a repository's webhooks report
// every login mentioned there, and "new mention" means the account is
// mentioned, so a new_mention trigger with repositories takes the
// account's login unless it names logins (or "*" for anyone) itself.
func TestMentionTriggersTakeTheAccountsLogin(t *testing.T) {
	h := newHarness(t)
	mentioned := func(tr store.Trigger) []string {
		t.Helper()
		var p match.Params
		if err := json.Unmarshal(tr.Params, &p); err != nil {
			t.Fatal(err)
		}
		return p.Mentioned
	}
	own := h.mustCreate(triggers.NewMention, h.octo, repos(helloWorld))
	if got := mentioned(own); !slices.Equal(got, []string{h.octo.Login}) || h.octo.Login == "" {
		t.Errorf("mentioned = %q, want the account's login %q", got, h.octo.Login)
	}
	named := h.mustCreate(triggers.NewMention, h.octo, `{"repositories":["`+helloWorld+`"],"mentioned":["hubot","*"]}`)
	if got := mentioned(named); !slices.Equal(got, []string{"hubot", "*"}) {
		t.Errorf("mentioned = %q, want the trigger's own", got)
	}
	// Polled mentions are the account's own notifications: no default,
	// and no mentioned parameter.
	if got := mentioned(h.mustCreate(triggers.NewMention, h.octo, "")); got != nil {
		t.Errorf("polled mention trigger: mentioned = %q, want none", got)
	}
	for _, params := range []string{`{"mentioned":["hubot"]}`, `{"repositories":["` + helloWorld + `"],"mentioned":["not a login"]}`} {
		if _, err := h.create(triggers.NewMention, h.octo, params); !errors.Is(err, registry.ErrInvalid) || !strings.Contains(err.Error(), "mentioned") {
			t.Errorf("params %s: %v, want invalid, naming mentioned", params, err)
		}
	}
}

// TestHookRegistrationIsLogged: registering a webhook upstream is one info
// line with the hook and where it is, a failure a warn line with why.
func TestHookRegistrationIsLogged(t *testing.T) {
	var logs bytes.Buffer
	h := newHarnessWith(t, harnessOptions{logs: &logs})
	h.mustCreate(triggers.NewIssue, h.octo, repos(helloWorld))
	if got := logs.String(); !strings.Contains(got, `"message":"webhook registered upstream"`) || !strings.Contains(got, `"target":"`+helloWorld+`"`) {
		t.Errorf("no info line for the registered hook:\n%s", got)
	}
}
