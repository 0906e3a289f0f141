package registry_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// createOrgRepo creates repository name of organisation org as login.
func (h *harness) createOrgRepo(login, org, name string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.gh.URL()+"/orgs/"+org+"/repos", strings.NewReader(`{"name":"`+name+`"}`))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("User-Agent", "registry-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := bearerClient(login).Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		h.t.Fatalf("create repository %s/%s: %d %s", org, name, resp.StatusCode, b)
	}
}

// coverage is the coverage of trigger t as the API shows it.
func (h *harness) coverage(t store.Trigger) *registry.Coverage {
	h.t.Helper()
	hooks, err := h.reg.HooksOf(h.ctx, t)
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := h.reg.CoverageOf(h.ctx, t, hooks)
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// targets lists the hook records' scopes and targets, sorted.
func targetsOf(recs []store.Hook) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Scope)+" "+r.Target)
	}
	slices.Sort(out)
	return out
}

func lackingTargets(c *registry.Coverage) []string {
	var out []string
	for _, g := range c.Lacking {
		out = append(out, string(g.Scope)+" "+g.Target)
	}
	slices.Sort(out)
	return out
}

// A trigger without repositories takes every repository the account
// reaches: one hook on each organisation it owns, one on each other
// repository it administers, and none where it lacks the rights, which
// the coverage names with the reason.
func TestAllRepositoriesHooksWhatTheAccountAdministers(t *testing.T) {
	h := newHarness(t)
	h.createOrgRepo("octocat", fakecodehost.SeedOrg, "tools")
	// A collaborator with push rights only, and a member of an
	// organisation it does not own: it sees their repositories but may
	// not hook them.
	if err := h.gh.SetCollaborator(fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo, "octocat", "push"); err != nil {
		t.Fatal(err)
	}
	if err := h.gh.SetOrg("acme", map[string]string{"monalisa": fakecodehost.OrgAdmin}); err != nil {
		t.Fatal(err)
	}
	h.createOrgRepo("monalisa", "acme", "widgets")
	if err := h.gh.SetOrg("acme", map[string]string{"octocat": fakecodehost.OrgMember}); err != nil {
		t.Fatal(err)
	}

	tr := h.mustCreate(triggers.NewIssue, h.octo, "")
	want := []string{"organization octo-org", "repository octocat/hello-world"}
	if got := targetsOf(h.records()); !slices.Equal(got, want) {
		t.Fatalf("hook records = %v, want %v", got, want)
	}
	h.checkHook(h.onlyOrgHook(fakecodehost.SeedOrg), h.record(h.octo, store.HookOrganization, "octo-org"), eventsOf(triggers.NewIssue))
	h.checkHook(h.onlyHook(fakecodehost.SeedOwner, fakecodehost.SeedRepo), h.record(h.octo, store.HookRepository, helloWorld), eventsOf(triggers.NewIssue))
	// The organisation's repositories have no hooks of their own: the
	// organisation hook delivers their events.
	if hs := h.gh.Hooks(fakecodehost.SeedOrg, "tools"); len(hs) != 0 {
		t.Errorf("octo-org/tools has hooks of its own: %+v", hs)
	}
	for _, r := range [][2]string{{fakecodehost.SeedOtherOwner, fakecodehost.SeedOtherRepo}, {"acme", "widgets"}} {
		if hs := h.gh.Hooks(r[0], r[1]); len(hs) != 0 {
			t.Errorf("%s/%s, where octocat is no admin, has hooks: %+v", r[0], r[1], hs)
		}
	}

	c := h.coverage(tr)
	if c == nil {
		t.Fatal("no coverage for a trigger on all repositories")
	}
	if c.Hooks != 2 || !slices.Equal(c.Organizations, []string{"octo-org"}) || c.Repositories != 1 || c.CheckedAt.IsZero() {
		t.Errorf("coverage = %+v, want 2 hooks, octo-org, 1 repository, a check time", c)
	}
	wantLacking := []string{"repository acme/widgets", "repository monalisa/octo-app"}
	if got := lackingTargets(c); !slices.Equal(got, wantLacking) {
		t.Errorf("lacking = %v, want %v", got, wantLacking)
	}
	for _, g := range c.Lacking {
		if !strings.Contains(g.Reason, "not admin") {
			t.Errorf("lacking %s: reason %q does not say admin rights are missing", g.Target, g.Reason)
		}
	}
	if g := c.Lacking[slices.IndexFunc(c.Lacking, func(g registry.Gap) bool { return g.Target == "monalisa/octo-app" })]; !strings.Contains(g.Reason, "push rights") {
		t.Errorf("lacking monalisa/octo-app: reason %q does not name the rights octocat has", g.Reason)
	}
	// A trigger on chosen repositories has no coverage.
	if c := h.coverage(h.mustCreate(triggers.NewPush, h.octo, repos(helloWorld))); c != nil {
		t.Errorf("coverage of a trigger on chosen repositories = %+v, want none", c)
	}

	h.mustDelete(tr)
	want = []string{"repository octocat/hello-world"}
	if got := targetsOf(h.records()); !slices.Equal(got, want) {
		t.Errorf("after deleting the trigger, hook records = %v, want only the new_push trigger's %v", got, want)
	}
	if hs := h.gh.OrgHooks(fakecodehost.SeedOrg); len(hs) != 0 {
		t.Errorf("octo-org keeps hooks after the trigger went: %+v", hs)
	}
}

// A repository created after the trigger gets its hook at the next
// refresh (the poller's), and one the account loses admin rights on moves
// to lacking.
func TestAllRepositoriesPicksUpRepositoriesCreatedLater(t *testing.T) {
	h := newHarness(t)
	tr := h.mustCreate(triggers.NewPullRequest, h.octo, "")
	h.createRepo("octocat", "later")
	if hs := h.gh.Hooks("octocat", "later"); len(hs) != 0 {
		t.Fatalf("hooks before the refresh: %+v", hs)
	}
	if _, err := h.reg.RefreshReach(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	h.checkHook(h.onlyHook("octocat", "later"), h.record(h.octo, store.HookRepository, "octocat/later"), eventsOf(triggers.NewPullRequest))
	if c := h.coverage(tr); c.Hooks != 3 || c.Repositories != 2 {
		t.Errorf("coverage = %+v, want 3 hooks (octo-org, hello-world, later) and 2 repositories", c)
	}

	// A refresh that finds nothing new changes nothing upstream.
	h.gh.ResetLog()
	if _, err := h.reg.RefreshReach(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	for _, r := range h.gh.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("an unchanged refresh sent %s %s", r.Method, r.Path)
		}
	}
}

// A trigger on chosen repositories of an organisation the account's reach
// covers is served by the organisation hook while a trigger on all
// repositories exists, so that no event reaches it twice; its repository
// hook comes back when that trigger goes.
func TestAllRepositoriesSharesTheOrganisationHook(t *testing.T) {
	h := newHarness(t)
	h.createOrgRepo("octocat", fakecodehost.SeedOrg, "tools")
	chosen := h.mustCreate(triggers.NewIssue, h.octo, repos("octo-org/tools"))
	h.onlyHook(fakecodehost.SeedOrg, "tools")

	all := h.mustCreate(triggers.NewPush, h.octo, "")
	if hs := h.gh.Hooks(fakecodehost.SeedOrg, "tools"); len(hs) != 0 {
		t.Errorf("octo-org/tools keeps its own hook beside the organisation's: %+v", hs)
	}
	h.checkHook(h.onlyOrgHook(fakecodehost.SeedOrg), h.record(h.octo, store.HookOrganization, "octo-org"), eventsOf(triggers.NewIssue, triggers.NewPush))
	hooks, err := h.reg.HooksOf(h.ctx, chosen)
	if err != nil || len(hooks) != 1 || hooks[0].Scope != store.HookOrganization {
		t.Errorf("hooks of the chosen-repository trigger = %+v, %v; want the organisation hook", hooks, err)
	}

	h.mustDelete(all)
	h.checkHook(h.onlyHook(fakecodehost.SeedOrg, "tools"), h.record(h.octo, store.HookRepository, "octo-org/tools"), eventsOf(triggers.NewIssue))
	if hs := h.gh.OrgHooks(fakecodehost.SeedOrg); len(hs) != 0 {
		t.Errorf("octo-org keeps its hook: %+v", hs)
	}
}

// An organisation the account owns but whose hooks its token may not
// manage is served repository by repository, and shows as lacking.
func TestAllRepositoriesWithoutOrganisationHookRights(t *testing.T) {
	h := newHarness(t)
	h.createOrgRepo("octocat", fakecodehost.SeedOrg, "tools")
	if err := h.gh.FailNext("GET /orgs/{org}/hooks", 1, http.StatusNotFound); err != nil {
		t.Fatal(err)
	}
	tr := h.mustCreate(triggers.NewIssue, h.octo, "")
	want := []string{"repository octo-org/tools", "repository octocat/hello-world"}
	if got := targetsOf(h.records()); !slices.Equal(got, want) {
		t.Fatalf("hook records = %v, want %v", got, want)
	}
	c := h.coverage(tr)
	if got := lackingTargets(c); !slices.Equal(got, []string{"organization octo-org"}) {
		t.Errorf("lacking = %v, want the organisation", got)
	} else if !strings.Contains(c.Lacking[0].Reason, "admin:org_hook") {
		t.Errorf("reason %q does not name the scope to grant", c.Lacking[0].Reason)
	}
}

// An account whose repositories cannot be read gets no trigger on all of
// them: the error says why, and nothing is left behind.
func TestAllRepositoriesRefusedWhenReachCannotBeRead(t *testing.T) {
	h := newHarness(t)
	if err := h.gh.FailNext("GET /user/repos", 1, http.StatusInternalServerError); err != nil {
		t.Fatal(err)
	}
	_, err := h.create(triggers.NewIssue, h.octo, "")
	if err == nil || !strings.Contains(err.Error(), "repositories of octocat") {
		t.Fatalf("err = %v, want one about reading octocat's repositories", err)
	}
	if ts := h.triggers(); len(ts) != 0 {
		t.Errorf("triggers left: %+v", ts)
	}
	if recs := h.records(); len(recs) != 0 {
		t.Errorf("hook records left: %+v", recs)
	}
}
