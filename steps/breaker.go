package steps

import (
	"fmt"
	"sync"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

// Defaults of the breaker's Options.
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 30 * time.Second
	// DefaultBreakerMaxCooldown is the longest a failing probe doubles the
	// hold to, unless the cooldown itself is longer.
	DefaultBreakerMaxCooldown = 5 * time.Minute
	// minProbeWait is the least steps are told to wait while another
	// step probes their circuit (a tenth of its cooldown otherwise): the
	// probe's answer may take as long as a step.
	minProbeWait = 2 * time.Second
)

// CircuitChange describes a circuit opening or closing, for the operator.
type CircuitChange struct {
	AccountID string
	Open      bool
	// Failures is how many failed answers in a row opened the circuit.
	Failures int
	// Until is when an open circuit lets a probe through.
	Until time.Time
	// Last describes the last failure ("upstream 502", "no answer: ...").
	Last string
}

// breaker holds back the steps of an account whose provider keeps
// failing. Each account has a circuit:
//
//   - closed: steps run; every answer beneath the connector's policy
//     counts, and threshold failed answers in a row (5xx, or no answer)
//     open it;
//   - open: steps are refused unsent with CodeUnavailable until the
//     cooldown ends;
//   - then one step runs as a probe while the others are still refused: an
//     answer that is not a failure closes the circuit, failures only open
//     it again for twice the cooldown (at most maxCooldown).
//
// Only the provider's answers to this account count: another account, on
// the same provider or not, has its own circuit. Circuits live in the
// process: each triggerd learns a failing provider from its own requests.
type breaker struct {
	threshold   int
	cooldown    time.Duration
	maxCooldown time.Duration
	now         func() time.Time
	onChange    func(CircuitChange)

	mu sync.Mutex
	m  map[string]*circuit
}

// circuit is one account's state. An account absent from the map is
// closed with no failures.
type circuit struct {
	failures int
	last     string
	// openUntil is set while the circuit is open.
	openUntil time.Time
	cooldown  time.Duration
	// probing: a step runs as the probe of an open circuit.
	probing bool
}

func newBreaker(o Options) *breaker {
	b := &breaker{threshold: o.BreakerThreshold, cooldown: o.BreakerCooldown,
		now: o.Now, onChange: o.OnCircuitChange, m: map[string]*circuit{}}
	if b.threshold <= 0 {
		b.threshold = DefaultBreakerThreshold
	}
	if b.cooldown <= 0 {
		b.cooldown = DefaultBreakerCooldown
	}
	b.maxCooldown = max(DefaultBreakerMaxCooldown, b.cooldown)
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// allow says whether a step of the account may run now. probe is set
// when it runs as the probe of an open circuit: the caller must then call
// done once the step has finished. A refusal is a *connectors.Error with
// CodeUnavailable.
func (b *breaker) allow(accountID string) (probe bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.m[accountID]
	if c == nil || c.openUntil.IsZero() {
		return false, nil
	}
	now := b.now()
	switch {
	case now.Before(c.openUntil):
		return false, b.refusal(accountID, c, c.openUntil.Sub(now))
	case c.probing:
		return false, b.refusal(accountID, c, max(minProbeWait, c.cooldown/10))
	}
	c.probing = true
	return true, nil
}

func (b *breaker) refusal(accountID string, c *circuit, wait time.Duration) *connectors.Error {
	return &connectors.Error{Code: connectors.CodeUnavailable, RetryAfter: wait, Retryable: true,
		Message: fmt.Sprintf("the provider failed %d requests in a row for account %s (last: %s); its steps are held back, not sent, until %s",
			c.failures, accountID, c.last, b.now().Add(wait).UTC().Format(time.RFC3339))}
}

// record counts one answer of the provider to the account: failed for a
// 5xx or no answer at all, with what happened in detail.
func (b *breaker) record(accountID string, failed bool, detail string) {
	var change *CircuitChange
	b.mu.Lock()
	c := b.m[accountID]
	if !failed {
		// A closed circuit forgets its failures; an open one (probing or
		// not) waits for its probe, whatever a step that ran before it
		// opened answers now.
		if c != nil && c.openUntil.IsZero() {
			delete(b.m, accountID)
		}
	} else {
		if c == nil {
			c = &circuit{cooldown: b.cooldown}
			b.m[accountID] = c
		}
		c.failures++
		c.last = detail
		if c.openUntil.IsZero() && c.failures >= b.threshold {
			c.openUntil = b.now().Add(c.cooldown)
			change = &CircuitChange{AccountID: accountID, Open: true, Failures: c.failures, Until: c.openUntil, Last: detail}
		}
	}
	b.mu.Unlock()
	if change != nil && b.onChange != nil {
		b.onChange(*change)
	}
}

// done ends a probe: the circuit closes when the provider answered any of
// its requests (answered says so), and opens again for twice as long
// when it failed them all. A probe that sent nothing leaves the circuit
// open for the next step to probe.
func (b *breaker) done(accountID string, sent, answered bool) {
	var change *CircuitChange
	b.mu.Lock()
	c := b.m[accountID]
	switch {
	case c == nil:
	case !sent:
		c.probing = false
	case answered:
		delete(b.m, accountID)
		change = &CircuitChange{AccountID: accountID, Failures: c.failures, Last: c.last}
	default:
		c.probing = false
		c.cooldown = min(2*c.cooldown, b.maxCooldown)
		c.openUntil = b.now().Add(c.cooldown)
		change = &CircuitChange{AccountID: accountID, Open: true, Failures: c.failures, Until: c.openUntil, Last: c.last}
	}
	b.mu.Unlock()
	if change != nil && b.onChange != nil {
		b.onChange(*change)
	}
}
