// Package console serves triggerd's web console under /console/: pages,
// rendered on the server with html/template, where people sign in with an
// API key and see and operate what triggerd does for their tenant
// (connected accounts, tool steps, agents, triggers, deliveries, events,
// runs, dead letters).
//
// Everything it shows that came from outside (payloads, headers, titles)
// is text: templates escape it, and the Content-Security-Policy on every
// answer lets no script run but the console's own file. Every
// state-changing request needs the session's CSRF token. Pages and
// assets are embedded in the binary.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/accounts"
	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
	"github.com/triggerd/triggerd/triggers"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console/"

// What the console needs of the services behind the /v1 API. Each is
// implemented by the package named beside it.

// Authenticator maps a tenant API key to its tenant (tenants.Service).
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (string, error)
}

// Tenants lists and creates tenants, for the admin (tenants.Service and
// the store).
type Tenants interface {
	Create(ctx context.Context, name string) (store.Tenant, string, error)
	ListTenants(ctx context.Context) ([]store.Tenant, error)
	Keys(ctx context.Context, tenantID string) ([]tenants.Key, error)
	CreateKey(ctx context.Context, tenantID, name string) (tenants.Key, string, error)
	Revoke(ctx context.Context, tenantID, keyID string) error
}

// Accounts manages connected accounts (accounts.Service).
type Accounts interface {
	Start(ctx context.Context, tenantID, connector, returnTo string) (string, error)
	List(ctx context.Context, tenantID string) ([]store.Account, error)
	Get(ctx context.Context, tenantID, id string) (store.Account, error)
	Remove(ctx context.Context, tenantID, id string) (store.Account, accounts.RemoveReport, error)
}

// Registry manages agents and triggers (registry.Registry).
type Registry interface {
	CreateAgent(ctx context.Context, tenantID string, in registry.AgentInput) (store.Agent, string, error)
	GetAgent(ctx context.Context, tenantID, id string) (store.Agent, error)
	ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error)
	DeleteAgent(ctx context.Context, tenantID, id string) error
	AgentEndpoint(ctx context.Context, tenantID, agentID string) (store.Hook, bool, error)
	HookActivity(ctx context.Context, id string) (store.HookActivity, error)
	CreateTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	DraftTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error)
	ListTriggers(ctx context.Context, tenantID string) ([]store.Trigger, error)
	SetEnabled(ctx context.Context, tenantID, id string, enabled bool) (store.Trigger, error)
	DeleteTrigger(ctx context.Context, tenantID, id string) error
	HooksOf(ctx context.Context, t store.Trigger) ([]store.Hook, error)
	CoverageOf(ctx context.Context, t store.Trigger, hooks []store.Hook) (*registry.Coverage, error)
	HookURL(h store.Hook) string
	AccountRemoving(ctx context.Context, tenantID string, acc store.Account) error
}

// Records reads runs, event outcomes and the delivery log (the store).
type Records interface {
	GetRun(ctx context.Context, tenantID, id string) (store.Run, error)
	ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error)
	GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error)
	GetDelivery(ctx context.Context, tenantID, id string) (store.DeliveryRecord, error)
	ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]store.DeliveryRecord, error)
	ReadActivity(ctx context.Context, tenantID string, spans []store.ActivitySpan) ([][]store.ActivityCounts, error)
}

// Replayer replays events (dispatch.Dispatcher).
type Replayer interface {
	Replay(ctx context.Context, tenantID, eventID, triggerID string, bypass bool) ([]dispatch.ReplayPlan, error)
}

// DryRunner tests a trigger against recent events (dispatch.Dispatcher).
type DryRunner interface {
	DryRun(ctx context.Context, t store.Trigger, limit int) (dispatch.DryRunReport, error)
}

// Steps is the tool step catalogue (the step runner).
type Steps interface {
	List(q string) []connectors.Step
	Get(id string) (connectors.Step, bool)
	Run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error)
}

// Archive reads archived deliveries (bus.Bus).
type Archive interface {
	Delivery(ctx context.Context, c triggers.Connector, key string) (triggers.Capture, error)
}

// Redeliverer makes a new attempt at an archived delivery and records it
// in the delivery log (see Redelivery).
type Redeliverer interface {
	Redeliver(ctx context.Context, tenantID string, capture triggers.Capture, asNew bool) (store.DeliveryRecord, error)
}

// DeadLetters lists and requeues dead letters (bus.Bus).
type DeadLetters interface {
	ListDead(ctx context.Context, source string, from uint64, limit int) ([]bus.Dead, error)
	Requeue(ctx context.Context, seq uint64) (bus.Dead, error)
}

// Options configures the console. Auth, Accounts, Registry and Records
// are required; the others leave their pages' actions out when nil.
type Options struct {
	Auth     Authenticator
	Tenants  Tenants
	Accounts Accounts
	Registry Registry
	Records  Records
	Replayer Replayer
	// DryRunner makes the trigger form's "Test against recent events".
	DryRunner DryRunner
	Steps     Steps
	Archive   Archive
	// Redeliver makes the Redeliver buttons work.
	Redeliver Redeliverer
	Dead      DeadLetters
	// AdminKeys sign in as the admin.
	AdminKeys []string
	// SecureCookies marks the session cookie Secure (--public-url is
	// https).
	SecureCookies bool
	// PublicURL is triggerd's external URL, for connect flows' return.
	PublicURL string
	// UnconfiguredConnectors names the connectors without OAuth client
	// settings, with the settings to set.
	UnconfiguredConnectors map[string]string
	// Ready reports the readiness of NATS and the store, for Overview.
	Ready func(ctx context.Context) map[string]error
	// SharedTenant returns the tenant of the shared webhook endpoints
	// (the default tenant), whose dead events it sees; nil: only the
	// admin sees them.
	SharedTenant func(ctx context.Context) (string, error)
	// Backlog reports what waits (spooled deliveries, events the
	// dispatcher has not taken), for Overview; counts are of this
	// process's spool and of the shared dispatch consumer.
	Backlog func(ctx context.Context) []Backlog
	// Now defaults to time.Now.
	Now    func() time.Time
	Logger zerolog.Logger
}

// Backlog is one queue's length, or why it could not be read.
type Backlog struct {
	Name  string
	Count int64
	Err   string
}

// Console is the web console's handler.
type Console struct {
	o        Options
	log      zerolog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
}

// New returns the console.
func New(o Options) (*Console, error) {
	if o.Auth == nil || o.Accounts == nil || o.Registry == nil || o.Records == nil {
		return nil, errors.New("console: Auth, Accounts, Registry and Records are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console: static: %w", err)
	}
	c := &Console{
		o:        o,
		log:      o.Logger.With().Str("component", "console").Logger(),
		sessions: newSessions(o.Now, sessionIdle, maxSessions),
		pages:    pages,
		static:   http.StripPrefix(Prefix+"static/", http.FileServerFS(sub)),
	}
	c.routes()
	return c, nil
}

// ServeHTTP answers every request under Prefix, with the security headers
// set first.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	c.mux.ServeHTTP(w, r)
}

// handler is a page's handler: it runs with the request's session.
type handler func(w http.ResponseWriter, r *http.Request, s *session) error

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /console/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		c.static.ServeHTTP(w, r)
	})
	m.HandleFunc("GET /console/signin", c.signInPage)
	m.HandleFunc("POST /console/signin", c.signIn)
	m.HandleFunc("GET /console/{$}", c.page(c.overview))
	m.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, Prefix, http.StatusFound)
	})
	c.post(m, "/console/signout", c.signOut)

	c.get(m, "/console/deliveries", c.deliveries)
	c.get(m, "/console/deliveries/redeliver", c.redeliverFilteredPage)
	c.post(m, "/console/deliveries/redeliver", c.redeliverFiltered)
	c.get(m, "/console/deliveries/{id}", c.delivery)
	c.post(m, "/console/deliveries/{id}/redeliver", c.redeliver)

	c.get(m, "/console/events", c.events)
	c.get(m, "/console/events/{id}", c.event)
	c.post(m, "/console/events/{id}/replay", c.replay)

	c.get(m, "/console/runs", c.runs)
	c.get(m, "/console/runs/{id}", c.run)

	c.get(m, "/console/integrations", c.integrations)
	c.post(m, "/console/integrations/connect", c.connect)
	c.get(m, "/console/integrations/{id}/remove", c.removeAccountPage)
	c.post(m, "/console/integrations/{id}/remove", c.removeAccount)

	c.get(m, "/console/triggers", c.triggersList)
	c.get(m, "/console/triggers/new", c.newTrigger)
	c.post(m, "/console/triggers", c.createTrigger)
	c.get(m, "/console/triggers/{id}", c.trigger)
	c.post(m, "/console/triggers/{id}/enabled", c.setTriggerEnabled)
	c.get(m, "/console/triggers/{id}/delete", c.deleteTriggerPage)
	c.post(m, "/console/triggers/{id}/delete", c.deleteTrigger)

	c.get(m, "/console/agents", c.agents)
	c.post(m, "/console/agents", c.createAgent)
	c.get(m, "/console/agents/{id}", c.agent)
	c.get(m, "/console/agents/{id}/delete", c.deleteAgentPage)
	c.post(m, "/console/agents/{id}/delete", c.deleteAgent)

	c.get(m, "/console/steps", c.steps)
	c.get(m, "/console/steps/{id}", c.step)
	c.post(m, "/console/steps/{id}/run", c.runStep)

	c.get(m, "/console/dead", c.deadLetters)
	c.get(m, "/console/dead/{seq}", c.deadLetterPage)
	c.post(m, "/console/dead/{seq}/requeue", c.requeue)
	c.get(m, "/console/dead/requeue", c.requeueFilteredPage)
	c.post(m, "/console/dead/requeue", c.requeueFiltered)

	c.get(m, "/console/tenants", c.tenantsPage)
	c.post(m, "/console/tenants", c.createTenant)
	c.post(m, "/console/view-as", c.viewAs)
	c.get(m, "/console/tenants/{id}/keys", c.tenantKeys)
	c.post(m, "/console/tenants/{id}/keys", c.createTenantKey)
	c.get(m, "/console/tenants/{id}/keys/{key}/revoke", c.revokeTenantKeyPage)
	c.post(m, "/console/tenants/{id}/keys/{key}/revoke", c.revokeTenantKey)

	m.HandleFunc("/console/", c.page(func(w http.ResponseWriter, r *http.Request, s *session) error {
		return errNotFound
	}))
	c.mux = m
}

func (c *Console) get(m *http.ServeMux, path string, h handler) {
	m.HandleFunc("GET "+path, c.page(h))
}

// post routes a state-changing request: it needs the session's CSRF
// token (a form field, or the X-CSRF-Token header), else 403.
func (c *Console) post(m *http.ServeMux, path string, h handler) {
	m.HandleFunc("POST "+path, c.page(func(w http.ResponseWriter, r *http.Request, s *session) error {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !s.checkCSRF(csrfOf(r)) {
			return errCSRF
		}
		return h(w, r, s)
	}))
}

// maxFormBytes bounds a form's body (a step's input, an agent's
// pipeline).
const maxFormBytes = 1 << 20

func csrfOf(r *http.Request) string {
	if t := r.Header.Get("X-CSRF-Token"); t != "" {
		return t
	}
	return r.PostFormValue("csrf")
}

// page wraps a handler: it finds the session (or sends the browser to
// sign in) and renders the handler's error as a page.
func (c *Console) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		s := c.sessions.get(r)
		if s == nil {
			switch {
			case r.Header.Get(fragmentHeader) != "":
				// A live refresh of a page whose session ended: nothing
				// to show, and the script stops refreshing.
				w.Header().Set(signedOutHeader, "1")
				w.WriteHeader(http.StatusNoContent)
			case r.Method == http.MethodGet:
				http.Redirect(w, r, Prefix+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			default:
				http.Error(w, "sign in first", http.StatusForbidden)
			}
			return
		}
		if err := h(w, r, s); err != nil {
			c.fail(w, r, s, err)
		}
	}
}

// Errors handlers return, rendered by fail.
var (
	errNotFound = errors.New("not found")
	errCSRF     = errors.New("the form was not sent by this console (missing or stale CSRF token): reload the page and try again")
	errAdmin    = errors.New("only the admin can do this")
	errNoTenant = errors.New("choose a tenant to view first")
)

// userError is a refusal to show as it is (a validation message).
type userError struct {
	status int
	msg    string
}

func (e *userError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &userError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status, msg := http.StatusInternalServerError, "something went wrong reading or writing; retry (the server log says what)"
	var ue *userError
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, registry.ErrNotFound),
		errors.Is(err, accounts.ErrAccountNotFound):
		status, msg = http.StatusNotFound, "There is nothing here: no such page, or it belongs to another tenant."
	case errors.Is(err, errCSRF):
		status, msg = http.StatusForbidden, err.Error()
	case errors.Is(err, errAdmin):
		status, msg = http.StatusForbidden, err.Error()
	case errors.Is(err, errNoTenant):
		status, msg = http.StatusOK, "You are signed in as the admin. Choose a tenant on the Tenants page to see its pages."
	case errors.As(err, &ue):
		status, msg = ue.status, ue.msg
	case errors.Is(err, registry.ErrInvalid):
		status, msg = http.StatusBadRequest, err.Error()
	default:
		c.log.Error().Err(err).Str("path", r.URL.Path).Msg("console page failed")
	}
	data := map[string]any{"Status": status, "Message": msg}
	// The list the page belongs to is where to go on from (not for a
	// refusal: the list would be refused too).
	seg, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	if label, ok := sections[seg]; ok && status != http.StatusForbidden {
		data["Back"] = map[string]string{"Path": Prefix + seg, "Label": label}
	}
	c.render(w, r, s, status, "error", "Error", data)
}

// sections are the console's lists by their path under Prefix.
var sections = map[string]string{
	"integrations": "Integrations", "steps": "Tool steps", "agents": "Agents", "triggers": "Triggers",
	"deliveries": "Deliveries", "events": "Events", "runs": "Runs", "dead": "Dead letters", "tenants": "Tenants",
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	Session *session
	CSRF    string
	Flash   string
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, page, title string, data any) {
	t, ok := c.pages[page]
	if !ok {
		http.Error(w, "no template "+page, http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Nav: page, Session: s, Data: data, Flash: r.URL.Query().Get("flash")}
	if s != nil {
		v.CSRF = s.csrf
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.Error().Err(err).Str("page", page).Msg("rendering a console page")
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fragmentHeader marks a live update's request (console.js): signed
// out, it is answered 204 with signedOutHeader rather than sent to the
// sign-in page.
const (
	fragmentHeader  = "X-Console-Fragment"
	signedOutHeader = "X-Console-Signed-Out"
)

// redirect answers a form with 303 to path, with a message to show.
func redirect(w http.ResponseWriter, r *http.Request, path, flash string) {
	if flash != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "flash=" + url.QueryEscape(flash)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// tenant returns the tenant the session acts for, or errNoTenant.
func tenant(s *session) (string, error) {
	if s.tenant == "" {
		return "", errNoTenant
	}
	return s.tenant, nil
}

// isInvalidKey reports whether err is a refused key (not a failure).
func isInvalidKey(err error) bool { return errors.Is(err, tenants.ErrInvalidKey) }
