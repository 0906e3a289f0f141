package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/internal/testenv"
)

// agentPasswords is an AgentAuthenticator over a map, as the registry is
// one over the store.
type agentPasswords struct {
	mu sync.Mutex
	pw map[string]string
}

func (a *agentPasswords) set(id, pw string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pw[id] = pw
}

func (a *agentPasswords) AuthenticateAgent(_ context.Context, id, pw string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if want, ok := a.pw[id]; !ok || want != pw {
		return fmt.Errorf("agent %s: wrong password or no such agent", id)
	}
	return nil
}

const operatorPassword = "pw-operator"

// lastMsg reads the last message on subject, as the operator.
func (b *Bus) lastMsg(ctx context.Context, subject string) (string, []byte, error) {
	st, err := b.js.Stream(ctx, agent.Stream)
	if err != nil {
		return "", nil, err
	}
	m, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		return "", nil, err
	}
	return m.Subject, m.Data, nil
}

// startAuthServer runs an embedded server that lets in the operator and
// the agents of pws, and connects the operator (which provisions the
// streams).
func startAuthServer(t *testing.T, pws *agentPasswords, refused func(user string, reason error)) (*Embedded, *Bus) {
	t.Helper()
	emb, err := StartEmbedded(EmbeddedOptions{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Auth: &ClientAuth{OperatorPasswords: []string{"pw-operator-old", operatorPassword}, Agents: pws, OnRefused: refused},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := Connect(ctx, emb.ClientURL(), Options{Embedded: emb, User: OperatorUser, Password: operatorPassword, ServeAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return emb, b
}

func TestEmbeddedRefusesConnectionsWithoutCredentials(t *testing.T) {
	var mu sync.Mutex
	var refusals []string
	pws := &agentPasswords{pw: map[string]string{}}
	a := uuid.NewString()
	pws.set(a, "pw-right")
	emb, _ := startAuthServer(t, pws, func(user string, reason error) {
		mu.Lock()
		refusals = append(refusals, user+": "+reason.Error())
		mu.Unlock()
	})
	for _, c := range []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"a wrong operator password", []nats.Option{nats.UserInfo(OperatorUser, "pw-wrong")}},
		{"an agent's wrong password", []nats.Option{nats.UserInfo(a, "pw-wrong")}},
		{"an unknown agent", []nats.Option{nats.UserInfo(uuid.NewString(), "pw-right")}},
		{"a user that is no agent id", []nats.Option{nats.UserInfo("a.b", "pw-right")}},
		{"the operator's password as an agent", []nats.Option{nats.UserInfo(a, operatorPassword)}},
	} {
		nc, err := nats.Connect(emb.ClientURL(), append(c.opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", c.name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization error", c.name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refusals) != 6 {
		t.Fatalf("%d refusals heard, want 6: %q", len(refusals), refusals)
	}
	for _, r := range refusals {
		if strings.Contains(r, "pw-") {
			t.Errorf("a refusal carries a password: %q", r)
		}
	}
	// Every operator password is accepted, so one can be rotated.
	for _, pw := range []string{operatorPassword, "pw-operator-old"} {
		if nc, err := nats.Connect(emb.ClientURL(), nats.UserInfo(OperatorUser, pw)); err != nil {
			t.Errorf("the operator: %v", err)
		} else {
			nc.Close()
		}
	}
	if nc, err := agent.Connect(emb.ClientURL(), a, "pw-right"); err != nil {
		t.Fatalf("the agent with its password: %v", err)
	} else {
		nc.Close()
	}
}

// TestAgentsReachOnlyTheirOwnRuns: an agent connected with its password
// takes its runs and reports results through agent.Consume, and cannot
// read another agent's runs or results, publish events or runs, or touch
// the streams.
func TestAgentsReachOnlyTheirOwnRuns(t *testing.T) {
	pws := &agentPasswords{pw: map[string]string{}}
	mine, other := uuid.NewString(), uuid.NewString()
	pws.set(mine, "mine")
	pws.set(other, "other")
	emb, op := startAuthServer(t, pws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Another agent's run and result, which the test agent must not see.
	otherRun, _ := json.Marshal(agent.Run{ID: "run-other", Agent: other, Kind: "new_issue", Event: json.RawMessage(`{"secret":"of the other tenant"}`)})
	if err := op.Publish(ctx, agent.RunsSubject(other), "run-other", otherRun); err != nil {
		t.Fatal(err)
	}
	otherResult, _ := json.Marshal(agent.Result{RunID: "run-other", Agent: other, Status: agent.StatusSucceeded})
	if err := op.Publish(ctx, agent.ResultsSubject(other, "run-other"), "result:run-other", otherResult); err != nil {
		t.Fatal(err)
	}

	violations := make(chan error, 64)
	nc, js := connectAgent(t, emb, mine, "mine", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	}))

	// Its own run goes through Consume: consumer, pull, result, ack.
	run, _ := json.Marshal(agent.Run{ID: "run-mine", Agent: mine, Kind: "new_issue"})
	if err := op.Publish(ctx, agent.RunsSubject(mine), "run-mine", run); err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var consumeErrs []error
	var errMu sync.Mutex
	go func() {
		done <- agent.Consume(cctx, js, mine, func(context.Context, agent.Run) (agent.Result, error) {
			return agent.Result{Status: agent.StatusSucceeded}, nil
		}, agent.WithErrorHandler(func(err error) {
			errMu.Lock()
			consumeErrs = append(consumeErrs, err)
			errMu.Unlock()
		}))
	}()
	testenv.Eventually(t, 10*time.Second, "the agent's result", func() bool {
		_, data, err := op.lastMsg(ctx, agent.ResultsSubject(mine, "run-mine"))
		return err == nil && strings.Contains(string(data), `"succeeded"`)
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	errMu.Lock()
	if len(consumeErrs) > 0 {
		t.Errorf("Consume reported errors under the agent's permissions: %v", consumeErrs)
	}
	errMu.Unlock()

	// What it may not do. Requests are refused by the server (a
	// permissions violation) and answered by no one.
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 300*time.Millisecond) }
	for _, subj := range []string{
		"$JS.API.DIRECT.GET." + agent.Stream + "." + agent.ResultsSubject(other, "run-other"),
		"$JS.API.DIRECT.GET." + agent.Stream + "." + agent.RunsSubject(other),
		"$JS.API.STREAM.MSG.GET." + agent.Stream,
		"$JS.API.STREAM.INFO." + agent.Stream,
		"$JS.API.STREAM.DELETE." + EventsStream,
		"$JS.API.STREAM.PURGE." + agent.Stream,
		"$JS.API.CONSUMER.CREATE." + agent.Stream + "." + agent.ConsumerName(mine),
		"$JS.API.CONSUMER.CREATE." + agent.Stream + "." + agent.ConsumerName(mine) + "." + agent.RunsSubject(other),
		"$JS.API.CONSUMER.CREATE." + agent.Stream + "." + agent.ConsumerName(other) + "." + agent.RunsSubject(other),
		"$JS.API.CONSUMER.MSG.NEXT." + agent.Stream + "." + agent.ConsumerName(other),
		"$JS.API.CONSUMER.DELETE." + agent.Stream + "." + agent.ConsumerName(mine),
	} {
		var body []byte // a direct get by subject takes none
		if !strings.HasPrefix(subj, "$JS.API.DIRECT.GET.") {
			body = []byte(`{"seq":1}`)
		}
		rctx, c := short()
		msg, err := nc.RequestWithContext(rctx, subj, body)
		c()
		if err == nil {
			t.Errorf("request on %s answered: %s %q", subj, msg.Header, msg.Data)
		}
	}
	// A filter that is not the one in the subject is refused (by
	// triggerd's gateway, and behind it by the server), on the subject the
	// agent may use.
	rctx, c := short()
	bad, _ := json.Marshal(map[string]any{"stream_name": agent.Stream, "config": map[string]any{
		"durable_name": agent.ConsumerName(mine), "filter_subject": "agents.>", "ack_policy": "explicit",
	}})
	msg, err := nc.RequestWithContext(rctx, "$JS.API.CONSUMER.CREATE."+agent.Stream+"."+agent.ConsumerName(mine)+"."+agent.RunsSubject(mine), bad)
	c()
	if err != nil || !strings.Contains(string(msg.Data), `"error"`) {
		t.Errorf("a consumer of every agent's runs: %v %q", err, msgData(msg))
	}
	for _, subj := range []string{"agents.>", agent.RunsSubject(other), "_INBOX.>", agent.InboxPrefix(other) + ".>", "triggers.>", ">"} {
		sub, err := nc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := op.Publish(ctx, agent.RunsSubject(other), uuid.NewString(), otherRun); err != nil {
			t.Fatal(err)
		}
		if m, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Errorf("subscribed to %s and read %s", subj, m.Subject)
		}
		_ = sub.Unsubscribe()
	}
	before := eventMsgs(t, op)
	for _, subj := range []string{
		"triggers.codehost.new_issue.octo.hello",
		agent.RunsSubject(mine),
		agent.RunsSubject(other),
		agent.ResultsSubject(other, "run-other-2"),
		"push.x",
	} {
		if err := nc.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "the server's permission violations", func() bool { return len(violations) >= 5 })
	for len(violations) > 0 {
		if err := <-violations; !errors.Is(err, nats.ErrPermissionViolation) {
			t.Errorf("async error %v, want a permissions violation", err)
		}
	}
	if after := eventMsgs(t, op); after != before {
		t.Errorf("the events stream went from %d to %d messages", before, after)
	}
	if _, _, err := op.lastMsg(ctx, agent.ResultsSubject(other, "run-other-2")); err == nil {
		t.Error("the agent published another agent's result")
	}
}

// connectAgent connects as agent id with password pw, closing the
// connection when the test ends.
func connectAgent(t *testing.T, emb *Embedded, id, pw string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := agent.Connect(emb.ClientURL(), id, pw, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}

func TestDisconnectUserClosesAnAgentsConnections(t *testing.T) {
	pws := &agentPasswords{pw: map[string]string{}}
	a := uuid.NewString()
	pws.set(a, "old")
	emb, _ := startAuthServer(t, pws, nil)
	closed := make(chan struct{})
	nc, err := agent.Connect(emb.ClientURL(), a, "old", nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The password is replaced, then the agent's connections closed: the
	// client's reconnects with the old password are refused.
	pws.set(a, "new")
	if n := emb.DisconnectUser(a); n != 1 {
		t.Fatalf("closed %d connections, want 1", n)
	}
	testenv.Eventually(t, 5*time.Second, "the old password to stay refused", func() bool {
		return !nc.IsConnected() && nc.LastError() != nil && errors.Is(nc.LastError(), nats.ErrAuthorization)
	})
}

// TestAgentsRepliesStayInTheirOwnAccount: NATS does not check a
// request's reply subject, and JetStream answers on whatever subject a
// request names. An agent that names one of triggerd's own subjects
// (events, push jobs, the delivery index) must not get JetStream to
// publish there: its replies stay in its own account. Nor can it make a
// push consumer deliver there, or store a result that shadows another
// agent's.
func TestAgentsRepliesStayInTheirOwnAccount(t *testing.T) {
	pws := &agentPasswords{pw: map[string]string{}}
	mine, other := uuid.NewString(), uuid.NewString()
	pws.set(mine, "mine")
	pws.set(other, "other")
	emb, op := startAuthServer(t, pws, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// Whatever reaches triggerd's subjects in its own account.
	landed := make(chan *nats.Msg, 64)
	for _, subj := range []string{"triggers.>", "push.>", IndexSubject, "dead.>", agent.RunsSubject(other)} {
		sub, err := op.nc.ChanSubscribe(subj, landed)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := op.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	nc, js := connectAgent(t, emb, mine, "mine")
	// The agent's consumer, created through triggerd's gateway, and a
	// run and a result for it to be asked about.
	if _, err := js.CreateOrUpdateConsumer(ctx, agent.Stream, jetstream.ConsumerConfig{
		Durable: agent.ConsumerName(mine), FilterSubject: agent.RunsSubject(mine), AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Fatalf("the agent's own consumer: %v", err)
	}
	for i := range 3 {
		run, _ := json.Marshal(agent.Run{ID: fmt.Sprint("run-", i), Agent: mine, Kind: "new_issue"})
		if err := op.Publish(ctx, agent.RunsSubject(mine), fmt.Sprint("run-", i), run); err != nil {
			t.Fatal(err)
		}
	}
	if err := agent.Report(ctx, js, agent.Result{RunID: "run-0", Agent: mine, Status: agent.StatusSucceeded}); err != nil {
		t.Fatalf("the agent's own result: %v", err)
	}
	events, push := eventMsgs(t, op), streamMsgs(t, op, PushStream)

	// The requests the agent may make, each with a reply subject of
	// triggerd's.
	cons := agent.ConsumerName(mine)
	for _, r := range []struct{ subject, reply, body string }{
		{"$JS.API.DIRECT.GET." + agent.Stream + "." + agent.ResultsSubject(mine, "run-0"), "triggers.codehost.new_issue.octo.hello", ""},
		{"$JS.API.DIRECT.GET." + agent.Stream + "." + agent.ResultsSubject(mine, "run-0"), "push.agent." + other, ""},
		{"$JS.API.CONSUMER.INFO." + agent.Stream + "." + cons, IndexSubject, ""},
		{"$JS.API.CONSUMER.MSG.NEXT." + agent.Stream + "." + cons, "triggers.codehost.new_issue.octo.hello", `{"batch":1}`},
		{"$JS.API.CONSUMER.MSG.NEXT." + agent.Stream + "." + cons, agent.RunsSubject(other), `{"batch":1}`},
		{agent.ResultsSubject(mine, "run-1"), "triggers.codehost.new_issue.octo.hello", `{"run_id":"run-1","agent":"` + mine + `","status":"succeeded"}`},
	} {
		if err := nc.PublishRequest(r.subject, r.reply, []byte(r.body)); err != nil {
			t.Fatal(err)
		}
	}
	// The same requests answered to the agent itself: once these are
	// answered, the ones above have been too.
	for _, subj := range []string{
		"$JS.API.DIRECT.GET." + agent.Stream + "." + agent.ResultsSubject(mine, "run-0"),
		"$JS.API.CONSUMER.INFO." + agent.Stream + "." + cons,
	} {
		if _, err := nc.RequestWithContext(ctx, subj, nil); err != nil {
			t.Fatalf("%s: %v", subj, err)
		}
	}
	msg, err := nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT."+agent.Stream+"."+cons, []byte(`{"batch":1}`))
	if err != nil || !strings.HasPrefix(msg.Subject, "agents."+mine+".runs") {
		t.Fatalf("the agent's own pull: %v %v", err, msg)
	}
	if err := op.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-landed:
		t.Errorf("an agent's reply landed on %s in triggerd's account: %q", m.Subject, m.Data)
	default:
	}
	if n := eventMsgs(t, op); n != events {
		t.Errorf("the events stream went from %d to %d messages", events, n)
	}
	if n := streamMsgs(t, op, PushStream); n != push {
		t.Errorf("the push stream went from %d to %d messages", push, n)
	}

	// A push consumer would deliver in triggerd's account: the gateway
	// creates pull consumers of the agent's own runs only.
	for name, cfg := range map[string]map[string]any{
		"a deliver subject": {"deliver_subject": "triggers.codehost.new_issue.octo.hello"},
		"another filter":    {"filter_subject": agent.RunsSubject(other)},
		"no acks":           {"ack_policy": "none"},
	} {
		c := map[string]any{"durable_name": cons, "filter_subject": agent.RunsSubject(mine), "ack_policy": "explicit"}
		for k, v := range cfg {
			c[k] = v
		}
		body, _ := json.Marshal(map[string]any{"stream_name": agent.Stream, "config": c})
		msg, err := nc.RequestWithContext(ctx, agent.ConsumerCreateSubject(mine), body)
		if err != nil || !strings.Contains(string(msg.Data), `"error"`) || !strings.Contains(string(msg.Data), "triggerd: ") {
			t.Errorf("a consumer with %s: %v %q", name, err, msgData(msg))
		}
	}
	info, err := op.js.Consumer(ctx, agent.Stream, cons)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().Config; c.DeliverSubject != "" || c.FilterSubject != agent.RunsSubject(mine) || c.AckPolicy != jetstream.AckExplicitPolicy {
		t.Errorf("the agent's consumer became %+v", c)
	}

	// A result is stored only for the run its subject names, under a
	// message id of the agent's: one naming another agent's result id
	// does not have that result dropped as a duplicate.
	if _, err := js.Publish(ctx, agent.ResultsSubject(mine, "run-2"), []byte(`{"run_id":"run-1","agent":"`+mine+`"}`)); err == nil {
		t.Error("a result for run-1 was stored as run-2's")
	}
	shadow := nats.NewMsg(agent.ResultsSubject(mine, "run-other"))
	shadow.Data = []byte(`{"run_id":"run-other","agent":"` + mine + `","status":"failed"}`)
	shadow.Header.Set(jetstream.MsgIDHeader, agent.ResultMsgID(other, "run-other"))
	if _, err := js.PublishMsg(ctx, shadow); err != nil {
		t.Fatal(err)
	}
	_, ojs := connectAgent(t, emb, other, "other")
	if err := agent.Report(ctx, ojs, agent.Result{RunID: "run-other", Agent: other, Status: agent.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	if _, data, err := op.lastMsg(ctx, agent.ResultsSubject(other, "run-other")); err != nil || !strings.Contains(string(data), `"succeeded"`) {
		t.Errorf("the other agent's result: %v %q", err, data)
	}
}

// streamMsgs returns how many messages stream holds.
func streamMsgs(t *testing.T, b *Bus, stream string) uint64 {
	t.Helper()
	st, err := b.js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// recordingLogger keeps the level and text of each line logged.
type recordingLogger struct{ lines []string }

func (r *recordingLogger) add(level, format string, v ...any) {
	r.lines = append(r.lines, level+" "+fmt.Sprintf(format, v...))
}
func (r *recordingLogger) Noticef(format string, v ...any) { r.add("notice", format, v...) }
func (r *recordingLogger) Warnf(format string, v ...any)   { r.add("warn", format, v...) }
func (r *recordingLogger) Fatalf(format string, v ...any)  { r.add("fatal", format, v...) }
func (r *recordingLogger) Errorf(format string, v ...any)  { r.add("error", format, v...) }
func (r *recordingLogger) Debugf(format string, v ...any)  { r.add("debug", format, v...) }
func (r *recordingLogger) Tracef(format string, v ...any)  { r.add("trace", format, v...) }

// On a cluster, a member's route tells the others of an agent's
// subscription in an account only that member has made: logged at debug
// level, while the same line for any other account stays an error.
func TestClusterLoggerQuietsAgentAccountsOnly(t *testing.T) {
	rec := &recordingLogger{}
	l := clusterLogger{rec}
	const format = "127.0.0.1:6222 - rid:16 - Unknown account %q for remote subject %q"
	l.Errorf(format, agentAccountPrefix+"ag_1", "_INBOX_AGENT.ag_1.x")
	l.Errorf(format, "TEAM", "foo")
	l.Errorf("route %s failed", "x")
	want := []string{
		`debug 127.0.0.1:6222 - rid:16 - Unknown account "AGENT_ag_1" for remote subject "_INBOX_AGENT.ag_1.x"`,
		`error 127.0.0.1:6222 - rid:16 - Unknown account "TEAM" for remote subject "foo"`,
		`error route x failed`,
	}
	if strings.Join(rec.lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("logged:\n%s\nwant:\n%s", strings.Join(rec.lines, "\n"), strings.Join(want, "\n"))
	}
}
