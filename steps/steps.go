// Package steps is the tool step catalogue and runner: it finds a step by
// id or search, validates its input against the step's JSON Schema, runs
// it as a connected account with the connector's HTTP policy (rate limits,
// caching, retries), and turns every failure into a *connectors.Error with
// a code callers decide on. The HTTP API and the dispatcher both use it.
package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

// accountClients gives an HTTP client authorised as a connected account.
type accountClients interface {
	Client(ctx context.Context, tenantID, id string) (*http.Client, store.Account, error)
}

// Options configures a Runner.
type Options struct {
	// Toolkits are the connectors' named steps and HTTP policies.
	Toolkits []connectors.Toolkit
	// Extra are further steps (the API Call steps), run under the policy of
	// their connector's toolkit.
	Extra    []connectors.Step
	Accounts accountClients
}

type entry struct {
	step   connectors.Step
	schema *jsonschema.Schema
	wrap   func(accountID string, base http.RoundTripper) http.RoundTripper
}

// Runner finds and runs steps.
type Runner struct {
	entries map[string]*entry
	order   []string
	acc     accountClients
}

// New compiles every step's input schema and refuses duplicate ids.
func New(o Options) (*Runner, error) {
	if o.Accounts == nil {
		return nil, errors.New("steps: nil Accounts")
	}
	r := &Runner{entries: map[string]*entry{}, acc: o.Accounts}
	wraps := map[string]func(string, http.RoundTripper) http.RoundTripper{}
	var all []connectors.Step
	for _, tk := range o.Toolkits {
		wraps[tk.Connector] = tk.Wrap
		all = append(all, tk.Steps...)
	}
	all = append(all, o.Extra...)
	for _, s := range all {
		if s.ID == "" || s.Run == nil {
			return nil, fmt.Errorf("steps: step %q has no id or no Run", s.Name)
		}
		if _, dup := r.entries[s.ID]; dup {
			return nil, fmt.Errorf("steps: duplicate step id %q", s.ID)
		}
		schema, err := compile(s.ID, s.Input)
		if err != nil {
			return nil, fmt.Errorf("steps: %s: input schema: %w", s.ID, err)
		}
		r.entries[s.ID] = &entry{step: s, schema: schema, wrap: wraps[s.Connector]}
		r.order = append(r.order, s.ID)
	}
	return r, nil
}

func compile(id string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	loc := "triggerd:steps/" + id + "/input"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// List returns the steps whose id, name, connector or description contains
// every word of q (case-insensitive), in catalogue order; q "" lists all.
func (r *Runner) List(q string) []connectors.Step {
	words := strings.Fields(strings.ToLower(q))
	var out []connectors.Step
	for _, id := range r.order {
		s := r.entries[id].step
		hay := strings.ToLower(s.ID + " " + s.Name + " " + s.Connector + " " + s.Description)
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(hay, w) }) {
			out = append(out, s)
		}
	}
	return out
}

// Get returns the step with this id.
func (r *Runner) Get(id string) (connectors.Step, bool) {
	e, ok := r.entries[id]
	if !ok {
		return connectors.Step{}, false
	}
	return e.step, true
}

// Run validates input, runs step id as the tenant's account, and returns
// the step's output as JSON. Every error is a *connectors.Error.
func (r *Runner) Run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error) {
	e, ok := r.entries[id]
	if !ok {
		return nil, connectors.Errorf(connectors.CodeNotFound, "no step %q; GET /v1/steps lists them", id)
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "input is not JSON: %v", err)
	}
	if err := e.schema.Validate(doc); err != nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "input does not match %s's schema: %s", id, schemaMessage(err))
	}
	if accountID == "" {
		return nil, connectors.Errorf(connectors.CodeValidation, "no account: name a connected %s account", e.step.Connector)
	}
	client, acc, err := r.acc.Client(ctx, tenantID, accountID)
	if err != nil {
		return nil, accountError(accountID, err)
	}
	if acc.Connector != e.step.Connector {
		return nil, connectors.Errorf(connectors.CodeValidation, "account %s is a %s account; %s needs a %s account", accountID, acc.Connector, id, e.step.Connector)
	}
	hc := *client
	if e.wrap != nil {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = e.wrap(accountID, base)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	env := connectors.Env{HTTP: &hc, Account: connectors.AccountInfo{
		ID: acc.ID, Login: acc.Login, ExternalID: acc.ExternalID, Metadata: acc.Metadata,
	}}
	out, err := e.step.Run(ctx, env, input)
	if err != nil {
		return nil, stepError(ctx, err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, connectors.Errorf(connectors.CodeUpstream, "encode the output of %s: %v", id, err)
	}
	return b, nil
}

// schemaMessage makes a validation error readable in one line.
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		var parts []string
		for _, c := range leaves(ve) {
			loc := "/" + strings.Join(c.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, c.ErrorKind))
		}
		if len(parts) > 0 {
			return strings.Join(parts, "; ")
		}
	}
	return err.Error()
}

func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// accountError maps the accounts package's typed errors onto step codes.
func accountError(id string, err error) error {
	switch {
	case errors.Is(err, accounts.ErrAccountNotFound):
		return connectors.Errorf(connectors.CodeNotFound, "no connected account %s in this tenant", id)
	case errors.Is(err, accounts.ErrAccountRemoved):
		return connectors.Errorf(connectors.CodeAccountRemoved, "account %s was removed; reconnect it to use it again", id)
	case errors.Is(err, accounts.ErrNeedsReauth):
		return connectors.Errorf(connectors.CodeNeedsReauth, "the provider refused account %s's grant; reconnect it", id)
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Message: "the account's token could not be obtained: " + err.Error(), Retryable: true}
}

// stepError normalises whatever a step returned into a *connectors.Error.
func stepError(ctx context.Context, err error) error {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctx.Err() != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: "the step did not finish before its deadline", Retryable: true}
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Message: err.Error(), Retryable: true}
}
