package poll_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/triggerd/triggerd/poll"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/triggers"
)

// new_repository without an organisation is polled from the repositories
// the account owns: one event per repository created after the trigger,
// none for an organisation's, and a quiet poll is a free 304.
func TestNewRepository(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.accts.add(tenant, octo, "octocat")
	h.accts.add(tenant, "acct-org", "octocat")
	p := h.poller()
	h.clock.Advance(time.Minute)
	h.trigger(tenant, octo, triggers.NewRepository, "")
	// An organisation trigger is its hook's business, not the poller's.
	h.trigger(tenant, "acct-org", triggers.NewRepository, `{"organization":"octo-org"}`)
	h.pollOnce(p)
	h.wantEvents(0, "only repositories created before the trigger")
	reqs := h.fake.RequestsTo("GET /user/repos")
	if len(reqs) != 1 || reqs[0].Query.Get("affiliation") != "owner" || reqs[0].Query.Get("sort") != "created" {
		t.Fatalf("first poll: %+v, want one read of the account's own repositories, newest first", reqs)
	}

	h.clock.Advance(time.Minute)
	repo := h.call("octocat", http.MethodPost, "/user/repos", `{"name":"fresh"}`)
	h.call("octocat", http.MethodPost, "/orgs/"+fakecodehost.SeedOrg+"/repos", `{"name":"theirs"}`)
	h.pollOnce(p)
	evs := h.wantEvents(1, "after a new repository")
	e := evs[0].ev
	id := fmt.Sprint(int64(repo["id"].(float64)))
	if e.Kind != triggers.NewRepository || e.DeliveryID != "repository-"+id || e.SourceEvent != poll.SourceRepositories ||
		e.Action != "created" || e.Repository == nil || e.Repository.FullName != "octocat/fresh" || !e.Scope.Polled() ||
		e.Resource.Type != "repository" || e.Resource.Title != "octocat/fresh" {
		t.Errorf("event %+v", e)
	}
	var payload struct {
		Action     string `json:"action"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	if err := json.Unmarshal(e.Payload, &payload); err != nil || payload.Action != "created" || payload.Repository.FullName != "octocat/fresh" {
		t.Errorf("payload %s is not shaped as GitHub's repository webhook: %v", e.Payload, err)
	}

	h.fake.ResetLog()
	h.pollOnce(p)
	h.wantEvents(1, "a quiet poll")
	if reqs := h.fake.RequestsTo("GET /user/repos"); len(reqs) != 1 || reqs[0].Status != http.StatusNotModified {
		t.Errorf("quiet poll: %+v, want one 304", reqs)
	}
}

// reachCalls records the accounts whose reach the poller refreshes.
type reachCalls struct {
	mu    sync.Mutex
	calls []string
}

func (r *reachCalls) RefreshReach(_ context.Context, tenantID, accountID string) (registry.Reach, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, tenantID+"/"+accountID)
	return registry.Reach{}, nil
}

// The poller refreshes the reach of the accounts with an active trigger
// on all repositories, and of no other.
func TestReachRefreshedEachPass(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, a := range []string{"acct-all", "acct-chosen", "acct-mentions", "acct-inactive"} {
		h.accts.add(tenant, a, "octocat")
	}
	rc := &reachCalls{}
	p := h.poller(func(o *poll.Options) { o.Reach = rc })
	h.trigger(tenant, "acct-all", triggers.NewIssue, "")
	h.trigger(tenant, "acct-all", triggers.NewPush, "")
	h.trigger(tenant, "acct-chosen", triggers.NewIssue, `{"repositories":["octocat/hello-world"]}`)
	h.trigger(tenant, "acct-mentions", triggers.NewMention, "")
	inactive := h.trigger(tenant, "acct-inactive", triggers.NewIssue, "")
	inactive.Status = "inactive"
	if _, err := h.st.UpdateTrigger(t.Context(), inactive); err != nil {
		t.Fatal(err)
	}
	h.pollOnce(p)
	h.pollOnce(p)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if want := []string{tenant + "/acct-all", tenant + "/acct-all"}; !slices.Equal(rc.calls, want) {
		t.Errorf("reach refreshed for %v, want %v (once a pass)", rc.calls, want)
	}
}
