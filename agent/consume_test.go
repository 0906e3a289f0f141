package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/testenv"
)

// waitFor bounds every wait of these tests.
const waitFor = 10 * time.Second

type env struct {
	t *testing.T
	// url is the server's; nc and js are the operator's connection, which
	// may do anything, as triggerd's own.
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// operatorPassword and agentPassword are the test server's: every agent id
// connects with agentPassword.
const (
	operatorPassword = "operator-password"
	agentPassword    = "agent-password"
)

type anyAgent struct{}

func (anyAgent) AuthenticateAgent(_ context.Context, _, pw string) error {
	if pw != agentPassword {
		return errors.New("wrong password")
	}
	return nil
}

// startJS runs triggerd's embedded NATS on a random port and a temporary
// store, with its streams and its users: agents connect with agent.Connect
// and get the permissions triggerd gives them.
func startJS(t *testing.T) *env {
	t.Helper()
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Auth: &bus.ClientAuth{OperatorPasswords: []string{operatorPassword}, Agents: anyAgent{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	b, err := bus.Connect(ctx, emb.ClientURL(), bus.Options{Embedded: emb, User: bus.OperatorUser, Password: operatorPassword, ServeAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	nc, err := nats.Connect(emb.ClientURL(), nats.UserInfo(bus.OperatorUser, operatorPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, url: emb.ClientURL(), nc: nc, js: js}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// publishRun publishes run as triggerd does.
func (e *env) publishRun(run agent.Run) {
	e.t.Helper()
	e.publishRaw(agent.RunsSubject(run.Agent), run.ID, mustJSON(e.t, run))
}

func (e *env) publishRaw(subject, msgID string, data []byte) {
	e.t.Helper()
	if _, err := e.js.Publish(ctxT(e.t), subject, data, jetstream.WithMsgID(msgID)); err != nil {
		e.t.Fatal(err)
	}
}

// agentJS connects as agent id, as an agent does.
func (e *env) agentJS(id string) jetstream.JetStream {
	e.t.Helper()
	nc, err := agent.Connect(e.url, id, agentPassword)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	return js
}

// consume runs agent.Consume, connected as agent id, until the returned
// stop is called (or the test ends); stop returns Consume's error.
func (e *env) consume(id string, fn agent.RunFunc, opts ...agent.Option) (stop func() error) {
	e.t.Helper()
	js := e.agentJS(id)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Consume(ctx, js, id, fn, opts...) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitFor):
				err = errors.New("Consume did not return after its context was cancelled")
			}
		})
		return err
	}
	e.t.Cleanup(func() {
		if err := stop(); err != nil {
			e.t.Error(err)
		}
	})
	return stop
}

// results follows id's results subject from the start.
func (e *env) results(id string) jetstream.Consumer {
	e.t.Helper()
	c, err := e.js.OrderedConsumer(ctxT(e.t), agent.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{agent.ResultsSubject(id, "*")},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// nextResult waits for the next result on c.
func (e *env) nextResult(c jetstream.Consumer) (agent.Result, jetstream.Msg) {
	e.t.Helper()
	msg, err := c.Next(jetstream.FetchMaxWait(waitFor))
	if err != nil {
		e.t.Fatalf("waiting for a result: %v", err)
	}
	var res agent.Result
	if err := json.Unmarshal(msg.Data(), &res); err != nil {
		e.t.Fatal(err)
	}
	return res, msg
}

// consumerInfo returns the state of id's consumer, which must exist.
func (e *env) consumerInfo(id string) *jetstream.ConsumerInfo {
	e.t.Helper()
	info, ok := e.findConsumer(id)
	if !ok {
		e.t.Fatalf("agent %s has no consumer", id)
	}
	return info
}

// findConsumer returns the state of id's consumer, or false while Consume
// has yet to create it.
func (e *env) findConsumer(id string) (*jetstream.ConsumerInfo, bool) {
	e.t.Helper()
	c, err := e.js.Consumer(ctxT(e.t), agent.Stream, agent.ConsumerName(id))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := c.Info(ctxT(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return info, true
}

// settled reports whether id's consumer exists and has every run delivered
// and acknowledged (or terminated).
func (e *env) settled(id string) func() bool {
	return func() bool {
		info, ok := e.findConsumer(id)
		return ok && info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer > 0
	}
}

func runFor(id string) agent.Run {
	r := testRun(uuid.NewString())
	r.Agent = id
	return r
}

func TestConsumeReportsResult(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	run := runFor(id)

	var got agent.Run
	var attempt int
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		got, attempt = r, agent.Attempt(ctx)
		return agent.Result{Output: json.RawMessage(`{"done":true}`)}, nil
	})
	e.publishRun(run)

	res, msg := e.nextResult(results)
	if h := msg.Headers().Get(jetstream.MsgIDHeader); h != "result:"+id+":"+run.ID {
		t.Errorf("result Nats-Msg-Id %q", h)
	}
	if res.RunID != run.ID || res.Agent != id || res.Status != agent.StatusSucceeded || string(res.Output) != `{"done":true}` || res.FinishedAt.IsZero() {
		t.Errorf("result %+v", res)
	}
	testenv.Eventually(t, waitFor, "the run to be acknowledged", e.settled(id))
	if got.ID != run.ID || got.Trigger != run.Trigger || string(got.Event) != string(run.Event) || attempt != 1 {
		t.Errorf("fn got %+v at attempt %d", got, attempt)
	}

	cfg := e.consumerInfo(id).Config
	if cfg.Durable != "agent-"+id || cfg.FilterSubject != "agents."+id+".runs" || cfg.AckPolicy != jetstream.AckExplicitPolicy ||
		cfg.AckWait != agent.DefaultAckWait || cfg.MaxDeliver != agent.DefaultMaxDeliver {
		t.Errorf("consumer config %+v", cfg)
	}
}

func TestConsumeKeepsSlowRunInProgress(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	const ackWait = 500 * time.Millisecond

	var calls atomic.Int32
	var attempts sync.Map
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		n := calls.Add(1)
		attempts.Store(n, agent.Attempt(ctx))
		// The work outlasts three AckWaits.
		select {
		case <-time.After(3 * ackWait):
		case <-ctx.Done():
			return agent.Result{}, ctx.Err()
		}
		return agent.Result{}, nil
	}, agent.WithAckWait(ackWait), agent.WithConcurrency(2)) // a redelivery would reach the idle worker

	run := runFor(id)
	e.publishRun(run)
	if res, _ := e.nextResult(results); res.RunID != run.ID {
		t.Fatalf("result %+v", res)
	}
	testenv.Eventually(t, waitFor, "the run to be acknowledged", e.settled(id))
	if n := calls.Load(); n != 1 {
		t.Fatalf("fn called %d times", n)
	}
	if a, _ := attempts.Load(int32(1)); a != 1 {
		t.Fatalf("delivery %v, want 1", a)
	}
	if info := e.consumerInfo(id); info.NumRedelivered != 0 || info.Delivered.Consumer != 1 {
		t.Fatalf("redelivered %d, delivered %d", info.NumRedelivered, info.Delivered.Consumer)
	}
}

func TestConsumeTerminatesWhatIsNotARun(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	advisories, err := e.nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED." + agent.Stream + "." + agent.ConsumerName(id))
	if err != nil {
		t.Fatal(err)
	}
	var reported atomic.Int32
	var calls atomic.Int32
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		calls.Add(1)
		return agent.Result{}, nil
	}, agent.WithErrorHandler(func(error) { reported.Add(1) }))

	subject := agent.RunsSubject(id)
	e.publishRaw(subject, "garbage", []byte("not json"))
	e.publishRaw(subject, "no-id", []byte(`{"agent":"`+id+`"}`))
	e.publishRaw(subject, "other-agent", []byte(`{"id":"r1","agent":"someone-else"}`))
	e.publishRaw(subject, "wildcard-id", []byte(`{"id":"r.*","agent":"`+id+`"}`))
	for i := range 4 {
		m, err := advisories.NextMsg(waitFor)
		if err != nil {
			t.Fatalf("advisory %d: %v", i, err)
		}
		var adv struct {
			Reason     string `json:"reason"`
			Deliveries uint64 `json:"deliveries"`
		}
		if err := json.Unmarshal(m.Data, &adv); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(adv.Reason, "invalid run") || adv.Deliveries != 1 {
			t.Errorf("advisory %d: %+v", i, adv)
		}
	}

	// The consumer carries on with the next run.
	run := runFor(id)
	e.publishRun(run)
	if res, _ := e.nextResult(results); res.RunID != run.ID {
		t.Fatalf("result %+v", res)
	}
	testenv.Eventually(t, waitFor, "every message to be settled", e.settled(id))
	if calls.Load() != 1 {
		t.Fatalf("fn called %d times", calls.Load())
	}
	if reported.Load() < 4 {
		t.Fatalf("%d errors reported, want 4 or more", reported.Load())
	}
}

func TestConsumeRetriesFailedRun(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	var mu sync.Mutex
	var attempts []int
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, agent.Attempt(ctx))
		if len(attempts) == 1 {
			return agent.Result{}, errors.New("rate limited")
		}
		return agent.Result{Output: json.RawMessage(fmt.Sprint(agent.Attempt(ctx)))}, nil
	}, agent.WithRetryBackoff(time.Millisecond, 20*time.Millisecond))

	run := runFor(id)
	e.publishRun(run)
	// The failed attempt reported nothing: the first result is the second
	// attempt's.
	res, _ := e.nextResult(results)
	if res.Status != agent.StatusSucceeded || string(res.Output) != "2" {
		t.Fatalf("result %+v", res)
	}
	testenv.Eventually(t, waitFor, "the run to be acknowledged", e.settled(id))
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(attempts) != "[1 2]" {
		t.Fatalf("attempts %v", attempts)
	}
}

func TestConsumeReportsFailureOnLastAttempt(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	var calls atomic.Int32
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		calls.Add(1)
		return agent.Result{}, errors.New("boom")
	}, agent.WithMaxDeliver(2), agent.WithRetryBackoff(time.Millisecond, time.Millisecond))

	run := runFor(id)
	e.publishRun(run)
	res, _ := e.nextResult(results)
	if res.RunID != run.ID || res.Status != agent.StatusFailed || res.Error != "boom" {
		t.Fatalf("result %+v", res)
	}
	testenv.Eventually(t, waitFor, "the run to be terminated", e.settled(id))
	if calls.Load() != 2 {
		t.Fatalf("fn called %d times, want 2", calls.Load())
	}
}

func TestConsumeStopsOnCancel(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	started := make(chan struct{})
	var returned atomic.Bool
	stop := e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		defer returned.Store(true)
		close(started)
		<-ctx.Done()
		return agent.Result{}, ctx.Err()
	}, agent.WithConcurrency(3))

	run := runFor(id)
	e.publishRun(run)
	select {
	case <-started:
	case <-time.After(waitFor):
		t.Fatal("fn not called")
	}
	if err := stop(); err != nil {
		t.Fatalf("Consume = %v, want nil", err)
	}
	if !returned.Load() {
		t.Fatal("Consume returned before fn did")
	}

	// The interrupted run went back at once: another instance takes it.
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		return agent.Result{Output: json.RawMessage(fmt.Sprint(agent.Attempt(ctx)))}, nil
	})
	res, _ := e.nextResult(results)
	if res.RunID != run.ID || res.Status != agent.StatusSucceeded || string(res.Output) != "2" {
		t.Fatalf("result %+v", res)
	}
}

func TestConsumeIdleStopsPromptly(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	stop := e.consume(id, func(context.Context, agent.Run) (agent.Result, error) {
		return agent.Result{}, nil
	}, agent.WithConcurrency(4))
	// Let the workers get their pull requests out.
	testenv.Eventually(t, waitFor, "pull requests", func() bool {
		info, ok := e.findConsumer(id)
		return ok && info.NumWaiting > 0
	})
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("Consume took %s to stop", d)
	}
}

func TestConsumeArguments(t *testing.T) {
	fn := func(context.Context, agent.Run) (agent.Result, error) { return agent.Result{}, nil }
	for _, id := range []string{"", "a.b", "a*", "a>", "a b", "a\tb", "a\nb"} {
		if err := agent.Consume(context.Background(), nil, id, fn); !errors.Is(err, agent.ErrAgentID) {
			t.Errorf("Consume with id %q = %v, want ErrAgentID", id, err)
		}
	}
	id := uuid.NewString()
	if err := agent.Consume(context.Background(), nil, id, nil); err == nil {
		t.Error("Consume with a nil fn succeeded")
	}
	for _, opt := range []agent.Option{
		agent.WithAckWait(0),
		agent.WithMaxDeliver(0),
		agent.WithConcurrency(0),
		agent.WithRetryBackoff(0, time.Second),
		agent.WithRetryBackoff(time.Second, time.Millisecond),
	} {
		if err := agent.Consume(context.Background(), nil, id, fn, opt); err == nil {
			t.Error("Consume accepted an invalid option")
		}
	}
}

func TestReport(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	results := e.results(id)
	ctx := ctxT(t)
	res := agent.Result{RunID: "run_1", Agent: id, Status: agent.StatusFailed, Error: "no access"}
	js := e.agentJS(id)
	for range 2 {
		if err := agent.Report(ctx, js, res); err != nil {
			t.Fatal(err)
		}
	}
	got, msg := e.nextResult(results)
	if got.RunID != "run_1" || got.Status != agent.StatusFailed || got.FinishedAt.IsZero() || msg.Subject() != agent.ResultsSubject(id, "run_1") {
		t.Fatalf("result %+v on %s", got, msg.Subject())
	}
	stream, err := e.js.Stream(ctx, agent.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d messages stored, want the result once", info.State.Msgs)
	}

	for _, bad := range []agent.Result{
		{Agent: id, Status: agent.StatusSucceeded},
		{RunID: "r", Agent: "a.b", Status: agent.StatusSucceeded},
		{RunID: "r", Agent: id, Status: "done"},
		{RunID: "r", Agent: id},
		{RunID: "r", Agent: id, Status: agent.StatusSucceeded, Output: json.RawMessage("{")},
	} {
		if err := agent.Report(ctx, js, bad); err == nil {
			t.Errorf("Report(%+v) succeeded", bad)
		}
	}
}

func TestBackoff(t *testing.T) {
	const base, limit = time.Second, 5 * time.Minute
	one := func() float64 { return 0.999999999 }
	zero := func() float64 { return 0 }
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second, 10: limit, 64: limit, 1 << 30: limit} {
		if got := agent.Backoff(attempt, base, limit, one); got > want || got < want-time.Millisecond {
			t.Errorf("attempt %d: %s, want about %s", attempt, got, want)
		}
		if got := agent.Backoff(attempt, base, limit, zero); got != 0 {
			t.Errorf("attempt %d with 0: %s", attempt, got)
		}
	}
}

func TestConsumeDoesNotRedoAReportedRun(t *testing.T) {
	e := startJS(t)
	id := uuid.NewString()
	var calls atomic.Int32
	// The first attempt reports its result, then fails as if its
	// acknowledgement were lost (a crash, a server restart): the
	// redelivery finds the result and does not call the RunFunc again.
	js := e.agentJS(id)
	e.consume(id, func(ctx context.Context, r agent.Run) (agent.Result, error) {
		calls.Add(1)
		if err := agent.Report(ctx, js, agent.Result{RunID: r.ID, Agent: id, Status: agent.StatusSucceeded}); err != nil {
			return agent.Result{}, err
		}
		return agent.Result{}, errors.New("acknowledgement lost")
	}, agent.WithRetryBackoff(time.Millisecond, 20*time.Millisecond))
	e.publishRun(runFor(id))
	testenv.Eventually(t, waitFor, "the run to be acknowledged", e.settled(id))
	if info := e.consumerInfo(id); info.Delivered.Consumer != 2 {
		t.Fatalf("delivered %d times, want 2 (the redelivery acknowledged)", info.Delivered.Consumer)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the RunFunc ran %d times, want 1", n)
	}
}
