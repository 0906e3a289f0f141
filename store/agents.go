package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// AgentDelivery says how an agent is started.
type AgentDelivery string

// Agent deliveries.
const (
	// DeliverNATS publishes runs to agents.<agent-id>.runs on JetStream.
	DeliverNATS AgentDelivery = "nats"
	// DeliverHTTP POSTs runs to the agent's URL, signed the Standard
	// Webhooks way.
	DeliverHTTP AgentDelivery = "http"
)

// PipelineStep is one tool step an agent's runs execute, in order.
type PipelineStep struct {
	// Name identifies the step's output for later steps' templates
	// ({{ .steps.<name>.output... }}); unique within the agent.
	Name string `json:"name"`
	// Step is the step id ("codehost.create_comment").
	Step string `json:"step"`
	// Account is the connected account the step runs as.
	Account string `json:"account"`
	// Input is the step's input with string values that may be templates.
	Input json.RawMessage `json:"input,omitempty"`
}

// Agent is something triggers start.
type Agent struct {
	ID       string        `json:"id"`
	TenantID string        `json:"tenant_id"`
	Name     string        `json:"name"`
	Delivery AgentDelivery `json:"delivery"`
	// URL is where DeliverHTTP runs are POSTed.
	URL string `json:"url,omitempty"`
	// SealedSecret is the Standard Webhooks signing secret of an HTTP
	// agent, sealed like tokens.
	SealedSecret []byte `json:"sealed_secret,omitempty"`
	// NATSPasswordHash is the SHA-256 of a NATS agent's password, with
	// which it connects to the embedded NATS as itself; NATSPasswordSetAt
	// is when that password was made. Both are unset for HTTP agents and
	// for NATS agents made before agents had passwords.
	NATSPasswordHash  []byte         `json:"nats_password_hash,omitempty"`
	NATSPasswordSetAt time.Time      `json:"nats_password_set_at,omitzero"`
	Steps             []PipelineStep `json:"steps,omitempty"`
	CreatedAt         time.Time      `json:"created_at"`
	UpdatedAt         time.Time      `json:"updated_at"`
	Version           int64          `json:"version"`
}

// Validate reports the first identifier an agent to be stored lacks.
func (a Agent) Validate() error {
	return requireIDs("id", a.ID, "tenant id", a.TenantID)
}

// ForCreate returns a as CreateAgent stores it: Version 1, a zero
// CreatedAt set to now, a zero UpdatedAt set to CreatedAt.
func (a Agent) ForCreate(now time.Time) Agent {
	Stamp(&a.CreatedAt, &a.UpdatedAt, now)
	a.Version = 1
	return a
}

// SameAgentName reports whether two agent names are the same as people
// read them: equal but for case.
func SameAgentName(a, b string) bool { return strings.EqualFold(a, b) }

// NameTakenError is CreateAgentNamed's refusal: the tenant's agent
// AgentID is already named Name. It matches ErrNameTaken.
type NameTakenError struct {
	AgentID, Name string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("agent %s is already named %q", e.AgentID, e.Name)
}

// Is makes errors.Is(err, ErrNameTaken) hold.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// TakenName returns the first of agents named name (SameAgentName), as a
// *NameTakenError, or nil when none is.
func TakenName(agents []Agent, name string) error {
	for _, a := range agents {
		if SameAgentName(a.Name, name) {
			return &NameTakenError{AgentID: a.ID, Name: a.Name}
		}
	}
	return nil
}

// Agents stores agents.
type Agents interface {
	// CreateAgent stores a new agent with Version 1; ErrConflict if the id
	// exists.
	CreateAgent(ctx context.Context, a Agent) (Agent, error)
	// CreateAgentNamed is CreateAgent, unless another agent of the tenant
	// has a's name (SameAgentName): then a *NameTakenError, and nothing is
	// stored. The check and the write are one step, so of two concurrent
	// creations of one name exactly one succeeds.
	CreateAgentNamed(ctx context.Context, a Agent) (Agent, error)
	// GetAgent returns the tenant's agent or ErrNotFound (also for another
	// tenant's).
	GetAgent(ctx context.Context, tenantID, id string) (Agent, error)
	// FindAgent returns the agent with id, whatever its tenant, or
	// ErrNotFound: an agent connecting to NATS names only itself.
	FindAgent(ctx context.Context, id string) (Agent, error)
	// ListAgents returns the tenant's agents, oldest first.
	ListAgents(ctx context.Context, tenantID string) ([]Agent, error)
	// UpdateAgent replaces the agent if Versions match (ErrConflict
	// otherwise) and returns it with Version increased.
	UpdateAgent(ctx context.Context, a Agent) (Agent, error)
	// DeleteAgent deletes the agent; ErrNotFound if absent.
	DeleteAgent(ctx context.Context, tenantID, id string) error
}
