package registry

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/triggerd/triggerd/pipeline"
	"github.com/triggerd/triggerd/store"
)

// AgentInput is what an agent is created from.
type AgentInput struct {
	Name string `json:"name"`
	// Delivery is "nats" (default) or "http".
	Delivery store.AgentDelivery  `json:"delivery"`
	URL      string               `json:"url,omitempty"`
	Steps    []store.PipelineStep `json:"steps,omitempty"`
	// AllowDuplicateName creates the agent even when another agent of the
	// tenant has its name; without it that is ErrNameTaken.
	AllowDuplicateName bool `json:"allow_duplicate_name,omitempty"`
}

// stepName is what a pipeline step's name must look like, so templates can
// refer to it as .steps.<name>.
var stepName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// CreateAgent validates and stores an agent. It returns the agent's
// secret, which is shown only here: for an HTTP agent the Standard Webhooks
// signing secret, for a NATS agent the password it connects with.
func (r *Registry) CreateAgent(ctx context.Context, tenantID string, in AgentInput) (store.Agent, string, error) {
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || utf8.RuneCountInString(in.Name) > 200 {
		return store.Agent{}, "", invalidf("name must be 1 to 200 characters")
	}
	if in.Delivery == "" {
		in.Delivery = store.DeliverNATS
	}
	switch in.Delivery {
	case store.DeliverNATS:
		if in.URL != "" {
			return store.Agent{}, "", invalidf("url is only for agents with delivery \"http\"")
		}
	case store.DeliverHTTP:
		if in.URL == "" {
			return store.Agent{}, "", invalidf("delivery \"http\" needs a url the runs are POSTed to")
		}
		if err := r.o.CheckAgentURL(in.URL); err != nil {
			return store.Agent{}, "", invalidf("url: %v", err)
		}
	default:
		return store.Agent{}, "", invalidf("delivery %q: use \"nats\" (runs on agents.<agent-id>.runs) or \"http\" (runs POSTed to url)", in.Delivery)
	}
	if !in.AllowDuplicateName {
		// A quick refusal before the secrets are made; the store checks
		// again as it writes.
		if err := r.checkNameFree(ctx, tenantID, in.Name); err != nil {
			return store.Agent{}, "", err
		}
	}
	if err := r.checkSteps(ctx, tenantID, in.Steps); err != nil {
		return store.Agent{}, "", err
	}
	now := r.o.Now()
	a := store.Agent{
		ID: uuid.NewString(), TenantID: tenantID, Name: in.Name, Delivery: in.Delivery, URL: in.URL,
		Steps: in.Steps, CreatedAt: now, UpdatedAt: now,
	}
	var secret string
	var err error
	switch a.Delivery {
	case store.DeliverHTTP:
		if secret, err = r.o.NewAgentSecret(); err != nil {
			return store.Agent{}, "", fmt.Errorf("agent secret: %w", err)
		}
		if a.SealedSecret, err = r.o.Secrets.Seal([]byte(secret), store.AgentSecretAAD(a.ID)); err != nil {
			return store.Agent{}, "", fmt.Errorf("seal agent secret: %w", err)
		}
	case store.DeliverNATS:
		if secret, err = r.setNATSPassword(&a); err != nil {
			return store.Agent{}, "", err
		}
	}
	create := r.o.Store.CreateAgentNamed
	if in.AllowDuplicateName {
		create = r.o.Store.CreateAgent
	}
	a, err = create(ctx, a)
	if err != nil {
		if taken := (*store.NameTakenError)(nil); errors.As(err, &taken) {
			return store.Agent{}, "", nameTaken(taken.AgentID, taken.Name)
		}
		return store.Agent{}, "", fmt.Errorf("store agent: %w", err)
	}
	return a, secret, nil
}

// checkSteps validates a pipeline: known steps, unique names, accounts of
// the tenant and of the step's connector, templates that parse.
func (r *Registry) checkSteps(ctx context.Context, tenantID string, steps []store.PipelineStep) error {
	seen := map[string]bool{}
	// outputs are the earlier steps' output schemas, for the templates'
	// references to .steps.<name>.output... (nil: not known, not checked).
	outputs := map[string]json.RawMessage{}
	schemas, _ := r.o.Steps.(OutputSchemas)
	for i, s := range steps {
		where := fmt.Sprintf("steps[%d]", i)
		if !stepName.MatchString(s.Name) {
			return invalidf("%s: name %q must be a letter or _ followed by letters, digits or _ (templates use .steps.<name>)", where, s.Name)
		}
		if seen[s.Name] {
			return invalidf("%s: name %q is used twice", where, s.Name)
		}
		seen[s.Name] = true
		if r.o.Steps != nil {
			conn, ok := r.o.Steps.Has(s.Step)
			if !ok {
				return invalidf("%s: unknown step %q; GET /v1/steps lists them", where, s.Step)
			}
			acc, err := r.o.Accounts.Get(ctx, tenantID, s.Account)
			if err != nil {
				return invalidf("%s: account %q: %v", where, s.Account, err)
			}
			if acc.Connector != conn {
				return invalidf("%s: step %s needs a %s account; %s is a %s account", where, s.Step, conn, acc.ID, acc.Connector)
			}
		}
		// CheckFieldRefs also refuses what pipeline.CheckTemplates does.
		if err := pipeline.CheckFieldRefs(s.Input, outputs); err != nil {
			return invalidf("%s: %v", where, err)
		}
		outputs[s.Name] = nil
		if schemas != nil {
			outputs[s.Name], _ = schemas.OutputSchema(s.Step)
		}
	}
	return nil
}

// OutputSchemas is what a step catalogue (Options.Steps) may also offer:
// each step's output JSON Schema, so that templates' references to an
// earlier step's output are checked when the agent is saved.
type OutputSchemas interface {
	OutputSchema(stepID string) (json.RawMessage, bool)
}

// GetAgent returns the tenant's agent.
func (r *Registry) GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error) {
	a, err := r.o.Store.GetAgent(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Agent{}, fmt.Errorf("agent %s: %w", id, ErrNotFound)
	}
	return a, err
}

// ListAgents returns the tenant's agents.
func (r *Registry) ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error) {
	return r.o.Store.ListAgents(ctx, tenantID)
}

// DeleteAgent deletes an agent no trigger starts any more.
func (r *Registry) DeleteAgent(ctx context.Context, tenantID, id string) error {
	if _, err := r.GetAgent(ctx, tenantID, id); err != nil {
		return err
	}
	ts, err := r.o.Store.ListTriggers(ctx, store.TriggerFilter{TenantID: tenantID, AgentID: id})
	if err != nil {
		return err
	}
	if len(ts) > 0 {
		ids := make([]string, len(ts))
		for i, t := range ts {
			ids[i] = t.ID
		}
		return conflictf("agent %s is started by triggers %s; delete them first", id, strings.Join(ids, ", "))
	}
	if err := r.o.Store.DeleteAgent(ctx, tenantID, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	r.notifyAgent(ctx, id)
	return nil
}

// setNATSPassword gives a a new NATS password, stores its hash in a, and
// returns it.
func (r *Registry) setNATSPassword(a *store.Agent) (string, error) {
	pw, err := r.o.NewNATSPassword()
	if err != nil {
		return "", fmt.Errorf("agent NATS password: %w", err)
	}
	sum := sha256.Sum256([]byte(pw))
	a.NATSPasswordHash = sum[:]
	a.NATSPasswordSetAt = r.o.Now().UTC()
	return pw, nil
}

// ResetNATSPassword gives a NATS agent a new password and returns it, shown
// only here. The old one stops working at once: connections made with it
// are closed (Notifier.AgentCredentialsChanged) and refused when they
// reconnect. Agents made before agents had passwords get their first one
// this way.
func (r *Registry) ResetNATSPassword(ctx context.Context, tenantID, id string) (store.Agent, string, error) {
	for attempt := 0; ; attempt++ {
		a, err := r.GetAgent(ctx, tenantID, id)
		if err != nil {
			return store.Agent{}, "", err
		}
		if a.Delivery != store.DeliverNATS {
			return store.Agent{}, "", invalidf("agent %s takes its runs over %s and has no NATS password", id, a.Delivery)
		}
		pw, err := r.setNATSPassword(&a)
		if err != nil {
			return store.Agent{}, "", err
		}
		a.UpdatedAt = a.NATSPasswordSetAt
		a, err = r.o.Store.UpdateAgent(ctx, a)
		if errors.Is(err, store.ErrConflict) && attempt < 3 {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return store.Agent{}, "", fmt.Errorf("store agent %s: %w", id, err)
		}
		r.notifyAgent(ctx, id)
		return a, pw, nil
	}
}

// AgentPasswords checks NATS agents' passwords against the store. It needs
// nothing else of the registry, so that the embedded NATS can check agents
// from the moment it listens, before the registry is built.
type AgentPasswords struct {
	Store interface {
		FindAgent(ctx context.Context, id string) (store.Agent, error)
	}
}

// AuthenticateAgent returns nil when password is the NATS password of the
// agent agentID, of any tenant; otherwise an error saying why not, which
// never carries the password.
func (p AgentPasswords) AuthenticateAgent(ctx context.Context, agentID, password string) error {
	a, err := p.Store.FindAgent(ctx, agentID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("agent %s: no such agent", agentID)
	case err != nil:
		return fmt.Errorf("agent %s: %w", agentID, err)
	case a.Delivery != store.DeliverNATS:
		return fmt.Errorf("agent %s takes its runs over %s, not NATS", agentID, a.Delivery)
	case len(a.NATSPasswordHash) == 0:
		return fmt.Errorf("agent %s has no NATS password yet: POST /v1/agents/%s/nats-password makes one", agentID, agentID)
	}
	sum := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(sum[:], a.NATSPasswordHash) != 1 {
		return fmt.Errorf("agent %s: wrong password (the one shown when the agent was made, or last by POST /v1/agents/%s/nats-password)", agentID, agentID)
	}
	return nil
}

func (r *Registry) notifyAgent(ctx context.Context, id string) {
	if r.o.Notifier != nil {
		r.o.Notifier.AgentCredentialsChanged(ctx, id)
	}
}

// AgentEndpoint returns an agent's deployment endpoint, if it has one.
func (r *Registry) AgentEndpoint(ctx context.Context, tenantID, agentID string) (store.Hook, bool, error) {
	h, err := r.o.Store.FindHook(ctx, endpointKey(tenantID, agentID))
	if errors.Is(err, store.ErrNotFound) {
		return store.Hook{}, false, nil
	}
	return h, err == nil, err
}

// checkNameFree returns ErrNameTaken if an agent of the tenant is named
// name, compared as people read names (store.SameAgentName): two agents
// of one name are told apart only by their ids, which lists and logs do
// not make plain; a tenant that wants them anyway says so
// (AgentInput.AllowDuplicateName). It is the early answer; the store's
// CreateAgentNamed decides, atomically, for creations racing past it.
func (r *Registry) checkNameFree(ctx context.Context, tenantID, name string) error {
	agents, err := r.o.Store.ListAgents(ctx, tenantID)
	if err != nil {
		return fmt.Errorf("list the tenant's agents: %w", err)
	}
	var taken *store.NameTakenError
	if errors.As(store.TakenName(agents, name), &taken) {
		return nameTaken(taken.AgentID, taken.Name)
	}
	return nil
}

// nameTaken is ErrNameTaken for the agent id already named name. It reads
// as its detail alone: the API answers it under the code name_taken, and
// "name taken: ... is already named" said the conflict twice.
func nameTaken(id, name string) error {
	return detailError{fmt.Sprintf("agent %s is already named %q: choose another name, or send \"allow_duplicate_name\": true (triggerctl agents create --allow-duplicate-name) to have two agents of that name", id, name), ErrNameTaken}
}
