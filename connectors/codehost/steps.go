package codehost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/schema"
)

// The named steps of the code-hosting connector are defined in the
// steps_*.go files; this file holds what they share: the toolkit, input
// decoding and checks, JSON Schema construction and the structured
// outputs.

// NewToolkit returns the codehost connector's named steps and the HTTP
// policy they (and the API Call step) run under. It panics if o is invalid
// (an APIBaseURL that is not an absolute http or https URL); NewPolicy
// returns that as an error instead. To keep the Policy (for CacheStats or
// Forget), call NewPolicy and then Policy.Toolkit.
func NewToolkit(o ToolkitOptions) connectors.Toolkit {
	p, err := NewPolicy(o)
	if err != nil {
		panic(err)
	}
	return p.Toolkit()
}

// Toolkit returns the named steps with p as their HTTP policy.
func (p *Policy) Toolkit() connectors.Toolkit {
	k := &kit{p: p}
	var steps []connectors.Step
	for _, group := range [][]connectors.Step{k.repoSteps(), k.branchSteps(), k.issueSteps(), k.pullSteps(), k.actionSteps(), k.gistSteps(), k.collaboratorSteps()} {
		steps = append(steps, group...)
	}
	return connectors.Toolkit{Connector: name, Steps: steps, Wrap: p.Wrap}
}

// kit builds the steps.
type kit struct{ p *Policy }

func (k *kit) client(env connectors.Env) *client {
	return &client{hc: env.HTTP, base: k.p.base, now: k.p.o.Now, login: env.Account.Login}
}

// checker validates a decoded input beyond what decoding catches; it
// returns a *connectors.Error with CodeValidation.
type checker interface{ check() error }

// define makes a step whose input decodes into I.
func define[I any, P interface {
	*I
	checker
}](k *kit, id, title, desc string, in, out schema.Schema, run func(context.Context, *client, P) (any, error)) connectors.Step {
	return connectors.Step{
		ID:          name + "." + id,
		Name:        title,
		Connector:   name,
		Description: desc,
		Input:       schema.Root(in),
		Output:      schema.Root(out),
		Run: func(ctx context.Context, env connectors.Env, raw json.RawMessage) (any, error) {
			v := P(new(I))
			if err := decodeInput(raw, v); err != nil {
				return nil, err
			}
			if err := v.check(); err != nil {
				return nil, err
			}
			if env.HTTP == nil {
				return nil, connectors.Errorf(connectors.CodeValidation, "%s.%s: no HTTP client for the account", name, id)
			}
			return run(ctx, k.client(env), v)
		},
	}
}

// decodeInput strictly decodes a step input: unknown fields and trailing
// data are refused.
func decodeInput(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return connectors.Errorf(connectors.CodeValidation, "input: %v", err)
	}
	if dec.More() {
		return connectors.Errorf(connectors.CodeValidation, "input: trailing data after the JSON object")
	}
	return nil
}

// problems collects input problems.
type problems []string

func (p *problems) addf(format string, a ...any) { *p = append(*p, fmt.Sprintf(format, a...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return connectors.Errorf(connectors.CodeValidation, "input: %s", strings.Join(p, "; "))
}

// namePattern matches GitHub owner, repository and user names; the input
// schemas carry it and nameRE checks it.
const namePattern = `^[A-Za-z0-9_.-]{1,100}$`

var nameRE = regexp.MustCompile(namePattern)

func (p *problems) name(field, v string) {
	switch {
	case v == "":
		p.addf("%s is required", field)
	case !nameRE.MatchString(v) || v == "." || v == "..":
		p.addf("%s %q is not a valid GitHub name", field, v)
	}
}

func (p *problems) required(field, v string) {
	if strings.TrimSpace(v) == "" {
		p.addf("%s is required", field)
	}
}

func (p *problems) enum(field, v string, allowed ...string) {
	if v != "" && !slices.Contains(allowed, v) {
		p.addf("%s must be one of %s, not %q", field, strings.Join(allowed, ", "), v)
	}
}

func (p *problems) positive(field string, n int64) {
	if n < 1 {
		p.addf("%s must be a positive integer", field)
	}
}

func (p *problems) timestamp(field, v string) {
	if v == "" {
		return
	}
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		p.addf("%s must be an RFC 3339 date-time, not %q", field, v)
	}
}

// filePath checks a repository file path: relative, no empty, "." or ".."
// segments.
func (p *problems) filePath(field, v string, allowEmpty bool) {
	if v == "" {
		if !allowEmpty {
			p.addf("%s is required", field)
		}
		return
	}
	for _, s := range strings.Split(v, "/") {
		if s == "" || s == "." || s == ".." {
			p.addf("%s %q must be a relative path without empty, '.' or '..' segments", field, v)
			return
		}
	}
}

// repoInput names a repository.
type repoInput struct {
	Owner string `json:"owner"`
	Repo  string `json:"repo"`
}

func (r repoInput) checkRepo(p *problems) {
	p.name("owner", r.Owner)
	p.name("repo", r.Repo)
}

// listInput bounds a list step.
type listInput struct {
	MaxItems int `json:"max_items"`
}

// Bounds of max_items.
const (
	defaultMaxItems = 30
	maxMaxItems     = 1000
)

func (l *listInput) checkList(p *problems) {
	switch {
	case l.MaxItems == 0:
		l.MaxItems = defaultMaxItems
	case l.MaxItems < 0 || l.MaxItems > maxMaxItems:
		p.addf("max_items must be between 1 and %d", maxMaxItems)
	}
}

// ghName is a GitHub owner, repository or user name.
func ghName(desc string) schema.Schema { return schema.String(desc).Pattern(namePattern) }

var (
	// Read-only schema fragments.
	repoProps = schema.Props{
		"owner": ghName("Account or organisation that owns the repository."),
		"repo":  ghName("Repository name."),
	}
	maxItemsProp = schema.Props{"max_items": schema.Integer("Most items to return (default 30, at most 1000); pages are followed until then.").
			Min(1).Max(maxMaxItems).Default(defaultMaxItems)}
	hasMoreProp = schema.Boolean("Whether GitHub had more items than max_items.")
)

// listOutput is the schema of a list step's output: {key: [item],
// count, has_more}.
func listOutput(key string, item schema.Schema, extra schema.Props) schema.Schema {
	p := schema.Merge(schema.Props{
		key:        schema.Array(item, "").Describe(""), // served with an empty description since it was written
		"count":    schema.Integer("Items returned."),
		"has_more": hasMoreProp,
	}, extra)
	return schema.Object(p, key, "count", "has_more")
}

// ----- GitHub's answers, as far as the steps read them -----

type ghUser struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
}

func (u *ghUser) login() string {
	if u == nil {
		return ""
	}
	return u.Login
}

func logins(us []ghUser) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		out = append(out, u.Login)
	}
	return out
}

// ----- Structured outputs shared by several steps -----

// Person is who a commit names as author or committer.
type Person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Date  string `json:"date"`
	Login string `json:"login,omitempty"`
}

var personSchema = schema.Object(schema.Props{
	"name": schema.String("Name."), "email": schema.String("Email address."), "date": schema.String("When (RFC 3339)."),
	"login": schema.String("GitHub login, when GitHub could match the email to an account."),
}, "name", "email", "date")

// AssignedUser is a user assigned to an issue.
type AssignedUser struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
}

var assignedUserSchema = schema.Object(schema.Props{"login": schema.String("Login."), "id": schema.Integer("User id.")}, "login", "id")
