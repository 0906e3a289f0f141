package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/registry"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/triggers"
)

const (
	triggerPrefix = "triggerd://triggers/"
	eventPrefix   = "triggerd://events/"
	jsonMIME      = "application/json"
	// recentEvents is how many of each trigger's latest events the
	// resource list and a trigger's resource show.
	recentEvents = 10
)

// TriggerURI is the resource URI of a trigger.
func TriggerURI(id string) string { return triggerPrefix + id }

// EventURI is the resource URI of an event's record.
func EventURI(id string) string { return eventPrefix + id }

// addTriggerFeatures adds the resource templates (triggers and events,
// readable by id) and the trigger tools.
func (t *tenant) addTriggerFeatures() {
	t.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "trigger", Title: "Trigger", URITemplate: triggerPrefix + "{id}", MIMEType: jsonMIME,
		Description: "A trigger: its kind, account, agent, parameters, filter, status, and its latest events with what it did with each. Subscribe to hear of each run it starts.",
	}, t.readResource)
	t.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "event", Title: "Event", URITemplate: eventPrefix + "{id}", MIMEType: jsonMIME,
		Description: "An event's record: its kind, subject, repository, and the outcome for each trigger that was a candidate (started a run, or why not).",
	}, t.readResource)
	for _, tt := range t.triggerTools() {
		t.srv.AddTool(tt.tool, tt.handler)
	}
}

// syncResources lists the tenant's triggers and their latest events as
// resources.
func (t *tenant) syncResources(ctx context.Context) error {
	trs, err := t.s.o.Triggers.ListTriggers(ctx, t.id)
	if err != nil {
		return fmt.Errorf("list triggers: %w", err)
	}
	want := map[string]*mcp.Resource{}
	for _, tr := range trs {
		want[TriggerURI(tr.ID)] = &mcp.Resource{
			URI: TriggerURI(tr.ID), Name: "trigger " + tr.ID, MIMEType: jsonMIME,
			Title:       fmt.Sprintf("Trigger %s (%s)", tr.Kind, tr.Status),
			Description: triggerSummary(tr),
		}
		recs, err := t.s.o.Records.ListTriggerEvents(ctx, t.id, tr.ID, recentEvents)
		if err != nil {
			return fmt.Errorf("list trigger %s's events: %w", tr.ID, err)
		}
		for _, rec := range recs {
			title := "Event " + rec.Kind
			if rec.Repository != "" {
				title += " on " + rec.Repository
			}
			want[EventURI(rec.EventID)] = &mcp.Resource{
				URI: EventURI(rec.EventID), Name: "event " + rec.EventID, MIMEType: jsonMIME, Title: title,
				Description: "received " + rec.ReceivedAt.UTC().Format(time.RFC3339),
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []string
	for uri := range t.resources {
		if want[uri] == nil {
			gone = append(gone, uri)
			delete(t.resources, uri)
		}
	}
	if len(gone) > 0 {
		t.srv.RemoveResources(gone...)
	}
	for uri, r := range want {
		sig := r.Title + "\x00" + r.Description
		if t.resources[uri] != sig {
			t.srv.AddResource(r, t.readResource)
			t.resources[uri] = sig
		}
	}
	return nil
}

// resourcesChanged lists the resources again after a trigger tool changed
// them, so that sessions are told resources/list_changed.
func (t *tenant) resourcesChanged(ctx context.Context) {
	if err := t.syncResources(ctx); err != nil {
		t.s.log.Warn().Err(err).Str("tenant", t.id).Msg("listing the resources after a trigger changed; the next resources/list catches up")
	}
}

func triggerSummary(tr store.Trigger) string {
	s := fmt.Sprintf("%s as account %s for agent %s", tr.Kind, tr.AccountID, tr.AgentID)
	if len(tr.Params) > 0 && string(tr.Params) != "{}" {
		s += ", params " + string(tr.Params)
	}
	if !tr.Enabled {
		s += ", disabled"
	}
	return s
}

// triggerView is a trigger as a resource shows it.
type triggerView struct {
	ID           string              `json:"id"`
	Kind         string              `json:"kind"`
	Account      string              `json:"account"`
	Agent        string              `json:"agent"`
	Enabled      bool                `json:"enabled"`
	Status       store.TriggerStatus `json:"status"`
	StatusCode   string              `json:"status_code,omitempty"`
	StatusReason string              `json:"status_reason,omitempty"`
	Params       json.RawMessage     `json:"params"`
	Filter       string              `json:"filter,omitempty"`
	CreatedAt    time.Time           `json:"created_at"`
	UpdatedAt    time.Time           `json:"updated_at"`
	URI          string              `json:"uri"`
}

func viewTrigger(tr store.Trigger) triggerView {
	v := triggerView{
		ID: tr.ID, Kind: tr.Kind, Account: tr.AccountID, Agent: tr.AgentID, Enabled: tr.Enabled, Status: tr.Status,
		StatusCode: tr.StatusCode, StatusReason: tr.StatusReason, Params: tr.Params, Filter: tr.Filter,
		CreatedAt: tr.CreatedAt, UpdatedAt: tr.UpdatedAt, URI: TriggerURI(tr.ID),
	}
	if len(v.Params) == 0 {
		v.Params = json.RawMessage("{}")
	}
	return v
}

// recentEvent is one of a trigger's latest events, with what the trigger
// did with it.
type recentEvent struct {
	URI        string          `json:"uri"`
	EventID    string          `json:"event_id"`
	Kind       string          `json:"kind"`
	Repository string          `json:"repository,omitempty"`
	ReceivedAt time.Time       `json:"received_at"`
	Outcomes   []store.Outcome `json:"outcomes"`
}

// readResource reads a trigger (with its latest events) or an event's
// record, of this tenant only.
func (t *tenant) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	var v any
	switch {
	case strings.HasPrefix(uri, triggerPrefix):
		tr, err := t.s.o.Triggers.GetTrigger(ctx, t.id, strings.TrimPrefix(uri, triggerPrefix))
		if err != nil {
			return nil, t.resourceError(uri, err)
		}
		recs, err := t.s.o.Records.ListTriggerEvents(ctx, t.id, tr.ID, recentEvents)
		if err != nil {
			return nil, t.resourceError(uri, err)
		}
		events := make([]recentEvent, 0, len(recs))
		for _, rec := range recs {
			e := recentEvent{URI: EventURI(rec.EventID), EventID: rec.EventID, Kind: rec.Kind, Repository: rec.Repository, ReceivedAt: rec.ReceivedAt}
			for _, o := range rec.Outcomes {
				if o.TriggerID == tr.ID {
					e.Outcomes = append(e.Outcomes, o)
				}
			}
			events = append(events, e)
		}
		v = struct {
			triggerView
			RecentEvents []recentEvent `json:"recent_events"`
		}{viewTrigger(tr), events}
	case strings.HasPrefix(uri, eventPrefix):
		// The answer of GET /v1/events/{id}, by the same lookup: an event
		// no trigger wanted is found too, with why nothing started.
		ev, err := dispatch.LookUpEvent(ctx, t.s.o.Records, t.s.o.Unrecorded, t.id, strings.TrimPrefix(uri, eventPrefix))
		if err != nil {
			return nil, t.resourceError(uri, err)
		}
		v = ev
	default:
		return nil, mcp.ResourceNotFoundError(uri)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: jsonMIME, Text: string(b)}}}, nil
}

// resourceError is "not found" for another tenant's record as for none.
func (t *tenant) resourceError(uri string, err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, registry.ErrNotFound) {
		return mcp.ResourceNotFoundError(uri)
	}
	t.s.log.Warn().Err(err).Str("uri", uri).Msg("reading a resource")
	return fmt.Errorf("%s could not be read right now; retry", uri)
}

// subscribe accepts subscriptions to the tenant's triggers (each run
// they start) and events.
func (t *tenant) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	var err error
	switch {
	case strings.HasPrefix(uri, triggerPrefix):
		_, err = t.s.o.Triggers.GetTrigger(ctx, t.id, strings.TrimPrefix(uri, triggerPrefix))
	case strings.HasPrefix(uri, eventPrefix):
		// What can be read can be subscribed to.
		_, err = dispatch.LookUpEvent(ctx, t.s.o.Records, t.s.o.Unrecorded, t.id, strings.TrimPrefix(uri, eventPrefix))
	default:
		return mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return t.resourceError(uri, err)
	}
	return nil
}

// triggerTool is one trigger management tool.
type triggerTool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// idSchema is the input of the tools that take a trigger's id.
var idSchema = map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"id"},
	"properties": map[string]any{"id": map[string]any{"type": "string", "description": "The trigger's id (triggers_list lists them)."}},
}

// triggerInputSchema is what triggers_create takes: POST /v1/triggers's
// body.
func triggerInputSchema() map[string]any {
	var kinds []string
	for _, k := range triggers.Kinds() {
		kinds = append(kinds, string(k.Kind))
	}
	return map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"kind", "account", "agent"},
		"properties": map[string]any{
			"kind":    map[string]any{"type": "string", "enum": kinds, "description": "What starts the trigger (triggers_list_kinds says what each means and which params it takes)."},
			"account": map[string]any{"type": "string", "description": "The id of the connected account the trigger watches through (of the kind's connector)."},
			"agent":   map[string]any{"type": "string", "description": "The id of the agent each run starts (agents_list lists them)."},
			"params":  map[string]any{"type": "object", "description": `The kind's parameters, e.g. {"repositories": ["owner/name"]}.`},
			"filter":  map[string]any{"type": "string", "description": "An optional CEL expression over the event; the trigger starts a run only when it is true."},
			"enabled": map[string]any{"type": "boolean", "description": "Defaults to true."},
		},
	}
}

func (t *tenant) triggerTools() []triggerTool {
	reg := t.s.o.Triggers
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}
	testSchema := triggerInputSchema()
	testProps := testSchema["properties"].(map[string]any)
	testSchema["required"] = []string{}
	testProps["id"] = map[string]any{"type": "string", "description": "An existing trigger to test; then only filter (to try another) and limit may be given with it."}
	testProps["limit"] = map[string]any{"type": "integer", "minimum": 1, "description": fmt.Sprintf("How many recent events to test against (default %d).", dispatch.DryRunEvents)}
	return []triggerTool{
		{&mcp.Tool{
			Name: "triggers_list_kinds", Title: "List trigger kinds", Annotations: readOnly,
			Description: "Lists the kinds of trigger (new issue, new pull request, deployment started, ...): their connector, parameters and how their events arrive.",
			InputSchema: map[string]any{"type": "object", "additionalProperties": false},
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			type kindView struct {
				triggers.KindInfo
				Params []string `json:"params"`
			}
			var out []kindView
			for _, k := range triggers.Kinds() {
				out = append(out, kindView{KindInfo: k, Params: nonNil(match.ParamsFor(k.Kind))})
			}
			return structured("Trigger kinds:", map[string]any{"kinds": out})
		}},
		{&mcp.Tool{
			Name: "agents_list", Title: "List agents", Annotations: readOnly,
			Description: "Lists the tenant's agents: what a trigger starts. A trigger needs an agent's id.",
			InputSchema: map[string]any{"type": "object", "additionalProperties": false},
		}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ags, err := reg.ListAgents(ctx, t.id)
			if err != nil {
				return t.registryFailure(err, "agents"), nil
			}
			type agentView struct {
				ID       string              `json:"id"`
				Name     string              `json:"name"`
				Delivery store.AgentDelivery `json:"delivery"`
			}
			out := make([]agentView, len(ags))
			for i, a := range ags {
				out[i] = agentView{ID: a.ID, Name: a.Name, Delivery: a.Delivery}
			}
			return structured(fmt.Sprintf("%d agents:", len(out)), map[string]any{"agents": out})
		}},
		{&mcp.Tool{
			Name: "triggers_list", Title: "List triggers", Annotations: readOnly,
			Description: "Lists the tenant's triggers with their status; each is also the resource triggerd://triggers/{id}.",
			InputSchema: map[string]any{"type": "object", "additionalProperties": false},
		}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			trs, err := reg.ListTriggers(ctx, t.id)
			if err != nil {
				return t.registryFailure(err, "triggers"), nil
			}
			out := make([]triggerView, len(trs))
			for i, tr := range trs {
				out[i] = viewTrigger(tr)
			}
			return structured(fmt.Sprintf("%d triggers:", len(out)), map[string]any{"triggers": out})
		}},
		{&mcp.Tool{
			Name: "triggers_create", Title: "Create trigger",
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
			Description: "Creates a trigger: when an event of its kind happens (through the account, on its params' repositories, passing its filter), it starts a run of the agent. Registers the webhooks it needs. Test it first with triggers_test.",
			InputSchema: triggerInputSchema(),
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in registry.TriggerInput
			if res := decodeStrict(req.Params.Arguments, &in); res != nil {
				return res, nil
			}
			tr, err := reg.CreateTrigger(ctx, t.id, in)
			if err != nil {
				return t.registryFailure(err, "trigger"), nil
			}
			t.resourcesChanged(ctx)
			return structured("Created trigger "+tr.ID+"; subscribe to "+TriggerURI(tr.ID)+" to hear of its runs.", viewTrigger(tr))
		}},
		{&mcp.Tool{
			Name: "triggers_test", Title: "Test trigger", Annotations: readOnly,
			Description: "Dry run: tells what a trigger (an existing one by id, or one described as triggers_create takes it) would have done with the latest events of its kind, and why each did or did not match. Starts nothing.",
			InputSchema: testSchema,
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				registry.TriggerInput
				ID    string `json:"id"`
				Limit *int   `json:"limit"`
			}
			if res := decodeStrict(req.Params.Arguments, &in); res != nil {
				return res, nil
			}
			var tr store.Trigger
			var err error
			if in.ID != "" {
				if in.Kind != "" || in.Account != "" || in.Agent != "" || len(in.Params) > 0 || in.Enabled != nil {
					return failure(connectors.Errorf(connectors.CodeValidation, "with id, give only filter and limit: a trigger's other fields cannot be changed")), nil
				}
				tr, err = reg.GetTrigger(ctx, t.id, in.ID)
				if err == nil && in.Filter != "" {
					tr.Filter = in.Filter
				}
			} else {
				tr, err = reg.DraftTrigger(ctx, t.id, in.TriggerInput)
			}
			if err != nil {
				return t.registryFailure(err, "trigger"), nil
			}
			n := dispatch.DryRunEvents
			if in.Limit != nil {
				n = *in.Limit
			}
			report, err := t.s.o.DryRunner.DryRun(ctx, tr, n)
			switch {
			case errors.Is(err, dispatch.ErrInvalidDryRun):
				return failure(connectors.Errorf(connectors.CodeValidation, "%v", err)), nil
			case err != nil:
				t.s.log.Warn().Err(err).Msg("dry run failed")
				return failure(&connectors.Error{Code: connectors.CodeUnavailable, Message: "the events stream could not be read right now", RetryAfter: 5 * time.Second, Retryable: true}), nil
			}
			return structured(fmt.Sprintf("Of %d recent events, %d would have started a run.", len(report.Events), report.Matched), report)
		}},
		t.switchTool("triggers_enable", "Enable trigger", "Enables a trigger: its events start runs again.", true),
		t.switchTool("triggers_disable", "Disable trigger", "Disables a trigger: its events start no run until it is enabled again.", false),
		{&mcp.Tool{
			Name: "triggers_delete", Title: "Delete trigger",
			Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(true)},
			Description: "Deletes a trigger and the webhooks only it used. It cannot be undone.",
			InputSchema: idSchema,
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				ID string `json:"id"`
			}
			if res := decodeStrict(req.Params.Arguments, &in); res != nil {
				return res, nil
			}
			if err := reg.DeleteTrigger(ctx, t.id, in.ID); err != nil {
				return t.registryFailure(err, "trigger"), nil
			}
			t.resourcesChanged(ctx)
			return structured("Deleted trigger "+in.ID+".", map[string]any{"deleted": in.ID})
		}},
	}
}

func (t *tenant) switchTool(name, title, desc string, enabled bool) triggerTool {
	return triggerTool{&mcp.Tool{
		Name: name, Title: title, Description: desc, InputSchema: idSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			ID string `json:"id"`
		}
		if res := decodeStrict(req.Params.Arguments, &in); res != nil {
			return res, nil
		}
		tr, err := t.s.o.Triggers.SetEnabled(ctx, t.id, in.ID, enabled)
		if err != nil {
			return t.registryFailure(err, "trigger"), nil
		}
		// The trigger's resource says whether it is enabled.
		t.resourcesChanged(ctx)
		return structured(fmt.Sprintf("Trigger %s is now enabled=%t.", tr.ID, tr.Enabled), viewTrigger(tr))
	}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// decodeStrict decodes a tool's arguments into v as the API decodes a
// body: one object of v's fields. On failure it returns the tool's
// validation result.
func decodeStrict(raw json.RawMessage, v any) *mcp.CallToolResult {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return failure(connectors.Errorf(connectors.CodeValidation, "the arguments do not fit the tool's input schema: %v", err))
	}
	return nil
}

// registryFailure maps the registry's errors onto tool results, as the
// API maps them onto answers.
func (t *tenant) registryFailure(err error, what string) *mcp.CallToolResult {
	switch {
	case errors.Is(err, registry.ErrInvalid):
		return failure(connectors.Errorf(connectors.CodeValidation, "%v", err))
	case errors.Is(err, registry.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return failure(connectors.Errorf(connectors.CodeNotFound, "no such %s in this tenant", what))
	case errors.Is(err, registry.ErrConflict):
		return failure(&connectors.Error{Code: connectors.CodeValidation, Message: "conflict: " + err.Error()})
	case errors.Is(err, registry.ErrHookRights):
		return failure(connectors.Errorf(connectors.CodePermissionDenied, "%v", err))
	case errors.Is(err, registry.ErrUpstream):
		return failure(&connectors.Error{Code: connectors.CodeUpstream, Message: err.Error(), Retryable: true})
	}
	t.s.log.Error().Err(err).Str("what", what).Msg("registry operation failed")
	return failure(&connectors.Error{Code: connectors.CodeUnavailable, Message: "the " + what + " could not be read or written right now", RetryAfter: 5 * time.Second, Retryable: true})
}

// structured is a successful result of the trigger tools.
func structured(summary string, v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	return success(summary, b), nil
}
