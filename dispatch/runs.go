package dispatch

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/pipeline"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

// Outcome results a match turns into (store.Outcome.Result); the others
// are the index's (FilteredOut, Disabled, an inactive trigger's code).
const (
	ResultStarted = "started"
	ResultFailed  = "failed"
)

// errBusy says another worker holds a run's claim; try again later.
type errBusy struct{ until time.Time }

func (e errBusy) Error() string {
	return "run is claimed by another worker until " + e.until.UTC().Format(time.RFC3339)
}

// permanentError is a failure retrying cannot fix (the agent was deleted).
type permanentError struct{ msg string }

func (e permanentError) Error() string { return e.msg }

// runSpec is what a run is made from.
type runSpec struct {
	id       string
	tenantID string
	trigger  string
	agentID  string
	kind     triggers.Kind
	eventID  string
	// summary is the event's (triggers.Event.Summary), for the run's
	// record.
	summary string
	event   []byte
	replay  bool
}

// handleEvent dispatches one trigger event: outcomes for every candidate,
// a run for every match, then the runs' tool steps.
func (d *Dispatcher) handleEvent(ctx context.Context, j *bus.Job) {
	if d.noCandidates(j) {
		// Nothing to record or start: a lost ack only means the event
		// comes again and is skipped again.
		d.metrics.skipped.Inc()
		if err := j.AckNoWait(); err != nil {
			d.log.Warn().Err(err).Str("subject", j.Subject()).Msg("ack failed; the event will be redelivered")
		}
		return
	}
	var ev triggers.Event
	if err := triggers.DecodeEvent(j.Data(), &ev); err != nil {
		d.dead(ctx, j, "decode: the message is not a trigger event: "+err.Error())
		return
	}
	if !ev.Kind.Valid() || ev.ID == "" {
		d.dead(ctx, j, fmt.Sprintf("decode: unknown kind %q or missing id", ev.Kind))
		return
	}
	stop := bus.Heartbeat(j, d.o.AckWait/3)
	defer stop()

	index := d.index.Load()
	// An event that carries its payload by reference gets it for the
	// filters that may read it (and, below, the templates).
	payload := d.eventPayload(&ev, j.LastDelivery(), true)
	outcomes, ok, err := payload.match(ctx, index, &ev)
	if !ok {
		d.retry(ctx, j, err)
		return
	}
	if err := d.nameProjectField(ctx, &ev, outcomes); err != nil {
		d.retry(ctx, j, err)
		return
	}
	if payload != nil {
		// Read before any run starts, so that a payload that cannot be
		// read yet delays the event, not runs claimed halfway.
		need, err := d.templatesNeedPayload(ctx, outcomes)
		if err == nil && need {
			if _, err = payload.decoded(ctx); isPermanent(err) {
				err = nil // the steps that need it fail, saying why
			}
		}
		if err != nil {
			d.retry(ctx, j, err)
			return
		}
	}
	records := map[string]*store.EventRecord{}
	record := func(tenant string) *store.EventRecord {
		r := records[tenant]
		if r == nil {
			r = &store.EventRecord{
				TenantID: tenant, EventID: ev.ID, Kind: string(ev.Kind), Summary: ev.Summary(), Subject: j.Subject(), Seq: j.Sequence(),
				DeliveryID: ev.DeliveryID, ReceivedAt: ev.ReceivedAt, Outcomes: []store.Outcome{},
			}
			if ev.Repository != nil {
				r.Repository = ev.Repository.FullName
			}
			records[tenant] = r
		}
		return r
	}
	// A tenant's hook always leaves a record, even without candidates, so
	// "why did nothing start?" has an answer.
	if ev.Scope != nil {
		record(ev.Scope.Tenant)
	}
	// announced are the runs this pass started, told of once the
	// event's record (which they point at) is stored.
	var started, announced []store.Run
	for _, o := range outcomes {
		out := store.Outcome{TriggerID: o.TriggerID, AgentID: o.Agent, Result: o.Result, Reason: o.Reason}
		if o.Result == match.Matched {
			spec := runSpec{
				id: RunID(ev.ID, o.TriggerID, ""), tenantID: o.TenantID, trigger: o.TriggerID,
				agentID: o.Agent, kind: ev.Kind, eventID: ev.ID, summary: ev.Summary(), event: j.Data(),
			}
			r, fresh, err := d.startRun(ctx, spec, ev.ReceivedAt)
			var perm permanentError
			switch {
			case errors.As(err, &perm):
				out.Result, out.Reason = ResultFailed, perm.msg
			case err != nil:
				d.retry(ctx, j, err)
				return
			default:
				out.Result, out.RunID = ResultStarted, r.ID
				started = append(started, r)
				if fresh {
					announced = append(announced, r)
				}
			}
		}
		d.metrics.outcomes.WithLabelValues(out.Result).Inc()
		rec := record(o.TenantID)
		rec.Outcomes = append(rec.Outcomes, out)
	}
	now := d.o.Now()
	for _, rec := range records {
		rec.DispatchedAt = now
		if err := d.o.Store.PutEvent(ctx, *rec); err != nil {
			d.retry(ctx, j, fmt.Errorf("record outcomes: %w", err))
			return
		}
	}
	for _, r := range announced {
		d.announce(r)
	}
	for _, r := range started {
		if err := d.runSteps(ctx, r, j.Data(), j.Sequence(), payload); err != nil {
			d.retry(ctx, j, err)
			return
		}
	}
	if err := j.Ack(ctx); err != nil {
		d.log.Warn().Err(err).Str("event", ev.ID).Msg("ack failed; the event will be redelivered and recognised")
	}
}

// noCandidates reports, from the subject and headers alone, that no
// trigger can match the job's event and none of its tenants needs a record
// of it, so it need not even be decoded. Events without the routing header
// (published by an earlier version) are always decoded.
func (d *Dispatcher) noCandidates(j *bus.Job) bool {
	h := j.Header()
	enc := h.Get(bus.HeaderRepository)
	if enc == "" || h.Get(bus.HeaderScope) != "" {
		return false
	}
	repo, ok := triggers.DecodeToken(enc)
	if !ok {
		return false
	}
	c, k, ok := triggers.ParseSubject(j.Subject())
	if !ok {
		return false
	}
	return !d.index.Load().Candidates(c, k, repo)
}

// startRun claims the run and starts its agent, once: a run already
// started (by this or another worker, before a crash or a late ack) is
// returned as it is. fresh reports that this call started it.
func (d *Dispatcher) startRun(ctx context.Context, spec runSpec, received time.Time) (r store.Run, fresh bool, err error) {
	ag, agentErr := d.o.Store.GetAgent(ctx, spec.tenantID, spec.agentID)
	if agentErr != nil && !errors.Is(agentErr, store.ErrNotFound) {
		return store.Run{}, false, fmt.Errorf("load agent %s: %w", spec.agentID, agentErr)
	}
	// An agent deleted meanwhile has no delivery; its run fails below.
	r, err = d.claim(ctx, spec, cmp.Or(ag.Delivery, store.DeliverNATS))
	if err != nil {
		return store.Run{}, false, err
	}
	if r.Status != store.RunClaimed {
		return r, false, nil
	}
	if errors.Is(agentErr, store.ErrNotFound) {
		msg := "agent " + spec.agentID + " no longer exists"
		r.Status, r.Error, r.FinishedAt = store.RunFailed, &store.RunError{Code: "agent_not_found", Message: msg}, d.o.Now()
		if _, err := d.update(ctx, r); err != nil {
			return store.Run{}, false, err
		}
		d.logRun(r)
		return store.Run{}, false, permanentError{msg}
	}
	body, err := json.Marshal(agent.Run{
		ID: r.ID, Tenant: r.TenantID, Agent: r.AgentID, Trigger: r.TriggerID, Kind: r.Kind,
		Replay: r.Replay, CreatedAt: r.CreatedAt, Event: json.RawMessage(spec.event),
	})
	if err != nil {
		return store.Run{}, false, fmt.Errorf("encode run %s: %w", r.ID, err)
	}
	// The run id is the Nats-Msg-Id: a worker that published and died
	// before recording it publishes again as a duplicate, not a second
	// start.
	subject, status := agent.RunsSubject(ag.ID), "published"
	if ag.Delivery == store.DeliverHTTP {
		subject, status = pushSubject(ag.ID), "queued"
	}
	if err := d.o.Queue.Publish(ctx, subject, r.ID, body); err != nil {
		d.releaseClaim(ctx, r)
		return store.Run{}, false, fmt.Errorf("start agent %s: %w", ag.ID, err)
	}
	now := d.o.Now()
	if !received.IsZero() && !r.Replay {
		d.metrics.startLatency.Observe(now.Sub(received).Seconds())
	}
	r.Status, r.StartedAt, r.DeliveryStatus = store.RunStarted, now, status
	if len(ag.Steps) == 0 {
		// Nothing more to do: one write settles the run.
		r.Status, r.FinishedAt = store.RunSucceeded, now
	}
	r.Steps = make([]store.StepRun, len(ag.Steps))
	for i, s := range ag.Steps {
		r.Steps[i] = store.StepRun{Name: s.Name, Step: s.Step, Account: s.Account, Status: store.StepPending, Input: s.Input}
	}
	r, err = d.update(ctx, r)
	if err != nil {
		return store.Run{}, false, err
	}
	d.logRun(r)
	return r, true, nil
}

// releaseClaim gives up the claim of a run whose agent could not be
// started (its stream had no leader, say), so that the event's next
// delivery, an AckWait later, takes the run over at once instead of
// waiting out the whole lease (StepTimeout+AckWait, minutes by default).
// Nothing was started, and should the publish have landed after all, the
// next one carries the same Nats-Msg-Id and is dropped as a duplicate. A
// failed release only means the lease runs out as before.
func (d *Dispatcher) releaseClaim(ctx context.Context, r store.Run) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.o.AckWait)
	defer cancel()
	if _, err := d.updateClaim(ctx, r, d.o.Now()); err != nil {
		d.log.Debug().Err(err).Str("run_id", r.ID).Msg("run claim not released; it expires with its lease")
	}
}

// announce tells Options.OnRunStarted of a run just started.
func (d *Dispatcher) announce(r store.Run) {
	if d.o.OnRunStarted != nil {
		d.o.OnRunStarted(r)
	}
}

// claim creates the run, or takes over a claim that expired. It returns
// errBusy while another worker's claim holds.
func (d *Dispatcher) claim(ctx context.Context, spec runSpec, delivery store.AgentDelivery) (store.Run, error) {
	now := d.o.Now()
	r, err := d.o.Store.CreateRun(ctx, store.Run{
		ID: spec.id, TenantID: spec.tenantID, EventID: spec.eventID, TriggerID: spec.trigger,
		AgentID: spec.agentID, Kind: string(spec.kind), Summary: spec.summary, Replay: spec.replay, Status: store.RunClaimed,
		Attempts: 1, ClaimedBy: uuid.NewString(), ClaimedUntil: now.Add(d.lease()), Delivery: delivery,
		CreatedAt: now, UpdatedAt: now,
	})
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, store.ErrConflict) {
		return store.Run{}, fmt.Errorf("claim run %s: %w", spec.id, err)
	}
	r, err = d.o.Store.GetRun(ctx, spec.tenantID, spec.id)
	if err != nil {
		return store.Run{}, fmt.Errorf("read run %s: %w", spec.id, err)
	}
	switch r.Status {
	case store.RunSucceeded, store.RunFailed:
		return r, nil
	}
	if r.ClaimedUntil.After(now) {
		return store.Run{}, errBusy{r.ClaimedUntil}
	}
	r.Attempts++
	r.ClaimedBy, r.ClaimedUntil = uuid.NewString(), now.Add(d.lease())
	r, err = d.o.Store.UpdateRun(ctx, r)
	if errors.Is(err, store.ErrConflict) {
		return store.Run{}, errBusy{now.Add(d.o.AckWait)}
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("take over run %s: %w", spec.id, err)
	}
	return r, nil
}

// update stores the run's lifecycle (status, steps, error, times),
// extending its claim. Other writers touch only the agent's side (delivery
// status, result), so a lost compare-and-set is retried on the fresh record
// while the claim is still this worker's; once another worker has taken
// the run over, this one stops.
func (d *Dispatcher) update(ctx context.Context, r store.Run) (store.Run, error) {
	return d.updateClaim(ctx, r, time.Time{})
}

// updateClaim is update with the claim held until a given time instead of
// a lease from now (zero: a lease from now).
func (d *Dispatcher) updateClaim(ctx context.Context, r store.Run, until time.Time) (store.Run, error) {
	for range 10 {
		now := d.o.Now()
		r.UpdatedAt = now
		switch {
		case r.Status == store.RunSucceeded || r.Status == store.RunFailed:
			r.ClaimedUntil = time.Time{}
		case !until.IsZero():
			r.ClaimedUntil = until
		default:
			r.ClaimedUntil = now.Add(d.lease())
		}
		out, err := d.o.Store.UpdateRun(ctx, r)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return store.Run{}, fmt.Errorf("update run %s: %w", r.ID, err)
		}
		fresh, err := d.o.Store.GetRun(ctx, r.TenantID, r.ID)
		if err != nil {
			return store.Run{}, fmt.Errorf("reread run %s: %w", r.ID, err)
		}
		if fresh.ClaimedBy != r.ClaimedBy {
			return store.Run{}, errBusy{now.Add(d.o.AckWait)}
		}
		fresh.Status, fresh.Steps, fresh.Error = r.Status, r.Steps, r.Error
		fresh.StartedAt, fresh.FinishedAt, fresh.Attempts = r.StartedAt, r.FinishedAt, r.Attempts
		if fresh.DeliveryStatus == "" {
			fresh.DeliveryStatus = r.DeliveryStatus
		}
		r = fresh
	}
	return store.Run{}, errBusy{d.o.Now().Add(d.o.AckWait)}
}

// runSteps runs the pipeline of a started run from where it stands; seq
// is the event's sequence in the events stream, and payload, for an event
// that carries its payload by reference, reads it for the templates that
// may use it (nil for any other event). A step found running was
// interrupted (its worker died): it may have taken effect, so it is not run
// again and the run fails. A step refused for a rate limit, or held back
// because its provider keeps failing, waits (see park), and runSteps
// returns with the run still started.
func (d *Dispatcher) runSteps(ctx context.Context, r store.Run, event []byte, seq uint64, payload *eventPayload) error {
	if r.Status != store.RunStarted {
		return nil
	}
	var data map[string]any
	// outputs are earlier steps' outputs, as templates see them:
	// .steps.<name>.output.
	outputs := map[string]any{}
	remember := func(s *store.StepRun) {
		var out any
		if err := decodeNumbers(s.Output, &out); err == nil {
			outputs[s.Name] = map[string]any{"output": out}
		}
	}
	fail := func(i int, code, msg string) error { return d.failAt(ctx, r, i, code, msg) }
	for i := range r.Steps {
		s := &r.Steps[i]
		switch s.Status {
		case store.StepSucceeded:
			remember(s)
			continue
		case store.StepFailed, store.StepSkipped, store.StepInterrupted:
			return nil // already settled
		case store.StepRunning:
			s.Status, s.FinishedAt = store.StepInterrupted, d.o.Now()
			s.Error = &store.RunError{Code: "interrupted", Message: "the worker stopped while this step ran; it may have taken effect upstream, so it is not run again"}
			return fail(i, "interrupted", s.Error.Message)
		}
		// A waiting step's input was rendered before it was refused:
		// rendering it again would read what the event put in it (an
		// issue's body, say) as templates.
		if s.Status != store.StepWaiting {
			if data == nil {
				if err := decodeNumbers(event, &data); err != nil {
					return fail(i, "template", "the event could not be decoded for templates: "+err.Error())
				}
			}
			if payload != nil && data["payload"] == nil && pipeline.InputReadsPayload(s.Input) {
				v, err := payload.decoded(ctx)
				switch {
				case err == nil:
					data["payload"] = v
				case !isPermanent(err):
					return err // the step has not run: it runs when the job comes back
				default:
					msg := "the event carries its payload by reference, and it could not be read: " + err.Error()
					s.Status, s.FinishedAt = store.StepFailed, d.o.Now()
					s.Error = &store.RunError{Code: codePayloadUnavailable, Message: msg}
					return fail(i, codePayloadUnavailable, msg)
				}
			}
			data["steps"] = outputs
			input, err := pipeline.RenderInput(s.Input, data)
			if err != nil {
				s.Status, s.FinishedAt = store.StepFailed, d.o.Now()
				s.Error = &store.RunError{Code: "template", Message: err.Error()}
				return fail(i, "template", err.Error())
			}
			s.Input = input
		}
		s.Status, s.StartedAt = store.StepRunning, d.o.Now()
		var err error
		if r, err = d.update(ctx, r); err != nil {
			return err
		}
		s = &r.Steps[i]
		stepCtx, cancel := context.WithTimeout(ctx, d.o.StepTimeout)
		out, err := d.o.Steps.Run(connectors.WithCaller(stepCtx, "pipeline"), r.TenantID, s.Step, s.Account, s.Input)
		cancel()
		s.FinishedAt = d.o.Now()
		d.metrics.steps.WithLabelValues(s.Step, stepResult(err)).Inc()
		if err != nil {
			until, whyNot := d.deferral(r, *s, err)
			if !until.IsZero() {
				return d.park(ctx, r, i, seq, until, err)
			}
			s.Status, s.Error, s.RetryAt = store.StepFailed, stepRunError(err), time.Time{}
			s.Error.Message += whyNot
			return fail(i, s.Error.Code, s.Error.Message)
		}
		s.Status, s.Output, s.Error, s.RetryAt = store.StepSucceeded, out, nil, time.Time{}
		remember(s)
		if r, err = d.update(ctx, r); err != nil {
			return err
		}
	}
	r.Status, r.FinishedAt = store.RunSucceeded, d.o.Now()
	r, err := d.update(ctx, r)
	if err == nil {
		d.logRun(r)
	}
	return err
}

// failAt fails run r at step i (whose own status the caller has set):
// the steps after it that have not run are skipped.
func (d *Dispatcher) failAt(ctx context.Context, r store.Run, i int, code, msg string) error {
	for k := i + 1; k < len(r.Steps); k++ {
		if r.Steps[k].Status == store.StepPending {
			r.Steps[k].Status = store.StepSkipped
		}
	}
	r.Status, r.FinishedAt = store.RunFailed, d.o.Now()
	r.Error = &store.RunError{Code: code, Message: fmt.Sprintf("step %d (%s): %s", i+1, r.Steps[i].Name, msg)}
	r, err := d.update(ctx, r)
	if err == nil {
		d.logRun(r)
	}
	return err
}

// minStepWait is the shortest wait for a rate limit, for providers that
// refuse without saying for how long.
const minStepWait = time.Second

// waits reports whether a step that failed with code waits and runs again
// instead of failing its run: when a rate limit refused it
// (rate_limited), or when it was held back unsent because its provider
// keeps failing the account (unavailable). Nothing took effect either
// way, so running it again is safe even for a write. Other failures of a
// write may have taken effect; the connectors already retry idempotent
// requests within the step.
//
// A rate-limited step waits at most MaxStepWaits times: a budget that is
// still spent after that many resets will not be soon. A held-back step
// waits as often as its provider's outage needs, within MaxStepWait.
func waits(code string) bool {
	return code == string(connectors.CodeRateLimited) || code == string(connectors.CodeUnavailable)
}

// deferral says whether step s of run r, which failed with err, waits
// (see waits) instead of failing its run, and until when; a zero time when
// it does not, with why not for a failure that could have waited (" (...)",
// to add to the step's error), "" for any other.
func (d *Dispatcher) deferral(r store.Run, s store.StepRun, err error) (until time.Time, whyNot string) {
	var ce *connectors.Error
	if !errors.As(err, &ce) || !waits(string(ce.Code)) {
		return time.Time{}, ""
	}
	limited := ce.Code == connectors.CodeRateLimited
	if limited && s.Waits >= d.o.MaxStepWaits {
		return time.Time{}, fmt.Sprintf(" (gave up after waiting %d times for the limit)", s.Waits)
	}
	wait := max(ce.RetryAfter, minStepWait)
	// Runs refused together (one account's budget or circuit) should not
	// all come back at the same instant: up to a tenth more, at most 5 s.
	wait += rand.N(min(wait/10, 5*time.Second) + 1)
	until = d.o.Now().Add(wait)
	if until.Sub(r.StartedAt) > d.o.MaxStepWait {
		if limited {
			return time.Time{}, fmt.Sprintf(" (not waited for: the limit lifts more than %s after the run started)", d.o.MaxStepWait)
		}
		return time.Time{}, fmt.Sprintf(" (not waited for: the provider may be tried again only more than %s after the run started)", d.o.MaxStepWait)
	}
	return until, ""
}

// park records that step i of run r waits until a given time, and
// schedules its resumption: a message on the resume queue that the
// dispatcher takes at that time (handleResume). The run stays claimed
// until then, so a redelivery of its event meanwhile waits as well; if the
// message cannot be published, the event's own redelivery resumes the run.
// Waiting runs hold no worker and no slot of the events consumer.
func (d *Dispatcher) park(ctx context.Context, r store.Run, i int, seq uint64, until time.Time, err error) error {
	s := &r.Steps[i]
	re := stepRunError(err)
	re.Message += "; runs again at " + until.UTC().Format(time.RFC3339)
	s.Status, s.Error, s.Waits, s.RetryAt, s.FinishedAt = store.StepWaiting, re, s.Waits+1, until, time.Time{}
	r, err = d.updateClaim(ctx, r, until)
	if err != nil {
		return err
	}
	body, err := json.Marshal(resumeRequest{TenantID: r.TenantID, RunID: r.ID, Seq: seq, NotBefore: until})
	if err != nil {
		return fmt.Errorf("encode the resumption of run %s: %w", r.ID, err)
	}
	d.metrics.waits.Inc()
	d.log.Info().Str("run", r.ID).Str("step", s.Step).Str("code", re.Code).Int("waits", s.Waits).Time("retry_at", until).Msg("step held back; the run waits")
	msgID := fmt.Sprintf("resume:%s:%d:%d", r.ID, i, s.Waits)
	if err := d.o.Queue.Publish(ctx, resumeSubject(r.TenantID), msgID, body); err != nil {
		return fmt.Errorf("schedule the resumption of run %s: %w", r.ID, err)
	}
	return nil
}

func stepResult(err error) string {
	if err == nil {
		return "succeeded"
	}
	return string(stepRunError(err).Code)
}

// stepRunError turns a step runner's error into a typed run error.
func stepRunError(err error) *store.RunError {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return &store.RunError{Code: string(ce.Code), Message: ce.Message}
	}
	return &store.RunError{Code: string(connectors.CodeUpstream), Message: err.Error()}
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// retry settles a job whose processing failed transiently: it comes back
// after a delay (or, when another worker holds a run, after its claim).
// While the store is unreachable it leaves the job in hand instead, to run
// again once the store answers (holding).
func (d *Dispatcher) retry(ctx context.Context, j *bus.Job, err error) {
	if d.holdFor(ctx, err) {
		return
	}
	delay := backoff(j.Delivered())
	var busy errBusy
	if errors.As(err, &busy) {
		delay = max(time.Until(busy.until), 100*time.Millisecond)
	}
	d.log.Warn().Err(err).Str("subject", j.Subject()).Int("delivered", j.Delivered()).Dur("retry_in", delay).Msg("dispatch deferred")
	if err := j.Retry(ctx, delay, err.Error()); err != nil {
		d.log.Error().Err(err).Str("subject", j.Subject()).Msg("could not defer the message; it comes back after AckWait")
	}
}

// dead dead-letters a job that can never be processed.
func (d *Dispatcher) dead(ctx context.Context, j *bus.Job, reason string) bool {
	if err := j.Dead(ctx, reason); err != nil {
		d.log.Error().Err(err).Str("subject", j.Subject()).Str("reason", reason).Msg("dead-lettering failed; the message comes back")
		return false
	}
	d.metrics.dead.Inc()
	d.log.Error().Str("subject", j.Subject()).Str("reason", reason).Msg("dead-lettered")
	return true
}

// backoff is the delay before the n-th redelivery: exponential from 1s,
// capped at 1 minute, with full jitter (agent.Backoff), never under 100ms.
func backoff(delivered int) time.Duration {
	return max(agent.Backoff(delivered, time.Second, time.Minute, nil), 100*time.Millisecond)
}
