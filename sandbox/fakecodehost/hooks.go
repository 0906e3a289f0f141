package fakecodehost

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxHooksPerEvent is how many hooks of one repository or organisation
// may subscribe to the same event; GitHub refuses more with a 422.
const MaxHooksPerEvent = 20

// hook is a webhook of a repository or an organisation.
type hook struct {
	id          int64
	active      bool
	events      []string
	url         string
	contentType string // json or form
	secret      string
	insecureSSL string // "0" or "1"
	created     time.Time
	updated     time.Time
	// The last delivery's answer: lastCode 0 is null; lastStatus is
	// "unused" until the first delivery.
	lastCode    int
	lastStatus  string
	lastMessage string
}

// hookScope is where hooks live: a repository or an organisation.
type hookScope struct {
	repo *repo
	org  *user
}

func (sc hookScope) list() *[]*hook {
	if sc.repo != nil {
		return &sc.repo.hooks
	}
	return &sc.org.hooks
}

// target is the X-GitHub-Hook-Installation-Target-Type and -ID.
func (sc hookScope) target() (string, int64) {
	if sc.repo != nil {
		return TargetRepository, sc.repo.id
	}
	return TargetOrganization, sc.org.id
}

// kind is the hook object's type.
func (sc hookScope) kind() string {
	if sc.repo != nil {
		return "Repository"
	}
	return "Organization"
}

func (c *call) hooksURL(sc hookScope) string {
	if sc.repo != nil {
		return c.repoURL(sc.repo) + "/hooks"
	}
	return c.base + "/orgs/" + sc.org.login + "/hooks"
}

// scopes lists every repository and organisation.
func (st *state) scopes() []hookScope {
	var out []hookScope
	for _, r := range st.repos {
		out = append(out, hookScope{repo: r})
	}
	for _, u := range st.users {
		if u.org {
			out = append(out, hookScope{org: u})
		}
	}
	return out
}

// hookByID finds a hook anywhere.
func (st *state) hookByID(id int64) (hookScope, *hook) {
	for _, sc := range st.scopes() {
		for _, h := range *sc.list() {
			if h.id == id {
				return sc, h
			}
		}
	}
	return hookScope{}, nil
}

// hookScope resolves /repos/{owner}/{repo}/hooks or /orgs/{org}/hooks.
// Only an admin of the repository or of the organisation may manage its
// hooks; GitHub answers 404 to everyone else.
func (c *call) hookScope() (hookScope, *reply) {
	if org, isOrg := c.p["org"]; isOrg {
		u := c.s.st.users[strings.ToLower(org)]
		if u == nil || !u.org || u.roles[c.login] != OrgAdmin {
			return hookScope{}, notFound()
		}
		return hookScope{org: u}, nil
	}
	r, rep := c.repoWith("admin")
	if rep != nil {
		return hookScope{}, rep
	}
	return hookScope{repo: r}, nil
}

func (c *call) hookParam() (hookScope, *hook, *reply) {
	sc, rep := c.hookScope()
	if rep != nil {
		return sc, nil, rep
	}
	id, err := strconv.ParseInt(c.p["hook_id"], 10, 64)
	if err != nil {
		return sc, nil, notFound()
	}
	for _, h := range *sc.list() {
		if h.id == id {
			return sc, h, nil
		}
	}
	return sc, nil, notFound()
}

func (c *call) hookJSON(sc hookScope, h *hook) M {
	u := c.hooksURL(sc) + "/" + strconv.FormatInt(h.id, 10)
	cfg := M{"url": h.url, "content_type": h.contentType, "insecure_ssl": h.insecureSSL}
	if h.secret != "" {
		cfg["secret"] = "********"
	}
	var code any
	if h.lastCode != 0 {
		code = h.lastCode
	}
	events := slices.Clone(h.events)
	if events == nil {
		events = []string{}
	}
	m := M{
		"type": sc.kind(), "id": h.id, "name": "web", "active": h.active, "events": events, "config": cfg,
		"updated_at": ts(h.updated), "created_at": ts(h.created),
		"url": u, "ping_url": u + "/pings", "deliveries_url": u + "/deliveries",
		"last_response": M{"code": code, "status": h.lastStatus, "message": nullable(h.lastMessage)},
	}
	if sc.repo != nil {
		m["test_url"] = u + "/test"
	}
	return m
}

// hookIn is the body of a hook's create or update; nil means absent.
type hookIn struct {
	Name         *string   `json:"name"`
	Active       *bool     `json:"active"`
	Events       *[]string `json:"events"`
	AddEvents    []string  `json:"add_events"`
	RemoveEvents []string  `json:"remove_events"`
	Config       *struct {
		URL         *string `json:"url"`
		ContentType *string `json:"content_type"`
		Secret      *string `json:"secret"`
		InsecureSSL any     `json:"insecure_ssl"`
	} `json:"config"`
}

var eventName = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*)$`)

func hookError(msg string) *reply {
	return validation(M{"resource": "Hook", "code": "custom", "message": msg})
}

// configure writes in's config to h: a config replaces the whole
// configuration, as GitHub's PATCH does (a secret left out is removed).
func (in *hookIn) configure(h *hook) *reply {
	cfg := in.Config
	if cfg == nil || cfg.URL == nil || strings.TrimSpace(*cfg.URL) == "" {
		return hookError("Config must contain URL for webhooks")
	}
	if u, err := url.Parse(*cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return hookError("The URL you've entered is not valid. Please make sure that you encode all special characters first")
	}
	ct := "form"
	if cfg.ContentType != nil {
		ct = *cfg.ContentType
	}
	if ct != "json" && ct != "form" {
		return invalid("Hook", "content_type", "invalid")
	}
	ssl := "0"
	switch v := cfg.InsecureSSL.(type) {
	case nil:
	case string:
		ssl = v
	case float64:
		ssl = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		ssl = "?"
	}
	if ssl != "0" && ssl != "1" {
		return invalid("Hook", "insecure_ssl", "invalid")
	}
	h.url, h.contentType, h.insecureSSL, h.secret = *cfg.URL, ct, ssl, ""
	if cfg.Secret != nil {
		h.secret = *cfg.Secret
	}
	return nil
}

func validEvents(events []string) *reply {
	for _, e := range events {
		if !eventName.MatchString(e) {
			return invalid("Hook", "events", "invalid")
		}
	}
	return nil
}

// conflicts answers GitHub's 422s for a hook about to be saved as h in sc
// (self is the hook being updated, or nil): another hook with the same
// URL, or an event that would have more than MaxHooksPerEvent hooks.
// added are the events h subscribes to anew.
func conflicts(sc hookScope, self, h *hook, added []string) *reply {
	noun := "repository"
	if sc.org != nil {
		noun = "organization"
	}
	others := slices.DeleteFunc(slices.Clone(*sc.list()), func(o *hook) bool { return o == self })
	for _, o := range others {
		if o.url == h.url {
			return hookError("Hook already exists on this " + noun)
		}
	}
	check := slices.Clone(added)
	if slices.Contains(added, "*") {
		for _, o := range others {
			check = append(check, o.events...)
		}
	}
	slices.Sort(check)
	var errs []M
	for _, e := range slices.Compact(check) {
		n := 0
		for _, o := range others {
			if o.wants(e) {
				n++
			}
		}
		if n >= MaxHooksPerEvent {
			errs = append(errs, M{"resource": "Hook", "code": "custom",
				"message": "The \"" + e + "\" event cannot have more than " + strconv.Itoa(MaxHooksPerEvent) + " hooks"})
		}
	}
	if len(errs) > 0 {
		return validation(errs...)
	}
	return nil
}

func (c *call) listHooks() *reply {
	sc, rep := c.hookScope()
	if rep != nil {
		return rep
	}
	var items []any
	for _, h := range *sc.list() {
		items = append(items, c.hookJSON(sc, h))
	}
	return c.page(items, "")
}

func (c *call) getHook() *reply {
	sc, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	return okBody(c.hookJSON(sc, h))
}

func (c *call) createHook() *reply {
	sc, rep := c.hookScope()
	if rep != nil {
		return rep
	}
	var in hookIn
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	switch {
	case in.Name == nil && sc.org != nil:
		// An organisation's hook must name itself; a repository's
		// defaults to web.
		return invalid("Hook", "name", "missing_field")
	case in.Name != nil && *in.Name != "web":
		return validation(M{"resource": "Hook", "code": "custom", "field": "name", "message": "Name must be \"web\""})
	}
	h := &hook{active: true, events: []string{"push"}, created: c.now, updated: c.now, lastStatus: "unused"}
	if in.Active != nil {
		h.active = *in.Active
	}
	if in.Events != nil {
		h.events = dedupe(*in.Events)
	}
	if rep := validEvents(h.events); rep != nil {
		return rep
	}
	if rep := in.configure(h); rep != nil {
		return rep
	}
	if rep := conflicts(sc, nil, h, h.events); rep != nil {
		return rep
	}
	h.id = c.s.st.id()
	*sc.list() = append(*sc.list(), h)
	if h.active {
		c.ping(sc, h)
	}
	return created(c.hookJSON(sc, h))
}

func (c *call) updateHook() *reply {
	sc, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	var in hookIn
	if rep := c.decode(&in); rep != nil {
		return rep
	}
	next := *h
	next.events = slices.Clone(h.events)
	if in.Active != nil {
		next.active = *in.Active
	}
	if in.Events != nil {
		next.events = dedupe(*in.Events)
	}
	next.events = dedupe(append(next.events, in.AddEvents...))
	next.events = slices.DeleteFunc(next.events, func(e string) bool { return slices.Contains(in.RemoveEvents, e) })
	if rep := validEvents(next.events); rep != nil {
		return rep
	}
	if in.Config != nil {
		if rep := in.configure(&next); rep != nil {
			return rep
		}
	}
	added := slices.DeleteFunc(slices.Clone(next.events), func(e string) bool { return slices.Contains(h.events, e) })
	if rep := conflicts(sc, h, &next, added); rep != nil {
		return rep
	}
	next.updated = c.now
	*h = next
	return okBody(c.hookJSON(sc, h))
}

func (c *call) deleteHook() *reply {
	sc, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	*sc.list() = slices.DeleteFunc(*sc.list(), func(o *hook) bool { return o == h })
	return noContent()
}

// pingHook sends a ping to the hook, active or not.
func (c *call) pingHook() *reply {
	sc, h, rep := c.hookParam()
	if rep != nil {
		return rep
	}
	c.ping(sc, h)
	return noContent()
}

var zen = []string{
	"Design for failure.", "Keep it logically awesome.", "Anything added dilutes everything else.",
	"Encourage flow.", "Non-blocking is better than blocking.", "Half measures are as bad as nothing at all.",
	"Favor focus over features.", "Avoid administrative distraction.", "Approachable is better than simple.",
	"Mind your words, they are important.", "Speak like a human.", "Practicality beats purity.",
	"Responsive is better than fast.", "It's not fully shipped until it's fast.",
}

// ping delivers GitHub's ping event to h.
func (c *call) ping(sc hookScope, h *hook) {
	m := M{"zen": zen[h.id%int64(len(zen))], "hook_id": h.id, "hook": c.hookJSON(sc, h), "sender": c.user(c.login)}
	if sc.repo != nil {
		c.aboutRepo(m, sc.repo)
	} else {
		m["organization"] = c.orgJSON(sc.org)
	}
	c.s.launchLocked(newOutgoing(hookAt{sc, h}, "ping", payloadBytes(m), c.now))
}

// payloadBytes encodes a webhook payload.
func payloadBytes(m M) []byte {
	b, _ := encode(&reply{body: m}).body.([]byte)
	return b
}

// aboutRepo sets a webhook payload's repository (the API's object,
// without the caller's permissions) and, for an organisation's
// repository, its organization.
func (c *call) aboutRepo(m M, r *repo) {
	repo := c.repoJSON(r)
	delete(repo, "permissions")
	m["repository"] = repo
	if o := c.s.st.orgOf(r); o != nil {
		m["organization"] = c.orgJSON(o)
	}
}

func (c *call) orgJSON(u *user) M {
	u0 := c.base + "/orgs/" + u.login
	return M{
		"login": u.login, "id": u.id, "node_id": nodeID("Organization", u.id), "url": u0,
		"repos_url": u0 + "/repos", "events_url": u0 + "/events", "hooks_url": u0 + "/hooks", "issues_url": u0 + "/issues",
		"members_url": u0 + "/members{/member}", "public_members_url": u0 + "/public_members{/member}",
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(u.id, 10) + "?v=4", "description": nullable(u.name),
	}
}

// emit delivers a repository event caused by the API call c to the hooks
// that want it: fields plus repository, sender and, for an organisation's
// repository, organization.
func (c *call) emit(r *repo, event string, fields M) {
	hooks := c.s.st.hooksFor(r, event)
	if len(hooks) == 0 {
		return
	}
	m := M{"sender": c.user(c.login)}
	c.aboutRepo(m, r)
	for k, v := range fields {
		m[k] = v
	}
	c.s.emitLocked(hooks, event, payloadBytes(m), c.now)
}

// Hook is a read-only view of a webhook of the fake.
type Hook struct {
	ID          int64
	Active      bool
	Events      []string
	URL         string
	ContentType string
	Secret      string
	InsecureSSL string
	// LastResponseCode is the last delivery's status (0 when none was
	// answered); LastResponseStatus is "unused" before the first delivery,
	// then "active" after a 2xx, "misconfigured" after another status and
	// "timeout" when the receiver did not answer.
	LastResponseCode     int
	LastResponseStatus   string
	LastResponseMessage  string
	CreatedAt, UpdatedAt time.Time
}

func (h *hook) view() Hook {
	return Hook{ID: h.id, Active: h.active, Events: slices.Clone(h.events), URL: h.url, ContentType: h.contentType,
		Secret: h.secret, InsecureSSL: h.insecureSSL, LastResponseCode: h.lastCode, LastResponseStatus: h.lastStatus,
		LastResponseMessage: h.lastMessage, CreatedAt: h.created, UpdatedAt: h.updated}
}

func views(hs []*hook) []Hook {
	out := make([]Hook, len(hs))
	for i, h := range hs {
		out[i] = h.view()
	}
	return out
}

// Hooks returns copies of owner/repo's webhooks, oldest first (nil when
// the repository does not exist).
func (s *Server) Hooks(owner, repo string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.st.repos[repoKey(owner, repo)]; r != nil {
		return views(r.hooks)
	}
	return nil
}

// OrgHooks returns copies of organisation org's webhooks, oldest first.
func (s *Server) OrgHooks(org string) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.st.users[strings.ToLower(org)]; u != nil && u.org {
		return views(u.hooks)
	}
	return nil
}

// SetHookActive switches a hook (of any repository or organisation) on or
// off behind the API's back, as a person in GitHub's settings would; it
// reports whether the hook exists.
func (s *Server) SetHookActive(id int64, active bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, h := s.st.hookByID(id)
	if h == nil {
		return false
	}
	h.active, h.updated = active, s.o.Now()
	return true
}

// DeleteHook deletes a hook behind the API's back; it reports whether the
// hook existed.
func (s *Server) DeleteHook(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, h := s.st.hookByID(id)
	if h == nil {
		return false
	}
	*sc.list() = slices.DeleteFunc(*sc.list(), func(o *hook) bool { return o == h })
	return true
}

// hookRoutes are the webhook routes of repositories and organisations.
func hookRoutes() []row {
	var out []row
	for _, base := range []string{"/repos/{owner}/{repo}/hooks", "/orgs/{org}/hooks"} {
		out = append(out,
			row{Route("GET " + base), (*call).listHooks},
			row{Route("POST " + base), (*call).createHook},
			row{Route("GET " + base + "/{hook_id}"), (*call).getHook},
			row{Route("PATCH " + base + "/{hook_id}"), (*call).updateHook},
			row{Route("DELETE " + base + "/{hook_id}"), (*call).deleteHook},
			row{Route("POST " + base + "/{hook_id}/pings"), (*call).pingHook},
		)
		out = append(out, hookDeliveryRoutes(base)...)
	}
	return out
}
