package bus

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/triggerd/triggerd/agent"
)

// OperatorUser is the embedded server's user with every permission: the
// user triggerd itself and the operator's tools (triggerctl tail, dead,
// redeliver) connect as.
const OperatorUser = "triggerd"

// AgentAuthenticator checks an agent's NATS password
// (registry.AgentPasswords).
type AgentAuthenticator interface {
	// AuthenticateAgent returns nil when password is agentID's, and
	// otherwise an error saying why not (for the log: it must not carry
	// the password).
	AuthenticateAgent(ctx context.Context, agentID, password string) error
}

// ClientAuth is who may connect to the embedded server. Without it
// (EmbeddedOptions.Auth nil) anyone who reaches the port may do anything:
// read every tenant's events and runs, publish events the dispatcher acts
// on, delete the streams.
type ClientAuth struct {
	// OperatorPasswords are OperatorUser's passwords, all accepted (to
	// rotate one); at least one is required.
	OperatorPasswords []string
	// Agents checks agents' passwords; nil refuses every agent.
	Agents AgentAuthenticator
	// Timeout bounds one agent's check (DefaultAuthTimeout when zero).
	Timeout time.Duration
	// OnRefused, when set, hears of every connection refused: the user
	// name it gave and why. Never the password.
	OnRefused func(user string, reason error)
}

// DefaultAuthTimeout bounds the check of an agent's password: nats-server
// closes a connection that has not authenticated within 2 s.
const DefaultAuthTimeout = 1500 * time.Millisecond

// authenticator is ClientAuth as nats-server's custom authentication.
type authenticator struct {
	ClientAuth
	operator [][]byte

	// mu guards srv and accounts.
	mu sync.Mutex
	// srv is the server, once its exports are in place (setServer); until
	// then every agent is refused.
	srv *server.Server
	// accounts holds each agent's account, made at its first connection.
	accounts map[string]*server.Account
}

// agentAccountPrefix begins the name of each agent's account on the
// embedded server.
const agentAccountPrefix = "AGENT_"

// agentExports are the subjects triggerd's account offers agents' accounts
// (each agent imports its own share: agent.Imports), with JetStream's
// pulls answered by a stream of messages.
var agentExports = []struct {
	subject  string
	streamed bool
}{
	{agent.GatewayPrefix + ".>", false},
	{"$JS.API.CONSUMER.INFO." + agent.Stream + ".*", false},
	{"$JS.API.CONSUMER.MSG.NEXT." + agent.Stream + ".*", true},
	{"$JS.ACK." + agent.Stream + ".>", false},
	{"$JS.API.DIRECT.GET." + agent.Stream + ".>", false},
}

// setServer exports agentExports from srv's global account, where
// triggerd and its streams are, and lets agents in.
func (a *authenticator) setServer(srv *server.Server) error {
	g := srv.GlobalAccount()
	for _, e := range agentExports {
		rt := server.Singleton
		if e.streamed {
			rt = server.Streamed
		}
		if err := g.AddServiceExportWithResponse(e.subject, rt, nil); err != nil {
			return fmt.Errorf("embedded nats: export %s to agents: %w", e.subject, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.srv = srv
	a.accounts = map[string]*server.Account{}
	return nil
}

// account returns agentID's account, made with agent.Imports from the
// global account the first time.
func (a *authenticator) account(agentID string) (*server.Account, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return nil, errors.New("the server is still starting")
	}
	if acc, ok := a.accounts[agentID]; ok {
		return acc, nil
	}
	acc, err := a.srv.RegisterAccount(agentAccountPrefix + agentID)
	if err != nil {
		return nil, fmt.Errorf("the agent's account: %w", err)
	}
	g := a.srv.GlobalAccount()
	for _, im := range agent.Imports(agentID) {
		if err := acc.AddServiceImport(g, im.From, im.To); err != nil {
			return nil, fmt.Errorf("the agent's account: import %s: %w", im.From, err)
		}
	}
	a.accounts[agentID] = acc
	return acc, nil
}

func newAuthenticator(a ClientAuth) (*authenticator, error) {
	auth := &authenticator{ClientAuth: a}
	for _, pw := range a.OperatorPasswords {
		if pw == "" {
			return nil, errors.New("embedded nats: an empty operator password")
		}
		auth.operator = append(auth.operator, []byte(pw))
	}
	if len(auth.operator) == 0 {
		return nil, errors.New("embedded nats: ClientAuth without an operator password")
	}
	if auth.Timeout <= 0 {
		auth.Timeout = DefaultAuthTimeout
	}
	return auth, nil
}

// isOperator compares pw with every operator password, in constant time.
func (a *authenticator) isOperator(pw string) bool {
	ok := 0
	for _, want := range a.operator {
		ok |= subtle.ConstantTimeCompare([]byte(pw), want)
	}
	return ok == 1
}

// Check lets OperatorUser in with every permission, in the global account
// where the streams are, and an agent into an account of its own with the
// permissions agent.Permissions gives it. nats-server calls it for every
// client connection, the in-process ones included.
func (a *authenticator) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	user := o.Username
	if user == OperatorUser {
		if !a.isOperator(o.Password) {
			a.refused(user, errors.New("wrong operator password"))
			return false
		}
		c.RegisterUser(&server.User{Username: user})
		return true
	}
	switch {
	case user == "":
		a.refused(user, errors.New("no user name (agents connect as their agent id, operators as "+OperatorUser+")"))
		return false
	case agent.CheckAgentID(user) != nil:
		a.refused(user, errors.New("not an agent id"))
		return false
	case a.Agents == nil:
		a.refused(user, errors.New("agents may not connect to this server"))
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	if err := a.Agents.AuthenticateAgent(ctx, user, o.Password); err != nil {
		a.refused(user, err)
		return false
	}
	acc, err := a.account(user)
	if err != nil {
		a.refused(user, err)
		return false
	}
	pub, sub := agent.Permissions(user)
	c.RegisterUser(&server.User{Username: user, Account: acc, Permissions: &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}})
	return true
}

func (a *authenticator) refused(user string, reason error) {
	if a.OnRefused != nil {
		a.OnRefused(user, reason)
	}
}

// DisconnectUser closes every connection of user (an agent id, when its
// password was replaced or the agent deleted) and returns how many it
// closed. The clients may reconnect, and are checked again.
func (e *Embedded) DisconnectUser(user string) int {
	cz, err := e.srv.Connz(&server.ConnzOptions{User: user, Limit: 1 << 20})
	if err != nil {
		return 0
	}
	n := 0
	for _, ci := range cz.Conns {
		if e.srv.DisconnectClientByID(ci.Cid) == nil {
			n++
		}
	}
	return n
}

// clusterLogger is the embedded server's logger on a cluster with agents.
// Each member makes an agent's account when the agent first connects to
// it, so when the agent subscribes on one member the others hear of
// interest in an account they do not have, and nats-server logs that as an
// error ("Unknown account ... for remote subject") on every such
// subscription. It is harmless: all an agent exchanges with triggerd goes
// through its imports from the global account, on the member it is
// connected to, and no member needs the interest of another's agent
// accounts. clusterLogger logs that line, for agents' accounts only, at
// debug level.
type clusterLogger struct{ server.Logger }

func (l clusterLogger) Errorf(format string, v ...any) {
	if strings.Contains(format, "Unknown account %q for remote subject") && len(v) > 0 {
		if name, ok := v[0].(string); ok && strings.HasPrefix(name, agentAccountPrefix) {
			l.Logger.Debugf(format, v...)
			return
		}
	}
	l.Logger.Errorf(format, v...)
}
