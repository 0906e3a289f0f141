package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
)

// flakyProvider answers 502 to one account's token while failing is set,
// and 200 otherwise; hold, when set, keeps a request waiting until it is
// closed. It counts the requests of each token.
type flakyProvider struct {
	failing atomic.Bool
	mu      sync.Mutex
	hits    map[string]int
	hold    chan struct{}
	held    chan struct{}
}

func (p *flakyProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	p.hits[tok]++
	hold, held := p.hold, p.held
	p.mu.Unlock()
	if hold != nil {
		held <- struct{}{}
		<-hold
	}
	if tok == "tok-acc_gh" && p.failing.Load() {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	}
	fmt.Fprint(w, `{"ok":true}`)
}

// holdRequests makes requests wait until release; each one arriving is
// announced on the returned channel (buffered for n).
func (p *flakyProvider) holdRequests(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold, p.held = make(chan struct{}), make(chan struct{}, n)
	return p.held
}

// release lets the held requests, and every later one, through.
func (p *flakyProvider) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.hold)
	p.hold = nil
}

func (p *flakyProvider) count(tok string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[tok]
}

// fetchStep reads one URL and fails with the provider's status on a 5xx.
func fetchStep(url string) connectors.Step {
	return connectors.Step{
		ID: "codehost.fetch", Name: "Fetch", Connector: "codehost", Description: "Reads a URL.",
		Input: json.RawMessage(`{"type":"object"}`), Output: json.RawMessage(`{"type":"object"}`),
		Run: func(ctx context.Context, env connectors.Env, _ json.RawMessage) (any, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := env.HTTP.Do(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				return nil, &connectors.Error{Code: connectors.CodeUpstream, Status: resp.StatusCode, Message: "the provider failed"}
			}
			return map[string]bool{"ok": true}, nil
		},
	}
}

func newBreakerRunner(t *testing.T) (*Runner, *flakyProvider, *testenv.Clock, *[]CircuitChange) {
	t.Helper()
	p := &flakyProvider{hits: map[string]int{}}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	clock := testenv.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	changes := new([]CircuitChange)
	r, err := New(Options{
		Toolkits: []connectors.Toolkit{{Connector: "codehost", Steps: []connectors.Step{fetchStep(srv.URL)}}},
		Accounts: fakeAccounts{accounts: map[string]store.Account{
			"acc_gh":  {ID: "acc_gh", TenantID: "t1", Connector: "codehost"},
			"acc_gh2": {ID: "acc_gh2", TenantID: "t1", Connector: "codehost"},
		}},
		BreakerThreshold: 3,
		BreakerCooldown:  30 * time.Second,
		Now:              clock.Now,
		OnCircuitChange: func(c CircuitChange) {
			mu.Lock()
			defer mu.Unlock()
			*changes = append(*changes, c)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, p, clock, changes
}

func fetch(r *Runner, account string) error {
	_, err := r.Run(context.Background(), "t1", "codehost.fetch", account, json.RawMessage(`{}`))
	return err
}

func wantCode(t *testing.T, err error, code connectors.ErrorCode, retryAfter time.Duration) {
	t.Helper()
	var ce *connectors.Error
	if !errors.As(err, &ce) || ce.Code != code || ce.RetryAfter != retryAfter {
		t.Fatalf("err = %v (%+v), want %s with RetryAfter %s", err, ce, code, retryAfter)
	}
}

// An account whose provider keeps failing has its steps held back unsent
// after BreakerThreshold failures in a row; other accounts run on; after
// the cooldown one step probes, a failed probe doubles the wait, and an
// answered one lets every step through again.
func TestFailingProviderHoldsBackTheAccountsSteps(t *testing.T) {
	r, p, clock, changes := newBreakerRunner(t)
	// openCircuit fails 2 steps, has one answered, which resets the count,
	// then fails the 3 in a row that open the circuit.
	openCircuit := func() {
		t.Helper()
		p.failing.Store(true)
		for range 2 {
			wantCode(t, fetch(r, "acc_gh"), connectors.CodeUpstream, 0)
		}
		p.failing.Store(false)
		if err := fetch(r, "acc_gh"); err != nil {
			t.Fatal(err)
		}
		p.failing.Store(true)
		for range 3 {
			wantCode(t, fetch(r, "acc_gh"), connectors.CodeUpstream, 0)
		}
	}

	// Failures in a row open the circuit; an answer in between resets
	// the count.
	openCircuit()
	if got := p.count("tok-acc_gh"); got != 6 {
		t.Fatalf("provider saw %d requests, want 6", got)
	}

	// Open: refused unsent, with the time a probe will be let through.
	err := fetch(r, "acc_gh")
	wantCode(t, err, connectors.CodeUnavailable, 30*time.Second)
	if !strings.Contains(err.Error(), "3 requests in a row") || !strings.Contains(err.Error(), "upstream 502") {
		t.Fatalf("err = %v: say how many failures and the last one", err)
	}
	if got := p.count("tok-acc_gh"); got != 6 {
		t.Fatalf("an open circuit sent a request (%d)", got)
	}
	if len(*changes) != 1 || !(*changes)[0].Open || (*changes)[0].Failures != 3 || (*changes)[0].AccountID != "acc_gh" {
		t.Fatalf("changes = %+v, want one opening after 3 failures", *changes)
	}
	// Another account of the same provider is not held back.
	if err := fetch(r, "acc_gh2"); err != nil {
		t.Fatal(err)
	}

	// The cooldown ends: one probe is sent and fails; the next wait is
	// twice as long.
	clock.Advance(30 * time.Second)
	wantCode(t, fetch(r, "acc_gh"), connectors.CodeUpstream, 0)
	if got := p.count("tok-acc_gh"); got != 7 {
		t.Fatalf("the probe sent %d requests, want 1", got-6)
	}
	wantCode(t, fetch(r, "acc_gh"), connectors.CodeUnavailable, time.Minute)

	// The provider recovers. While the probe waits for its answer, other
	// steps are held back; its answer closes the circuit.
	p.failing.Store(false)
	clock.Advance(time.Minute)
	held := p.holdRequests(0)
	probe := make(chan error, 1)
	go func() { probe <- fetch(r, "acc_gh") }()
	<-held
	wantCode(t, fetch(r, "acc_gh"), connectors.CodeUnavailable, 6*time.Second)
	p.release()
	if err := <-probe; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if err := fetch(r, "acc_gh"); err != nil {
		t.Fatalf("after a good probe: %v", err)
	}
	last := (*changes)[len(*changes)-1]
	if len(*changes) != 3 || last.Open || last.AccountID != "acc_gh" {
		t.Fatalf("changes = %+v, want open, open again, closed", *changes)
	}

	// Closed means closed: it takes the threshold again to open it, and
	// it opens with the first cooldown again, not the doubled one.
	openCircuit()
	wantCode(t, fetch(r, "acc_gh"), connectors.CodeUnavailable, 30*time.Second)
}

// A step called off (its caller went away) says nothing about the
// provider: it neither counts as a failure nor ends a probe as one.
func TestCalledOffStepsDoNotOpenTheCircuit(t *testing.T) {
	r, p, clock, changes := newBreakerRunner(t)
	calledOff := func() {
		t.Helper()
		held := p.holdRequests(1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := r.Run(ctx, "t1", "codehost.fetch", "acc_gh", json.RawMessage(`{}`))
			done <- err
		}()
		<-held
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a called-off step succeeded")
		}
		p.release()
	}
	for range 5 {
		calledOff()
	}
	if len(*changes) != 0 {
		t.Fatalf("changes = %+v: called-off steps opened the circuit", *changes)
	}
	if err := fetch(r, "acc_gh"); err != nil {
		t.Fatal(err)
	}

	// Open the circuit, and call its probe off: the circuit stays open
	// for the next step to probe at once, not for twice as long.
	p.failing.Store(true)
	for range 3 {
		wantCode(t, fetch(r, "acc_gh"), connectors.CodeUpstream, 0)
	}
	clock.Advance(30 * time.Second)
	calledOff()
	before := p.count("tok-acc_gh")
	p.failing.Store(false)
	if err := fetch(r, "acc_gh"); err != nil {
		t.Fatalf("the step after a called-off probe: %v; want it sent as the next probe", err)
	}
	if got := p.count("tok-acc_gh"); got != before+1 {
		t.Fatalf("provider saw %d more requests, want 1", got-before)
	}
	if last := (*changes)[len(*changes)-1]; len(*changes) != 2 || last.Open {
		t.Fatalf("changes = %+v, want open, then closed by the second probe", *changes)
	}
}
