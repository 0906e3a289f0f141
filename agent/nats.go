package agent

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// On triggerd's embedded NATS every agent connects as itself: its id is the
// user name, and the password is the one triggerd showed when it created
// the agent (or when the password was last replaced). The server lets an
// agent do what Consume and Report do for its own runs and nothing else:
// it cannot read another agent's runs or results, publish events or runs,
// or change the streams. Connect sets the connection up that way.
//
// Permissions alone would not be enough: NATS does not check the reply
// subject of a request, and JetStream answers a request on whatever reply
// subject it names, so an agent allowed one direct get could have the
// answer published on "triggers.>" and have the events stream store it as
// an event. Each agent is therefore in a NATS account of its own, which
// takes from triggerd's account only the subjects of Imports: replies to
// its requests come back into its own account, whatever subject it names.
// Two of those subjects reach triggerd rather than JetStream (the
// gateway): creating the agent's consumer, which triggerd checks is a
// pull consumer of the agent's own runs before creating it, and
// publishing a result, which triggerd stores under a message id of its
// own so that no agent can shadow another's.

// NATSPasswordPrefix starts every agent NATS password, so a leaked one is
// recognisable for what it is.
const NATSPasswordPrefix = "tdagent_"

// NewNATSPassword returns a new agent NATS password: NATSPasswordPrefix
// followed by the unpadded URL-safe base64 of 32 random bytes.
func NewNATSPassword() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("agent: new NATS password: %w", err)
	}
	return NATSPasswordPrefix + base64.RawURLEncoding.EncodeToString(key), nil
}

// InboxPrefix is the prefix of the reply subjects of agentID's connection.
// The server lets the agent subscribe only below it, so no agent can read
// the replies another one receives (the runs a pull hands out among them).
func InboxPrefix(agentID string) string { return "_INBOX_AGENT." + agentID }

// Permissions returns the subjects agentID may publish to and subscribe
// to: those Consume and Report use, each scoped to the agent. They keep
// an agent apart from others only together with an account of its own
// (see Imports): an operator running triggerd on their own NATS
// (--nats-url) gives agents' users both.
//
//   - creating or updating the durable consumer ConsumerName(agentID),
//     only with the filter RunsSubject(agentID) (the server checks that
//     the filter in the request is the one in the subject);
//   - reading that consumer's state and pulling from it;
//   - acknowledging the runs it hands out;
//   - publishing results on ResultsSubject(agentID, "*"), and reading
//     them back by subject (JetStream's direct get of the last message);
//   - subscribing to its own inbox, InboxPrefix(agentID).
func Permissions(agentID string) (publish, subscribe []string) {
	cons := ConsumerName(agentID)
	publish = []string{
		ConsumerCreateSubject(agentID),
		"$JS.API.CONSUMER.INFO." + Stream + "." + cons,
		"$JS.API.CONSUMER.MSG.NEXT." + Stream + "." + cons,
		"$JS.ACK." + Stream + "." + cons + ".>",
		ResultsSubject(agentID, "*"),
		directGetPrefix + ResultsSubject(agentID, "*"),
	}
	return publish, []string{InboxPrefix(agentID) + ".>"}
}

// GatewayPrefix starts the subjects, in triggerd's account, on which
// triggerd answers an agent's consumer creation and results (see
// Imports).
const GatewayPrefix = "triggerd.agentapi"

// GatewayConsumerSubject is where triggerd takes agentID's requests to
// create or update its consumer.
func GatewayConsumerSubject(agentID string) string {
	return GatewayPrefix + "." + agentID + ".consumer"
}

// GatewayResultsSubject is where triggerd takes agentID's result of run
// runID ("*" for all of them), to store it on ResultsSubject.
func GatewayResultsSubject(agentID, runID string) string {
	return GatewayPrefix + "." + agentID + ".result." + runID
}

// Import is one subject an agent's account takes from triggerd's: what
// the agent publishes on From is delivered on To in triggerd's account,
// and the answers come back to the agent's own account.
type Import struct {
	From, To string
}

// Imports returns the subjects agentID's account takes from triggerd's
// account: those of Permissions, JetStream's own but for the consumer's
// creation and the results, which go to triggerd's gateway (see
// GatewayPrefix). An operator running triggerd on their own NATS
// (--nats-url) gives each agent an account with these service imports
// (and triggerd's account the matching exports) to keep agents apart.
//
// The last import, of JetStream's account info ($JS.API.INFO) from the
// gateway, is one the agent never uses (Permissions does not let it
// publish there): it is there so that nats-server does not give the
// agent's account, which has no JetStream of its own, the whole of
// JetStream's API to answer "JetStream not enabled for account". That
// answer would race the imported one on every request, and on a cluster,
// where JetStream's own answer takes a round trip to a stream's leader,
// win it.
func Imports(agentID string) []Import {
	pub, _ := Permissions(agentID)
	imports := make([]Import, 0, len(pub)+1)
	for _, subj := range pub {
		to := subj
		switch subj {
		case ConsumerCreateSubject(agentID):
			to = GatewayConsumerSubject(agentID)
		case ResultsSubject(agentID, "*"):
			to = GatewayResultsSubject(agentID, "*")
		}
		imports = append(imports, Import{From: subj, To: to})
	}
	return append(imports, Import{From: accountInfoSubject, To: GatewayPrefix + "." + agentID + ".info"})
}

// accountInfoSubject is JetStream's API subject for an account's info.
const accountInfoSubject = "$JS.API.INFO"

// ConsumerCreateSubject is JetStream's API subject for creating or
// updating agentID's consumer with the filter of its runs (the server
// checks that the filter in the request is the one in the subject).
func ConsumerCreateSubject(agentID string) string {
	return "$JS.API.CONSUMER.CREATE." + Stream + "." + ConsumerName(agentID) + "." + RunsSubject(agentID)
}

// directGetPrefix is JetStream's API subject for the last message of a
// subject in Stream: the subject follows it.
const directGetPrefix = "$JS.API.DIRECT.GET." + Stream + "."

// Connect connects to triggerd's NATS at url as agentID, with the password
// triggerd gave the agent, and with the inbox prefix the server allows it
// (InboxPrefix). opts come after Connect's own and may add to them (a
// name, reconnect settings, TLS), but a user, password or inbox prefix
// among them makes the server refuse the connection or its replies.
//
// The connection keeps reconnecting when the server refuses it (nats.go
// would give up after two refusals in a row): triggerd refuses an agent it
// cannot check, while its store is unreachable, and lets it in again once
// it can. A password that was replaced, or an agent that was deleted, is
// refused on every attempt: a nats.DisconnectErrHandler among opts sees
// nats.ErrAuthorization.
//
//	nc, err := agent.Connect("nats://triggerd.example.com:4222", id, os.Getenv("AGENT_NATS_PASSWORD"))
//	js, err := jetstream.New(nc)
//	err = agent.Consume(ctx, js, id, run)
func Connect(url, agentID, password string, opts ...nats.Option) (*nats.Conn, error) {
	if err := CheckAgentID(agentID); err != nil {
		return nil, err
	}
	if password == "" {
		return nil, errors.New("agent: Connect without a password: use the nats_password triggerd showed when it created the agent (POST /v1/agents/{id}/nats-password makes a new one)")
	}
	all := append([]nats.Option{
		nats.Name("agent " + agentID),
		nats.UserInfo(agentID, password),
		nats.CustomInboxPrefix(InboxPrefix(agentID)),
		nats.IgnoreAuthErrorAbort(),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			return nil, fmt.Errorf("agent: connect to %s as agent %s: %w (a deleted agent, or a password replaced since: POST /v1/agents/{id}/nats-password makes a new one)", url, agentID, err)
		}
		return nil, fmt.Errorf("agent: connect to %s as agent %s: %w", url, agentID, err)
	}
	return nc, nil
}
