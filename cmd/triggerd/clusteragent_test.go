package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/sandbox/fakecodehost"
	"github.com/triggerd/triggerd/sandbox/fakeoauth"
	"github.com/triggerd/triggerd/store/storetest"
)

// agentRig is what triggerd processes on one NATS need to start agents
// for the deliveries of a load: a Redis store they share, a fake code host
// with an account connected to it, and a NATS agent whose trigger takes
// every issue opened in the fake's repository. The agent counts the runs
// it starts per event id.
type agentRig struct {
	t        *testing.T
	gh       *fakecodehost.Server
	auth     *fakeoauth.GitHub
	httpAddr string // the first process's, where OAuth calls back
	args     []string
	env      []string
	key      string // the default tenant's API key
	agentID  string
	password string // the agent's NATS password, as triggerd gave it
	// starts counts each event's runs by their first delivery,
	// redeliveries the deliveries after it.
	starts, redeliveries sync.Map
}

// newAgentRig prepares the store and the fake code host; Args gives each
// process its flags, Setup connects the account and creates the agent and
// its trigger once a process is up.
func newAgentRig(t *testing.T) *agentRig {
	t.Helper()
	url, prefix := storetest.RedisURL(t), storetest.Prefix(t)
	r := &agentRig{t: t, httpAddr: freeAddr(t)}
	r.gh = fakecodehost.New(fakecodehost.Options{})
	r.gh.Start()
	t.Cleanup(r.gh.Close)
	r.auth = fakeoauth.NewGitHub(t)
	public := "http://" + r.httpAddr
	r.auth.Config(public + "/v1/connect/codehost/callback")
	// The test Redis keeps nothing on disk: --redis-allow-volatile.
	r.args = []string{
		"--redis-url", url, "--redis-prefix", prefix, "--redis-allow-volatile", "--public-url", public,
		"--codehost-client-id", r.auth.ClientID, "--codehost-auth-base-url", r.auth.URL(), "--codehost-api-base-url", r.gh.URL(),
		"--allow-private-provider-urls", // the fakes listen on loopback
		"--dispatch-ack-wait", "2s", "--reconcile-interval", "0",
	}
	r.env = []string{"TRIGGERD_CODEHOST_CLIENT_SECRET=" + r.auth.ClientSecret, "TRIGGERD_ENCRYPTION_KEY=" + strings.Repeat("ab", 32)}
	return r
}

// Args returns process i's flags: the first one listens where OAuth calls
// back.
func (r *agentRig) Args(i int) []string {
	if i == 0 {
		return append([]string{"--http-addr", r.httpAddr}, r.args...)
	}
	return r.args
}

// Setup connects the code-hosting account through the first process,
// whose data dir holds the default tenant's key, and creates the agent
// and its trigger on new issues in the fake's repository.
func (r *agentRig) Setup(dataDir string) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "default_tenant_key"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.key = strings.TrimSpace(string(b))
	start := r.api(http.MethodGet, "/v1/connect/codehost/start", "", http.StatusOK)
	query, err := r.auth.SignIn(context.Background(), start["authorize_url"].(string))
	if err != nil {
		r.t.Fatal(err)
	}
	cb := r.api(http.MethodGet, "/v1/connect/codehost/callback?"+query.Encode(), "", http.StatusOK)
	account := cb["account"].(map[string]any)["id"].(string)
	ag := r.api(http.MethodPost, "/v1/agents", `{"name": "cluster-load"}`, http.StatusCreated)
	r.agentID, r.password = ag["id"].(string), ag["nats_password"].(string)
	r.api(http.MethodPost, "/v1/triggers", fmt.Sprintf(`{"kind": "new_issue", "account": %q, "agent": %q, "params": {"repositories": [%q]}}`,
		account, r.agentID, fakecodehost.SeedOwner+"/"+fakecodehost.SeedRepo), http.StatusCreated)
}

// get reads path, whatever it answers.
func (r *agentRig) get(path string) (int, map[string]any) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+r.httpAddr+path, nil)
	req.Header.Set("Authorization", "Bearer "+r.key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (r *agentRig) api(method, path, body string, want int) map[string]any {
	r.t.Helper()
	req, _ := http.NewRequest(method, "http://"+r.httpAddr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+r.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		r.t.Fatalf("%s %s: %d %v, want %d", method, path, resp.StatusCode, out, want)
	}
	return out
}

// Consume runs the agent on the NATS at url, as user and password (the
// agent's own when user is empty), until the test ends or stop is called:
// it counts each run it starts under the run's event id and answers it.
func (r *agentRig) Consume(url, user, password string) (stop func()) {
	r.t.Helper()
	if user == "" {
		user, password = r.agentID, r.password
	}
	nc, err := agent.Connect(url, user, password, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := agent.Consume(ctx, js, user, func(ctx context.Context, run agent.Run) (agent.Result, error) {
				var ev struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(run.Event, &ev); err != nil || ev.ID == "" {
					return agent.Result{}, fmt.Errorf("run %s: no event id: %v", run.ID, err)
				}
				// A start is a run message's first delivery; the server
				// delivers it again when the ack was late or lost with
				// a killed server: the same message, counted apart.
				counts := &r.starts
				if agent.Attempt(ctx) > 1 {
					counts = &r.redeliveries
				}
				n, _ := counts.LoadOrStore(ev.ID, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				return agent.Result{Status: agent.StatusSucceeded, Output: json.RawMessage(`{"seen": true}`)}, nil
			}, agent.WithAckWait(10*time.Second))
			if err != nil && ctx.Err() == nil {
				r.t.Logf("the agent's consumer stopped: %v", err)
				// A server killed or electing: consume again. The
				// wait is the retry's pace, not a wait for a state.
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done; nc.Close() }) }
	r.t.Cleanup(stop)
	return stop
}

// Started returns how many times the agent started a run of event id.
func (r *agentRig) Started(id string) int64 {
	n, ok := r.starts.Load(id)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// CheckStartedOnce waits until the agent has started a run for every
// event id in want, then fails the test for each event it started more
// than once.
func (r *agentRig) CheckStartedOnce(want map[string]bool) {
	r.t.Helper()
	if len(want) == 0 {
		r.t.Fatal("no event to start the agent")
	}
	missing := 0
	r.t.Cleanup(func() {
		if missing > 0 {
			_, runs := r.get("/v1/runs?limit=1000")
			_, events := r.get("/v1/events?limit=5")
			r.t.Logf("%d of %d accepted events started no run of the agent; triggerd's runs: %.300v; events: %.1500v", missing, len(want), runs, events)
		}
	})
	testenv.Eventually(r.t, 30*time.Second, "the agent to start a run for every accepted event", func() bool {
		missing = 0
		for id := range want {
			if r.Started(id) == 0 {
				missing++
			}
		}
		return missing == 0
	})
	twice, stray := 0, 0
	r.starts.Range(func(k, v any) bool {
		id, n := k.(string), v.(*atomic.Int64).Load()
		if !want[id] {
			// A delivery answered 5xx whose events were committed
			// all the same: the sender redelivers it, and the
			// duplicate check keeps that from starting it again.
			stray++
		}
		if n > 1 {
			twice++
			r.t.Errorf("event %s started the agent %d times (and reached it %d times more as a redelivery)", id, n, countOf(&r.redeliveries, id))
		}
		return true
	})
	r.t.Logf("the agent started a run for each of the %d accepted events (and %d others); %d started twice", len(want), stray, twice)
}

// helloIssueBody is issueBody in the fake's repository, which the rig's
// trigger watches.
func helloIssueBody(n int) []byte {
	return []byte(strings.Replace(string(issueBody(n)), `"repository":{"id":9,"name":"api","full_name":"octo-org/api","owner":{"login":"octo-org"}}`,
		`"repository":{"id":9,"name":"`+fakecodehost.SeedRepo+`","full_name":"`+fakecodehost.SeedOwner+"/"+fakecodehost.SeedRepo+`","owner":{"login":"`+fakecodehost.SeedOwner+`"}}`, 1))
}
