package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Pusher POSTs a run to an HTTP agent (package dispatch/push).
type Pusher interface {
	// Push delivers run, signed with secret, and returns what the agent
	// answered.
	Push(ctx context.Context, url, secret string, run agent.Run) (PushReply, error)
	// Retry says whether a failed push is worth retrying and after how
	// long, on the given attempt (1 for the first).
	Retry(err error, attempt int) (delay time.Duration, retry bool)
}

// PushReply is an HTTP agent's 2xx answer to a run.
type PushReply struct {
	// Result is the agent's result, when the answer was one (the reply
	// contract: {"status": "succeeded"|"failed", ...}).
	Result *agent.Result
	// Unrecognized is the answer's body when it was something else (a
	// mistaken shape, an agent that answers its own JSON or text); the run
	// keeps it, marked as such, rather than drop it without a word. Nil
	// for a body of only white space, as push.Delivery gives it.
	Unrecognized []byte
}

// unrecognizedResult is a run's Result for an answer that was not a
// Result.
type unrecognizedResult struct {
	Unrecognized bool `json:"unrecognized"`
	// Answer is the body as it came: JSON when it was JSON, else a string.
	Answer  any    `json:"answer"`
	Message string `json:"message"`
}

// unrecognizedMessage is unrecognizedResult's Message.
const unrecognizedMessage = "the agent answered 2xx with a body that is not a run result " +
	`({"status": "succeeded" or "failed", "output": ..., "error": ...}, for this run); it is kept here as it came`

// handlePush delivers one queued run to its HTTP agent.
func (d *Dispatcher) handlePush(ctx context.Context, j *bus.Job) {
	var run agent.Run
	if err := json.Unmarshal(j.Data(), &run); err != nil || run.ID == "" {
		d.dead(ctx, j, "decode: the message is not an agent run")
		return
	}
	ag, err := d.o.Store.GetAgent(ctx, run.Tenant, run.Agent)
	if errors.Is(err, store.ErrNotFound) {
		if d.dead(ctx, j, "agent "+run.Agent+" no longer exists") {
			d.settlePush(ctx, run, "dead_lettered", PushReply{}, "the agent was deleted")
		}
		return
	}
	if err != nil {
		d.retry(ctx, j, fmt.Errorf("load agent %s: %w", run.Agent, err))
		return
	}
	if d.o.Secrets == nil {
		d.dead(ctx, j, "no secret opener configured for HTTP agents")
		return
	}
	secret, err := d.o.Secrets.Open(ag.SealedSecret, store.AgentSecretAAD(ag.ID))
	if err != nil {
		if d.dead(ctx, j, "open the signing secret of agent "+ag.ID+": "+err.Error()) {
			d.settlePush(ctx, run, "dead_lettered", PushReply{}, "the agent's signing secret cannot be opened")
		}
		return
	}
	stop := bus.Heartbeat(j, d.o.AckWait/3)
	reply, err := d.o.Pusher.Push(ctx, ag.URL, string(secret), run)
	stop()
	if err == nil {
		d.metrics.pushes.WithLabelValues("delivered").Inc()
		d.settlePush(ctx, run, "delivered", reply, "")
		if err := j.Ack(ctx); err != nil {
			d.log.Warn().Err(err).Str("run", run.ID).Msg("push ack failed; the agent may receive the run again with the same webhook-id")
		}
		return
	}
	delay, again := d.o.Pusher.Retry(err, j.Delivered())
	if again && !j.LastDelivery() {
		d.metrics.pushes.WithLabelValues("retried").Inc()
		d.log.Info().Err(err).Str("run", run.ID).Int("attempt", j.Delivered()).Dur("retry_in", delay).Msg("agent push failed; retrying")
		d.settlePush(ctx, run, "retrying", PushReply{}, err.Error())
		if err := j.Retry(ctx, delay, err.Error()); err != nil {
			d.log.Error().Err(err).Str("run", run.ID).Msg("could not defer the push")
		}
		return
	}
	reason := "push to agent " + ag.ID + ": " + err.Error()
	if again {
		reason = fmt.Sprintf("gave up after %d attempts: %s", j.Delivered(), reason)
	}
	// The run says dead_lettered only once the dead letter exists; if it
	// cannot be written, the push comes back and is decided again.
	if d.dead(ctx, j, reason) {
		d.metrics.pushes.WithLabelValues("dead_lettered").Inc()
		d.settlePush(ctx, run, "dead_lettered", PushReply{}, err.Error())
	}
}

// settlePush records how far an HTTP agent's run got.
func (d *Dispatcher) settlePush(ctx context.Context, run agent.Run, status string, reply PushReply, detail string) {
	var result []byte
	switch {
	case reply.Result != nil:
		result, _ = json.Marshal(reply.Result)
	case reply.Unrecognized != nil:
		u := unrecognizedResult{Unrecognized: true, Answer: string(reply.Unrecognized), Message: unrecognizedMessage}
		if json.Valid(reply.Unrecognized) {
			u.Answer = json.RawMessage(reply.Unrecognized)
		}
		result, _ = json.Marshal(u)
		d.log.Warn().Str("run", run.ID).Str("agent", run.Agent).Msg("the HTTP agent's 2xx answer is not a run result; kept on the run, marked unrecognized")
	}
	d.modifyRun(ctx, run.Tenant, run.ID, func(r *store.Run) {
		r.DeliveryStatus = status
		if result != nil {
			r.Result = result
		}
		r.DeliveryError = detail
	})
}

// modifyRun applies fn to a stored run, retrying a lost compare-and-set a
// few times; failures are logged (the run record is informational here).
func (d *Dispatcher) modifyRun(ctx context.Context, tenantID, id string, fn func(*store.Run)) {
	for range 5 {
		r, err := d.o.Store.GetRun(ctx, tenantID, id)
		if err != nil {
			d.log.Warn().Err(err).Str("run", id).Msg("run record not updated")
			return
		}
		fn(&r)
		r.UpdatedAt = d.o.Now()
		if _, err = d.o.Store.UpdateRun(ctx, r); err == nil {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			d.log.Warn().Err(err).Str("run", id).Msg("run record not updated")
			return
		}
	}
}

// handleResult records an agent's reported result on its run.
func (d *Dispatcher) handleResult(ctx context.Context, j *bus.Job) {
	var res agent.Result
	if err := json.Unmarshal(j.Data(), &res); err != nil || res.RunID == "" {
		d.dead(ctx, j, "decode: the message is not an agent result")
		return
	}
	// agents.<agent-id>.results.<run-id>: an agent reports only its own runs.
	r, err := d.o.Store.GetRun(ctx, "", res.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.dead(ctx, j, "result for unknown run "+res.RunID)
		return
	case err != nil:
		d.retry(ctx, j, err)
		return
	case j.Subject() != agent.ResultsSubject(r.AgentID, r.ID):
		d.dead(ctx, j, "result for run "+res.RunID+" published by another agent ("+j.Subject()+")")
		return
	}
	d.modifyRun(ctx, r.TenantID, r.ID, func(r *store.Run) { r.Result = append([]byte(nil), j.Data()...) })
	if err := j.Ack(ctx); err != nil {
		d.log.Warn().Err(err).Str("run", res.RunID).Msg("result ack failed")
	}
}

// ReplayRequest asks for one event to be dispatched again to one trigger.
type ReplayRequest struct {
	TenantID  string `json:"tenant_id"`
	EventID   string `json:"event_id"`
	Seq       uint64 `json:"seq"`
	TriggerID string `json:"trigger_id"`
	AgentID   string `json:"agent_id"`
	// BypassFilter skips the trigger's parameters and filter, not its
	// state: a disabled or inactive trigger starts nothing.
	BypassFilter bool   `json:"bypass_filter"`
	ReplayID     string `json:"replay_id"`
	RunID        string `json:"run_id"`
}

// ReplayPlan is what a replay will do for one candidate trigger.
type ReplayPlan struct {
	TriggerID string `json:"trigger_id"`
	Result    string `json:"result"`
	Reason    string `json:"reason,omitempty"`
	RunID     string `json:"run_id,omitempty"`
}

// Replay queues event eventID of tenantID again: to triggerID only (its
// parameters and filter bypassed when bypass is set), or to every trigger
// of the tenant that matches it now. A disabled or inactive trigger gets
// nothing, bypass or not: its plan's Result says why (Disabled, or the
// trigger's inactive code such as account_removed), as an event's outcome
// would. It returns what each candidate will get; the runs are started by
// the replay consumer, durably, which checks the trigger's state again.
func (d *Dispatcher) Replay(ctx context.Context, tenantID, eventID, triggerID string, bypass bool) ([]ReplayPlan, error) {
	rec, err := d.o.Store.GetEvent(ctx, tenantID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		// An event of the shared endpoints no trigger was a candidate
		// for has no record, and is looked for in the stream.
		u, uerr := d.LookUpUnrecorded(ctx, tenantID, eventID)
		if uerr != nil && !errors.Is(uerr, store.ErrNotFound) {
			return nil, uerr
		}
		rec, err = u.Record, uerr
	}
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", eventID, err)
	}
	_, data, err := d.o.Queue.EventAt(ctx, rec.Seq)
	if err != nil {
		return nil, fmt.Errorf("event %s is no longer in the events stream: %w", eventID, err)
	}
	var ev triggers.Event
	if err := triggers.DecodeEvent(data, &ev); err != nil || ev.ID != eventID {
		return nil, fmt.Errorf("event %s: the stream holds something else at sequence %d", eventID, rec.Seq)
	}
	if ev.Scope == nil && (tenantID == "" || tenantID != d.o.SharedTenant) {
		// An event of the shared endpoints is the shared tenant's alone
		// (a record another tenant holds predates that rule).
		return nil, fmt.Errorf("event %s came on a shared endpoint, which is not this tenant's: %w", eventID, store.ErrNotFound)
	}
	ev.Scope = match.ReplayScope(tenantID, ev.Scope)
	index := d.index.Load()
	// match decides as handleEvent does, with the payload of an event
	// that carries it by reference read for the filters that need it.
	matchAll := func() ([]match.Outcome, error) {
		outcomes, ok, err := d.eventPayload(&ev, false, false).match(ctx, index, &ev)
		if !ok {
			return nil, fmt.Errorf("event %s: %w", eventID, err)
		}
		if err := d.nameProjectField(ctx, &ev, outcomes); err != nil {
			return nil, fmt.Errorf("event %s: %w", eventID, err)
		}
		return outcomes, nil
	}
	var outcomes []match.Outcome
	if triggerID == "" {
		if outcomes, err = matchAll(); err != nil {
			return nil, err
		}
	} else {
		st, err := d.o.Store.GetTrigger(ctx, tenantID, triggerID)
		if err != nil {
			return nil, fmt.Errorf("trigger %s: %w", triggerID, err)
		}
		if st.Kind != string(ev.Kind) {
			return nil, fmt.Errorf("trigger %s is for %s events, event %s is %s", triggerID, st.Kind, eventID, ev.Kind)
		}
		o := match.Outcome{TriggerID: st.ID, TenantID: st.TenantID, Account: st.AccountID, Agent: st.AgentID, Result: match.Matched}
		if result, reason, held := storedHeldBack(st); held {
			// Bypassing the filter does not bypass the trigger's state: a
			// disabled or inactive trigger starts nothing, as for a new
			// event.
			o.Result, o.Reason = result, reason
		} else if !bypass {
			// The trigger's outcome as the dispatcher decides it now.
			o.Result, o.Reason = match.FilteredOut, "not a candidate for this event (its repositories or scope do not include it)"
			all, err := matchAll()
			if err != nil {
				return nil, err
			}
			for _, c := range all {
				if c.TriggerID == triggerID {
					o = c
				}
			}
		}
		outcomes = []match.Outcome{o}
	}
	replayID := fmt.Sprintf("%d", d.o.Now().UnixNano())
	var plans []ReplayPlan
	for _, o := range outcomes {
		p := ReplayPlan{TriggerID: o.TriggerID, Result: o.Result, Reason: o.Reason}
		if o.Result == match.Matched {
			req := ReplayRequest{
				TenantID: tenantID, EventID: eventID, Seq: rec.Seq, TriggerID: o.TriggerID, AgentID: o.Agent,
				BypassFilter: bypass, ReplayID: replayID, RunID: RunID(eventID, o.TriggerID, replayID),
			}
			body, err := json.Marshal(req)
			if err != nil {
				return nil, err
			}
			// The replay request shares the push stream with the run it
			// starts, whose Msg-Id is the run id: its own id must differ.
			if err := d.o.Queue.Publish(ctx, replaySubject(tenantID), "replay:"+req.RunID, body); err != nil {
				return nil, fmt.Errorf("queue replay: %w", err)
			}
			p.Result, p.RunID = "queued", req.RunID
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// handleReplay starts the run of one queued replay.
func (d *Dispatcher) handleReplay(ctx context.Context, j *bus.Job) {
	var req ReplayRequest
	if err := json.Unmarshal(j.Data(), &req); err != nil || req.RunID == "" {
		d.dead(ctx, j, "decode: the message is not a replay request")
		return
	}
	_, data, err := d.o.Queue.EventAt(ctx, req.Seq)
	if errors.Is(err, bus.ErrEventGone) {
		d.dead(ctx, j, "event "+req.EventID+" is no longer in the events stream")
		return
	}
	if err != nil {
		d.retry(ctx, j, err)
		return
	}
	var ev triggers.Event
	if err := triggers.DecodeEvent(data, &ev); err != nil {
		d.dead(ctx, j, "decode: "+err.Error())
		return
	}
	spec := runSpec{
		id: req.RunID, tenantID: req.TenantID, trigger: req.TriggerID, agentID: req.AgentID,
		kind: ev.Kind, eventID: ev.ID, summary: ev.Summary(), event: data, replay: true,
	}
	// The trigger may have been disabled, stopped or deleted since the
	// replay was queued (or the request predates the check in Replay).
	if held, err := d.holdReplay(ctx, spec); err != nil {
		d.retry(ctx, j, err)
		return
	} else if held {
		if err := j.Ack(ctx); err != nil {
			d.log.Warn().Err(err).Str("run", spec.id).Msg("replay ack failed; it comes back and is found settled")
		}
		return
	}
	d.continueRun(ctx, j, spec, req.Seq)
}

// storedHeldBack is HeldBack for a stored trigger.
func storedHeldBack(st store.Trigger) (result, reason string, held bool) {
	t := match.Trigger{Enabled: st.Enabled}
	t.Inactive, t.InactiveCode = match.InactiveOf(st)
	return match.HeldBack(&t)
}

// holdReplay reports whether the replay run of spec is not to start
// because its trigger no longer exists, or is disabled or inactive now;
// the run is then recorded as failed, with the trigger's outcome (disabled,
// account_removed, ...) as its error code and why as its message. A run
// that already exists (a redelivered request, another worker) is not held:
// recording it conflicts, and continueRun leaves it as it is or goes on
// with it.
func (d *Dispatcher) holdReplay(ctx context.Context, spec runSpec) (bool, error) {
	var code, msg string
	st, err := d.o.Store.GetTrigger(ctx, spec.tenantID, spec.trigger)
	switch {
	case errors.Is(err, store.ErrNotFound):
		code, msg = "trigger_not_found", "trigger "+spec.trigger+" no longer exists"
	case err != nil:
		return false, fmt.Errorf("load trigger %s: %w", spec.trigger, err)
	default:
		result, reason, held := storedHeldBack(st)
		if !held {
			return false, nil
		}
		code, msg = result, reason
	}
	now := d.o.Now()
	_, err = d.o.Store.CreateRun(ctx, store.Run{
		ID: spec.id, TenantID: spec.tenantID, EventID: spec.eventID, TriggerID: spec.trigger,
		AgentID: spec.agentID, Kind: string(spec.kind), Summary: spec.summary, Replay: true, Status: store.RunFailed,
		Error:     &store.RunError{Code: code, Message: "replay not started: " + msg},
		CreatedAt: now, UpdatedAt: now, FinishedAt: now,
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return false, nil // the run exists already
	case err != nil:
		return false, fmt.Errorf("record run %s: %w", spec.id, err)
	}
	d.log.Info().Str("run", spec.id).Str("trigger", spec.trigger).Str("code", code).Msg("replay not started: " + msg)
	return true, nil
}

// continueRun starts the run of spec if it has not started, runs its steps
// from where they stand and settles the job that asked for it: a replay or
// a resumption. Both are idempotent: a run already finished is left as it
// is.
func (d *Dispatcher) continueRun(ctx context.Context, j *bus.Job, spec runSpec, seq uint64) {
	stop := bus.Heartbeat(j, d.o.AckWait/3)
	defer stop()
	r, fresh, err := d.startRun(ctx, spec, time.Time{})
	var perm permanentError
	switch {
	case errors.As(err, &perm):
		d.dead(ctx, j, perm.msg)
		return
	case err != nil:
		d.retry(ctx, j, err)
		return
	case fresh:
		d.announce(r)
	}
	var ev triggers.Event
	_ = triggers.DecodeEvent(spec.event, &ev) // for its payload_ref: an event that does not decode has none
	if err := d.runSteps(ctx, r, spec.event, seq, d.eventPayload(&ev, j.LastDelivery(), false)); err != nil {
		d.retry(ctx, j, err)
		return
	}
	if err := j.Ack(ctx); err != nil {
		d.log.Warn().Err(err).Str("run", r.ID).Str("subject", j.Subject()).Msg("ack failed; the run is looked at again and left as it is")
	}
}

// resumeRequest asks for a run whose step waits for a rate limit to go on
// at NotBefore (see park).
type resumeRequest struct {
	TenantID  string    `json:"tenant_id"`
	RunID     string    `json:"run_id"`
	Seq       uint64    `json:"seq"`
	NotBefore time.Time `json:"not_before"`
}

// handleResume goes on with a run whose step waited for a rate limit. The
// message arrives when it is published and is put back until its time;
// the run's claim, held by park until then, keeps any other worker off it.
func (d *Dispatcher) handleResume(ctx context.Context, j *bus.Job) {
	var req resumeRequest
	if err := json.Unmarshal(j.Data(), &req); err != nil || req.RunID == "" || req.TenantID == "" {
		d.dead(ctx, j, "decode: the message is not a run resumption")
		return
	}
	if wait := req.NotBefore.Sub(d.o.Now()); wait > 0 {
		if err := j.Retry(ctx, wait, "waiting until "+req.NotBefore.UTC().Format(time.RFC3339)); err != nil {
			d.log.Warn().Err(err).Str("run", req.RunID).Msg("could not put the resumption back; it comes back after AckWait")
		}
		return
	}
	r, err := d.o.Store.GetRun(ctx, req.TenantID, req.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		d.dead(ctx, j, "run "+req.RunID+" no longer exists")
		return
	case err != nil:
		d.retry(ctx, j, fmt.Errorf("read run %s: %w", req.RunID, err))
		return
	case r.Status != store.RunStarted:
		// Finished meanwhile (its event's redelivery resumed it).
		d.ackResumption(ctx, j, r.ID)
		return
	}
	_, data, err := d.o.Queue.EventAt(ctx, req.Seq)
	if errors.Is(err, bus.ErrEventGone) {
		d.expire(ctx, j, r)
		return
	}
	if err != nil {
		d.retry(ctx, j, err)
		return
	}
	d.continueRun(ctx, j, runSpec{
		id: r.ID, tenantID: r.TenantID, trigger: r.TriggerID, agentID: r.AgentID,
		kind: triggers.Kind(r.Kind), eventID: r.EventID, summary: r.Summary, event: data, replay: r.Replay,
	}, req.Seq)
}

// expire fails a waiting run whose event the events stream no longer
// holds: its steps' templates cannot be rendered any more.
func (d *Dispatcher) expire(ctx context.Context, j *bus.Job, r store.Run) {
	if r.ClaimedUntil.After(d.o.Now()) {
		d.retry(ctx, j, errBusy{r.ClaimedUntil})
		return
	}
	i := slices.IndexFunc(r.Steps, func(s store.StepRun) bool { return s.Status == store.StepWaiting })
	if i < 0 {
		// No step waits any more: another worker went on with the run.
		d.ackResumption(ctx, j, r.ID)
		return
	}
	re := &store.RunError{Code: "event_expired", Message: "event " + r.EventID + " left the events stream while the run waited; replay it to run the agent again"}
	r.Steps[i].Status, r.Steps[i].Error, r.Steps[i].RetryAt, r.Steps[i].FinishedAt = store.StepFailed, re, time.Time{}, d.o.Now()
	if err := d.failAt(ctx, r, i, re.Code, re.Message); err != nil {
		d.retry(ctx, j, err)
		return
	}
	d.ackResumption(ctx, j, r.ID)
}

// ackResumption acknowledges a resumption request for run runID; a lost
// acknowledgement only brings the request back, to be found done.
func (d *Dispatcher) ackResumption(ctx context.Context, j *bus.Job, runID string) {
	if err := j.Ack(ctx); err != nil {
		d.log.Warn().Err(err).Str("run", runID).Msg("resumption ack failed")
	}
}

// metrics are the dispatcher's Prometheus metrics.
type metrics struct {
	outcomes     *prometheus.CounterVec
	skipped      prometheus.Counter
	steps        *prometheus.CounterVec
	pushes       *prometheus.CounterVec
	waits        prometheus.Counter
	dead         prometheus.Counter
	pruned       *prometheus.CounterVec
	startLatency prometheus.Histogram
	held         prometheus.Gauge
	pingsFailed  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_dispatch_outcomes_total", Help: "Candidate triggers per outcome (started, filtered_out, disabled, account_removed, failed).",
		}, []string{"result"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "triggerd_dispatch_events_skipped_total", Help: "Events no trigger could match, acknowledged from their subject and headers without reading them.",
		}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_dispatch_steps_total", Help: "Pipeline steps run, by step id and result (succeeded or the error code).",
		}, []string{"step", "result"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_dispatch_pushes_total", Help: "Runs POSTed to HTTP agents, by result (delivered, retried, dead_lettered).",
		}, []string{"result"}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "triggerd_dispatch_step_waits_total", Help: "Pipeline steps refused for a rate limit, or held back from a failing provider, and set to run again later.",
		}),
		dead: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "triggerd_dispatch_dead_letters_total", Help: "Messages dead-lettered by the dispatcher.",
		}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_dispatch_pruned_total", Help: "Finished runs and event records deleted past the retention, by record (run, event).",
		}, []string{"record"}),
		startLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "triggerd_dispatch_start_latency_seconds",
			Help:    "Time from a webhook's receipt to its agent run being published.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "triggerd_dispatch_held_messages", Help: "Messages the dispatcher holds while its store is unreachable, to run once it answers.",
		}),
		pingsFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "triggerd_dispatch_store_pings_failed_total", Help: "Pings of an unreachable store by workers holding a message.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.outcomes, m.skipped, m.steps, m.pushes, m.waits, m.dead, m.pruned, m.startLatency, m.held, m.pingsFailed} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register dispatch metrics: %w", err)
			}
		}
	}
	return m, nil
}
