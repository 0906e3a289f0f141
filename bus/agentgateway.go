package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/triggerd/triggerd/agent"
)

// The agent gateway answers the two requests of an agent that triggerd
// checks before JetStream sees them (agent.Imports sends them here, from
// the agent's own account): creating its consumer, and publishing a
// result. Everything else an agent does goes to JetStream directly.

// agentGatewayQueue is the queue group of the gateway's subscription, so
// that one of several triggerd processes on one NATS answers each request.
const agentGatewayQueue = "triggerd-agent-gateway"

// agentGatewayTimeout bounds the gateway's own request to JetStream.
const agentGatewayTimeout = 5 * time.Second

// serveAgents subscribes the gateway; the subscription ends with the
// connection (Close drains it, letting a request in hand finish). It
// returns once the server has the subscription: an agent that connects
// as soon as Connect returns finds the gateway, not "no responders".
func (b *Bus) serveAgents(ctx context.Context) error {
	_, err := b.nc.QueueSubscribe(agent.GatewayPrefix+".>", agentGatewayQueue, b.answerAgent)
	if err != nil {
		return fmt.Errorf("agent gateway: %w", err)
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("agent gateway: subscribing: %w", err)
	}
	return nil
}

// answerAgent answers one request on agent.GatewayPrefix.<agent>.<op>...
func (b *Bus) answerAgent(m *nats.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), agentGatewayTimeout)
	defer cancel()
	var reply []byte
	tokens := strings.Split(strings.TrimPrefix(m.Subject, agent.GatewayPrefix+"."), ".")
	switch {
	case len(tokens) == 2 && tokens[1] == "consumer":
		reply = b.createAgentConsumer(ctx, tokens[0], m.Data)
	case len(tokens) == 3 && tokens[1] == "result":
		reply = b.storeAgentResult(ctx, tokens[0], tokens[2], m.Data)
	default:
		reply = apiError("", 404, "no such request: "+m.Subject)
	}
	if m.Reply != "" {
		_ = m.Respond(reply)
	}
}

// agentConsumerRequest is the part of JetStream's consumer creation
// request the gateway checks.
type agentConsumerRequest struct {
	Stream string `json:"stream_name"`
	Config struct {
		Durable        string   `json:"durable_name"`
		Name           string   `json:"name"`
		Filter         string   `json:"filter_subject"`
		Filters        []string `json:"filter_subjects"`
		DeliverSubject string   `json:"deliver_subject"`
		DeliverGroup   string   `json:"deliver_group"`
		AckPolicy      string   `json:"ack_policy"`
		SampleFreq     string   `json:"sample_freq"`
		Direct         bool     `json:"direct"`
	} `json:"config"`
}

// createAgentConsumer creates or updates agentID's consumer as the request
// asks, if it is a pull consumer of the agent's own runs with explicit
// acknowledgement, and returns JetStream's answer. Anything else would let
// the agent have JetStream publish its runs on a subject of triggerd's own
// (a push consumer's deliver subject is in the stream's account), or
// sample its acknowledgements into triggerd's advisories.
func (b *Bus) createAgentConsumer(ctx context.Context, agentID string, data []byte) []byte {
	const typ = "io.nats.jetstream.api.v1.consumer_create_response"
	if err := agent.CheckAgentID(agentID); err != nil {
		return apiError(typ, 400, err.Error())
	}
	var req agentConsumerRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return apiError(typ, 400, "the request is not JSON: "+err.Error())
	}
	c, runs, name := req.Config, agent.RunsSubject(agentID), agent.ConsumerName(agentID)
	var why string
	switch {
	case req.Stream != agent.Stream:
		why = fmt.Sprintf("stream %q: an agent's consumer is on %s", req.Stream, agent.Stream)
	case c.Durable != name || (c.Name != "" && c.Name != name):
		why = fmt.Sprintf("consumer %q: an agent's consumer is the durable %s", cmp.Or(c.Durable, c.Name), name)
	case !(c.Filter == runs && len(c.Filters) == 0) && !(c.Filter == "" && slices.Equal(c.Filters, []string{runs})):
		why = fmt.Sprintf("an agent's consumer takes only its runs: its filter must be %s", runs)
	case c.DeliverSubject != "" || c.DeliverGroup != "":
		why = "an agent's consumer is a pull consumer: no deliver subject"
	case c.AckPolicy != "explicit":
		why = fmt.Sprintf("ack policy %q: an agent acknowledges each run (explicit)", c.AckPolicy)
	case c.SampleFreq != "" || c.Direct:
		why = "an agent's consumer takes no sampling and is not direct"
	}
	if why != "" {
		return apiError(typ, 400, why)
	}
	resp, err := b.nc.RequestWithContext(ctx, agent.ConsumerCreateSubject(agentID), data)
	if err != nil {
		return apiError(typ, 503, "creating the consumer: "+err.Error())
	}
	return resp.Data
}

// storeAgentResult publishes agentID's result of run runID on
// agent.ResultsSubject, with the message id agent.ResultMsgID whatever
// headers the agent sent, and returns JetStream's acknowledgement.
func (b *Bus) storeAgentResult(ctx context.Context, agentID, runID string, data []byte) []byte {
	var res struct {
		RunID string `json:"run_id"`
		Agent string `json:"agent"`
	}
	switch err := json.Unmarshal(data, &res); {
	case err != nil:
		return apiError("", 400, "the result is not JSON: "+err.Error())
	case res.Agent != agentID || res.RunID != runID:
		return apiError("", 400, fmt.Sprintf("a result published on %s must have agent %q and run_id %q", agent.ResultsSubject(agentID, runID), agentID, runID))
	}
	msg := nats.NewMsg(agent.ResultsSubject(agentID, runID))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, agent.ResultMsgID(agentID, runID))
	resp, err := b.nc.RequestMsgWithContext(ctx, msg)
	if errors.Is(err, nats.ErrNoResponders) {
		return apiError("", 503, "no stream takes "+msg.Subject)
	} else if err != nil {
		return apiError("", 503, "storing the result: "+err.Error())
	}
	return resp.Data
}

// apiError is a JetStream API error answer, as nats.go's jetstream package
// reads it: code is the HTTP-like status, and the description says why.
func apiError(typ string, code int, description string) []byte {
	type apiErr struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code,omitempty"`
		Description string `json:"description"`
	}
	body := struct {
		Type  string `json:"type,omitempty"`
		Error apiErr `json:"error"`
	}{typ, apiErr{Code: code, Description: "triggerd: " + description}}
	if code == 400 {
		body.Error.ErrCode = 10003 // JetStream's "bad request"
	}
	data, _ := json.Marshal(body)
	return data
}
