package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// manyRepos is how many repositories the account of the tests below
// administers besides octocat/hello-world.
const manyRepos = 300

// createRepos creates n repositories of octocat, repo-000 onwards, and
// returns their full names with octocat/hello-world's, sorted.
func (h *harness) createRepos(n int) []string {
	h.t.Helper()
	names := []string{helloWorld}
	for i := range n {
		name := fmt.Sprintf("repo-%03d", i)
		h.createRepo("octocat", name)
		names = append(names, "octocat/"+name)
	}
	slices.Sort(names)
	return names
}

// hooksNot returns the repositories of names that do not have want hooks
// upstream, each with how many it has.
func (h *harness) hooksNot(names []string, want int) []string {
	h.t.Helper()
	var off []string
	for _, n := range names {
		owner, repo, _ := strings.Cut(n, "/")
		if got := len(h.gh.Hooks(owner, repo)); got != want {
			off = append(off, fmt.Sprintf("%s has %d", n, got))
		}
	}
	return off
}

// A trigger on all repositories of an account with hundreds of them
// registers their hooks concurrently: each exactly once, each failure
// recorded on its own repository and reported by name, the others kept;
// the reconcile then registers the failed ones, again exactly once.
func TestAllRepositoriesRegistersManyHooks(t *testing.T) {
	logs := &testenv.Buffer{}
	h := newHarnessWith(t, harnessOptions{logs: logs})
	names := h.createRepos(manyRepos)
	if err := h.gh.FailNext(repoHooksCreate, 3, http.StatusBadGateway); err != nil {
		t.Fatal(err)
	}

	tr := h.mustCreate(triggers.NewIssue, h.octo, "")
	var failing []string
	for _, rec := range h.records() {
		switch {
		case rec.Scope == store.HookRepository && rec.Status == store.HookFailing:
			failing = append(failing, rec.Target)
			if !strings.Contains(rec.StatusReason, "repository "+rec.Target) || !strings.Contains(rec.StatusReason, "502") {
				t.Errorf("failing hook %s: reason %q does not name the repository and GitHub's answer", rec.Target, rec.StatusReason)
			}
		case rec.Status != store.HookActive || rec.ExternalID == 0:
			t.Errorf("hook %s %s: %s (%s), external id %d", rec.Scope, rec.Target, rec.Status, rec.StatusReason, rec.ExternalID)
		}
	}
	if len(failing) != 3 {
		t.Fatalf("failing hooks = %v, want the 3 whose creation GitHub refused", failing)
	}
	var ok []string
	for _, n := range names {
		if !slices.Contains(failing, n) {
			ok = append(ok, n)
		}
	}
	if off := h.hooksNot(ok, 1); len(off) > 0 {
		t.Errorf("%d repositories do not have exactly one hook: %v", len(off), off)
	}
	if off := h.hooksNot(failing, 0); len(off) > 0 {
		t.Errorf("repositories whose creation failed have hooks: %v", off)
	}
	h.onlyOrgHook(fakecodehost.SeedOrg)
	for _, n := range ok {
		owner, repo, _ := strings.Cut(n, "/")
		h.checkHook(h.onlyHook(owner, repo), h.record(h.octo, store.HookRepository, n), eventsOf(triggers.NewIssue))
	}

	c := h.coverage(tr)
	if c.Hooks != len(names)-3+1 || c.Repositories != len(names) || c.Pending != 0 {
		t.Errorf("coverage: %d hooks, %d repositories, %d pending; want %d, %d, 0", c.Hooks, c.Repositories, c.Pending, len(names)-2, len(names))
	}
	var reported []string
	for _, g := range c.Failing {
		reported = append(reported, g.Target)
	}
	slices.Sort(failing)
	slices.Sort(reported)
	if !slices.Equal(reported, failing) {
		t.Errorf("coverage failing = %v, want %v", reported, failing)
	}
	// The log says how many failed of how many, and names each.
	line := ""
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "could not be registered") {
			line = l
		}
	}
	if !strings.Contains(line, fmt.Sprintf("3 of %d webhooks", len(names)+1)) {
		t.Errorf("no log line counting the failures: %q", line)
	}
	for _, f := range failing {
		if !strings.Contains(line, "repository "+f+": ") {
			t.Errorf("the log line does not name %s: %q", f, line)
		}
	}

	if _, err := h.reg.Reconcile(h.ctx); err != nil {
		t.Fatal(err)
	}
	if off := h.hooksNot(names, 1); len(off) > 0 {
		t.Errorf("after the reconcile, %d repositories do not have exactly one hook: %v", len(off), off)
	}
	if c := h.coverage(tr); c.Hooks != len(names)+1 || len(c.Failing) != 0 {
		t.Errorf("after the reconcile: %d hooks, failing %v; want %d and none", c.Hooks, c.Failing, len(names)+1)
	}
}

// A rate limit stops the registration: no hook is started for the
// account until GitHub's wait is over, those started finish, and the next
// refresh of the reach registers the rest, each exactly once.
func TestAllRepositoriesStopsAtRateLimit(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	h := newHarnessWith(t, harnessOptions{clock: clock})
	// Enough that without the pause every one would be attempted well
	// past the bound below.
	names := h.createRepos(100)
	if err := h.gh.SecondaryLimitNext(repoHooksCreate, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	h.gh.ResetLog()

	tr := h.mustCreate(triggers.NewIssue, h.octo, "")
	creates := len(h.gh.RequestsTo(repoHooksCreate))
	// One worker met the limit; the others finish the hook each had
	// started (a few more while the first records its failure).
	if creates > 4*registry.DefaultHookConcurrency {
		t.Errorf("%d hook creations sent after the rate limit, want at most %d", creates, 4*registry.DefaultHookConcurrency)
	}
	c := h.coverage(tr)
	if c.Pending < len(names)-creates || len(c.Failing) != 1 || !strings.Contains(c.Failing[0].Reason, "rate limit") {
		t.Errorf("coverage after the limit: %d pending, failing %+v; want at least %d pending and the limited one", c.Pending, c.Failing, len(names)-creates)
	}
	if off := h.hooksNot(names, 1); len(off) < len(names)-creates {
		t.Errorf("only %d repositories lack their hook, want at least %d", len(off), len(names)-creates)
	}

	// Before the limit lifts, a refresh sends no hook creation.
	h.gh.ResetLog()
	if _, err := h.reg.RefreshReach(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(h.gh.RequestsTo(repoHooksCreate)); n != 0 {
		t.Errorf("a refresh during the limit sent %d hook creations", n)
	}

	clock.Advance(time.Minute + time.Second)
	if _, err := h.reg.RefreshReach(h.ctx, tenant, h.octo.ID); err != nil {
		t.Fatal(err)
	}
	if off := h.hooksNot(names, 1); len(off) > 0 {
		t.Errorf("after the limit, %d repositories do not have exactly one hook: %v", len(off), off)
	}
	if c := h.coverage(tr); c.Pending != 0 || len(c.Failing) != 0 || c.Hooks != len(names)+1 {
		t.Errorf("coverage after the limit lifted: %+v", c)
	}
}

// A caller that gives up stops the registration: nothing more is started,
// and what was registered stays registered.
func TestAllRepositoriesCancelled(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{})
	names := h.createRepos(40)
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	var started atomic.Int32
	stop := func() {
		// Called by the workers as each hook creation is sent.
		if started.Add(1) == 10 {
			cancel()
		}
	}
	h.faults.beforeCreate.Store(&stop)
	_, err := h.reg.CreateTrigger(ctx, tenant, registry.TriggerInput{Kind: string(triggers.NewIssue), Account: h.octo.ID, Agent: h.agent.ID})
	h.faults.beforeCreate.Store(nil)
	creates := len(h.gh.RequestsTo(repoHooksCreate))
	t.Logf("CreateTrigger: %v; %d hook creations sent", err, creates)
	if creates >= len(names) {
		t.Errorf("%d hook creations sent after the caller gave up at the 10th, want fewer than %d", creates, len(names))
	}
	// Hooks not started have no record (the next refresh makes them);
	// those registered keep theirs, and the hook upstream.
	recs := h.records()
	if len(recs) > len(names)/2 {
		t.Errorf("%d hook records after the caller gave up at the 10th creation of %d, want those started only", len(recs), len(names))
	}
	for _, rec := range recs {
		owner, repo, _ := strings.Cut(rec.Target, "/")
		if rec.ExternalID != 0 && rec.Scope == store.HookRepository && len(h.gh.Hooks(owner, repo)) != 1 {
			t.Errorf("active hook record %s has %d hooks upstream", rec.Target, len(h.gh.Hooks(owner, repo)))
		}
	}
}

// BenchmarkAllRepositoriesHooks creates a trigger on all repositories of
// an account administering 301, one hook at a time and
// DefaultHookConcurrency at a time, with the fake GitHub answering at once
// and after a round trip of 20 ms (GitHub's are longer). Each round is a
// fresh fake and store; run with -benchtime=1x -count=3 and compare the
// medians.
func BenchmarkAllRepositoriesHooks(b *testing.B) {
	for _, latency := range []time.Duration{0, 20 * time.Millisecond} {
		for _, conc := range []int{1, registry.DefaultHookConcurrency} {
			b.Run(fmt.Sprintf("latency=%s/concurrency=%d", latency, conc), func(b *testing.B) {
				for range b.N {
					b.StopTimer()
					h := newHarnessWith(b, harnessOptions{hookConcurrency: conc})
					names := h.createRepos(manyRepos)
					h.gh.SetLatency(latency)
					b.StartTimer()
					h.mustCreate(triggers.NewIssue, h.octo, "")
					b.StopTimer()
					h.gh.SetLatency(0)
					if off := h.hooksNot(names, 1); len(off) > 0 {
						b.Fatalf("%d repositories without exactly one hook: %v", len(off), off)
					}
				}
			})
		}
	}
}
