package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/dispatch/push"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/triggers"
)

// fakeSteps records the steps it runs; fail makes a step id fail, refuse
// makes its next n calls fail with refusal.
type fakeSteps struct {
	mu      sync.Mutex
	calls   []stepCall
	fail    map[string]error
	refuse  map[string]int
	refusal error
	block   chan struct{} // when set, every call waits for it
	// out is the output of a step id, instead of the default one.
	out map[string]string
}

type stepCall struct {
	Step, Account string
	Input         map[string]any
}

func (f *fakeSteps) Run(ctx context.Context, tenantID, stepID, accountID string, input json.RawMessage) (json.RawMessage, error) {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var in map[string]any
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.calls = append(f.calls, stepCall{stepID, accountID, in})
	n := len(f.calls)
	err := f.fail[stepID]
	if f.refuse[stepID] > 0 {
		f.refuse[stepID]--
		err = f.refusal
	}
	out, ok := f.out[stepID]
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if ok {
		return json.RawMessage(out), nil
	}
	return json.RawMessage(fmt.Sprintf(`{"id": %d, "number": 7, "url": "https://example.test/c/%d"}`, n, n)), nil
}

func (f *fakeSteps) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

type harness struct {
	t     testing.TB
	bus   *bus.Bus
	js    jetstream.JetStream
	store store.Store
	steps *fakeSteps
	d     *dispatch.Dispatcher
	stop  func()
}

func newHarness(t testing.TB, o dispatch.Options) *harness {
	t.Helper()
	b, emb := bustest.Start(t)
	return newHarnessOn(t, o, b, emb)
}

// newHarnessOn is newHarness on a bus of the test's own.
func newHarnessOn(t testing.TB, o dispatch.Options, b *bus.Bus, emb *bus.Embedded) *harness {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "triggerd.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newHarnessWith(t, o, b, emb, st)
}

// newHarnessWith is newHarnessOn with a store of the test's own.
func newHarnessWith(t testing.TB, o dispatch.Options, b *bus.Bus, emb *bus.Embedded, st store.Store) *harness {
	t.Helper()
	nc, err := nats.Connect(emb.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	h := &harness{t: t, bus: b, js: js, store: st, steps: &fakeSteps{fail: map[string]error{}, refuse: map[string]int{}, out: map[string]string{}}}
	o.Store, o.Steps = st, h.steps
	if o.Queue == nil {
		o.Queue = b
	}
	if o.SharedTenant == "" {
		// The harness's triggers are t1's and its deliveries unscoped, as
		// those of the shared endpoints: t1 owns them.
		o.SharedTenant = "t1"
	}
	if o.AckWait == 0 {
		o.AckWait = 2 * time.Second
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 2 * time.Second
	}
	h.d, err = dispatch.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// start runs the dispatcher until the test ends.
func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.d.Run(ctx) }()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("dispatcher: %v", err)
		}
	}
	h.t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
}

func (h *harness) agent(id string, steps ...store.PipelineStep) store.Agent {
	h.t.Helper()
	a, err := h.store.CreateAgent(context.Background(), store.Agent{
		ID: id, TenantID: "t1", Name: id, Delivery: store.DeliverNATS, Steps: steps, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

func (h *harness) trigger(id, agentID string, kind triggers.Kind, params match.Params, filter string) {
	h.t.Helper()
	p, _ := json.Marshal(params)
	_, err := h.store.CreateTrigger(context.Background(), store.Trigger{
		ID: id, TenantID: "t1", Kind: string(kind), AccountID: "acc1", AgentID: agentID, Enabled: true,
		Params: p, Filter: filter, Status: store.TriggerActive, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// deliver commits an issues.opened delivery and returns its new_issue event.
func (h *harness) deliver(id, repo string, number int, labels ...string) triggers.Event {
	h.t.Helper()
	payload, events := h.deliverEvents(id, repo, number, labels...)
	h.commitEvents(id, payload, events)
	return newIssueEvent(h.t, events)
}

// commitEvents commits an issues.opened delivery that deliverEvents mapped.
func (h *harness) commitEvents(id string, payload []byte, events []triggers.Event) {
	h.t.Helper()
	if _, err := h.bus.Commit(context.Background(), triggers.Capture{Connector: triggers.CodeHost, DeliveryID: id, ReceivedAt: time.Now(), Body: payload}, events); err != nil {
		h.t.Fatal(err)
	}
}

// newIssueEvent returns the new_issue event among events.
func newIssueEvent(t testing.TB, events []triggers.Event) triggers.Event {
	t.Helper()
	for _, e := range events {
		if e.Kind == triggers.NewIssue {
			return e
		}
	}
	t.Fatal("no new_issue event")
	return triggers.Event{}
}

// deliverEvents maps an issues.opened delivery without committing it: its
// payload and events.
func (h *harness) deliverEvents(id, repo string, number int, labels ...string) ([]byte, []triggers.Event) {
	h.t.Helper()
	owner, name, _ := strings.Cut(repo, "/")
	var ls []string
	for _, l := range labels {
		ls = append(ls, fmt.Sprintf(`{"name": %q}`, l))
	}
	payload := fmt.Sprintf(`{"action": "opened", "issue": {"number": %d, "title": "Crash on start", "body": "it fails", "html_url": "https://github.com/%s/issues/%d", "user": {"login": "octocat"}, "labels": [%s]},
		"repository": {"id": 1, "name": %q, "full_name": %q, "owner": {"login": %q}, "private": false}, "sender": {"login": "octocat"}}`,
		number, repo, number, strings.Join(ls, ","), name, repo, owner)
	res, err := triggers.Map(triggers.Delivery{Connector: triggers.CodeHost, ID: id, Event: "issues", ReceivedAt: time.Now(), Payload: []byte(payload)})
	if err != nil {
		h.t.Fatal(err)
	}
	return []byte(payload), res.Events
}

// waitRun polls until the run reaches a final state.
func (h *harness) waitRun(id string) store.Run {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r, err := h.store.GetRun(context.Background(), "t1", id)
		if err == nil && (r.Status == store.RunSucceeded || r.Status == store.RunFailed) {
			return r
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s did not finish: %+v (err %v)", id, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// subjectCount counts the messages a stream holds on subject.
func (h *harness) subjectCount(stream, subject string) uint64 {
	h.t.Helper()
	s, err := h.js.Stream(context.Background(), stream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// waitPending polls until the events consumer has nothing pending.
func (h *harness) waitPending() {
	h.t.Helper()
	h.waitSettled(bus.EventsStream, dispatch.EventsConsumer)
}

// waitSettled polls until a consumer of stream has nothing pending nor
// waiting for an acknowledgement.
func (h *harness) waitSettled(stream, consumer string) {
	h.t.Helper()
	testenv.Eventually(h.t, 15*time.Second, consumer+" consumer settled", func() bool {
		info := h.consumerInfo(stream, consumer)
		return info != nil && info.NumPending == 0 && info.NumAckPending == 0
	})
}

// consumerInfo returns a consumer's info, or nil before it exists.
func (h *harness) consumerInfo(stream, consumer string) *jetstream.ConsumerInfo {
	h.t.Helper()
	c, err := h.js.Consumer(context.Background(), stream, consumer)
	if err != nil {
		return nil
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return nil
	}
	return info
}

func TestDispatchStartsAgentAndRunsPipeline(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1",
		store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
			Input: json.RawMessage(`{"repository": "{{ .repository.full_name }}", "issue_number": "{{ .resource.number }}", "body": "Triage of #{{ .resource.number }}: {{ .payload.issue.title }}"}`)},
		store.PipelineStep{Name: "label", Step: "codehost.add_labels", Account: "acc1",
			Input: json.RawMessage(`{"issue_number": "{{ .resource.number }}", "note": "after comment {{ .steps.comment.output.id }}", "ref": "{{ .steps.comment.output.number }}"}`)},
	)
	h.agent("agent-2")
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}, Labels: []string{"bug"}}, "")
	h.trigger("trig-c", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/other"}}, "")
	h.start()

	ev := h.deliver("d-1", "octo-org/api", 42, "question")
	runID := dispatch.RunID(ev.ID, "trig-a", "")
	r := h.waitRun(runID)
	if r.Status != store.RunSucceeded || len(r.Steps) != 2 {
		t.Fatalf("run = %+v, want succeeded with 2 steps", r)
	}
	if h.steps.count() != 2 {
		t.Fatalf("steps run %d times, want 2", h.steps.count())
	}
	first := h.steps.calls[0].Input
	if first["repository"] != "octo-org/api" || first["issue_number"] != float64(42) || first["body"] != "Triage of #42: Crash on start" {
		t.Errorf("first step input = %v", first)
	}
	second := h.steps.calls[1].Input
	if second["note"] != "after comment 1" || second["ref"] != float64(7) {
		t.Errorf("second step input = %v (templates over the first step's output)", second)
	}
	if got := h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")); got != 1 {
		t.Errorf("agent-1 got %d runs, want 1", got)
	}
	h.waitPending()
	rec, err := h.store.GetEvent(context.Background(), "t1", ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range rec.Outcomes {
		got[o.TriggerID] = o.Result + ":" + o.Reason
	}
	if got["trig-a"] != "started:" || !strings.HasPrefix(got["trig-b"], "filtered_out:labels [question] include none of [bug]") || len(got) != 2 {
		t.Errorf("outcomes = %v; want trig-a started, trig-b filtered out by labels, trig-c not a candidate", got)
	}

	// The same event again (a redelivery JetStream could not deduplicate)
	// starts nothing and runs no step twice.
	data, _ := json.Marshal(ev)
	if err := h.bus.Publish(context.Background(), ev.Subject(), "again-"+ev.ID, data); err != nil {
		t.Fatal(err)
	}
	h.waitPending()
	if h.steps.count() != 2 || h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")) != 1 {
		t.Errorf("a redelivered event ran %d steps and %d runs; want 2 and 1", h.steps.count(), h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")))
	}
}

func TestFailingStepStopsRun(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.steps.fail["codehost.create_comment"] = connectors.Errorf(connectors.CodePermissionDenied, "the account cannot comment on octo-org/api")
	h.agent("agent-1",
		store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{"body": "hi"}`)},
		store.PipelineStep{Name: "after", Step: "codehost.add_labels", Account: "acc1", Input: json.RawMessage(`{}`)},
	)
	h.agent("agent-2", store.PipelineStep{Name: "bad", Step: "codehost.get_issue", Account: "acc1", Input: json.RawMessage(`{"n": "{{ .resource.nope }}"}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.trigger("trig-b", "agent-2", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	ev := h.deliver("d-2", "octo-org/api", 5)
	r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", ""))
	if r.Status != store.RunFailed || r.Steps[0].Status != store.StepFailed || r.Steps[0].Error.Code != "permission_denied" || r.Steps[1].Status != store.StepSkipped {
		t.Fatalf("run = %+v; want failed at step 1 with permission_denied and step 2 skipped", r)
	}
	r = h.waitRun(dispatch.RunID(ev.ID, "trig-b", ""))
	if r.Status != store.RunFailed || r.Steps[0].Error == nil || r.Steps[0].Error.Code != "template" || !strings.Contains(r.Steps[0].Error.Message, "no field .resource.nope") {
		t.Fatalf("run = %+v; want a template error naming the missing field", r)
	}
	if h.steps.count() != 1 {
		t.Errorf("%d steps ran, want 1", h.steps.count())
	}
}

// A trigger whose agent no longer exists fails its run with
// agent_not_found; the run still says how it would have been delivered.
func TestRunForDeletedAgentFails(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.trigger("trig-gone", "agent-gone", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	ev := h.deliver("d-gone", "octo-org/api", 6)
	r := h.waitRun(dispatch.RunID(ev.ID, "trig-gone", ""))
	if r.Status != store.RunFailed || r.Error == nil || r.Error.Code != "agent_not_found" {
		t.Fatalf("run = %+v; want failed with agent_not_found", r)
	}
	if r.Delivery != store.DeliverNATS {
		t.Errorf("run delivery = %q, want %q", r.Delivery, store.DeliverNATS)
	}
}

func TestInterruptedStepIsNotRunAgain(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Input: json.RawMessage(`{}`)})
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	// A worker died while the step ran: its claim has expired.
	ev := h.deliver("d-3", "octo-org/api", 9)
	past := time.Now().Add(-time.Hour)
	_, err := h.store.CreateRun(context.Background(), store.Run{
		ID: dispatch.RunID(ev.ID, "trig-a", ""), TenantID: "t1", EventID: ev.ID, TriggerID: "trig-a", AgentID: "agent-1",
		Kind: "new_issue", Status: store.RunStarted, Attempts: 1, ClaimedBy: "dead-worker", ClaimedUntil: past,
		Steps:     []store.StepRun{{Name: "comment", Step: "codehost.create_comment", Account: "acc1", Status: store.StepRunning, StartedAt: past}},
		CreatedAt: past, UpdatedAt: past,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", ""))
	if r.Status != store.RunFailed || r.Steps[0].Status != store.StepInterrupted || r.Attempts != 2 {
		t.Fatalf("run = %+v; want failed with the step interrupted, attempt 2", r)
	}
	if h.steps.count() != 0 {
		t.Errorf("the interrupted step ran again")
	}
	if got := h.subjectCount(bus.AgentsStream, agent.RunsSubject("agent-1")); got != 0 {
		t.Errorf("an already started run was published again (%d)", got)
	}
}

func TestPoisonMessageIsDeadLettered(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	// A trigger of the kind, so the dispatcher takes its events at all.
	h.agent("agent-1")
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{}, "")
	h.start()
	if err := h.bus.Publish(context.Background(), "triggers.codehost.new_issue.a.b", "poison-1", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	h.waitPending()
	dead, err := h.bus.ListDead(context.Background(), dispatch.EventsConsumer, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.HasPrefix(dead[0].Reason, "decode:") ||
		dead[0].Subject != "triggers.codehost.new_issue.a.b" || string(dead[0].Data) != "{not json" {
		t.Fatalf("dead letters = %+v; want one with a decode reason and the original data", dead)
	}
}

func TestScopedEventsReachOnlyTheirTenant(t *testing.T) {
	h := newHarness(t, dispatch.Options{})
	h.agent("agent-1")
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	// Another tenant's trigger on the same repository.
	p, _ := json.Marshal(match.Params{Repositories: []string{"octo-org/api"}})
	if _, err := h.store.CreateTrigger(context.Background(), store.Trigger{ID: "trig-x", TenantID: "t2", Kind: "new_issue", AccountID: "acc9", AgentID: "agent-9",
		Enabled: true, Params: p, Status: store.TriggerActive, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	h.start()
	ev := h.deliver("d-4", "octo-org/api", 1)
	scoped := ev
	scoped.Scope = &triggers.Scope{Hook: "h1", Tenant: "t1", Account: "acc1"}
	scoped.ID = triggers.EventID(triggers.CodeHost, "h1/d-4", triggers.NewIssue, 0)
	data, _ := json.Marshal(scoped)
	if err := h.bus.Publish(context.Background(), scoped.Subject(), scoped.ID, data); err != nil {
		t.Fatal(err)
	}
	h.waitRun(dispatch.RunID(scoped.ID, "trig-a", ""))
	h.waitPending()
	if _, err := h.store.GetRun(context.Background(), "", dispatch.RunID(scoped.ID, "trig-x", "")); err == nil {
		t.Error("a scoped event started another tenant's trigger")
	}
	if _, err := h.store.GetEvent(context.Background(), "t2", scoped.ID); err == nil {
		t.Error("another tenant got an outcome record for a scoped event")
	}
}

// testPusher sends with push.Sender but retries quickly.
type testPusher struct{ s *push.Sender }

func (p testPusher) Push(ctx context.Context, url, secret string, run agent.Run) (dispatch.PushReply, error) {
	d, err := p.s.Send(ctx, url, secret, run)
	if err != nil {
		return dispatch.PushReply{}, err
	}
	return dispatch.PushReply{Result: d.Result, Unrecognized: d.Unrecognized}, nil
}

func (p testPusher) Retry(err error, attempt int) (time.Duration, bool) {
	return 50 * time.Millisecond, !push.IsPermanent(err)
}

// sealer is a vault stand-in that stores secrets in clear.
type sealer struct{}

func (sealer) Open(sealed []byte, aad string) ([]byte, error) { return sealed, nil }

func TestHTTPAgentRetriedThenDeadLettered(t *testing.T) {
	h := newHarness(t, dispatch.Options{
		Pusher: testPusher{&push.Sender{Client: push.NewClient(5*time.Second, true)}}, Secrets: sealer{}, MaxDeliver: 4,
	})
	secret, _ := agent.NewSecret()
	var mu sync.Mutex
	answers := map[string][]int{} // path → statuses to answer, in order
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := agent.Verify([]string{secret}, r.Header, body, time.Now(), 0); err != nil {
			t.Errorf("push not verifiable: %v", err)
		}
		mu.Lock()
		n := seen[r.URL.Path]
		seen[r.URL.Path]++
		status := http.StatusOK
		if n < len(answers[r.URL.Path]) {
			status = answers[r.URL.Path][n]
		}
		mu.Unlock()
		w.WriteHeader(status)
	}))
	defer srv.Close()
	answers["/flaky"] = []int{502, 503}
	answers["/gone"] = []int{400}
	answers["/down"] = []int{500, 500, 500, 500, 500}
	for _, name := range []string{"flaky", "gone", "down"} {
		if _, err := h.store.CreateAgent(context.Background(), store.Agent{ID: name, TenantID: "t1", Name: name, Delivery: store.DeliverHTTP,
			URL: srv.URL + "/" + name, SealedSecret: []byte(secret), CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		h.trigger("trig-"+name, name, triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	}
	h.start()
	ev := h.deliver("d-http", "octo-org/api", 3)
	status := func(name string) store.Run {
		r, _ := h.store.GetRun(context.Background(), "t1", dispatch.RunID(ev.ID, "trig-"+name, ""))
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for status("flaky").DeliveryStatus != "delivered" || status("gone").DeliveryStatus != "dead_lettered" || status("down").DeliveryStatus != "dead_lettered" {
		if time.Now().After(deadline) {
			t.Fatalf("flaky %q, gone %q, down %q", status("flaky").DeliveryStatus, status("gone").DeliveryStatus, status("down").DeliveryStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	if seen["/flaky"] != 3 || seen["/gone"] != 1 || seen["/down"] != 4 {
		t.Errorf("attempts = %v; want flaky 3 (two failures, then delivered), gone 1 (permanent), down 4 (MaxDeliver)", seen)
	}
	mu.Unlock()
	dead, err := h.bus.ListDead(context.Background(), dispatch.PushConsumer, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, d := range dead {
		reasons[d.Source+" "+d.Subject] = d.Reason
	}
	if len(dead) != 2 || !strings.Contains(reasons["push push.agent.down"], "gave up after 4 attempts") || !strings.Contains(reasons["push push.agent.gone"], "400") {
		t.Errorf("dead letters = %v", reasons)
	}
	if r := status("down"); !strings.Contains(r.DeliveryError, "500") {
		t.Errorf("down run's delivery error = %q", r.DeliveryError)
	}
}

// skippedCount reads the dispatcher's count of events it acknowledged from
// the headers alone.
func skippedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	return metricValue(t, reg, "triggerd_dispatch_events_skipped_total")
}

// metricValue reads an unlabelled counter or gauge of reg (0 when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		return m.GetCounter().GetValue()
	}
	return 0
}

func TestEventsNoTriggerCanMatchAreSkippedUnread(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, dispatch.Options{Registerer: reg})
	h.agent("agent-1")
	h.trigger("trig-a", "agent-1", triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	h.start()
	skipped := func() float64 { return skippedCount(t, reg) }

	// No trigger on this repository: acknowledged from the headers, no
	// record, no run.
	other := h.deliver("d-1", "octo-org/other", 1)
	h.waitPending()
	if got := skipped(); got != 1 {
		t.Errorf("skipped events = %v; want 1", got)
	}
	if _, err := h.store.GetEvent(context.Background(), "t1", other.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an event no trigger could match left a record (err %v)", err)
	}

	// The repository in another case is the trigger's: read and started.
	ev := h.deliver("d-2", "Octo-Org/API", 2)
	if r := h.waitRun(dispatch.RunID(ev.ID, "trig-a", "")); r.Status != store.RunSucceeded {
		t.Errorf("run = %+v; want succeeded", r)
	}

	// A scoped event is read even without candidates: its tenant gets a
	// record saying nothing matched.
	_, events := h.deliverEvents("d-3", "octo-org/other", 3)
	scoped := events[0]
	scoped.ID = triggers.EventID(triggers.CodeHost, "h1/d-3", scoped.Kind, 0)
	scoped.Scope = &triggers.Scope{Hook: "h1", Tenant: "t1", Account: "acc1"}
	if _, err := h.bus.PublishEvents(context.Background(), []triggers.Event{scoped}, ""); err != nil {
		t.Fatal(err)
	}
	h.waitPending()
	rec, err := h.store.GetEvent(context.Background(), "t1", scoped.ID)
	if err != nil || len(rec.Outcomes) != 0 {
		t.Errorf("scoped event record = %+v, %v; want one with no outcomes", rec, err)
	}
	if got := skipped(); got != 1 {
		t.Errorf("skipped events = %v; want still 1", got)
	}
}

// An HTTP agent's 2xx answer that is not a run result is kept as the
// run's result, marked unrecognized, not dropped without a word.
func TestHTTPAgentAnswerThatIsNotAResultIsKept(t *testing.T) {
	h := newHarness(t, dispatch.Options{
		Pusher: testPusher{&push.Sender{Client: push.NewClient(5*time.Second, true)}}, Secrets: sealer{}, MaxDeliver: 4,
	})
	secret, _ := agent.NewSecret()
	answers := map[string]string{"/json": `{"ok": true, "run": "mine"}`, "/text": "thanks!", "/result": `{"status": "succeeded", "output": {"n": 1}}`}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	for _, name := range []string{"json", "text", "result"} {
		if _, err := h.store.CreateAgent(context.Background(), store.Agent{ID: name, TenantID: "t1", Name: name, Delivery: store.DeliverHTTP,
			URL: srv.URL + "/" + name, SealedSecret: []byte(secret), CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		h.trigger("trig-"+name, name, triggers.NewIssue, match.Params{Repositories: []string{"octo-org/api"}}, "")
	}
	h.start()
	ev := h.deliver("d-answers", "octo-org/api", 3)
	run := func(name string) store.Run {
		r, _ := h.store.GetRun(context.Background(), "t1", dispatch.RunID(ev.ID, "trig-"+name, ""))
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	for run("json").Result == nil || run("text").Result == nil || run("result").Result == nil {
		if time.Now().After(deadline) {
			t.Fatalf("results: json %s, text %s, result %s", run("json").Result, run("text").Result, run("result").Result)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, want := range map[string]string{"json": `"answer":{"ok":true,"run":"mine"}`, "text": `"answer":"thanks!"`} {
		got := string(run(name).Result)
		if !strings.Contains(got, `"unrecognized":true`) || !strings.Contains(got, want) || !strings.Contains(got, "not a run result") {
			t.Errorf("%s: result %s; want it kept, marked unrecognized, with %s", name, got, want)
		}
	}
	if got := string(run("result").Result); strings.Contains(got, "unrecognized") || !strings.Contains(got, `"status":"succeeded"`) {
		t.Errorf("a real result: %s", got)
	}
}
