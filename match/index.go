package match

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/triggerd/triggerd/triggers"
)

// Trigger subscribes an agent to one kind of event.
type Trigger struct {
	ID       string        `json:"id"`
	TenantID string        `json:"tenant_id"`
	Kind     triggers.Kind `json:"kind"`
	// Account is the connected account the trigger acts through.
	Account string `json:"account"`
	// Agent is the agent the trigger starts.
	Agent   string `json:"agent"`
	Enabled bool   `json:"enabled"`
	Params  Params `json:"params"`
	// Filter is a CEL expression over the variable event (the envelope,
	// payload included, as decoded JSON) that must yield true; "" for none.
	Filter string `json:"filter,omitempty"`
	// Inactive, when set, is why the platform stopped the trigger (its
	// account was removed, ...); InactiveCode classifies it
	// ("account_removed").
	Inactive     string `json:"inactive,omitempty"`
	InactiveCode string `json:"inactive_code,omitempty"`
}

// The results an Outcome can carry.
const (
	// Matched means the trigger's agent is to be started for the event.
	Matched = "matched"
	// FilteredOut means a parameter or the filter rejected the event.
	FilteredOut = "filtered_out"
	// Disabled means the trigger would have been considered but is disabled.
	Disabled = "disabled"
	// Inactive means the platform stopped the trigger; the Outcome's
	// Result is the trigger's InactiveCode when it has one.
	Inactive = "inactive"
)

// Outcome is what became of one candidate trigger for one event.
type Outcome struct {
	TriggerID string `json:"trigger_id"`
	TenantID  string `json:"tenant_id"`
	Account   string `json:"account"`
	Agent     string `json:"agent"`
	// Result is Matched, FilteredOut, Disabled, or Inactive (or the
	// trigger's InactiveCode).
	Result string `json:"result"`
	// Reason says, for FilteredOut, which parameter or the filter rejected
	// the event and why ("branch main not in [release]").
	Reason string `json:"reason,omitempty"`
}

// wildcard is the repository part of the bucket of triggers without a
// repository restriction.
const wildcard = "*"

// bucketKey names one index bucket.
type bucketKey struct {
	connector triggers.Connector
	kind      triggers.Kind
	// repo is a lower-cased "owner/repo", or wildcard.
	repo string
}

// entry is an indexed trigger with its parameters prepared for matching.
type entry struct {
	t       Trigger
	repos   []string // lower-cased, deduplicated; empty means wildcard
	program cel.Program
	// readsPayload is set when the filter may read the event's payload
	// (FilterReadsPayload).
	readsPayload bool
}

// Index holds triggers by connector, kind and repository, so matching an
// event looks only at the triggers of the event's own buckets, however many
// triggers there are. It is safe for concurrent use.
type Index struct {
	env *cel.Env
	// shared is the tenant whose triggers are candidates for unscoped
	// events (Options.SharedTenant); "" for none.
	shared string

	mu   sync.RWMutex
	byID map[string]*entry
	// buckets hold entries sorted by trigger id.
	buckets map[bucketKey][]*entry

	// Test hooks, nil outside tests: called for every candidate examined
	// and every event decoded for filters.
	onExamine func()
	onDecode  func()
}

// NewIndex returns an empty index whose triggers of tenant shared are the
// candidates for unscoped events.
func NewIndex(shared string) *Index {
	env, err := newFilterEnv()
	if err != nil {
		// The environment is fixed; failing to build it is a programming
		// error.
		panic("dispatch: building the CEL environment: " + err.Error())
	}
	return &Index{env: env, shared: shared, byID: make(map[string]*entry), buckets: make(map[bucketKey][]*entry)}
}

// Validate checks t's parameters and compiles its filter as Put does, and
// says what is wrong without naming the trigger: for a trigger being
// created, whose id means nothing to its author yet.
func Validate(t Trigger) error {
	_, err := NewIndex("").entry(t)
	return err
}

// entry checks t's parameters, compiles its filter and returns its entry;
// its errors do not name t.
func (x *Index) entry(t Trigger) (*entry, error) {
	if err := ValidateParams(t.Kind, t.Params); err != nil {
		return nil, err
	}
	e := &entry{t: cloneTrigger(t)}
	seen := make(map[string]bool, len(t.Params.Repositories))
	for _, r := range t.Params.Repositories {
		r = strings.ToLower(r)
		if !seen[r] {
			seen[r] = true
			e.repos = append(e.repos, r)
		}
	}
	if t.Filter != "" {
		prg, err := compileFilter(x.env, t.Filter)
		if err != nil {
			return nil, err
		}
		e.program = prg
		e.readsPayload = FilterReadsPayload(t.Filter)
	}
	return e, nil
}

// Put validates t, compiles its filter and adds it to the index, replacing
// (and moving between buckets) any trigger with the same id.
func (x *Index) Put(t Trigger) error {
	if t.ID == "" {
		return errors.New("trigger has no id")
	}
	e, err := x.entry(t)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", t.ID, err)
	}

	x.mu.Lock()
	defer x.mu.Unlock()
	if old := x.byID[t.ID]; old != nil {
		x.unlink(old)
	}
	x.byID[t.ID] = e
	for _, k := range keysOf(e) {
		b := x.buckets[k]
		i := sort.Search(len(b), func(i int) bool { return b[i].t.ID >= e.t.ID })
		b = append(b, nil)
		copy(b[i+1:], b[i:])
		b[i] = e
		x.buckets[k] = b
	}
	return nil
}

// Remove removes the trigger with the given id, if present.
func (x *Index) Remove(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byID[id]; e != nil {
		x.unlink(e)
		delete(x.byID, id)
	}
}

// Len returns the number of triggers in the index.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// unlink removes e from its buckets; x.mu must be held for writing.
func (x *Index) unlink(e *entry) {
	for _, k := range keysOf(e) {
		b := x.buckets[k]
		i := sort.Search(len(b), func(i int) bool { return b[i].t.ID >= e.t.ID })
		if i < len(b) && b[i] == e {
			copy(b[i:], b[i+1:])
			b[len(b)-1] = nil // drop the stale pointer for the collector
			b = b[:len(b)-1]
		}
		if len(b) == 0 {
			delete(x.buckets, k)
		} else {
			x.buckets[k] = b
		}
	}
}

// keysOf returns the buckets e belongs to: one per repository, or the
// wildcard bucket.
func keysOf(e *entry) []bucketKey {
	c := e.t.Kind.Connector()
	if len(e.repos) == 0 {
		return []bucketKey{{c, e.t.Kind, wildcard}}
	}
	keys := make([]bucketKey, len(e.repos))
	for i, r := range e.repos {
		keys[i] = bucketKey{c, e.t.Kind, r}
	}
	return keys
}

// Match returns the outcome of every candidate trigger for event ev, ordered
// by trigger id. The candidates are the triggers of the event's connector
// and kind that are restricted to the event's repository or not restricted
// to any, and that belong, for an event with a Scope, to the scope's tenant
// and account (or agent), and for an unscoped event (of the shared
// endpoints) to the index's shared tenant; no other trigger is looked at.
// The event is decoded for filters at most once, and only if a candidate's
// filter is evaluated.
func (x *Index) Match(ev *triggers.Event) []Outcome {
	out, _ := x.MatchWith(ev, nil)
	return out
}

// MatchWith is Match for an event that carries its payload by reference
// (payload_ref) without it: payloadErr says why it could not be read, for
// the filters that fail without it. unread reports a filter that may read
// the payload evaluated while it was neither read nor known unreadable:
// the caller reads it and matches again (eventPayload.match).
func (x *Index) MatchWith(ev *triggers.Event, payloadErr error) (out []Outcome, unread bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	exact, wild := x.eventBuckets(ev)
	if len(exact)+len(wild) == 0 {
		return nil, false
	}
	m := matcher{x: x, ev: ev, payloadErr: payloadErr}
	out = make([]Outcome, 0, len(exact)+len(wild))
	x.eachCandidate(ev, exact, wild, func(e *entry) bool {
		out = append(out, m.outcome(e))
		return true
	})
	return out, m.unread
}

// Considers reports whether Match would return any outcome for ev: whether
// any trigger is a candidate for it, parameters and filters aside.
func (x *Index) Considers(ev *triggers.Event) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	exact, wild := x.eventBuckets(ev)
	found := false
	x.eachCandidate(ev, exact, wild, func(*entry) bool {
		found = true
		return false
	})
	return found
}

// NeedsPayload reports whether the filter of a candidate trigger for ev
// that is enabled and active may read the event's payload.
func (x *Index) NeedsPayload(ev *triggers.Event) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	exact, wild := x.eventBuckets(ev)
	found := false
	x.eachCandidate(ev, exact, wild, func(e *entry) bool {
		_, _, held := HeldBack(&e.t)
		found = e.readsPayload && !held
		return !found
	})
	return found
}

// eventBuckets returns the buckets ev draws its candidates from
// (bucketsFor). x.mu must be held.
func (x *Index) eventBuckets(ev *triggers.Event) (exact, wild []*entry) {
	conn := ev.Connector
	if conn == "" {
		conn = ev.Kind.Connector()
	}
	repo := ""
	if ev.Repository != nil {
		repo = strings.ToLower(ev.Repository.FullName)
	}
	return x.bucketsFor(conn, ev.Kind, repo)
}

// eachCandidate calls fn, in id order, with each trigger of the buckets
// exact and wild that is a candidate for ev (in its scope and source),
// while fn returns true.
func (x *Index) eachCandidate(ev *triggers.Event, exact, wild []*entry, fn func(e *entry) bool) {
	// Merge the two id-sorted buckets; a trigger is in exactly one of them.
	for len(exact) > 0 || len(wild) > 0 {
		var e *entry
		if len(wild) == 0 || len(exact) > 0 && exact[0].t.ID < wild[0].t.ID {
			e, exact = exact[0], exact[1:]
		} else {
			e, wild = wild[0], wild[1:]
		}
		if inScope(ev.Scope, &e.t, x.shared) && mentionSource(ev, e) && repositorySource(ev, e) && !fn(e) {
			return
		}
	}
}

// Candidates reports whether any trigger is indexed for events of kind k
// from connector c on repository repo (a lower-cased full name, "" for
// none), of any tenant: false means Match would return nothing for such an
// event, whatever else it holds (its scope included).
func (x *Index) Candidates(c triggers.Connector, k triggers.Kind, repo string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	exact, wild := x.bucketsFor(c, k, repo)
	return len(exact)+len(wild) > 0
}

// bucketsFor returns the two buckets an event of kind k from connector c on
// repository repo (lower-cased, "" for none) draws its candidates from: the
// repository's, and "any repository". x.mu must be held.
func (x *Index) bucketsFor(c triggers.Connector, k triggers.Kind, repo string) (exact, wild []*entry) {
	if repo != "" {
		exact = x.buckets[bucketKey{c, k, repo}]
	}
	return exact, x.buckets[bucketKey{c, k, wildcard}]
}

// inScope reports whether t may receive an event of scope s: for an
// unscoped event (of the shared endpoints, verified with the operator's
// secrets) the triggers of tenant shared, which owns those endpoints, and
// none when shared is ""; else the scope's tenant's triggers of its
// account (hooks) or agent (deployment endpoints).
func inScope(s *triggers.Scope, t *Trigger, shared string) bool {
	switch {
	case s == nil:
		return shared != "" && t.TenantID == shared
	case t.TenantID != s.Tenant:
		return false
	case s.Account != "" && t.Account != s.Account:
		return false
	case s.Agent != "" && t.Agent != s.Agent:
		return false
	}
	return true
}

// mentionSource keeps the two sources of new_mention apart, so no mention
// starts a trigger twice: account-wide triggers (no repositories) take the
// poller's events from the account's notifications, which are about the
// account's own login; repository triggers take the webhooks' events.
func mentionSource(ev *triggers.Event, e *entry) bool {
	if ev.Kind != triggers.NewMention {
		return true
	}
	return ev.Scope.Polled() == (len(e.repos) == 0)
}

// repositorySource keeps the two sources of new_repository apart:
// triggers without an organisation take the poller's events from the
// account's own repositories, those with one its hook's events. A
// repository created in an organisation the account also polls for is
// not its own, but its organisation's hook reports it: without this, a
// trigger without an organisation would take that event too.
func repositorySource(ev *triggers.Event, e *entry) bool {
	if ev.Kind != triggers.NewRepository {
		return true
	}
	return ev.Scope.Polled() == (e.t.Params.Organization == "")
}

// matcher matches one event, holding its filter activation once built.
type matcher struct {
	x       *Index
	ev      *triggers.Event
	decoded bool
	act     cel.Activation
	err     error
	// payloadErr is why the payload of an event that carries it by
	// reference could not be read.
	payloadErr error
	// unread is set when a filter that may read the payload was evaluated
	// without it, for no known reason (see matchWith).
	unread bool
}

// outcome decides what becomes of candidate e.
func (m *matcher) outcome(e *entry) Outcome {
	if m.x.onExamine != nil {
		m.x.onExamine()
	}
	o := Outcome{TriggerID: e.t.ID, TenantID: e.t.TenantID, Account: e.t.Account, Agent: e.t.Agent}
	if result, reason, held := HeldBack(&e.t); held {
		o.Result, o.Reason = result, reason
	} else if reason := m.reject(e); reason != "" {
		o.Result, o.Reason = FilteredOut, reason
	} else {
		o.Result = Matched
	}
	return o
}

// HeldBack reports whether t's state keeps it from starting its agent,
// whatever the event: inactive (the Outcome result is its InactiveCode when
// it has one) or disabled. Replays, even those that bypass the parameters
// and filter, are held back the same way.
func HeldBack(t *Trigger) (result, reason string, held bool) {
	switch {
	case t.Inactive != "":
		return cmp.Or(t.InactiveCode, Inactive), t.Inactive, true
	case !t.Enabled:
		return Disabled, "trigger is disabled", true
	}
	return "", "", false
}

// reject returns why e's parameters or filter reject the event, or "".
func (m *matcher) reject(e *entry) string {
	r := &m.ev.Resource
	p := &e.t.Params
	if p.Organization != "" && !strings.EqualFold(p.Organization, m.ev.Account) {
		return "organization " + orNone(m.ev.Account) + " is not " + p.Organization
	}
	if len(p.Branches) > 0 {
		switch {
		case r.RefType == "tag":
			// A tag named like a branch pattern is still not a branch.
			return "branch: the event is about tag " + r.Ref + ", not a branch; want " + list(p.Branches)
		case r.Ref == "":
			return "branch: the event has no branch; want " + list(p.Branches)
		case !matchBranch(p.Branches, r.Ref):
			return "branch " + r.Ref + " not in " + list(p.Branches)
		}
	}
	if len(p.Labels) > 0 && !m.matchLabels(p.Labels) {
		have := eventLabels(m.ev)
		if len(have) == 0 {
			return "labels: the event has no labels; want any of " + list(p.Labels)
		}
		return "labels " + list(have) + " include none of " + list(p.Labels)
	}
	if p.ColumnID != 0 && r.ColumnID != p.ColumnID {
		return "column " + strconv.FormatInt(r.ColumnID, 10) + " is not " + strconv.FormatInt(p.ColumnID, 10)
	}
	if len(p.Conclusions) > 0 && !containsFold(p.Conclusions, r.Conclusion) {
		return "conclusion " + orNone(r.Conclusion) + " not in " + list(p.Conclusions)
	}
	if len(p.ReviewStates) > 0 && !containsFold(p.ReviewStates, r.ReviewState) {
		return "review state " + orNone(r.ReviewState) + " not in " + list(p.ReviewStates)
	}
	if len(p.Environments) > 0 && !containsFold(p.Environments, r.Target) {
		return "environment " + orNone(r.Target) + " not in " + list(p.Environments)
	}
	if len(p.Mentioned) > 0 && !slices.Contains(p.Mentioned, AnyLogin) && !containsFold(p.Mentioned, r.Mentioned) {
		return "mentioned @" + r.Mentioned + " is not among " + list(p.Mentioned)
	}
	if e.program != nil {
		if e.readsPayload && m.payloadErr == nil && m.ev.PayloadByReference() != "" {
			m.unread = true
		}
		act, err := m.activation()
		if err != nil {
			return "filter error: " + err.Error()
		}
		ok, err := evalFilter(e.program, act)
		if err != nil {
			return "filter error: " + err.Error() + m.payloadNote(e)
		}
		if !ok {
			return "filter: " + e.t.Filter + " is false"
		}
	}
	return ""
}

// activation decodes the event for filters on first use.
func (m *matcher) activation() (cel.Activation, error) {
	if !m.decoded {
		m.decoded = true
		if m.x.onDecode != nil {
			m.x.onDecode()
		}
		var doc map[string]any
		doc, m.err = decodeEvent(m.ev)
		if m.err == nil {
			m.act, m.err = cel.NewActivation(map[string]any{"event": doc})
		}
		if m.err != nil {
			m.err = fmt.Errorf("decoding the event: %w", m.err)
		}
	}
	return m.act, m.err
}

// payloadNote explains, for a filter that failed on an event that carries
// its payload by reference, why the payload was not there.
func (m *matcher) payloadNote(e *entry) string {
	ref := m.ev.PayloadByReference()
	switch {
	case ref == "" || !e.readsPayload:
		return ""
	case m.payloadErr != nil:
		return " (the event carries its payload by reference, and it could not be read: " + m.payloadErr.Error() + ")"
	}
	return " (the event carries its payload by reference, in " + ref + ", which was not read)"
}

// matchLabels reports whether the event carries any of e's labels. For
// new_issue_label only the label just added counts: the issue's other
// labels were there before and must not fire "label X added".
func (m *matcher) matchLabels(want []string) bool {
	for _, l := range eventLabels(m.ev) {
		if containsFold(want, l) {
			return true
		}
	}
	return false
}

// eventLabels lists the labels a labels parameter is matched against: the
// resource's label and labels, or for new_issue_label only the added label.
// The label an unlabeled update removed is not on the issue any more.
func eventLabels(ev *triggers.Event) []string {
	r := &ev.Resource
	switch {
	case r.Label == "" || ev.Action == "unlabeled":
		return r.Labels
	case ev.Kind == triggers.NewIssueLabel || containsFold(r.Labels, r.Label):
		if ev.Kind == triggers.NewIssueLabel {
			return []string{r.Label}
		}
		return r.Labels
	default:
		return append([]string{r.Label}, r.Labels...)
	}
}

// matchBranch reports whether ref equals one of the branches or matches one
// as a path.Match pattern.
func matchBranch(branches []string, ref string) bool {
	if ref == "" {
		return false
	}
	for _, b := range branches {
		if b == ref {
			return true
		}
		if ok, _ := path.Match(b, ref); ok {
			return true
		}
	}
	return false
}

// list formats values as "[a b c]".
func list(vs []string) string { return "[" + strings.Join(vs, " ") + "]" }

// orNone returns s, or "(none)" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// cloneTrigger copies t so the caller's slices are not shared.
func cloneTrigger(t Trigger) Trigger {
	c := func(s []string) []string {
		if s == nil {
			return nil
		}
		return append([]string(nil), s...)
	}
	p := &t.Params
	p.Repositories, p.Branches, p.Labels = c(p.Repositories), c(p.Branches), c(p.Labels)
	p.Conclusions, p.ReviewStates, p.Environments = c(p.Conclusions), c(p.ReviewStates), c(p.Environments)
	return t
}

// Kinds returns the kinds that have at least one trigger in the index,
// whatever its state (a disabled or inactive trigger still leaves an
// outcome on the events it would have taken), sorted.
func (x *Index) Kinds() []triggers.Kind {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []triggers.Kind
	for k, b := range x.buckets {
		if len(b) > 0 && !slices.Contains(out, k.kind) {
			out = append(out, k.kind)
		}
	}
	slices.Sort(out)
	return out
}

// ReplayScope is the scope an event is replayed under: the tenant's,
// whatever the original scope. The hook stays: it tells a polled mention
// from a webhook's (mentionSource), and inScope does not read it.
func ReplayScope(tenantID string, s *triggers.Scope) *triggers.Scope {
	r := &triggers.Scope{Tenant: tenantID}
	if s != nil {
		r.Hook = s.Hook
	}
	return r
}
