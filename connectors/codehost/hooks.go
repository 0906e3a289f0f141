package codehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// Errors of the webhook calls that callers decide on; test with
// errors.Is. Each comes wrapped with what was attempted and, when GitHub
// answered, a *connectors.Error with its status.
var (
	// ErrHookPermission: GitHub answered 404 or 403 on a hooks endpoint.
	// It answers 404 as well when the repository or organisation does not
	// exist, or the account cannot see it.
	ErrHookPermission = errors.New("the account cannot manage webhooks there: it needs admin rights on the repository " +
		"(or to be an owner of the organisation) and a token with the admin:repo_hook scope (repo covers it) " +
		"for a repository or admin:org_hook for an organisation")
	// ErrHookLimit: the repository or organisation already has 20 hooks
	// for one of the events (GitHub's limit).
	ErrHookLimit = errors.New("GitHub's limit of 20 webhooks per event is reached there")
	// ErrHookExists: another hook there already has the URL.
	ErrHookExists = errors.New("a webhook with the same URL already exists there")
	// ErrHookNotFound: GitHub answered 404 for one hook (deleted, or the
	// account lost admin rights; a following Create tells the two apart).
	ErrHookNotFound = errors.New("the webhook does not exist")
)

// maxHookPages guards List against a server whose pages never end; 20
// hooks per event fit on one page of 100 on GitHub.
const maxHookPages = 100

// Hooks calls GitHub's webhook API for repositories and organisations, and
// the polled reads (the user's gists and notifications, poll.go), as one
// connected account. It knows nothing of triggers. The zero BaseURL is
// api.github.com. It is safe for concurrent use.
type Hooks struct {
	// HTTP is authorised as the connected account (the platform adds the
	// token), usually through Policy.Wrap.
	HTTP *http.Client
	// BaseURL is the REST API root (default https://api.github.com).
	// Pagination links to other hosts are refused.
	BaseURL string
}

// HookTarget is what a hook belongs to: an organisation (Org) or a
// repository (Owner and Repo); exactly one of the two.
type HookTarget struct {
	Org         string
	Owner, Repo string
}

// String names the target for messages: "repository o/r" or
// "organisation o".
func (t HookTarget) String() string {
	if t.Org != "" {
		return "organisation " + t.Org
	}
	return "repository " + t.Owner + "/" + t.Repo
}

func (t HookTarget) check() error {
	var p problems
	switch {
	case t.Org != "" && (t.Owner != "" || t.Repo != ""):
		p.addf("a webhook target is an organisation or a repository, not both")
	case t.Org != "":
		p.name("org", t.Org)
	default:
		p.name("owner", t.Owner)
		p.name("repo", t.Repo)
	}
	return p.err()
}

// path is the target's hooks collection below the API root, escaped.
func (t HookTarget) path() string {
	if t.Org != "" {
		return "/orgs/" + seg(t.Org) + "/hooks"
	}
	return repoPath(t.Owner, t.Repo, "/hooks")
}

// HookResponse is GitHub's last_response of a hook: the status of its
// latest delivery (Code is nil before the first answered one) and
// GitHub's summary ("unused", "active", ...).
type HookResponse struct {
	Code            *int
	Status, Message string
}

// Hook is a webhook as GitHub reports it. The secret is never reported.
type Hook struct {
	ID     int64
	Active bool
	Events []string
	// URL and ContentType are the config's url and content_type (json or
	// form).
	URL, ContentType     string
	LastResponse         HookResponse
	CreatedAt, UpdatedAt time.Time
}

// HookSpec is the wanted state of a hook: payloads as JSON to URL, signed
// with Secret (none when empty), for Events (GitHub's default, push, when
// empty; "*" is every event). Active is sent as is: set it.
type HookSpec struct {
	URL    string
	Secret string
	Events []string
	Active bool
}

func (s HookSpec) check() error {
	if err := provhttp.CheckURL(s.URL); err != nil {
		return connectors.Errorf(connectors.CodeValidation, "webhook URL: %v", err)
	}
	for _, e := range s.Events {
		if strings.TrimSpace(e) == "" {
			return connectors.Errorf(connectors.CodeValidation, "webhook events: an empty event name")
		}
	}
	return nil
}

// body is the create or update body: the whole config, so that an update
// also sets (or removes) the secret.
func (s HookSpec) body(create bool) map[string]any {
	cfg := map[string]any{"url": s.URL, "content_type": "json", "insecure_ssl": "0"}
	if s.Secret != "" {
		cfg["secret"] = s.Secret
	}
	b := map[string]any{"active": s.Active, "config": cfg}
	if create {
		b["name"] = "web"
	}
	if len(s.Events) > 0 {
		b["events"] = s.Events
	}
	return b
}

// hookJSON is GitHub's hook object.
type hookJSON struct {
	ID     int64    `json:"id"`
	Active bool     `json:"active"`
	Events []string `json:"events"`
	Config struct {
		URL         string `json:"url"`
		ContentType string `json:"content_type"`
	} `json:"config"`
	LastResponse struct {
		Code    *int    `json:"code"`
		Status  *string `json:"status"`
		Message *string `json:"message"`
	} `json:"last_response"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (j hookJSON) hook() Hook {
	h := Hook{ID: j.ID, Active: j.Active, Events: j.Events, URL: j.Config.URL, ContentType: j.Config.ContentType,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
	if h.Events == nil {
		h.Events = []string{}
	}
	h.LastResponse.Code = j.LastResponse.Code
	if j.LastResponse.Status != nil {
		h.LastResponse.Status = *j.LastResponse.Status
	}
	if j.LastResponse.Message != nil {
		h.LastResponse.Message = *j.LastResponse.Message
	}
	return h
}

// List returns every hook of t, following GitHub's Link rel="next" pages
// (100 a page) to the end.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#list-repository-webhooks
// and https://docs.github.com/rest/orgs/webhooks#list-organization-webhooks
func (h Hooks) List(ctx context.Context, t HookTarget) ([]Hook, error) {
	what := "list the webhooks of " + t.String()
	if err := t.check(); err != nil {
		return nil, wrapHook(what, err)
	}
	c, err := h.client()
	if err != nil {
		return nil, wrapHook(what, err)
	}
	out := []Hook{}
	more, err := hookPages(ctx, h, c, what, "webhooks", t.path(), nil, ErrHookPermission, maxHookPages, func(page []hookJSON) bool {
		for _, j := range page {
			out = append(out, j.hook())
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case more:
		return nil, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: http.StatusOK,
			Message: fmt.Sprintf("GitHub's list did not end after %d pages", maxHookPages)})
	}
	return out, nil
}

// hookPages GETs path with query (100 a page) and follows GitHub's Link rel="next",
// on the API's host only, handing each page, a JSON array of T, to page.
// It stops at the last page, at an empty one, or when page returns false;
// after maxPages pages it stops with more true. A failed call is mapped by
// fail, with notFound for a 404; what names the call and noun its items.
func hookPages[T any](ctx context.Context, h Hooks, c *client, what, noun, path string, query url.Values, notFound error, maxPages int, page func([]T) bool) (more bool, err error) {
	q := url.Values{"per_page": {strconv.Itoa(perPage)}}
	for k, v := range query {
		q[k] = v
	}
	next := c.url(path, q)
	for pages := 1; ; pages++ {
		a, err := h.exchange(ctx, c, http.MethodGet, next, nil, nil)
		if err != nil {
			return false, h.fail(c, what, http.MethodGet, a, err, notFound, "")
		}
		var items []T
		if err := decodeAnswer(a, "page of "+noun, &items); err != nil {
			return false, wrapHook(what, err)
		}
		link := nextLink(a.header.Get("Link"))
		if !page(items) || link == "" || len(items) == 0 {
			return false, nil
		}
		if pages >= maxPages {
			return true, nil
		}
		u, ok := c.pageLink(link)
		if !ok {
			return false, wrapHook(what, &connectors.Error{Code: connectors.CodeUpstream, Status: a.status,
				Message: fmt.Sprintf("refusing GitHub's next page link: it is not on %s", c.base.Host)})
		}
		next = u
	}
}

// Get returns hook id of t; a 404 is ErrHookNotFound.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#get-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#get-an-organization-webhook
func (h Hooks) Get(ctx context.Context, t HookTarget, id int64) (Hook, error) {
	what := fmt.Sprintf("read webhook %d of %s", id, t)
	return h.one(ctx, what, t, http.MethodGet, id, nil, ErrHookNotFound, "")
}

// Create adds a hook to t as spec says and returns it. GitHub pings the
// new hook when it is active. A duplicate URL is ErrHookExists, the limit
// ErrHookLimit, missing rights ErrHookPermission.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#create-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#create-an-organization-webhook
func (h Hooks) Create(ctx context.Context, t HookTarget, spec HookSpec) (Hook, error) {
	what := "create a webhook on " + t.String()
	if err := spec.check(); err != nil {
		return Hook{}, wrapHook(what, err)
	}
	return h.one(ctx, what, t, http.MethodPost, 0, spec.body(true), ErrHookPermission, spec.Secret)
}

// Update sets hook id of t to spec: active, events (when given) and the
// whole config, secret included (an empty Secret removes it). A 404 is
// ErrHookNotFound; a URL another hook has is ErrHookExists.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#update-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#update-an-organization-webhook
func (h Hooks) Update(ctx context.Context, t HookTarget, id int64, spec HookSpec) (Hook, error) {
	what := fmt.Sprintf("update webhook %d of %s", id, t)
	if err := spec.check(); err != nil {
		return Hook{}, wrapHook(what, err)
	}
	return h.one(ctx, what, t, http.MethodPatch, id, spec.body(false), ErrHookNotFound, spec.Secret)
}

// Delete removes hook id of t. A hook already gone (404) is success; note
// that GitHub answers 404 as well to an account that lost admin rights.
//
// GitHub API docs: https://docs.github.com/rest/repos/webhooks#delete-a-repository-webhook
// and https://docs.github.com/rest/orgs/webhooks#delete-an-organization-webhook
func (h Hooks) Delete(ctx context.Context, t HookTarget, id int64) error {
	what := fmt.Sprintf("delete webhook %d of %s", id, t)
	if err := t.check(); err != nil {
		return wrapHook(what, err)
	}
	c, err := h.client()
	if err != nil {
		return wrapHook(what, err)
	}
	u := c.url(t.path()+"/"+strconv.FormatInt(id, 10), nil)
	a, err := h.exchange(ctx, c, http.MethodDelete, u, nil, nil)
	if a != nil && a.status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return h.fail(c, what, http.MethodDelete, a, err, ErrHookNotFound, "")
	}
	return nil
}

// one sends a request about one hook (id 0: the collection) and decodes
// the hook answered. notFound is what a 404 means.
func (h Hooks) one(ctx context.Context, what string, t HookTarget, method string, id int64, in any, notFound error, secret string) (Hook, error) {
	if err := t.check(); err != nil {
		return Hook{}, wrapHook(what, err)
	}
	c, err := h.client()
	if err != nil {
		return Hook{}, wrapHook(what, err)
	}
	p := t.path()
	if id != 0 {
		p += "/" + strconv.FormatInt(id, 10)
	}
	u := c.url(p, nil)
	a, err := h.exchange(ctx, c, method, u, nil, in)
	if err != nil {
		return Hook{}, h.fail(c, what, method, a, err, notFound, secret)
	}
	var j hookJSON
	if err := decodeAnswer(a, "webhook", &j); err != nil {
		return Hook{}, wrapHook(what, err)
	}
	return j.hook(), nil
}

// client checks the configuration and returns the request helper.
func (h Hooks) client() (*client, error) {
	if h.HTTP == nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "no HTTP client for the account")
	}
	base := h.BaseURL
	if base == "" {
		base = DefaultAPIBaseURL
	}
	if err := provhttp.CheckURL(base); err != nil {
		return nil, connectors.Errorf(connectors.CodeValidation, "API base URL: %v", err)
	}
	u, _ := url.Parse(strings.TrimSuffix(base, "/"))
	return &client{hc: h.HTTP, base: u, now: time.Now}, nil
}

// errStatus marks an answer outside 2xx (and 304, which callers of
// conditional requests handle): exchange returns it with the answer.
var errStatus = errors.New("unexpected status")

// exchange sends one request (client.exchange). It returns the answer for
// every status; err is errStatus for one outside 2xx and 304, or a
// transport failure (a *connectors.Error, with a nil answer).
func (h Hooks) exchange(ctx context.Context, c *client, method, rawURL string, hdr http.Header, in any) (*answer, error) {
	a, err := c.exchange(ctx, method, rawURL, hdr, in)
	if err == nil && a.status/100 != 2 && a.status != http.StatusNotModified {
		err = errStatus
	}
	return a, err
}

// fail maps a failed hooks call: 404 is notFound, a 403 that is no rate
// limit is ErrHookPermission, GitHub's 422s for a duplicate URL and the
// hook limit are ErrHookExists and ErrHookLimit, anything else the
// *connectors.Error the steps would report. secret, when set, is scrubbed
// from GitHub's message.
func (h Hooks) fail(c *client, what, method string, a *answer, err error, notFound error, secret string) error {
	if a == nil {
		var ce *connectors.Error
		if errors.As(err, &ce) && secret != "" {
			ce.Message = strings.ReplaceAll(ce.Message, secret, "[secret]")
		}
		if ce != nil && ce.Code == connectors.CodePermissionDenied {
			// The policy's transport classified a 403.
			return fmt.Errorf("codehost: %s: %w: %w", what, ErrHookPermission, ce)
		}
		return wrapHook(what, err)
	}
	ce, _ := c.statusError(method, a.path, a.status, a.header, a.body).(*connectors.Error)
	if ce == nil {
		ce = &connectors.Error{Code: connectors.CodeUpstream, Status: a.status, Message: http.StatusText(a.status)}
	}
	if secret != "" {
		ce.Message = strings.ReplaceAll(ce.Message, secret, "[secret]")
	}
	var kind error
	switch a.status {
	case http.StatusNotFound:
		kind = notFound
	case http.StatusForbidden:
		if ce.Code == connectors.CodePermissionDenied {
			kind = ErrHookPermission
		}
	case http.StatusUnprocessableEntity:
		kind = hookConflict(a.body)
	}
	if kind != nil {
		return fmt.Errorf("codehost: %s: %w: %w", what, kind, ce)
	}
	return fmt.Errorf("codehost: %s: %w", what, ce)
}

// hookConflict recognises GitHub's 422s for a duplicate hook URL and for
// the per-event hook limit.
func hookConflict(body []byte) error {
	var ge ghError
	_ = json.Unmarshal(body, &ge)
	texts := []string{ge.Message}
	for _, raw := range ge.Errors {
		var e struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(raw, &e) == nil:
			texts = append(texts, e.Message)
		case json.Unmarshal(raw, &s) == nil:
			texts = append(texts, s)
		}
	}
	for _, t := range texts {
		t = strings.ToLower(t)
		switch {
		case strings.Contains(t, "already exists"):
			return ErrHookExists
		case strings.Contains(t, "cannot have more than") && strings.Contains(t, "hooks"),
			strings.Contains(t, "maximum number of hooks"):
			return ErrHookLimit
		}
	}
	return nil
}

// RateLimited reports whether err is GitHub's rate limit (a spent
// primary budget, answered or known before sending, or a secondary
// limit), and how long GitHub asks to wait before the next request.
func RateLimited(err error) (retryAfter time.Duration, ok bool) {
	var ce *connectors.Error
	if errors.As(err, &ce) && ce.Code == connectors.CodeRateLimited {
		return ce.RetryAfter, true
	}
	return 0, false
}

// wrapHook adds what was attempted to err.
func wrapHook(what string, err error) error {
	return fmt.Errorf("codehost: %s: %w", what, err)
}
