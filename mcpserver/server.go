// Package mcpserver serves triggerd's tool steps, connected accounts and
// triggers over the Model Context Protocol (Streamable HTTP), for LLM
// agents and the clients that run them.
//
// Every request carries "Authorization: Bearer <tenant API key>", checked
// by the same tenant service as /v1; each tenant gets an MCP server of its
// own, whose tools are the steps it can run (a connector with at least one
// active account) and the trigger management tools, and whose resources
// are its triggers and recent events. A session is bound to the tenant
// that opened it. Steps run through the same runner as POST
// /v1/steps/{id}/run.
//
// The package is named mcpserver, not mcp, so that it can import the
// SDK's package mcp without renaming it in every file.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

// Authenticator maps an API key to its tenant (tenants.Service); an
// unknown or revoked key is an error wrapping tenants.ErrInvalidKey.
type Authenticator interface {
	Authenticate(ctx context.Context, key string) (string, error)
}

// Accounts lists a tenant's connected accounts (accounts.Service).
type Accounts interface {
	List(ctx context.Context, tenantID string) ([]store.Account, error)
}

// Steps is the step catalogue and runner (steps.Runner): the very runner
// POST /v1/steps/{id}/run calls, with its guard, budgets, quotas and
// circuit breakers.
type Steps interface {
	List(q string) []connectors.Step
	Run(ctx context.Context, tenantID, id, accountID string, input json.RawMessage) (json.RawMessage, error)
}

// Triggers manages agents' triggers (registry.Registry), with the
// validation the API applies.
type Triggers interface {
	ListAgents(ctx context.Context, tenantID string) ([]store.Agent, error)
	CreateTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	DraftTrigger(ctx context.Context, tenantID string, in registry.TriggerInput) (store.Trigger, error)
	GetTrigger(ctx context.Context, tenantID, id string) (store.Trigger, error)
	ListTriggers(ctx context.Context, tenantID string) ([]store.Trigger, error)
	SetEnabled(ctx context.Context, tenantID, id string, enabled bool) (store.Trigger, error)
	DeleteTrigger(ctx context.Context, tenantID, id string) error
}

// Records reads events' records: their outcomes, the why-ledger
// (store.Store).
type Records interface {
	GetEvent(ctx context.Context, tenantID, eventID string) (store.EventRecord, error)
	ListTriggerEvents(ctx context.Context, tenantID, triggerID string, limit int) ([]store.EventRecord, error)
}

// DryRunner tests a trigger against recent events (dispatch.Dispatcher).
type DryRunner interface {
	DryRun(ctx context.Context, t store.Trigger, limit int) (dispatch.DryRunReport, error)
}

// Options configures a Server.
type Options struct {
	Auth     Authenticator
	Accounts Accounts
	Steps    Steps
	// Triggers, Records and DryRunner serve the trigger tools and the
	// trigger and event resources; without Triggers there are none.
	Triggers  Triggers
	Records   Records
	DryRunner DryRunner
	// Unrecorded finds, for triggerd://events/{id}, an event of the shared
	// endpoints that left no record because no trigger was a candidate
	// for it, as GET /v1/events/{id} does (dispatch.Dispatcher); nil
	// leaves such an event not found, as an unknown one.
	Unrecorded dispatch.UnrecordedFinder
	// Version is the server version clients are told.
	Version string
	// SessionTimeout closes a session idle this long (default 30 min).
	SessionTimeout time.Duration
	// MaxBodyBytes bounds one request's body (default 10 MiB, as a step
	// run's through /v1: an input may carry a file's content).
	MaxBodyBytes int64
	Logger       zerolog.Logger
}

// Server is the MCP endpoint.
type Server struct {
	o       Options
	log     zerolog.Logger
	handler http.Handler

	mu      sync.Mutex
	tenants map[string]*tenant
}

// New returns the server.
func New(o Options) (*Server, error) {
	if o.Auth == nil || o.Accounts == nil || o.Steps == nil {
		return nil, errors.New("mcpserver: Auth, Accounts and Steps are required")
	}
	if o.Triggers != nil && (o.Records == nil || o.DryRunner == nil) {
		return nil, errors.New("mcpserver: Triggers needs Records and DryRunner")
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 10 << 20
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &Server{o: o, log: o.Logger.With().Str("component", "mcp").Logger(), tenants: map[string]*tenant{}}
	// The SDK serves the sessionless revisions (2026-07-28 on, SEP-2575)
	// only from a stateless handler, and the earlier ones, which most
	// clients speak, with sessions from a stateful one: each request goes
	// to the handler of the revision it names (its
	// MCP-Protocol-Version; none before initialize, a legacy handshake).
	//
	// The SDK's DNS rebinding protection refuses a request that reached a
	// loopback address with another Host: that is every request through
	// a reverse proxy on the same host (the usual way to serve
	// --public-url). It guards servers that trust whoever can reach them;
	// this one answers only a tenant's key, which a rebound page does not
	// have, so it is off.
	stateful := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		SessionTimeout:             o.SessionTimeout,
		MaxRequestBodyBytes:        o.MaxBodyBytes,
		JSONResponse:               true,
		DisableLocalhostProtection: true,
	})
	stateless := mcp.NewStreamableHTTPHandler(s.serverFor, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		MaxRequestBodyBytes:        o.MaxBodyBytes,
		DisableLocalhostProtection: true,
	})
	streamable := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= sessionless {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	// The SDK binds each session to the TokenInfo's UserID: a request
	// naming a session another tenant opened is refused (403).
	bound := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id, ok := ctx.Value(tenantKey{}).(string)
		if !ok || id == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id, Expiration: time.Now().Add(time.Hour)}, nil
	}, nil)(streamable)
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		r, ok = s.liveStream(w, r)
		if !ok {
			return
		}
		bound.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, id)))
	})
	return s, nil
}

// sessionless is the first protocol revision without sessions.
const sessionless = "2026-07-28"

// Path is where the endpoint is served.
const Path = "/mcp"

// ServeHTTP serves the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

type tenantKey struct{}

// authenticate checks the request's key and returns its tenant. Without
// a valid key it answers 401 with WWW-Authenticate and nothing about the
// tenants or the key.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (string, bool) {
	scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !strings.EqualFold(scheme, "Bearer") || key == "" {
		unauthorized(w, `Bearer realm="triggerd"`)
		return "", false
	}
	id, err := s.o.Auth.Authenticate(r.Context(), key)
	switch {
	case errors.Is(err, tenants.ErrInvalidKey):
		unauthorized(w, `Bearer realm="triggerd", error="invalid_token"`)
		return "", false
	case err != nil:
		s.log.Error().Err(err).Msg("authenticating an API key")
		w.Header().Set("Retry-After", "5")
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "the key could not be checked right now; retry")
		return "", false
	}
	return id, true
}

func unauthorized(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	writeJSONError(w, http.StatusUnauthorized, "unauthorized", `send a tenant API key as "Authorization: Bearer <key>"`)
}

func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]map[string]string{"error": {"code": code, "message": msg}})
}

// liveStream lifts the HTTP server's read and write deadlines from the
// request, which may be a stream open for as long as the session lives
// (a GET's server-sent events, a POST's answer streamed while a step
// runs). A POST's body is read first, under the read deadline and within
// MaxBodyBytes, so a slow sender is still cut off.
func (s *Server) liveStream(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	rc := http.NewResponseController(w)
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			writeJSONError(w, http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("the body is over the %d-byte limit", s.o.MaxBodyBytes))
			return nil, false
		case err != nil:
			writeJSONError(w, http.StatusBadRequest, "invalid_request", "the body could not be read")
			return nil, false
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	// Not every writer has deadlines (httptest's recorder): then there
	// are none to lift.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	return r, true
}

// serverFor returns the MCP server of the request's tenant.
func (s *Server) serverFor(r *http.Request) *mcp.Server {
	id, _ := r.Context().Value(tenantKey{}).(string)
	return s.tenant(r.Context(), id).srv
}

// tenant returns the tenant's server, making it on first use.
func (s *Server) tenant(ctx context.Context, id string) *tenant {
	s.mu.Lock()
	t, ok := s.tenants[id]
	if !ok {
		t = newTenant(s, id)
		s.tenants[id] = t
	}
	s.mu.Unlock()
	if !ok {
		if err := t.syncTools(ctx); err != nil {
			s.log.Warn().Err(err).Str("tenant", id).Msg("listing the tenant's accounts for its tools; tools/list tries again")
		}
	}
	return t
}

// existing returns the tenant's server if one was made.
func (s *Server) existing(id string) (*tenant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	return t, ok
}

// AccountsChanged brings the tenant's tools up to date with its accounts
// (one connected, removed, or marked needs_reauth); sessions whose list
// changed are sent notifications/tools/list_changed.
func (s *Server) AccountsChanged(ctx context.Context, tenantID string) {
	t, ok := s.existing(tenantID)
	if !ok {
		return // no session has seen the tenant's tools
	}
	if err := t.syncTools(ctx); err != nil {
		s.log.Warn().Err(err).Str("tenant", tenantID).Msg("accounts changed, but they could not be listed; the next tools/list catches up")
	}
}

// RunStarted tells the sessions subscribed to the run's trigger
// (notifications/resources/updated on triggerd://triggers/{id}), with the
// event and run ids in the notification's _meta.
func (s *Server) RunStarted(ctx context.Context, r store.Run) {
	t, ok := s.existing(r.TenantID)
	if !ok {
		return
	}
	err := t.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{
		URI: TriggerURI(r.TriggerID),
		Meta: mcp.Meta{
			"triggerd/run_id":    r.ID,
			"triggerd/event_id":  r.EventID,
			"triggerd/event_uri": EventURI(r.EventID),
		},
	})
	if err != nil {
		s.log.Debug().Err(err).Str("trigger", r.TriggerID).Msg("notifying a trigger's subscribers")
	}
}
