package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/store"
)

// tenant is one tenant's MCP server.
type tenant struct {
	s   *Server
	id  string
	srv *mcp.Server

	// mu serialises syncs; steps maps each step tool's name to the
	// signature of the tool registered (its accounts), so that only a
	// changed tool is added again (and sessions told).
	mu    sync.Mutex
	steps map[string]string
	// resources maps each listed resource's URI to its signature.
	resources map[string]string
}

func newTenant(s *Server, id string) *tenant {
	t := &tenant{s: s, id: id, steps: map[string]string{}, resources: map[string]string{}}
	opts := &mcp.ServerOptions{
		Instructions: instructions,
		// Declared up front: a tenant with no account yet still has the
		// trigger tools, and learns of new step tools by list_changed.
		Capabilities: &mcp.ServerCapabilities{
			Tools: &mcp.ToolCapabilities{ListChanged: true},
		},
	}
	if s.o.Triggers != nil {
		opts.Capabilities.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true}
		opts.SubscribeHandler = t.subscribe
		opts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	t.srv = mcp.NewServer(&mcp.Implementation{Name: "triggerd", Title: "triggerd", Version: s.o.Version}, opts)
	// Lists are read fresh: another process may have connected an
	// account or created a trigger.
	t.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				if err := t.syncTools(ctx); err != nil {
					t.s.log.Warn().Err(err).Str("tenant", t.id).Msg("listing the tenant's accounts for tools/list; the tools listed may be stale")
				}
			case "resources/list":
				if t.s.o.Triggers != nil {
					if err := t.syncResources(ctx); err != nil {
						t.s.log.Warn().Err(err).Str("tenant", t.id).Msg("listing the tenant's triggers for resources/list; the list may be stale")
					}
				}
			}
			return next(ctx, method, req)
		}
	})
	if s.o.Triggers != nil {
		t.addTriggerFeatures()
	}
	return t
}

const instructions = `triggerd runs tool steps (GitHub-style code hosting, Vercel-style deployments, Google Analytics-style reports) as the user's connected accounts, and starts the user's agents when trigger events happen.
Each step tool takes the step's own arguments plus "account" (or "connected_account" where the step has an "account" of its own): which connected account to act as; it may be left out when the tool lists only one.
A failed call says what to do next. Triggers and their events are resources (triggerd://triggers/{id}, triggerd://events/{id}); subscribe to a trigger to hear of each run it starts.`

// toolName is a step's MCP tool name: its id with "." as "_".
func toolName(stepID string) string { return strings.ReplaceAll(stepID, ".", "_") }

// validName is what MCP clients accept as a tool name.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// activeAccounts returns the tenant's active accounts by connector, each
// list ordered by login.
func (t *tenant) activeAccounts(ctx context.Context) (map[string][]store.Account, error) {
	accs, err := t.s.o.Accounts.List(ctx, t.id)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	by := map[string][]store.Account{}
	for _, a := range accs {
		if a.Status == store.StatusActive {
			by[a.Connector] = append(by[a.Connector], a)
		}
	}
	for _, list := range by {
		slices.SortFunc(list, func(a, b store.Account) int { return strings.Compare(a.Login+a.ID, b.Login+b.ID) })
	}
	return by, nil
}

// syncTools makes the step tools those of the steps the tenant can run
// now, each with its current accounts.
func (t *tenant) syncTools(ctx context.Context) error {
	by, err := t.activeAccounts(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	want := map[string]bool{}
	for _, st := range t.s.o.Steps.List("") {
		accs := by[st.Connector]
		if len(accs) == 0 {
			continue
		}
		// Only a tool whose accounts changed is built again: this runs
		// at every tools/list.
		name, sig := toolName(st.ID), accountsSignature(accs)
		if t.steps[name] == sig {
			want[name] = true
			continue
		}
		tool, h, err := t.stepTool(st, accs)
		if err != nil {
			t.s.log.Error().Err(err).Str("step", st.ID).Msg("a step cannot be served as an MCP tool")
			continue
		}
		want[name] = true
		t.srv.AddTool(tool, h)
		t.steps[name] = sig
	}
	var gone []string
	for name := range t.steps {
		if !want[name] {
			gone = append(gone, name)
			delete(t.steps, name)
		}
	}
	if len(gone) > 0 {
		t.srv.RemoveTools(gone...)
	}
	return nil
}

func accountsSignature(accs []store.Account) string {
	var b strings.Builder
	for _, a := range accs {
		b.WriteString(a.ID + "\x00" + a.Login + "\x00")
	}
	return b.String()
}

// accountArg is the name of a step tool's account argument: "account",
// or "connected_account" where the step's input has an "account" of its
// own (the analytics admin steps' Google Analytics account).
func accountArg(props map[string]any) string {
	if _, taken := props["account"]; taken {
		return "connected_account"
	}
	return "account"
}

// stepTool returns the tool of step st, runnable as accs.
func (t *tenant) stepTool(st connectors.Step, accs []store.Account) (*mcp.Tool, mcp.ToolHandler, error) {
	name := toolName(st.ID)
	if !validName.MatchString(name) {
		return nil, nil, fmt.Errorf("tool name %q does not match %s", name, validName)
	}
	var in map[string]any
	if err := json.Unmarshal(st.Input, &in); err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	if in["type"] != "object" {
		return nil, nil, errors.New(`input schema: not of type "object"`)
	}
	props, _ := in["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	arg := accountArg(props)
	ids := make([]string, len(accs))
	described := make([]string, len(accs))
	for i, a := range accs {
		ids[i] = a.ID
		described[i] = fmt.Sprintf("%s = %s", a.ID, accountLabel(a))
	}
	desc := fmt.Sprintf("The connected %s account to act as: %s.", st.Connector, strings.Join(described, "; "))
	if len(accs) == 1 {
		desc += " May be left out: it is the only one."
	}
	props[arg] = map[string]any{"type": "string", "enum": ids, "description": desc}
	in["properties"] = props
	required := requiredOf(in)
	if len(accs) > 1 {
		in["required"] = append(slices.Clone(required), arg)
	}

	var out map[string]any
	if len(st.Output) > 0 {
		if err := json.Unmarshal(st.Output, &out); err != nil {
			return nil, nil, fmt.Errorf("output schema: %w", err)
		}
		// MCP wants an object schema at the root; the outputs that
		// point at a definition ($ref) are objects too.
		if _, typed := out["type"]; !typed {
			out["type"] = "object"
		}
	}

	needs := "nothing more"
	if len(required) > 0 {
		needs = strings.Join(required, ", ")
	}
	tool := &mcp.Tool{
		Name:        name,
		Title:       st.Name,
		Description: fmt.Sprintf("%s\n\nNeeds: %s. Acts as a connected %s account (%q).", st.Description, needs, st.Connector, arg),
		InputSchema: in,
		Annotations: annotations(st),
	}
	if out != nil {
		tool.OutputSchema = out
	}
	return tool, t.runStep(st, arg, accs), nil
}

func requiredOf(schema map[string]any) []string {
	raw, _ := schema["required"].([]any)
	var out []string
	for _, r := range raw {
		if s, ok := r.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// accountLabel describes an account by its login, or its external id.
func accountLabel(a store.Account) string {
	switch {
	case a.Login != "":
		return a.Login
	case a.Metadata["name"] != "":
		return a.Metadata["name"]
	}
	return a.ExternalID
}

// Steps' kinds of action, by the verb their id starts with; the
// exceptions are listed by id.
var (
	readVerbs        = []string{"get_", "list_", "search_", "check_", "run_reports", "run_realtime_report"}
	destructiveVerbs = []string{"delete_", "cancel_", "remove_"}
	// Writes that leave things as they are when repeated with the same
	// arguments.
	idempotentVerbs = []string{"update_", "star_", "enable_", "disable_", "create_or_update_", "add_collaborator", "remove_", "cancel_", "create_key_events"}
)

// annotations says what a step does: reads, destructive writes (deletes
// and cancels), repeatable writes. Every step reaches a provider
// (openWorldHint). An API Call step may do anything, so it is hinted as
// destructive and not idempotent.
func annotations(st connectors.Step) *mcp.ToolAnnotations {
	_, action, _ := strings.Cut(st.ID, ".")
	has := func(verbs []string) bool {
		return slices.ContainsFunc(verbs, func(v string) bool { return strings.HasPrefix(action, v) })
	}
	a := &mcp.ToolAnnotations{Title: st.Name, OpenWorldHint: ptr(true)}
	switch {
	case action == "api_call":
		a.DestructiveHint = ptr(true)
	case has(readVerbs):
		a.ReadOnlyHint = true
		a.DestructiveHint = ptr(false)
		a.IdempotentHint = true
	default:
		a.DestructiveHint = ptr(has(destructiveVerbs))
		a.IdempotentHint = has(idempotentVerbs)
	}
	return a
}

func ptr[T any](v T) *T { return &v }

// runStep returns the handler of step st's tool: the arguments less the
// account argument are the step's input, run by the same runner as
// POST /v1/steps/{id}/run.
func (t *tenant) runStep(st connectors.Step, arg string, accs []store.Account) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]json.RawMessage{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return failure(connectors.Errorf(connectors.CodeValidation, "the arguments must be a JSON object")), nil
			}
		}
		var account string
		if v, ok := args[arg]; ok {
			if err := json.Unmarshal(v, &account); err != nil {
				return failure(connectors.Errorf(connectors.CodeValidation, "at /%s: want a string, an account id", arg)), nil
			}
			delete(args, arg)
		}
		if account == "" {
			if len(accs) != 1 {
				return failure(connectors.Errorf(connectors.CodeValidation, "at /%s: missing; name one of %s", arg, strings.Join(accountIDs(accs), ", "))), nil
			}
			account = accs[0].ID
		}
		input, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("encode the input: %w", err)
		}
		out, err := t.s.o.Steps.Run(connectors.WithCaller(ctx, "mcp"), t.id, st.ID, account, input)
		if err != nil {
			var ce *connectors.Error
			if errors.As(err, &ce) && (ce.Code == connectors.CodeNeedsReauth || ce.Code == connectors.CodeAccountRemoved) {
				// The account is no longer active: its tools change, and
				// the sessions are told, before the model reads why.
				if serr := t.syncTools(ctx); serr != nil {
					t.s.log.Warn().Err(serr).Str("tenant", t.id).Msg("an account became unusable, but the accounts could not be listed")
				}
			}
			return failure(err), nil
		}
		return success(fmt.Sprintf("%s succeeded as %s.", st.Name, labelOf(accs, account)), out), nil
	}
}

func accountIDs(accs []store.Account) []string {
	ids := make([]string, len(accs))
	for i, a := range accs {
		ids[i] = a.ID
	}
	return ids
}

func labelOf(accs []store.Account, id string) string {
	for _, a := range accs {
		if a.ID == id {
			return accountLabel(a) + " (" + id + ")"
		}
	}
	return id
}

// maxText bounds the JSON a result's text repeats; the structured
// content has all of it.
const maxText = 8 << 10

// success is a tool result: the output as structured content, and a line
// saying what happened followed by the output's JSON, for clients that
// read only text.
func success(summary string, out json.RawMessage) *mcp.CallToolResult {
	text := string(out)
	if len(text) > maxText {
		n := maxText
		for n > 0 && !utf8.RuneStart(text[n]) {
			n-- // not in the middle of a character
		}
		text = text[:n] + "… (cut here; the structured content has all of it)"
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary + "\n" + text}}}
	if len(out) > 0 && out[0] == '{' {
		res.StructuredContent = out
	}
	return res
}

// failure turns a step's error into a tool result with isError: the
// typed code, the message, and what the model should do next. The code
// and its details are in _meta["triggerd/error"].
func failure(err error) *mcp.CallToolResult {
	var ce *connectors.Error
	if !errors.As(err, &ce) {
		ce = &connectors.Error{Code: connectors.CodeUpstream, Message: err.Error()}
	}
	detail := map[string]any{"code": ce.Code, "message": ce.Message, "retryable": ce.Retryable}
	if ce.Status != 0 {
		detail["upstream_status"] = ce.Status
	}
	secs := 0
	if ce.RetryAfter > 0 {
		secs = int(math.Ceil(ce.RetryAfter.Seconds()))
		detail["retry_after_seconds"] = secs
		detail["retry_at"] = time.Now().Add(ce.RetryAfter).UTC().Format(time.RFC3339)
	}
	text := fmt.Sprintf("%s: %s\n%s", ce.Code, ce.Message, nextStep(ce, secs))
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta:    mcp.Meta{"triggerd/error": detail},
	}
}

// nextStep tells the model what to do about a failure.
func nextStep(ce *connectors.Error, retrySecs int) string {
	switch ce.Code {
	case connectors.CodeValidation:
		return "Nothing was sent. Fix the argument named above (see the tool's input schema) and call the tool again."
	case connectors.CodeNotFound:
		return "The provider (or triggerd) has no such resource visible to this account: check the names and ids (and the account), look them up with a list or search tool, and do not retry unchanged."
	case connectors.CodePermissionDenied:
		return "The account lacks the right: use another connected account if one has it, or ask the user to grant it. Retrying unchanged will fail again."
	case connectors.CodeRateLimited:
		return fmt.Sprintf("Wait %d seconds before calling again (not sooner); meanwhile do other work.", max(retrySecs, 1))
	case connectors.CodeAccountRemoved:
		return "The account was removed: list the tools again for the accounts left, or ask the user to reconnect it."
	case connectors.CodeNeedsReauth:
		return "The provider no longer accepts the account's grant: ask the user to reconnect the account (triggerctl accounts connect), or use another one."
	case connectors.CodeUnavailable:
		return fmt.Sprintf("The provider keeps failing this account's requests, so nothing was sent: try again in %d seconds, or tell the user the provider is down.", max(retrySecs, 1))
	}
	if ce.Retryable {
		return "The provider failed; the same call may succeed later: retry once after a short wait, then report the failure to the user."
	}
	return "The provider refused the request: read its message above, change the arguments if it names one, otherwise report the failure to the user."
}
