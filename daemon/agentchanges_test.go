package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/internal/testenv"
)

// onePassword lets in one agent with one password, which the test
// replaces.
type onePassword struct {
	mu        sync.Mutex
	id, value string
}

func (p *onePassword) set(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.value = v
}

func (p *onePassword) AuthenticateAgent(_ context.Context, id, pw string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != p.id || pw != p.value {
		return fmt.Errorf("agent %s: wrong password or no such agent", id)
	}
	return nil
}

// TestAgentChangesReachTheEmbeddedServersProcess: a process on another's
// embedded NATS (--nats-url: no server of its own) that replaces an
// agent's password gets the agent's connections to that server closed by
// the process whose server it is.
func TestAgentChangesReachTheEmbeddedServersProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const operatorPassword = "agent-changes-operator"
	pws := &onePassword{id: uuid.NewString(), value: "old"}
	emb, err := bus.StartEmbedded(bus.EmbeddedOptions{
		Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Auth: &bus.ClientAuth{OperatorPasswords: []string{operatorPassword}, Agents: pws},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	connect := func(o bus.Options) *bus.Bus {
		o.User, o.Password = bus.OperatorUser, operatorPassword
		b, err := bus.Connect(ctx, emb.ClientURL(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	owner := connect(bus.Options{Embedded: emb})
	other := connect(bus.Options{})
	if err := listenAgentChanges(ctx, owner, emb, "owner", zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var disconnects int
	nc, err := agent.Connect(emb.ClientURL(), pws.id, "old", nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { mu.Lock(); disconnects++; mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	disconnected := func() int { mu.Lock(); defer mu.Unlock(); return disconnects }

	// The other process, with no embedded server, replaces the password.
	pws.set("new")
	n := notifier{b: other, origin: "other", log: zerolog.Nop()}
	testenv.Eventually(t, 10*time.Second, "the agent's connection closed by the server's process", func() bool {
		if disconnected() > 0 {
			return true
		}
		n.AgentCredentialsChanged(ctx, pws.id) // again: the listener's subscription may not have reached the server yet
		return false
	})
	testenv.Eventually(t, 5*time.Second, "the old password to stay refused", func() bool {
		return !nc.IsConnected() && errors.Is(nc.LastError(), nats.ErrAuthorization)
	})
}
