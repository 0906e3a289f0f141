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
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/oauth2"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/internal/netguard"
	"github.com/triggerd/triggerd/store"
)

// accountTokens gives the tokens of connected accounts (accounts.Service).
type accountTokens interface {
	Token(ctx context.Context, tenantID, id string) (*oauth2.Token, store.Account, error)
	// Rejected is told that the provider refused an access token of the
	// account (HTTP 401) and returns the token to use instead, or an
	// error wrapping accounts.ErrNeedsReauth once the account is marked.
	Rejected(ctx context.Context, tenantID, id, accessToken string) (*oauth2.Token, error)
}

// Options configures a Runner.
type Options struct {
	// Toolkits are the connectors' named steps and HTTP policies.
	Toolkits []connectors.Toolkit
	// Extra are further steps (the API Call steps), run under the policy of
	// their connector's toolkit.
	Extra    []connectors.Step
	Accounts accountTokens
	// BreakerThreshold is how many failed answers in a row (5xx, or no
	// answer) from the provider to one account hold back that account's
	// steps (default DefaultBreakerThreshold); BreakerCooldown is how long
	// at first (default DefaultBreakerCooldown), doubling while probes
	// fail, up to DefaultBreakerMaxCooldown (or the cooldown, if longer).
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// OnCircuitChange, when set, is told when an account's steps start or
	// stop being held back.
	OnCircuitChange func(CircuitChange)
	// Now is the clock of the breaker and of Audit.Duration (default
	// time.Now).
	Now func() time.Time
	// Audit, when set, is told of every run of a step, whoever asked
	// (connectors.Caller: the API, MCP, a pipeline), once it has ended.
	Audit func(Audit)
	// Transport sends the steps' requests to the providers, beneath the
	// token and the connectors' policies; nil means the oauth2.HTTPClient
	// of the run's context, if any, else http.DefaultTransport. triggerd
	// passes one that refuses loopback, private and link-local addresses
	// (netguard.Transport), so that no token is sent inside the network.
	Transport http.RoundTripper
}

// Audit is one step run, for the audit log: who ran what as which
// account, and how it ended. It holds neither input nor output, which may
// carry what the account can read.
type Audit struct {
	Tenant, Step, Account string
	// Caller is connectors.Caller of the run's context.
	Caller string
	// Code is "ok", or the failure's connectors.ErrorCode.
	Code     string
	Duration time.Duration
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
	acc     accountTokens
	breaker *breaker
	audit   func(Audit)
	base    http.RoundTripper
}

// New compiles every step's input schema and refuses duplicate ids.
func New(o Options) (*Runner, error) {
	if o.Accounts == nil {
		return nil, errors.New("steps: nil Accounts")
	}
	r := &Runner{entries: map[string]*entry{}, acc: o.Accounts, breaker: newBreaker(o), audit: o.Audit, base: o.Transport}
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

// List returns the steps whose id, name, connector (or the words users
// know it by, connectors.SearchTerms) or description contains every word
// of q (case-insensitive), in catalogue order; q "" lists all.
func (r *Runner) List(q string) []connectors.Step {
	words := strings.Fields(strings.ToLower(q))
	var out []connectors.Step
	for _, id := range r.order {
		s := r.entries[id].step
		hay := strings.ToLower(s.ID + " " + s.Name + " " + s.Connector + " " + connectors.SearchTerms(s.Connector) + " " + s.Description)
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
// the step's output as JSON. Every error is a *connectors.Error. Each run
// is told to Options.Audit.
func (r *Runner) Run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error) {
	if r.audit == nil {
		return r.run(ctx, tenantID, id, accountID, input)
	}
	start := r.breaker.now()
	out, err := r.run(ctx, tenantID, id, accountID, input)
	code := "ok"
	var ce *connectors.Error
	if errors.As(err, &ce) {
		code = string(ce.Code)
	} else if err != nil {
		code = string(connectors.CodeUpstream)
	}
	r.audit(Audit{Tenant: tenantID, Step: id, Account: accountID, Caller: connectors.Caller(ctx), Code: code, Duration: r.breaker.now().Sub(start)})
	return out, err
}

func (r *Runner) run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error) {
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
	tok, acc, err := r.acc.Token(ctx, tenantID, accountID)
	if err != nil {
		return nil, accountError(accountID, err)
	}
	if acc.Connector != e.step.Connector {
		return nil, connectors.Errorf(connectors.CodeValidation, "account %s is a %s account; %s needs a %s account", accountID, acc.Connector, id, e.step.Connector)
	}
	info := connectors.AccountInfo{ID: acc.ID, Login: acc.Login, ExternalID: acc.ExternalID, Metadata: acc.Metadata}
	probe, err := r.breaker.allow(accountID)
	if err != nil {
		return nil, err
	}
	var w *watch
	if probe {
		// Deferred, so that a step that panics does not leave the
		// circuit probing for ever.
		defer func() {
			sent, answered := w.outcome()
			r.breaker.done(accountID, sent, answered)
		}()
	}
	out, w, err := e.runAs(ctx, r.breaker, r.base, tok, info, input)
	var marked bool
	if w.refused {
		// The provider refused the token: get another (a refresh), or
		// have the account marked needs_reauth so that its next use fails
		// fast and its owner sees why.
		next, rerr := r.acc.Rejected(ctx, tenantID, accountID, tok.AccessToken)
		marked = errors.Is(rerr, accounts.ErrNeedsReauth)
		if rerr == nil && next != nil && !w.effects {
			// Nothing but reads reached the provider: run it again with
			// the new token, once.
			var again *watch
			out, again, err = e.runAs(ctx, r.breaker, r.base, next, info, input)
			w.add(again)
		}
	}
	if err != nil {
		ce := stepError(ctx, err)
		if marked {
			msg := ce.Message + "; account " + accountID + " is now marked needs_reauth"
			// A provider's message may say to reconnect already (the
			// deployment and analytics connectors' do): say it once.
			if !strings.Contains(ce.Message, "reconnect") {
				msg += ": reconnect it"
			}
			ce = &connectors.Error{Code: connectors.CodeNeedsReauth, Status: ce.Status, Message: msg}
		}
		return nil, ce
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, connectors.Errorf(connectors.CodeUpstream, "encode the output of %s: %v", id, err)
	}
	return b, nil
}

// runAs runs the step with an account's token under its connector's HTTP
// policy, and reports what the provider answered, to the caller and to
// the breaker.
func (e *entry) runAs(ctx context.Context, b *breaker, base http.RoundTripper, tok *oauth2.Token, info connectors.AccountInfo, input json.RawMessage) (any, *watch, error) {
	clientCtx := ctx // where oauth2 finds its base transport
	if base != nil {
		clientCtx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: base})
	}
	hc := oauth2.NewClient(clientCtx, oauth2.StaticTokenSource(tok))
	w := &watch{base: hc.Transport, breaker: b, accountID: info.ID}
	hc.Transport = w
	if e.wrap != nil {
		hc.Transport = e.wrap(info.ID, w)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	out, err := e.step.Run(ctx, connectors.Env{HTTP: hc, Account: info}, input)
	return out, w, err
}

// watch notes what the provider answered a step's requests, beneath the
// connector's policy (so every attempt is seen, none from its cache), and
// tells the breaker.
type watch struct {
	base      http.RoundTripper
	breaker   *breaker
	accountID string
	mu        sync.Mutex
	// refused: a request was answered 401.
	refused bool
	// effects: a request that may change something (not GET, HEAD or
	// OPTIONS) was answered otherwise, or not at all.
	effects bool
	// sent: a request was sent; answered: one was answered, and not with
	// a 5xx.
	sent, answered bool
}

func (w *watch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.base.RoundTrip(req)
	if err != nil && errors.Is(req.Context().Err(), context.Canceled) {
		// The step was called off (a shutdown): the provider is not to
		// blame, and the request may or may not have reached it.
		w.mu.Lock()
		defer w.mu.Unlock()
		w.effects = w.effects || !safeMethod(req.Method)
		return resp, err
	}
	if errors.Is(err, netguard.ErrForbiddenAddress) {
		// The dial guard refused the provider's address: nothing was
		// sent, the provider is not to blame, and only the operator's
		// setting (named in err) changes the outcome.
		return nil, &connectors.Error{Code: connectors.CodeUpstream, Message: "request not sent: " + err.Error()}
	}
	failed, detail := false, ""
	switch {
	case err != nil && errors.Is(req.Context().Err(), context.DeadlineExceeded):
		failed, detail = true, "no answer within the step's deadline"
	case err != nil:
		failed, detail = true, "no answer: "+err.Error()
	case resp.StatusCode >= 500:
		failed, detail = true, fmt.Sprintf("upstream %d", resp.StatusCode)
	}
	w.breaker.record(w.accountID, failed, detail)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = true
	w.answered = w.answered || !failed
	switch {
	case err == nil && resp.StatusCode == http.StatusUnauthorized:
		w.refused = true
	case !safeMethod(req.Method):
		w.effects = true
	}
	return resp, err
}

// safeMethod reports whether a request with this method changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// outcome says whether a request was sent, and whether one was answered
// (not with a 5xx); nil saw nothing.
func (w *watch) outcome() (sent, answered bool) {
	if w == nil {
		return false, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sent, w.answered
}

// add takes in what another watch of the same step saw.
func (w *watch) add(o *watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = w.sent || o.sent
	w.answered = w.answered || o.answered
}

// schemaMessage makes a validation error readable in one line. Each
// violation is worded by its kind ("missing property 'title'"); printed
// with %s, a kind shows its Go value instead (&{[title]}).
func schemaMessage(err error) string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		p := message.NewPrinter(language.English)
		var parts []string
		for _, c := range leaves(ve) {
			loc := "/" + strings.Join(c.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, c.ErrorKind.LocalizedString(p)))
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
func stepError(ctx context.Context, err error) *connectors.Error {
	var ce *connectors.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ctx.Err() != nil {
		return &connectors.Error{Code: connectors.CodeUpstream, Message: "the step did not finish before its deadline", Retryable: true}
	}
	return &connectors.Error{Code: connectors.CodeUpstream, Message: err.Error(), Retryable: true}
}
