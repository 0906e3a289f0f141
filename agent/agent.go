// Package agent is the library agents import to take runs from triggerd
// and report what became of them.
//
// A trigger that matches an event starts its agent with a Run: the event,
// which trigger fired, and a run id. triggerd starts an agent in one of two
// ways, and the agent answers with a Result:
//
//   - HTTP agents receive each Run as a POST signed the Standard Webhooks way
//     (https://www.standardwebhooks.com/). NewHTTPHandler verifies the
//     signature, decodes the run, calls the agent's RunFunc and answers with
//     its Result. Sign and Verify implement the scheme for agents that serve
//     HTTP their own way.
//   - NATS agents pull their runs from JetStream: runs are published to
//     RunsSubject(agentID) in Stream, and results to
//     ResultsSubject(agentID, runID).
//     Consume runs a durable pull consumer, calls the RunFunc for each run
//     and reports its Result; Report publishes a Result for agents that read
//     runs their own way.
//
// Delivery is at least once both ways: a run can reach an agent more than
// once (a lost answer, a crash before the acknowledgement), always with the
// same Run.ID, so agents that act on the outside world deduplicate on it.
// Consume does so for runs it already reported: a redelivered run whose
// result is in the stream is acknowledged without calling the RunFunc
// again. Results are deduplicated by the stream on their run id.
//
// A RunFunc distinguishes two kinds of failure. A Result with Status
// StatusFailed is an outcome: it is reported and the run is over. An error
// means "try again later": the run is redelivered, with backoff, until the
// attempts run out.
//
// Minimal HTTP agent:
//
//	h := agent.NewHTTPHandler(os.Getenv("AGENT_SECRET"),
//		func(ctx context.Context, run agent.Run) (agent.Result, error) {
//			return agent.Result{Status: agent.StatusSucceeded}, nil
//		})
//	log.Fatal(http.ListenAndServe(":8081", h))
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Stream is the JetStream stream that holds runs and results; its subjects
// are "agents.>".
const Stream = "TRIGGERD_AGENTS"

// Result statuses.
const (
	// StatusSucceeded means the agent did what the run asked.
	StatusSucceeded = "succeeded"
	// StatusFailed means the agent gave up on the run for good; Result.Error
	// says why. It is not retried.
	StatusFailed = "failed"
)

// Run is one start of an agent by a trigger, as the agent receives it.
type Run struct {
	// ID identifies the run. Redeliveries of a run carry the same ID.
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Agent is the id of the agent the run is for.
	Agent string `json:"agent"`
	// Trigger is the id of the trigger that fired.
	Trigger string `json:"trigger"`
	// Kind is the trigger kind of the event ("new_issue").
	Kind string `json:"kind"`
	// Replay is set when an operator replayed the event rather than the
	// event happening now.
	Replay    bool      `json:"replay,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Event is the trigger event envelope: a JSON object with the event's
	// id, kind, repository, resource, payload and so on.
	Event json.RawMessage `json:"event"`
}

// Result is what an agent reports about a run.
type Result struct {
	RunID string `json:"run_id"`
	Agent string `json:"agent"`
	// Status is StatusSucceeded or StatusFailed.
	Status string `json:"status"`
	// Output is whatever JSON the agent wants to record; optional.
	Output json.RawMessage `json:"output,omitempty"`
	// Error says why the run failed.
	Error      string    `json:"error,omitempty"`
	FinishedAt time.Time `json:"finished_at"`
}

// RunFunc does an agent's work for one run. Returning a Result, whatever its
// Status, ends the run; returning an error asks for the run again later.
// The context is cancelled when the caller gives up: the HTTP request is
// gone, or Consume is stopping.
type RunFunc func(ctx context.Context, run Run) (Result, error)

// RunsSubject is the subject runs for agentID are published to. agentID
// must pass CheckAgentID.
func RunsSubject(agentID string) string { return "agents." + agentID + ".runs" }

// ResultsSubject is the subject the result of agentID's run runID is
// published to; runID "*" gives the filter of all the agent's results. Both
// ids must pass CheckAgentID.
func ResultsSubject(agentID, runID string) string {
	return "agents." + agentID + ".results." + runID
}

// ResultMsgID is the Nats-Msg-Id of agentID's result of run runID, so
// that a result reported twice is stored once. The agent's id is part of
// it: the stream's duplicate window is shared by every agent, and an id
// another agent could name would let it have a result dropped as a
// duplicate before it was ever stored.
func ResultMsgID(agentID, runID string) string { return "result:" + agentID + ":" + runID }

// ErrAgentID reports an agent id that cannot be a subject token.
var ErrAgentID = errors.New("agent: invalid agent id")

// CheckAgentID reports whether id can name an agent in subjects: not empty,
// and free of '.', '*', '>' and white space. Agent ids are UUIDs, which
// always pass.
func CheckAgentID(id string) error {
	if err := checkToken(id); err != nil {
		return fmt.Errorf("%w: %v", ErrAgentID, err)
	}
	return nil
}

// checkToken says what keeps id from being one subject token.
func checkToken(id string) error {
	if id == "" {
		return errors.New("empty")
	}
	if i := strings.IndexFunc(id, func(r rune) bool {
		return r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r)
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(id[i:])
		return fmt.Errorf("%q: %q is not allowed", id, r)
	}
	return nil
}

// complete fills in what a RunFunc may leave out of its result for run:
// the run and agent ids, the status (failed when Error is set), and the
// finishing time.
func complete(res Result, run Run, agentID string, now time.Time) Result {
	res.RunID = run.ID
	res.Agent = agentID
	if res.Status == "" {
		res.Status = StatusSucceeded
		if res.Error != "" {
			res.Status = StatusFailed
		}
	}
	if res.FinishedAt.IsZero() {
		res.FinishedAt = now.UTC()
	}
	return res
}

// check reports whether res can be reported.
func (res Result) check() error {
	if err := checkToken(res.RunID); err != nil {
		return fmt.Errorf("agent: result run id: %v", err)
	}
	if err := CheckAgentID(res.Agent); err != nil {
		return err
	}
	if res.Status != StatusSucceeded && res.Status != StatusFailed {
		return fmt.Errorf("agent: result status %q: want %q or %q", res.Status, StatusSucceeded, StatusFailed)
	}
	if len(res.Output) > 0 && !json.Valid(res.Output) {
		return errors.New("agent: result output is not valid JSON")
	}
	return nil
}
