package registry_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/connectors/codehost"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/triggers"
)

const (
	publicURL = "http://triggerd.test"
	tenant    = "tenant-1"

	repoHooksCreate = fakecodehost.Route("POST /repos/{owner}/{repo}/hooks")
	orgHooksCreate  = fakecodehost.Route("POST /orgs/{org}/hooks")
	repoHookUpdate  = fakecodehost.Route("PATCH /repos/{owner}/{repo}/hooks/{hook_id}")
	orgHookUpdate   = fakecodehost.Route("PATCH /orgs/{org}/hooks/{hook_id}")
	commentStep     = "codehost.create_comment"
)

// tokenFor is the bearer token a test account of login sends; the fake
// maps it back to login.
func tokenFor(login string) string { return "tok-" + login }

// harness is one registry over real parts: the GitHub fake, a bolt store
// in a temporary directory and a vault with a random key.
type harness struct {
	t     testing.TB
	ctx   context.Context
	gh    *fakecodehost.Server
	st    *boltstore.Store
	vault *accounts.Vault
	reg   *registry.Registry
	notes *notes
	// faults are the failures the accounts' clients inject.
	faults *faults
	// octo is octocat's code-hosting account, agent an agent of the
	// tenant the triggers start.
	octo  store.Account
	agent store.Agent
	// clock is harnessOptions.clock (nil: real time).
	clock *testenv.Clock
}

type harnessOptions struct {
	checkAgentURL func(string) error
	// receiver answers the fake's deliveries (default: 204 to each).
	receiver  http.RoundTripper
	healBatch int
	// clock, when set, is the time of both the fake and the registry.
	clock *testenv.Clock
	// logs, when set, receives the registry's log (JSON lines).
	logs io.Writer
	// hookConcurrency is registry.Options.HookConcurrency.
	hookConcurrency int
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, harnessOptions{}) }

func newHarnessWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	if o.receiver == nil {
		o.receiver = answer(http.StatusNoContent)
	}
	now := time.Now
	if o.clock != nil {
		now = o.clock.Now
	}
	gh := fakecodehost.New(fakecodehost.Options{
		Now:          now,
		Authenticate: func(token string) (string, bool) { return strings.CutPrefix(token, "tok-") },
		// Deliveries (the ping of a new hook) are answered here instead of
		// resolving triggerd.test.
		DeliveryClient: &http.Client{Transport: o.receiver},
	})
	gh.Start()
	t.Cleanup(gh.Close)

	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })

	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	vault, err := accounts.NewVault(key)
	if err != nil {
		t.Fatalf("vault: %v", err)
	}
	n, f := &notes{}, &faults{}
	reg, err := registry.New(registry.Options{
		Store:    st,
		Accounts: testAccounts{st: st, faults: f},
		Secrets:  vault,
		Steps:    catalogue{commentStep: string(triggers.CodeHost)},
		Notifier: n,
		HookAPI: func(c *http.Client) registry.HookAPI {
			return codehost.Hooks{HTTP: c, BaseURL: gh.URL()}
		},
		// The trailing slash is trimmed.
		PublicURL:       publicURL + "/",
		CheckAgentURL:   o.checkAgentURL,
		NewAgentSecret:  func() (string, error) { return "whsec_" + rand.Text(), nil },
		HealBatch:       o.healBatch,
		HookConcurrency: o.hookConcurrency,
		Now:             now,
		Logger:          zerolog.New(cmp.Or[io.Writer](o.logs, io.Discard)),
	})
	if err != nil {
		t.Fatalf("registry.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, gh: gh, st: st, vault: vault, reg: reg, notes: n, faults: f, clock: o.clock}
	h.octo = h.account("octocat", string(triggers.CodeHost))
	h.agent = h.newAgent("issue bot")
	return h
}

// testAccounts is the registry's view of accounts over the store: Client
// acts as the account's login on the fake, and refuses accounts that are
// not active, as accounts.Service does.
type testAccounts struct {
	st     store.Store
	faults *faults
}

// faults are failures of the accounts' HTTP clients.
type faults struct {
	// lostCreates is how many of the next hook creations GitHub carries
	// out but whose answer never arrives.
	lostCreates atomic.Int32
	// beforeCreate, when set, is called as each hook creation is sent.
	beforeCreate atomic.Pointer[func()]
}

func (a testAccounts) Get(ctx context.Context, tenantID, id string) (store.Account, error) {
	return a.st.GetAccount(ctx, tenantID, id)
}

func (a testAccounts) Client(ctx context.Context, tenantID, id string) (*http.Client, store.Account, error) {
	acc, err := a.Get(ctx, tenantID, id)
	if err != nil {
		return nil, store.Account{}, err
	}
	if acc.Status != store.StatusActive {
		return nil, acc, fmt.Errorf("account %s is %s", id, acc.Status)
	}
	return &http.Client{Transport: bearer{token: tokenFor(acc.Login), faults: a.faults}}, acc, nil
}

// bearerClient is an HTTP client acting as login on the fake.
func bearerClient(login string) *http.Client {
	return &http.Client{Transport: bearer{token: tokenFor(login)}}
}

type bearer struct {
	token  string
	faults *faults
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	if b.faults != nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/hooks") {
		if f := b.faults.beforeCreate.Load(); f != nil {
			(*f)()
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && b.faults != nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/hooks") &&
		b.faults.lostCreates.Add(-1) >= 0 {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil, errors.New("connection reset by peer")
	}
	return resp, err
}

// answer is a transport that answers every request with its status.
type answer int

func (a answer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: int(a), Status: http.StatusText(int(a)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// catalogue is the step catalogue: step id → connector.
type catalogue map[string]string

func (c catalogue) Has(id string) (string, bool) {
	conn, ok := c[id]
	return conn, ok
}

// notes records the trigger, hook and agent changes broadcast.
type notes struct {
	mu     sync.Mutex
	ids    []string
	hooks  []string
	agents []string
}

func (n *notes) AgentCredentialsChanged(_ context.Context, agentID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.agents = append(n.agents, agentID)
}

// agentChanges returns the ids of the agents whose credentials changed.
func (n *notes) agentChanges() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.agents)
}

func (n *notes) TriggerChanged(_ context.Context, tenantID, triggerID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids = append(n.ids, tenantID+"/"+triggerID)
}

func (n *notes) HookChanged(_ context.Context, connector, hookID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hooks = append(n.hooks, connector+"/"+hookID)
}

// hookChanges returns the hook changes broadcast, as connector/id.
func (n *notes) hookChanges() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.hooks)
}

// count is how many changes of the trigger were broadcast.
func (n *notes) count(triggerID string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, id := range n.ids {
		if id == tenant+"/"+triggerID {
			c++
		}
	}
	return c
}

func (n *notes) total() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.ids)
}

// account stores an active account of connector for login.
func (h *harness) account(login, connector string) store.Account {
	h.t.Helper()
	acc, err := h.st.CreateAccount(h.ctx, store.Account{
		ID: "acc-" + connector + "-" + login, TenantID: tenant, Connector: connector, ExternalID: login, Login: login,
		Scopes: []string{"repo", "admin:org_hook"}, Status: store.StatusActive,
	})
	if err != nil {
		h.t.Fatalf("create account %s: %v", login, err)
	}
	return acc
}

// setAccountStatus changes an account's status in the store, as the
// accounts service does when it is removed or connected again.
func (h *harness) setAccountStatus(acc store.Account, status store.AccountStatus) store.Account {
	h.t.Helper()
	cur, err := h.st.GetAccount(h.ctx, acc.TenantID, acc.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	cur.Status = status
	cur, err = h.st.UpdateAccount(h.ctx, cur)
	if err != nil {
		h.t.Fatalf("update account: %v", err)
	}
	return cur
}

func (h *harness) newAgent(name string) store.Agent {
	h.t.Helper()
	a, secret, err := h.reg.CreateAgent(h.ctx, tenant, registry.AgentInput{Name: name})
	if err != nil {
		h.t.Fatalf("CreateAgent: %v", err)
	}
	if !strings.HasPrefix(secret, agent.NATSPasswordPrefix) {
		h.t.Fatalf("a NATS agent got %q, want its NATS password", secret)
	}
	return a
}

// repos is the params of a trigger on the repositories.
func repos(rs ...string) string {
	b, _ := json.Marshal(map[string][]string{"repositories": rs})
	return string(b)
}

// org is the params of an organisation trigger.
func org(name string) string { return `{"organization":"` + name + `"}` }

func (h *harness) create(kind triggers.Kind, acc store.Account, params string) (store.Trigger, error) {
	return h.createFor(h.agent, kind, acc, params)
}

func (h *harness) createFor(agent store.Agent, kind triggers.Kind, acc store.Account, params string) (store.Trigger, error) {
	in := registry.TriggerInput{Kind: string(kind), Account: acc.ID, Agent: agent.ID}
	if params != "" {
		in.Params = json.RawMessage(params)
	}
	return h.reg.CreateTrigger(h.ctx, tenant, in)
}

func (h *harness) mustCreate(kind triggers.Kind, acc store.Account, params string) store.Trigger {
	h.t.Helper()
	t, err := h.create(kind, acc, params)
	if err != nil {
		h.t.Fatalf("CreateTrigger %s %s: %v", kind, params, err)
	}
	return t
}

func (h *harness) mustDelete(t store.Trigger) {
	h.t.Helper()
	if err := h.reg.DeleteTrigger(h.ctx, tenant, t.ID); err != nil {
		h.t.Fatalf("DeleteTrigger %s: %v", t.Kind, err)
	}
}

func (h *harness) trigger(id string) store.Trigger {
	h.t.Helper()
	t, err := h.reg.GetTrigger(h.ctx, tenant, id)
	if err != nil {
		h.t.Fatalf("GetTrigger: %v", err)
	}
	return t
}

func (h *harness) triggers() []store.Trigger {
	h.t.Helper()
	ts, err := h.reg.ListTriggers(h.ctx, tenant)
	if err != nil {
		h.t.Fatal(err)
	}
	return ts
}

// records are the tenant's hook records.
func (h *harness) records() []store.Hook {
	h.t.Helper()
	hs, err := h.st.ListHooks(h.ctx, tenant)
	if err != nil {
		h.t.Fatal(err)
	}
	return hs
}

// record is the hook record of the account on the target.
func (h *harness) record(acc store.Account, scope store.HookScope, target string) store.Hook {
	h.t.Helper()
	rec, err := h.st.FindHook(h.ctx, store.HookKey{TenantID: tenant, AccountID: acc.ID, Connector: string(triggers.CodeHost), Scope: scope, Target: target})
	if err != nil {
		h.t.Fatalf("hook record of %s on %s %s: %v", acc.ID, scope, target, err)
	}
	return rec
}

// onlyHook is the one hook of owner/repo upstream.
func (h *harness) onlyHook(owner, repo string) fakecodehost.Hook {
	h.t.Helper()
	hs := h.gh.Hooks(owner, repo)
	if len(hs) != 1 {
		h.t.Fatalf("%s/%s has %d hooks upstream, want 1: %+v", owner, repo, len(hs), hs)
	}
	return hs[0]
}

// onlyOrgHook is the one hook of organisation o upstream.
func (h *harness) onlyOrgHook(o string) fakecodehost.Hook {
	h.t.Helper()
	hs := h.gh.OrgHooks(o)
	if len(hs) != 1 {
		h.t.Fatalf("organisation %s has %d hooks upstream, want 1: %+v", o, len(hs), hs)
	}
	return hs[0]
}

// eventsOf is the sorted union of the kinds' hook events.
func eventsOf(kinds ...triggers.Kind) []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.HookEvents()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// checkHook checks that the upstream hook up is what the record rec says,
// registered for events, and signed with the secret ReadHookSecrets returns.
func (h *harness) checkHook(up fakecodehost.Hook, rec store.Hook, events []string) {
	h.t.Helper()
	wantURL := publicURL + "/webhooks/codehost/" + rec.ID
	switch {
	case !up.Active:
		h.t.Errorf("hook %d is inactive upstream", up.ID)
	case up.URL != wantURL:
		h.t.Errorf("hook %d URL = %q, want %q", up.ID, up.URL, wantURL)
	case h.reg.HookURL(rec) != wantURL:
		h.t.Errorf("HookURL = %q, want %q", h.reg.HookURL(rec), wantURL)
	case up.ContentType != "json":
		h.t.Errorf("hook %d content type = %q, want json", up.ID, up.ContentType)
	case !slices.Equal(sorted(up.Events), events):
		h.t.Errorf("hook %d events upstream = %v, want %v", up.ID, up.Events, events)
	case !slices.Equal(rec.Events, events):
		h.t.Errorf("hook record %s events = %v, want %v", rec.ID, rec.Events, events)
	case rec.ExternalID != up.ID:
		h.t.Errorf("hook record %s ExternalID = %d, want %d", rec.ID, rec.ExternalID, up.ID)
	case rec.Status != store.HookActive || rec.StatusReason != "":
		h.t.Errorf("hook record %s status = %s (%s), want active", rec.ID, rec.Status, rec.StatusReason)
	}
	scope, secrets, err := h.hookSecrets(string(triggers.CodeHost), rec.ID)
	if err != nil {
		h.t.Fatalf("ReadHookSecrets(%s): %v", rec.ID, err)
	}
	if len(secrets) != 1 || secrets[0] == "" || secrets[0] != up.Secret {
		h.t.Errorf("hook %d secret upstream = %q, ReadHookSecrets = %q; want the same one, not empty", up.ID, up.Secret, secrets)
	}
	want := triggers.Scope{Hook: rec.ID, Tenant: tenant, Account: rec.AccountID}
	if scope != want {
		h.t.Errorf("ReadHookSecrets scope = %+v, want %+v", scope, want)
	}
}

// createRepo creates login's repository name on the fake.
func (h *harness) createRepo(login, name string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.gh.URL()+"/user/repos", strings.NewReader(`{"name":"`+name+`"}`))
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
		h.t.Fatalf("create repository %s/%s: %d %s", login, name, resp.StatusCode, b)
	}
}

// hooksAs is the hook API acting as login, to change hooks behind the
// registry's back.
func (h *harness) hooksAs(login string) codehost.Hooks {
	return codehost.Hooks{HTTP: bearerClient(login), BaseURL: h.gh.URL()}
}

// hookSecrets reads a hook's scope and secrets as ingest does.
func (h *harness) hookSecrets(connector, id string) (triggers.Scope, []string, error) {
	return registry.ReadHookSecrets(h.ctx, h.st, h.vault, connector, id)
}
