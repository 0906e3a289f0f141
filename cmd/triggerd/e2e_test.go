package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
	"github.com/triggerd/triggerd/store/storetest"
)

// e2e is triggerd run as a process against a fake GitHub in the test
// process, with one agent started over NATS and one over HTTP.
type e2e struct {
	t         *testing.T
	dir       string
	httpAddr  string
	natsAddr  string
	args      []string
	env       []string
	p         *proc
	gh        *fakecodehost.Server
	key       string
	account   string
	httpRuns  sync.Map // webhook-id → count
	httpCalls atomic.Int64
	natsRuns  sync.Map // run id → count of first deliveries
	// natsRedeliveries counts the deliveries after a run's first.
	natsRedeliveries sync.Map
	auth             *fakeoauth.GitHub
	// client checks each exchange with the API against its OpenAPI
	// document.
	client *http.Client
}

func newE2E(t *testing.T) *e2e {
	t.Helper()
	return newE2EWith(t, nil, nil)
}

// newE2EWith is newE2E with extra flags and environment for triggerd.
func newE2EWith(t *testing.T, args, env []string) *e2e {
	t.Helper()
	v := &e2e{t: t, dir: t.TempDir(), httpAddr: freeAddr(t), natsAddr: freeAddr(t), client: checkedClient(t)}
	v.gh = fakecodehost.New(fakecodehost.Options{})
	v.gh.Start()
	t.Cleanup(v.gh.Close)
	auth := fakeoauth.NewGitHub(t)
	v.auth = auth
	public := "http://" + v.httpAddr
	auth.Config(public + "/v1/connect/codehost/callback")
	v.args = []string{
		"--http-addr", v.httpAddr, "--public-url", public, "--nats-listen", v.natsAddr, "--data-dir", v.dir,
		"--codehost-client-id", auth.ClientID, "--codehost-auth-base-url", auth.URL(), "--codehost-api-base-url", v.gh.URL(),
		"--allow-private-agent-urls", "--allow-private-provider-urls", // the fakes and agents listen on loopback
		"--dispatch-ack-wait", "2s", "--step-timeout", "3s", "--reconcile-interval", "0",
	}
	v.args = append(v.args, args...)
	v.env = append([]string{"TRIGGERD_CODEHOST_CLIENT_SECRET=" + auth.ClientSecret}, env...)
	v.start()
	b, err := os.ReadFile(filepath.Join(v.dir, "default_tenant_key"))
	if err != nil {
		t.Fatal(err)
	}
	v.key = strings.TrimSpace(string(b))

	v.account = v.reconnect()
	return v
}

// reconnect connects the code-hosting account the way a user does and
// returns its id.
func (v *e2e) reconnect() string {
	v.t.Helper()
	_, start := v.api(http.MethodGet, "/v1/connect/codehost/start", "", http.StatusOK)
	query, err := v.auth.SignIn(context.Background(), start["authorize_url"].(string))
	if err != nil {
		v.t.Fatal(err)
	}
	_, cb := v.api(http.MethodGet, "/v1/connect/codehost/callback?"+query.Encode(), "", http.StatusOK)
	return cb["account"].(map[string]any)["id"].(string)
}

// start runs triggerd on the test's fixed addresses (its flags come after
// startTriggerd's own and win), so agents and hooks find it again after a
// restart.
func (v *e2e) start() {
	v.p = startTriggerd(v.t, v.env, v.args...)
}

func (v *e2e) api(method, path, body string, want int) (int, map[string]any) {
	v.t.Helper()
	req, _ := http.NewRequest(method, "http://"+v.httpAddr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+v.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := v.client.Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if want != 0 && resp.StatusCode != want {
		v.t.Fatalf("%s %s: %d %v, want %d", method, path, resp.StatusCode, out, want)
	}
	return resp.StatusCode, out
}

// httpAgent serves an HTTP agent that counts runs by webhook-id.
func (v *e2e) httpAgent() (url string, setSecret func(string)) {
	var h atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hh, _ := h.Load().(http.Handler)
		if hh == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		hh.ServeHTTP(w, r)
	}))
	v.t.Cleanup(srv.Close)
	return srv.URL, func(secret string) {
		h.Store(agent.NewHTTPHandler(secret, func(_ context.Context, run agent.Run) (agent.Result, error) {
			v.httpCalls.Add(1)
			n, _ := v.httpRuns.LoadOrStore(run.ID, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"triaged": true}`)}, nil
		}))
	}
}

// natsAgent consumes the runs of the agent created with answer ag over
// NATS, connected as that agent, until the test ends.
func (v *e2e) natsAgent(ag map[string]any) {
	agentID, _ := ag["id"].(string)
	pw, _ := ag["nats_password"].(string)
	nc, err := agent.Connect("nats://"+v.natsAddr, agentID, pw, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := agent.Consume(ctx, js, agentID, func(ctx context.Context, run agent.Run) (agent.Result, error) {
				// A start is a run message's first delivery. The server
				// delivers a message again when its ack was late (a
				// loaded host) or lost: the same message, not a second
				// start, counted apart.
				counts := &v.natsRuns
				if agent.Attempt(ctx) > 1 {
					counts = &v.natsRedeliveries
				}
				n, _ := counts.LoadOrStore(run.ID, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"seen": true}`)}, nil
			}, agent.WithAckWait(10*time.Second))
			if err != nil && ctx.Err() == nil {
				// triggerd restarting: consume again once it is back.
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}()
	v.t.Cleanup(func() { cancel(); <-done })
}

// runs returns the tenant's runs.
func (v *e2e) runs(query string) []map[string]any {
	v.t.Helper()
	_, body := v.api(http.MethodGet, "/v1/runs?limit=1000&"+query, "", http.StatusOK)
	var out []map[string]any
	for _, r := range body["runs"].([]any) {
		out = append(out, r.(map[string]any))
	}
	return out
}

func countOf(m *sync.Map, id string) int64 {
	n, ok := m.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

func TestEndToEndTriggerStartsAgentsAndRunsPipeline(t *testing.T) {
	v := newE2E(t)
	pipeline := fmt.Sprintf(`[
		{"name": "look", "step": "codehost.get_issue", "account": %q, "input": {"owner": "{{ .repository.owner }}", "repo": "{{ .repository.name }}", "issue_number": "{{ .resource.number }}"}},
		{"name": "comment", "step": "codehost.create_issue_comment", "account": %q, "input": {"owner": "{{ .repository.owner }}", "repo": "{{ .repository.name }}", "issue_number": "{{ .steps.look.output.number }}", "body": "Triaging: {{ .steps.look.output.title }}"}}]`,
		v.account, v.account)
	_, natsAgent := v.api(http.MethodPost, "/v1/agents", `{"name": "triage-nats", "steps": `+pipeline+`}`, http.StatusCreated)
	agentURL, setSecret := v.httpAgent()
	_, httpAgent := v.api(http.MethodPost, "/v1/agents", `{"name": "triage-http", "delivery": "http", "url": "`+agentURL+`"}`, http.StatusCreated)
	secret, _ := httpAgent["webhook_secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("HTTP agent answer lacks its signing secret: %v", httpAgent)
	}
	setSecret(secret)
	natsID, httpID := natsAgent["id"].(string), httpAgent["id"].(string)
	v.natsAgent(natsAgent)

	// Creating the triggers registers one hook on the repository, through
	// the account, with the union of the events they need.
	trig := func(agentID, kind string) map[string]any {
		_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": %q, "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
			kind, v.account, agentID), http.StatusCreated)
		return tr
	}
	t1 := trig(natsID, "new_issue")
	t2 := trig(httpID, "new_issue")
	trig(httpID, "new_comment")
	hooks := v.gh.Hooks("octocat", "hello-world")
	if len(hooks) != 1 || !hooks[0].Active || strings.Join(hooks[0].Events, ",") != "issue_comment,issues,pull_request_review_comment" ||
		!strings.HasPrefix(hooks[0].URL, "http://"+v.httpAddr+"/webhooks/codehost/h_") {
		t.Fatalf("hooks on the fake = %+v; want one active hook for issues and the comment events at triggerd", hooks)
	}

	// An issue opened on GitHub: the fake delivers the signed webhook to
	// the hook, and both agents start once.
	issue := createIssue(t, v.gh, "Crash on start")
	var natsRun, httpRun map[string]any
	testenv.Eventually(t, 20*time.Second, "the trigger's run to succeed", func() bool {
		rs := v.runs("trigger=" + t1["id"].(string))
		if len(rs) == 1 && rs[0]["status"] == "succeeded" {
			natsRun = rs[0]
		}
		rs = v.runs("trigger=" + t2["id"].(string))
		if len(rs) == 1 && rs[0]["delivery_status"] == "delivered" {
			httpRun = rs[0]
		}
		return natsRun != nil && httpRun != nil
	})
	if c := countOf(&v.natsRuns, natsRun["id"].(string)); c != 1 {
		t.Errorf("the NATS agent received the run %d times, want 1", c)
	}
	if c := countOf(&v.httpRuns, httpRun["id"].(string)); c != 1 {
		t.Errorf("the HTTP agent received the run %d times, want 1", c)
	}
	steps := natsRun["steps"].([]any)
	comment := steps[1].(map[string]any)
	if len(steps) != 2 || comment["status"] != "succeeded" || comment["input"].(map[string]any)["body"] != "Triaging: Crash on start" {
		t.Fatalf("pipeline steps = %v", steps)
	}
	got, _ := v.gh.Issue("octocat", "hello-world", issue)
	if len(got.Comments) != 1 || got.Comments[0] != "Triaging: Crash on start" {
		t.Fatalf("comments on the issue = %q, want the pipeline's one comment", got.Comments)
	}
	// The HTTP agent's answer is recorded as the run's result; the NATS
	// agent's arrives over agents.<id>.results.
	if !strings.Contains(fmt.Sprint(httpRun["result"]), "triaged") {
		t.Errorf("HTTP run result = %v", httpRun["result"])
	}
	testenv.Eventually(t, 10*time.Second, "the NATS agent's result on the run", func() bool {
		_, r := v.api(http.MethodGet, "/v1/runs/"+natsRun["id"].(string), "", http.StatusOK)
		return strings.Contains(fmt.Sprint(r["result"]), "seen")
	})
	// The event's outcomes are readable, per candidate trigger.
	_, ev := v.api(http.MethodGet, "/v1/events/"+natsRun["event_id"].(string), "", http.StatusOK)
	outcomes := map[string]string{}
	for _, o := range ev["outcomes"].([]any) {
		om := o.(map[string]any)
		outcomes[om["trigger_id"].(string)] = om["result"].(string)
	}
	if outcomes[t1["id"].(string)] != "started" || outcomes[t2["id"].(string)] != "started" || len(outcomes) != 2 {
		t.Fatalf("outcomes = %v", outcomes)
	}
	// The pipeline's own comment came back as a new_comment event and
	// started the HTTP agent's comment trigger.
	testenv.Eventually(t, 20*time.Second, "both HTTP agent runs", func() bool { return len(v.runs("agent="+httpID)) == 2 })

	// A replay to one trigger starts a new, separate run.
	_, rep := v.api(http.MethodPost, "/v1/events/"+natsRun["event_id"].(string)+"/replay", `{"trigger_id": "`+t2["id"].(string)+`"}`, http.StatusAccepted)
	plans := rep["replay"].([]any)
	if len(plans) != 1 || plans[0].(map[string]any)["result"] != "queued" {
		t.Fatalf("replay = %v", rep)
	}
	replayRun := plans[0].(map[string]any)["run_id"].(string)
	deadline := time.Now().Add(20 * time.Second)
	for countOf(&v.httpRuns, replayRun) != 1 {
		if time.Now().After(deadline) {
			_, run := v.api(http.MethodGet, "/v1/runs/"+replayRun, "", 0)
			t.Fatalf("the replayed run %s did not reach the HTTP agent: %v\n%s", replayRun, run, v.p.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Deleting the last trigger on the repository removes the hook.
	_, list := v.api(http.MethodGet, "/v1/triggers", "", http.StatusOK)
	for _, tr := range list["triggers"].([]any) {
		v.api(http.MethodDelete, "/v1/triggers/"+tr.(map[string]any)["id"].(string), "", http.StatusNoContent)
	}
	if hooks := v.gh.Hooks("octocat", "hello-world"); len(hooks) != 0 {
		t.Fatalf("hooks left after deleting every trigger: %+v", hooks)
	}
}

func TestEndToEndWorkerKilledMidRunStartsNothingTwice(t *testing.T) {
	v := newE2E(t)
	pipeline := fmt.Sprintf(`[{"name": "comment", "step": "codehost.create_issue_comment", "account": %q,
		"input": {"owner": "{{ .repository.owner }}", "repo": "{{ .repository.name }}", "issue_number": "{{ .resource.number }}", "body": "run for #{{ .resource.number }}"}}]`, v.account)
	_, natsAgent := v.api(http.MethodPost, "/v1/agents", `{"name": "n", "steps": `+pipeline+`}`, http.StatusCreated)
	agentURL, setSecret := v.httpAgent()
	_, httpAgent := v.api(http.MethodPost, "/v1/agents", `{"name": "h", "delivery": "http", "url": "`+agentURL+`"}`, http.StatusCreated)
	setSecret(httpAgent["webhook_secret"].(string))
	natsID := natsAgent["id"].(string)
	v.natsAgent(natsAgent)
	for _, id := range []string{natsID, httpAgent["id"].(string)} {
		v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`, v.account, id), http.StatusCreated)
	}

	// The comment hangs upstream: the worker is killed in the middle of
	// the pipeline's step.
	route := fakecodehost.Route("POST /repos/{owner}/{repo}/issues/{issue_number}/comments")
	if err := v.gh.HangNext(route, 1); err != nil {
		t.Fatal(err)
	}
	issue := createIssue(t, v.gh, "Kill me")
	testenv.Eventually(t, 20*time.Second, "the comment request to reach the fake", func() bool { return len(v.gh.RequestsTo(route)) == 1 })
	v.p.kill()

	// After the restart the event is redelivered: the run is taken over
	// and its step, found running, is not sent again.
	v.start()
	testenv.Eventually(t, 30*time.Second, "the taken-over run to fail", func() bool {
		rs := v.runs("agent=" + natsID)
		return len(rs) == 1 && rs[0]["status"] == "failed"
	})
	r := v.runs("agent=" + natsID)[0]
	step := r["steps"].([]any)[0].(map[string]any)
	if step["status"] != "interrupted" || r["attempts"].(float64) < 2 {
		t.Fatalf("killed run = %v; want its step interrupted (not run again) after a second attempt", r)
	}
	testenv.Eventually(t, 20*time.Second, "the HTTP agent's first call", func() bool { return v.httpCalls.Load() >= 1 })
	// A new issue after the restart runs normally.
	next := createIssue(t, v.gh, "After restart")
	testenv.Eventually(t, 20*time.Second, "the issue comment after the restart", func() bool {
		got, _ := v.gh.Issue("octocat", "hello-world", next)
		return len(got.Comments) == 1
	})
	testenv.Eventually(t, 20*time.Second, "four runs", func() bool { return len(v.runs("")) == 4 })

	// Nothing started twice: one NATS run message per run (JetStream
	// holds exactly one per run id) and one HTTP run per webhook-id.
	nc, err := nats.Connect("nats://"+v.natsAddr, asOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), bus.AgentsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(agent.RunsSubject(natsID)))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[agent.RunsSubject(natsID)]; n != 2 {
		t.Errorf("the NATS agent's subject holds %d runs, want 2 (one per issue)", n)
	}
	runs := v.runs("")
	// The agent reconnects to the restarted NATS on its own: every NATS run
	// reaches it, once.
	testenv.Eventually(t, 30*time.Second, "every NATS run to reach the agent", func() bool {
		for _, run := range runs {
			if run["delivery"] == "nats" && countOf(&v.natsRuns, run["id"].(string)) == 0 {
				return false
			}
		}
		return true
	})
	for _, run := range runs {
		id := run["id"].(string)
		switch run["delivery"] {
		case "nats":
			if n := countOf(&v.natsRuns, id); n != 1 {
				t.Errorf("run %s reached the NATS agent as a first delivery %d times, want 1 (and %d times as a redelivery)",
					id, n, countOf(&v.natsRedeliveries, id))
			}
		case "http":
			// HTTP pushes are at least once, recognisable by webhook-id.
			if n := countOf(&v.httpRuns, id); n < 1 {
				t.Errorf("run %s never reached the HTTP agent", id)
			}
		}
	}
	// The interrupted comment was never retried: the hung request is the
	// only comment request for that issue.
	sent := 0
	for _, req := range v.gh.RequestsTo(route) {
		if strings.HasSuffix(req.Path, fmt.Sprintf("/issues/%d/comments", issue)) {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("%d comment requests for issue #%d; the interrupted step ran again", sent, issue)
	}
	t.Logf("killed run: attempts %v, step %v; HTTP agent calls %d for %d distinct runs", r["attempts"], step["status"], v.httpCalls.Load(), mapLen(&v.httpRuns))
}

func mapLen(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// createIssue opens an issue on the fake as octocat and returns its number.
func createIssue(t *testing.T, gh *fakecodehost.Server, title string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, gh.URL()+"/repos/octocat/hello-world/issues", strings.NewReader(`{"title": `+fmt.Sprintf("%q", title)+`}`))
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("User-Agent", "e2e-test")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Number int `json:"number"`
	}
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("create issue on the fake: %d", resp.StatusCode)
	}
	return out.Number
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestEndToEndAccountRemovalDeactivatesTriggers(t *testing.T) {
	v := newE2E(t)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "a"}`, http.StatusCreated)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_star", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
		v.account, ag["id"]), http.StatusCreated)
	if n := len(v.gh.Hooks("octocat", "hello-world")); n != 1 {
		t.Fatalf("%d hooks after creating the trigger, want 1", n)
	}
	v.api(http.MethodDelete, "/v1/accounts/"+v.account, "", http.StatusOK)
	_, got := v.api(http.MethodGet, "/v1/triggers/"+tr["id"].(string), "", http.StatusOK)
	if got["status"] != "inactive" || got["status_code"] != "account_removed" || !strings.Contains(fmt.Sprint(got["status_reason"]), "reconnect") {
		t.Fatalf("trigger after its account was removed = %v", got)
	}
	if n := len(v.gh.Hooks("octocat", "hello-world")); n != 0 {
		t.Fatalf("%d hooks left upstream after the account was removed, want 0", n)
	}
	// Reconnecting the same external account reactivates the trigger and
	// registers its hook again.
	if id := v.reconnect(); id != v.account {
		t.Fatalf("reconnecting gave account %s, want the same %s back", id, v.account)
	}
	_, got = v.api(http.MethodGet, "/v1/triggers/"+tr["id"].(string), "", http.StatusOK)
	if got["status"] != "active" || len(v.gh.Hooks("octocat", "hello-world")) != 1 {
		t.Fatalf("after reconnecting: trigger %v, hooks %d", got, len(v.gh.Hooks("octocat", "hello-world")))
	}
}

// TestEndToEndTriggerShowsItsAccountNeedsReauth: an account whose grant the
// provider refused shows on its triggers until it is reconnected.
func TestEndToEndTriggerShowsItsAccountNeedsReauth(t *testing.T) {
	v := newE2E(t)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "a"}`, http.StatusCreated)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_star", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
		v.account, ag["id"]), http.StatusCreated)
	path := "/v1/triggers/" + tr["id"].(string)
	if tr["account_status"] != "active" {
		t.Fatalf("new trigger = %v, want account_status active", tr)
	}
	// A token about to expire whose refresh the provider refuses: the next
	// use marks the account.
	v.auth.SetAccessTTL(10 * time.Second)
	v.reconnect()
	v.auth.RefuseRefresh(true)
	v.api(http.MethodPost, "/v1/steps/codehost.get_issue/run",
		fmt.Sprintf(`{"account": %q, "input": {"owner": "octocat", "repo": "hello-world", "issue_number": 1}}`, v.account), http.StatusConflict)
	_, got := v.api(http.MethodGet, path, "", http.StatusOK)
	if got["account_status"] != "needs_reauth" || got["account_status_reason"] == nil || got["status"] != "active" {
		t.Fatalf("trigger of an account needing reauth = %v", got)
	}
	_, list := v.api(http.MethodGet, "/v1/triggers", "", http.StatusOK)
	if ts := list["triggers"].([]any); len(ts) != 1 || ts[0].(map[string]any)["account_status"] != "needs_reauth" {
		t.Fatalf("trigger list = %v", list)
	}
	v.auth.RefuseRefresh(false)
	v.auth.SetAccessTTL(8 * time.Hour)
	v.reconnect()
	_, got = v.api(http.MethodGet, path, "", http.StatusOK)
	if got["account_status"] != "active" || got["account_status_reason"] != nil {
		t.Fatalf("trigger after reconnecting = %v", got)
	}
}

// startedCount reads triggerd_dispatch_outcomes_total{result="started"}.
func startedCount(t *testing.T, httpURL string) int {
	t.Helper()
	return metricValue(t, httpURL, `triggerd_dispatch_outcomes_total{result="started"}`)
}

// metricValue reads one sample (name and labels as /metrics prints them)
// from triggerd's /metrics; 0 when absent.
func metricValue(t *testing.T, httpURL, sample string) int {
	t.Helper()
	resp, err := client.Get(httpURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			var n float64
			fmt.Sscan(rest, &n)
			return int(n)
		}
	}
	return 0
}

func TestEndToEndTwoProcessesShareDispatch(t *testing.T) {
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	// The test Redis keeps nothing on disk: --redis-allow-volatile.
	v := newE2EWith(t, []string{"--redis-url", url, "--redis-prefix", prefix, "--redis-allow-volatile"}, []string{"TRIGGERD_ENCRYPTION_KEY=" + strings.Repeat("ab", 32)})
	// A second process on the same store and NATS, dispatching too.
	second := startTriggerd(t, append(v.env, "TRIGGERD_ENCRYPTION_KEY="+strings.Repeat("ab", 32)),
		"--redis-url", url, "--redis-prefix", prefix, "--redis-allow-volatile", "--nats-url", "nats://"+v.natsAddr, "--data-dir", v.dir,
		"--public-url", "http://"+v.httpAddr, "--reconcile-interval", "0", "--dispatch-ack-wait", "2s")
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "shared"}`, http.StatusCreated)
	v.natsAgent(ag)
	v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
		v.account, ag["id"]), http.StatusCreated)
	const n = 60
	for i := range n {
		createIssue(t, v.gh, fmt.Sprintf("shared %d", i))
	}
	testenv.Eventually(t, 30*time.Second, "every NATS run to reach the agent", func() bool { return mapLen(&v.natsRuns) == n })
	runs := v.runs("")
	if len(runs) != n {
		t.Fatalf("%d runs, want %d", len(runs), n)
	}
	for _, r := range runs {
		if c := countOf(&v.natsRuns, r["id"].(string)); c != 1 {
			t.Errorf("run %s reached the agent %d times", r["id"], c)
		}
	}
	a, b := startedCount(t, "http://"+v.httpAddr), startedCount(t, second.httpURL)
	if a+b != n || a == 0 || b == 0 {
		t.Errorf("runs started by the two processes: %d and %d; want both to share the %d", a, b, n)
	}
	t.Logf("the two processes started %d and %d runs", a, b)
}

func TestEndToEndPolledGistStartsAgent(t *testing.T) {
	v := newE2EWith(t, []string{"--poll-interval", "200ms"}, nil)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "gists"}`, http.StatusCreated)
	v.natsAgent(ag)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_gist", "account": %q, "agent": %q}`, v.account, ag["id"]), http.StatusCreated)
	if hooks := tr["hooks"].([]any); len(hooks) != 0 {
		t.Fatalf("a polled kind registered hooks: %v", hooks)
	}
	req, _ := http.NewRequest(http.MethodPost, v.gh.URL()+"/gists", strings.NewReader(`{"description": "notes", "public": true, "files": {"a.md": {"content": "hi"}}}`))
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("User-Agent", "e2e-test")
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create gist: %v %v", err, resp)
	}
	resp.Body.Close()
	testenv.Eventually(t, 20*time.Second, "the polled gist's run", func() bool { return mapLen(&v.natsRuns) == 1 })
	runs := v.runs("trigger=" + tr["id"].(string))
	if len(runs) != 1 || runs[0]["kind"] != "new_gist" {
		t.Fatalf("runs = %v", runs)
	}
}

// GitHub never redelivers on its own: issues opened while triggerd was
// down reach their agent once it is back, because the reconcile asks
// GitHub to redeliver what failed.
func TestEndToEndDeliveriesMissedWhileDownAreHealed(t *testing.T) {
	v := newE2EWith(t, []string{"--reconcile-interval", "1s"}, nil)
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "healed"}`, http.StatusCreated)
	v.natsAgent(ag)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": ["octocat/hello-world"]}}`,
		v.account, ag["id"]), http.StatusCreated)

	if code := v.p.stop(); code != 0 {
		t.Fatalf("triggerd exited %d", code)
	}
	for i := range 3 {
		createIssue(t, v.gh, fmt.Sprintf("while down %d", i))
	}
	if err := v.gh.WaitDeliveries(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, d := range v.gh.Deliveries() {
		if d.Event == "issues" && d.StatusCode == 0 {
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("%d failed deliveries while triggerd was down, want 3", failed)
	}

	v.start()
	testenv.Eventually(t, 30*time.Second, "a run for each issue opened while triggerd was down", func() bool {
		return len(v.runs("trigger="+tr["id"].(string))) == 3 && mapLen(&v.natsRuns) == 3
	})
	for _, r := range v.runs("") {
		if c := countOf(&v.natsRuns, r["id"].(string)); c != 1 {
			t.Errorf("run %s reached the agent %d times, want 1", r["id"], c)
		}
	}
	redelivered := 0
	for _, d := range v.gh.Deliveries() {
		if d.Redelivery && d.StatusCode == http.StatusAccepted {
			redelivered++
		}
	}
	if redelivered != 3 {
		t.Errorf("%d redeliveries answered 202, want 3", redelivered)
	}
	if n := metricValue(t, "http://"+v.httpAddr, `triggerd_registry_redeliveries_total{result="requested"}`); n != 3 {
		t.Errorf("triggerd_registry_redeliveries_total{result=\"requested\"} = %d, want 3", n)
	}
	_, got := v.api(http.MethodGet, "/v1/triggers/"+tr["id"].(string), "", http.StatusOK)
	if hooks := got["hooks"].([]any); len(hooks) != 1 || hooks[0].(map[string]any)["healed_through"] == nil {
		t.Errorf("trigger hooks = %v; want healed_through shown", got["hooks"])
	}
}

// A Status change in the older projects_v2_item payload shape (the field's
// node id only) starts the trigger's agent once triggerd has read the
// field's name from GitHub as the trigger's account; a change of another
// single-select field starts nothing and says why.
func TestEndToEndOldShapeProjectStatusChange(t *testing.T) {
	const secret = "shared-secret"
	v := newE2EWith(t, nil, []string{"TRIGGERD_CODEHOST_WEBHOOK_SECRET=" + secret})
	_, ag := v.api(http.MethodPost, "/v1/agents", `{"name": "board"}`, http.StatusCreated)
	_, tr := v.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "project_item_status_changed", "account": %q, "agent": %q, "params": {"organization": "octo-org"}}`,
		v.account, ag["id"]), http.StatusCreated)
	send := func(id, fieldID string) string {
		t.Helper()
		body := fmt.Sprintf(`{"action":"edited","projects_v2_item":{"id":7,"node_id":%q,"project_node_id":%q,"content_type":"Issue"},`+
			`"changes":{"field_value":{"field_node_id":%q,"field_type":"single_select"}},"organization":{"login":"octo-org"},"sender":{"login":"octocat"}}`,
			fakecodehost.SeedItemID, fakecodehost.SeedProjectID, fieldID)
		r, err := post("http://"+v.httpAddr, secret, delivery{event: "projects_v2_item", id: id, body: []byte(body)})
		if err != nil || r.status != http.StatusAccepted || len(r.body.Events) != 1 {
			t.Fatalf("delivery %s: %+v, %v", id, r, err)
		}
		return r.body.Events[0].ID
	}
	outcome := func(eventID string) map[string]any {
		t.Helper()
		var o map[string]any
		testenv.Eventually(t, 20*time.Second, "the event's outcome", func() bool {
			code, ev := v.api(http.MethodGet, "/v1/events/"+eventID, "", 0)
			if code != http.StatusOK {
				return false
			}
			os, _ := ev["outcomes"].([]any)
			if len(os) == 1 {
				o = os[0].(map[string]any)
			}
			return o != nil
		})
		return o
	}
	if o := outcome(send("d-priority", fakecodehost.SeedPriorityFieldID)); o["result"] != "filtered_out" ||
		o["reason"] != `project field "Priority" (`+fakecodehost.SeedPriorityFieldID+`) is not Status` {
		t.Errorf("Priority change: outcome %v", o)
	}
	if o := outcome(send("d-status", fakecodehost.SeedFieldID)); o["result"] != "started" || o["trigger_id"] != tr["id"] {
		t.Errorf("Status change: outcome %v", o)
	}
	if rs := v.runs("trigger=" + tr["id"].(string)); len(rs) != 1 {
		t.Errorf("%d runs of the trigger, want 1", len(rs))
	}
}
