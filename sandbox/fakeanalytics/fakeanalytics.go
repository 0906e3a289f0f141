// Package fakeanalytics is an in-memory fake of the Google Analytics 4 Data API
// and Admin API (v1beta) parts the analytics connector uses, faithful
// enough to run the connector's steps against in tests and in a sandbox
// mode.
//
// Data API: POST /v1beta/properties/{id}:runReport, :batchRunReports (up
// to five runReport requests for the property), :runPivotReport,
// :batchRunPivotReports and :runRealtimeReport over a seeded fact table
// (dimensions date, country, eventName, pagePath, sessionSource; realtime
// country, eventName, minutesAgo; metrics activeUsers, sessions,
// eventCount, screenPageViews and keyEvents, the events marked as key
// events), with relative dates in the property's time zone,
// FilterExpressions, orderBys, offset and limit; values are strings and a
// report without rows has neither "rows" nor "rowCount", as GA4 answers.
// Metrics GA4 renamed (conversions, now keyEvents) are refused with a 400
// that names the new name. GET /v1beta/properties/{id}/metadata lists the
// fields.
//
// Admin API: account summaries, properties (list with its required
// filter and showDeleted, get, create, update with updateMask, delete to
// the trash), key events (list, create, get, delete) and data streams
// (list, get, create, update with updateMask, delete), token-paginated.
//
// Access follows GA4 roles: a user's role on a property is the higher of
// their role on it and on its account; reports need Viewer, key events
// Editor, creating a property Administrator on the account. Quotas are
// kept per property and category (core, realtime): tokens per day (reset
// at midnight America/Los_Angeles, as Google documents), per hour and per
// project per hour (reset on the hour), concurrent requests, and server
// errors per project per hour (the 5xx answers the fake gave, injected
// ones included); any spent one answers 429 RESOURCE_EXHAUSTED with
// Google's messages, and returnPropertyQuota adds propertyQuota to the
// answer. Events recorded with CollectEvent show in realtime reports at
// once and in runReport after Options.ProcessingDelay, as GA4's
// processing lags. Tokens may be limited to OAuth scopes
// (Options.Scopes); a request a token's scopes do not cover answers 403
// with Google's ACCESS_TOKEN_SCOPE_INSUFFICIENT error. Errors use
// Google's {"error":{"code","message","status"}} shape. Failures can be
// injected per route, report requests can be held to observe concurrency,
// and every request is logged. Time comes from Options.Now.
//
// One Server serves both APIs: Handler routes both, DataHandler and
// AdminHandler only their own, for tests that put them on separate hosts.
// The package does not import testing.
package fakeanalytics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultUser is the e-mail of the default Authenticate.
const DefaultUser = "analyst@example.com"

// quotaZone is where daily quotas reset: Google documents midnight
// Pacific time.
const quotaZone = "America/Los_Angeles"

// Route names one endpoint by method and path pattern.
type Route string

// The routes the fake serves.
const (
	RouteRunReport         Route = "POST /v1beta/properties/{id}:runReport"
	RouteBatchRunReports   Route = "POST /v1beta/properties/{id}:batchRunReports"
	RouteRunRealtimeReport Route = "POST /v1beta/properties/{id}:runRealtimeReport"
	RouteRunPivotReport    Route = "POST /v1beta/properties/{id}:runPivotReport"
	RouteBatchRunPivots    Route = "POST /v1beta/properties/{id}:batchRunPivotReports"
	RouteGetMetadata       Route = "GET /v1beta/properties/{id}/metadata"
	RouteAccountSummaries  Route = "GET /v1beta/accountSummaries"
	RouteListProperties    Route = "GET /v1beta/properties"
	RouteGetProperty       Route = "GET /v1beta/properties/{id}"
	RouteCreateProperty    Route = "POST /v1beta/properties"
	RouteUpdateProperty    Route = "PATCH /v1beta/properties/{id}"
	RouteDeleteProperty    Route = "DELETE /v1beta/properties/{id}"
	RouteListKeyEvents     Route = "GET /v1beta/properties/{id}/keyEvents"
	RouteCreateKeyEvent    Route = "POST /v1beta/properties/{id}/keyEvents"
	RouteGetKeyEvent       Route = "GET /v1beta/properties/{id}/keyEvents/{keyEventId}"
	RouteDeleteKeyEvent    Route = "DELETE /v1beta/properties/{id}/keyEvents/{keyEventId}"
	RouteListDataStreams   Route = "GET /v1beta/properties/{id}/dataStreams"
	RouteGetDataStream     Route = "GET /v1beta/properties/{id}/dataStreams/{dataStreamId}"
	RouteCreateDataStream  Route = "POST /v1beta/properties/{id}/dataStreams"
	RouteUpdateDataStream  Route = "PATCH /v1beta/properties/{id}/dataStreams/{dataStreamId}"
	RouteDeleteDataStream  Route = "DELETE /v1beta/properties/{id}/dataStreams/{dataStreamId}"
)

// Role is a GA4 access level; higher roles include lower ones.
type Role int

// Roles.
const (
	RoleNone Role = iota
	RoleViewer
	RoleEditor
	RoleAdministrator
)

// Category is a Data API quota category.
type Category string

// Quota categories.
const (
	Core     Category = "core"
	Realtime Category = "realtime"
)

// Limits are a property's quota limits in one category.
type Limits struct {
	TokensPerDay, TokensPerHour, TokensPerProjectPerHour int64
	ConcurrentRequests                                   int64
	ServerErrorsPerProjectPerHour                        int64
	PotentiallyThresholdedRequestsPerHour                int64
}

// DefaultLimits returns a standard property's limits in category c: core
// as Google documents, realtime as the product spec states.
func DefaultLimits(c Category) Limits {
	if c == Realtime {
		return Limits{TokensPerDay: 75000, TokensPerHour: 15000, TokensPerProjectPerHour: 5250,
			ConcurrentRequests: 10, ServerErrorsPerProjectPerHour: 10, PotentiallyThresholdedRequestsPerHour: 120}
	}
	return Limits{TokensPerDay: 200000, TokensPerHour: 40000, TokensPerProjectPerHour: 14000,
		ConcurrentRequests: 10, ServerErrorsPerProjectPerHour: 10, PotentiallyThresholdedRequestsPerHour: 120}
}

// Options configures a Server.
type Options struct {
	// Authenticate resolves a bearer token to the user's e-mail. Nil means
	// any non-empty token is DefaultUser.
	Authenticate func(token string) (email string, ok bool)
	// Now is the fake's clock. Nil means time.Now.
	Now func() time.Time
	// ProcessingDelay is how long an event recorded with CollectEvent
	// takes to reach runReport; runRealtimeReport shows it at once. GA4's
	// processed data lags 24–48 hours. Zero makes collected events
	// reportable at once.
	ProcessingDelay time.Duration
	// Scopes returns the OAuth scopes granted to a token. Nil means every
	// token has every scope.
	Scopes func(token string) []string
}

// OAuth scopes the fake checks (Options.Scopes).
const (
	ScopeReadonly = "https://www.googleapis.com/auth/analytics.readonly"
	ScopeEdit     = "https://www.googleapis.com/auth/analytics.edit"
	ScopeFull     = "https://www.googleapis.com/auth/analytics"
)

// Account is an Analytics account.
type Account struct {
	// ID is numeric ("123"); AddAccount fills it when empty.
	ID          string
	DisplayName string
}

// Property is a GA4 property.
type Property struct {
	// ID is numeric ("456"); AddProperty fills it when empty.
	ID string
	// Account is the parent account's numeric id.
	Account          string
	DisplayName      string
	TimeZone         string // default America/Los_Angeles
	CurrencyCode     string // default USD
	IndustryCategory string
	PropertyType     string // default PROPERTY_TYPE_ORDINARY
	ServiceLevel     string // default GOOGLE_ANALYTICS_STANDARD
	CreateTime       time.Time
	UpdateTime       time.Time
	// DeleteTime is when the property was moved to the trash (zero:
	// not trashed); ExpireTime when the trash will delete it for good.
	DeleteTime, ExpireTime time.Time
}

// trashRetention is how long a trashed property stays restorable
// (Google: 35 days).
const trashRetention = 35 * 24 * time.Hour

// KeyEvent is a property's key event.
type KeyEvent struct {
	ID             string
	EventName      string
	CountingMethod string
	CreateTime     time.Time
	Custom         bool
	Deletable      bool
}

// DataStream is a property's data stream.
type DataStream struct {
	ID string
	// Type is WEB_DATA_STREAM (default), ANDROID_APP_DATA_STREAM or
	// IOS_APP_DATA_STREAM.
	Type          string
	DisplayName   string
	MeasurementID string // web streams: G-…; filled when empty
	DefaultURI    string
	PackageName   string
	BundleID      string
	CreateTime    time.Time
	UpdateTime    time.Time
}

// Fact is one row of a property's event table: the metrics of one event
// on one day for one country and page.
type Fact struct {
	// Date is YYYY-MM-DD in the property's time zone.
	Date                         string
	Country, PagePath, EventName string
	// SessionSource is the source of the session the event belongs to
	// (google, (direct), ...); empty reads as "(not set)".
	SessionSource                                      string
	ActiveUsers, Sessions, EventCount, ScreenPageViews int64
}

// RealtimeFact is one row of a property's realtime table.
type RealtimeFact struct {
	// MinutesAgo is 0..59.
	MinutesAgo                               int
	Country, EventName                       string
	ActiveUsers, EventCount, ScreenPageViews int64
}

// Failure is an injected failure.
type Failure struct {
	// Code is the HTTP status (default 503).
	Code int
	// Status is Google's canonical status (default from Code).
	Status string
	// Message defaults to a Google-like one.
	Message string
}

// Request is one request the fake received.
type Request struct {
	// Route is the endpoint that matched ("" for an unknown path).
	Route Route
	// Method and Path are the request's method and URL path.
	Method, Path string
	Query        url.Values
	Header       http.Header
	Body         []byte
	// Time is the fake clock's time on arrival.
	Time time.Time
}

// Usage is what a property has consumed in one category in the current
// windows.
type Usage struct {
	TokensToday, TokensThisHour int64
	// ServerErrorsThisHour counts the 5xx answers given this hour.
	ServerErrorsThisHour int64
}

type quotaState struct {
	limits   Limits
	day      string
	dayUsed  int64
	hour     time.Time
	hourUsed int64
	// serverErrors counts the 5xx answers given this hour.
	serverErrors int64
}

type propState struct {
	p         Property
	facts     []Fact
	realtime  []RealtimeFact
	collected []collected
	keyEvents []*KeyEvent
	streams   []*DataStream
	quota     map[Category]*quotaState
	inFlight  int
	maxFlight int
}

// collected is an event recorded by CollectEvent: f reaches runReport
// once the processing delay after at has passed.
type collected struct {
	at time.Time
	f  Fact
}

// Server is a fake GA4 Data and Admin API. It is safe for concurrent use.
type Server struct {
	auth   func(string) (string, bool)
	scopes func(string) []string
	delay  time.Duration
	now    func() time.Time
	zone   *time.Location
	data   http.Handler
	admin  http.Handler
	all    http.Handler

	mu        sync.Mutex
	seq       int
	accounts  map[string]*Account
	props     map[string]*propState
	grants    map[string]map[string]Role // email → resource → role
	tokenCost int64
	hold      chan struct{}
	changed   chan struct{}
	failures  map[Route][]Failure
	log       []Request
	srv       *httptest.Server
}

// New returns a Server with no accounts or properties.
func New(o Options) *Server {
	s := &Server{
		auth:     o.Authenticate,
		scopes:   o.Scopes,
		delay:    o.ProcessingDelay,
		now:      o.Now,
		accounts: map[string]*Account{},
		props:    map[string]*propState{},
		grants:   map[string]map[string]Role{},
		changed:  make(chan struct{}),
		failures: map[Route][]Failure{},
		seq:      1000,
	}
	if s.auth == nil {
		s.auth = func(token string) (string, bool) { return DefaultUser, token != "" }
	}
	if s.now == nil {
		s.now = time.Now
	}
	zone, err := time.LoadLocation(quotaZone)
	if err != nil {
		zone = time.FixedZone("PST", -8*3600)
	}
	s.zone = zone
	s.data = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, true, false) })
	s.admin = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false, true) })
	s.all = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, true, true) })
	return s
}

// Handler serves both the Data and the Admin API.
func (s *Server) Handler() http.Handler { return s.all }

// DataHandler serves only the Data API (analyticsdata.googleapis.com).
func (s *Server) DataHandler() http.Handler { return s.data }

// AdminHandler serves only the Admin API (analyticsadmin.googleapis.com).
func (s *Server) AdminHandler() http.Handler { return s.admin }

// Start serves Handler on a local port and returns its base URL, to be
// used as both the Data and the Admin base URL. Calling it again returns
// the same URL.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		s.srv = httptest.NewServer(s.all)
	}
	return s.srv.URL
}

// Close stops the server started by Start, if any, and releases held
// reports.
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// nextID returns a fresh numeric id. Callers hold mu.
func (s *Server) nextID() string {
	s.seq++
	return strconv.Itoa(s.seq)
}

// AddAccount stores an Analytics account and returns it.
func (s *Server) AddAccount(a Account) Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.ID == "" {
		a.ID = s.nextID()
	}
	stored := a
	s.accounts[a.ID] = &stored
	return a
}

// AddProperty stores a property, filling its id and defaults, and returns
// it. Its account is created when unknown.
func (s *Server) AddProperty(p Property) Property {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addProperty(p)
}

func (s *Server) addProperty(p Property) Property {
	if p.ID == "" {
		p.ID = s.nextID()
	}
	if p.Account == "" {
		p.Account = s.nextID()
	}
	if _, ok := s.accounts[p.Account]; !ok {
		s.accounts[p.Account] = &Account{ID: p.Account, DisplayName: "Account " + p.Account}
	}
	if p.TimeZone == "" {
		p.TimeZone = quotaZone
	}
	if p.CurrencyCode == "" {
		p.CurrencyCode = "USD"
	}
	if p.PropertyType == "" {
		p.PropertyType = "PROPERTY_TYPE_ORDINARY"
	}
	if p.ServiceLevel == "" {
		p.ServiceLevel = "GOOGLE_ANALYTICS_STANDARD"
	}
	if p.CreateTime.IsZero() {
		p.CreateTime = s.now().UTC()
	}
	if p.UpdateTime.IsZero() {
		p.UpdateTime = p.CreateTime
	}
	s.props[p.ID] = &propState{p: p, quota: map[Category]*quotaState{
		Core:     {limits: DefaultLimits(Core)},
		Realtime: {limits: DefaultLimits(Realtime)},
	}}
	return p
}

// Property returns the property with this numeric id.
func (s *Server) Property(id string) (Property, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[id]
	if !ok {
		return Property{}, false
	}
	return st.p, true
}

// Properties returns every property, by id.
func (s *Server) Properties() []Property {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Property
	for _, id := range s.propertyIDs() {
		out = append(out, s.props[id].p)
	}
	return out
}

// propertyIDs lists property ids in numeric order. Callers hold mu.
func (s *Server) propertyIDs() []string {
	ids := slices.Collect(maps.Keys(s.props))
	slices.SortFunc(ids, compareNumeric)
	return ids
}

func compareNumeric(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// Grant gives email role on resource ("accounts/123" or
// "properties/456"); RoleNone removes it.
func (s *Server) Grant(email, resource string, role Role) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.grants[email]
	if m == nil {
		m = map[string]Role{}
		s.grants[email] = m
	}
	if role == RoleNone {
		delete(m, resource)
		return
	}
	m[resource] = role
}

// propertyRole is email's effective role on property id. Callers hold mu.
func (s *Server) propertyRole(email, id string) Role {
	st, ok := s.props[id]
	if !ok {
		return RoleNone
	}
	g := s.grants[email]
	return max(g["properties/"+id], g["accounts/"+st.p.Account])
}

// AddFacts appends rows to property's event table.
func (s *Server) AddFacts(property string, facts ...Fact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[property]; ok {
		st.facts = append(st.facts, facts...)
	}
}

// CollectEvent records count occurrences of eventName now (dated today
// in the property's time zone), from the United States on page "/".
// runRealtimeReport shows them for the hour after; runReport counts them
// once Options.ProcessingDelay has passed on the fake's clock.
func (s *Server) CollectEvent(property, eventName string, count int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return
	}
	now := s.now()
	today := now.In(s.loc(st.p.TimeZone)).Format(time.DateOnly)
	f := Fact{Date: today, Country: "United States", PagePath: "/", EventName: eventName, EventCount: count, SessionSource: "(direct)"}
	if eventName == "page_view" {
		f.ScreenPageViews = count
	}
	st.collected = append(st.collected, collected{at: now, f: f})
}

// tables returns property st's facts and realtime rows as of now: the
// seeded ones plus the collected events runReport has processed and those
// recent enough for realtime. Callers hold mu.
func (s *Server) tables(st *propState, now time.Time) ([]Fact, []RealtimeFact) {
	facts := slices.Clone(st.facts)
	realtime := slices.Clone(st.realtime)
	for _, c := range st.collected {
		if !now.Before(c.at.Add(s.delay)) {
			facts = append(facts, c.f)
		}
		if ago := now.Sub(c.at); ago >= 0 && ago < time.Hour {
			realtime = append(realtime, RealtimeFact{MinutesAgo: int(ago / time.Minute), Country: c.f.Country,
				EventName: c.f.EventName, EventCount: c.f.EventCount, ScreenPageViews: c.f.ScreenPageViews})
		}
	}
	return facts, realtime
}

// Demo tables of SeedReportData.
var (
	demoCountries = []string{"United States", "Germany", "India", "Brazil"}
	demoPages     = []string{"/", "/pricing", "/docs", "/blog"}
	demoEvents    = []string{"page_view", "session_start", "first_visit", "scroll"}
	demoSources   = []string{"google", "(direct)", "newsletter", "bing"}
)

// SeedReportData fills property's event table with deterministic data for
// the last days days (today included): every combination of four
// countries, four pages and the events page_view, session_start,
// first_visit and scroll.
func (s *Server) SeedReportData(property string, days int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return
	}
	today := s.now().In(s.loc(st.p.TimeZone))
	for d := range days {
		date := today.AddDate(0, 0, -d).Format(time.DateOnly)
		for ci, c := range demoCountries {
			for pi, p := range demoPages {
				for ei, e := range demoEvents {
					h := int64((d*31+ci*17+pi*7+ei*3)%47 + 1)
					f := Fact{Date: date, Country: c, PagePath: p, EventName: e, EventCount: h,
						SessionSource: demoSources[(d+ci+pi)%len(demoSources)]}
					switch e {
					case "page_view":
						f.ScreenPageViews = h
					case "session_start":
						f.Sessions = h
						f.ActiveUsers = h/2 + 1
					case "first_visit":
						f.ActiveUsers = h/3 + 1
					}
					st.facts = append(st.facts, f)
				}
			}
		}
	}
}

// AddRealtime appends rows to property's realtime table.
func (s *Server) AddRealtime(property string, facts ...RealtimeFact) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[property]; ok {
		st.realtime = append(st.realtime, facts...)
	}
}

// AddKeyEvent stores a key event on property (as if created) and returns
// it.
func (s *Server) AddKeyEvent(property string, k KeyEvent) KeyEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return KeyEvent{}
	}
	if k.ID == "" {
		k.ID = s.nextID()
	}
	if k.CountingMethod == "" {
		k.CountingMethod = "ONCE_PER_EVENT"
	}
	if k.CreateTime.IsZero() {
		k.CreateTime = s.now().UTC()
	}
	stored := k
	st.keyEvents = append(st.keyEvents, &stored)
	return k
}

// KeyEvents returns property's key events in creation order.
func (s *Server) KeyEvents(property string) []KeyEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return nil
	}
	var out []KeyEvent
	for _, k := range st.keyEvents {
		out = append(out, *k)
	}
	return out
}

// AddDataStream stores a data stream on property and returns it.
func (s *Server) AddDataStream(property string, d DataStream) DataStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return DataStream{}
	}
	return s.addDataStream(st, d)
}

// addDataStream fills d's id and defaults and stores it on st. Callers
// hold mu.
func (s *Server) addDataStream(st *propState, d DataStream) DataStream {
	if d.ID == "" {
		d.ID = s.nextID()
	}
	if d.Type == "" {
		d.Type = "WEB_DATA_STREAM"
	}
	if d.Type == "WEB_DATA_STREAM" && d.MeasurementID == "" {
		d.MeasurementID = fmt.Sprintf("G-FAKE%06s", d.ID)
	}
	if d.CreateTime.IsZero() {
		d.CreateTime = s.now().UTC()
	}
	if d.UpdateTime.IsZero() {
		d.UpdateTime = d.CreateTime
	}
	stored := d
	st.streams = append(st.streams, &stored)
	return d
}

// DataStreams returns property's data streams in creation order.
func (s *Server) DataStreams(property string) []DataStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return nil
	}
	var out []DataStream
	for _, d := range st.streams {
		out = append(out, *d)
	}
	return out
}

// SetLimits sets property's quota limits in category c; consumption so
// far is kept.
func (s *Server) SetLimits(property string, c Category, l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[property]; ok {
		st.quota[c].limits = l
	}
}

// SetTokenCost makes every report cost n tokens; n ≤ 0 restores the
// default of one token plus one per dimension.
func (s *Server) SetTokenCost(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenCost = n
}

// Usage returns the tokens property has consumed in category c in the
// current day and hour.
func (s *Server) Usage(property string, c Category) Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[property]
	if !ok {
		return Usage{}
	}
	q := st.quota[c]
	s.roll(q)
	return Usage{TokensToday: q.dayUsed, TokensThisHour: q.hourUsed, ServerErrorsThisHour: q.serverErrors}
}

// InFlight returns how many Data API requests for property are being
// served right now.
func (s *Server) InFlight(property string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[property]; ok {
		return st.inFlight
	}
	return 0
}

// MaxInFlight returns the most Data API requests for property ever served
// at once.
func (s *Server) MaxInFlight(property string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[property]; ok {
		return st.maxFlight
	}
	return 0
}

// WaitInFlight blocks until at least n Data API requests for property are
// in flight, or ctx ends.
func (s *Server) WaitInFlight(ctx context.Context, property string, n int) error {
	for {
		s.mu.Lock()
		st, ok := s.props[property]
		if ok && st.inFlight >= n {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HoldReports makes report and metadata requests wait, once counted as in
// flight, until the returned release is called (or the server closes).
func (s *Server) HoldReports() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.hold = ch
	return sync.OnceFunc(func() {
		s.mu.Lock()
		if s.hold == ch {
			s.hold = nil
			close(ch)
		}
		s.mu.Unlock()
	})
}

// FailNext makes the next n requests to route (any route when "") fail
// with f, before authentication.
func (s *Server) FailNext(route Route, n int, f Failure) {
	if f.Code == 0 {
		f.Code = http.StatusServiceUnavailable
	}
	if f.Status == "" {
		f.Status = canonical(f.Code)
	}
	if f.Message == "" {
		f.Message = "The service is currently unavailable."
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures[route] = append(s.failures[route], f)
	}
}

// Requests returns every request received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// RequestsTo returns the requests that matched route.
func (s *Server) RequestsTo(route Route) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.log {
		if r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// ClearRequests empties the request log.
func (s *Server) ClearRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// loc loads a time zone, falling back to UTC.
func (s *Server) loc(name string) *time.Location {
	if l, err := time.LoadLocation(name); err == nil && name != "" {
		return l
	}
	return time.UTC
}

// match finds the route of a request path below /v1beta/.
func match(method, path string, data, admin bool) (Route, map[string]string) {
	rest, ok := strings.CutPrefix(path, "/v1beta/")
	if !ok {
		return "", nil
	}
	segs := strings.Split(rest, "/")
	vars := map[string]string{}
	if data && len(segs) == 2 && method == http.MethodPost {
		if id, m, ok := strings.Cut(segs[1], ":"); ok && segs[0] == "properties" {
			vars["id"] = id
			switch m {
			case "runReport":
				return RouteRunReport, vars
			case "batchRunReports":
				return RouteBatchRunReports, vars
			case "runRealtimeReport":
				return RouteRunRealtimeReport, vars
			case "runPivotReport":
				return RouteRunPivotReport, vars
			case "batchRunPivotReports":
				return RouteBatchRunPivots, vars
			}
			return "", nil
		}
	}
	if data && len(segs) == 3 && segs[0] == "properties" && segs[2] == "metadata" && method == http.MethodGet {
		vars["id"] = segs[1]
		return RouteGetMetadata, vars
	}
	if !admin {
		return "", nil
	}
	if len(segs) >= 2 && segs[0] == "properties" {
		vars["id"] = segs[1]
		if strings.Contains(segs[1], ":") {
			return "", nil
		}
	}
	switch {
	case len(segs) == 1 && segs[0] == "accountSummaries" && method == http.MethodGet:
		return RouteAccountSummaries, vars
	case len(segs) == 1 && segs[0] == "properties" && method == http.MethodGet:
		return RouteListProperties, vars
	case len(segs) == 1 && segs[0] == "properties" && method == http.MethodPost:
		return RouteCreateProperty, vars
	case len(segs) == 2 && segs[0] == "properties":
		switch method {
		case http.MethodGet:
			return RouteGetProperty, vars
		case http.MethodPatch:
			return RouteUpdateProperty, vars
		case http.MethodDelete:
			return RouteDeleteProperty, vars
		}
	case len(segs) == 3 && segs[0] == "properties" && segs[2] == "keyEvents":
		switch method {
		case http.MethodGet:
			return RouteListKeyEvents, vars
		case http.MethodPost:
			return RouteCreateKeyEvent, vars
		}
	case len(segs) == 4 && segs[0] == "properties" && segs[2] == "keyEvents":
		vars["keyEventId"] = segs[3]
		switch method {
		case http.MethodGet:
			return RouteGetKeyEvent, vars
		case http.MethodDelete:
			return RouteDeleteKeyEvent, vars
		}
	case len(segs) == 3 && segs[0] == "properties" && segs[2] == "dataStreams":
		switch method {
		case http.MethodGet:
			return RouteListDataStreams, vars
		case http.MethodPost:
			return RouteCreateDataStream, vars
		}
	case len(segs) == 4 && segs[0] == "properties" && segs[2] == "dataStreams":
		vars["dataStreamId"] = segs[3]
		switch method {
		case http.MethodGet:
			return RouteGetDataStream, vars
		case http.MethodPatch:
			return RouteUpdateDataStream, vars
		case http.MethodDelete:
			return RouteDeleteDataStream, vars
		}
	}
	return "", nil
}

// serve is the common prelude: log, route, the server-error quota,
// injected failure, authentication, scopes.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, data, admin bool) {
	route, vars := match(r.Method, r.URL.Path, data, admin)
	body := s.record(r, route)
	if route == "" {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found.")
		return
	}
	cat, isData := dataCategory(route)
	if isData {
		if msg := s.serverErrorsSpent(vars["id"], cat); msg != "" {
			writeError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", msg)
			return
		}
	}
	if f, ok := s.takeFailure(route); ok {
		if isData && f.Code >= 500 {
			s.countServerError(vars["id"], cat)
		}
		writeError(w, f.Code, f.Status, f.Message)
		return
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	email, ok := s.auth(token)
	if !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
		return
	}
	if !s.scoped(token, route) {
		writeScopeError(w, route)
		return
	}
	c := &call{s: s, w: w, r: r, email: email, vars: vars, body: body}
	switch route {
	case RouteRunReport:
		s.report(c, Core)
	case RouteBatchRunReports:
		s.batchReport(c)
	case RouteRunRealtimeReport:
		s.report(c, Realtime)
	case RouteRunPivotReport:
		s.pivotReport(c)
	case RouteBatchRunPivots:
		s.batchPivotReport(c)
	case RouteGetMetadata:
		s.metadata(c)
	case RouteAccountSummaries:
		s.accountSummaries(c)
	case RouteListProperties:
		s.listProperties(c)
	case RouteGetProperty:
		s.getProperty(c)
	case RouteCreateProperty:
		s.createProperty(c)
	case RouteUpdateProperty:
		s.updateProperty(c)
	case RouteDeleteProperty:
		s.deleteProperty(c)
	case RouteListKeyEvents:
		s.listKeyEvents(c)
	case RouteCreateKeyEvent:
		s.createKeyEvent(c)
	case RouteGetKeyEvent, RouteDeleteKeyEvent:
		s.keyEvent(c, route == RouteDeleteKeyEvent)
	case RouteListDataStreams:
		s.listDataStreams(c)
	case RouteGetDataStream:
		s.getDataStream(c)
	case RouteCreateDataStream:
		s.createDataStream(c)
	case RouteUpdateDataStream:
		s.updateDataStream(c)
	case RouteDeleteDataStream:
		s.deleteDataStream(c)
	}
}

// dataCategory is the quota category of a Data API route on a property
// (ok false for an Admin API route).
func dataCategory(route Route) (Category, bool) {
	switch route {
	case RouteRunReport, RouteBatchRunReports, RouteRunPivotReport, RouteBatchRunPivots, RouteGetMetadata:
		return Core, true
	case RouteRunRealtimeReport:
		return Realtime, true
	}
	return "", false
}

// serverErrorsPerHourSpent is the fake's message for a spent
// serverErrorsPerProjectPerHour quota, worded like Google's messages for
// the token quotas (Google's own wording for this one is not documented).
const serverErrorsPerHourSpent = "Exhausted server errors per project per hour. These quota tokens will return in under an hour."

// serverErrorsSpent returns the message for property id's spent server
// error quota in category c, or "".
func (s *Server) serverErrorsSpent(id string, c Category) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.props[id]
	if !ok {
		return ""
	}
	q := st.quota[c]
	s.roll(q)
	if q.serverErrors >= q.limits.ServerErrorsPerProjectPerHour {
		return serverErrorsPerHourSpent
	}
	return ""
}

// countServerError charges one 5xx answer to property id's server error
// quota in category c.
func (s *Server) countServerError(id string, c Category) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.props[id]; ok {
		q := st.quota[c]
		s.roll(q)
		q.serverErrors++
	}
}

// scoped reports whether token's scopes cover route: the Data API takes
// analytics.readonly or analytics, Admin API reads analytics.readonly or
// analytics.edit, and its writes analytics.edit.
func (s *Server) scoped(token string, route Route) bool {
	if s.scopes == nil {
		return true
	}
	want := []string{ScopeEdit}
	switch {
	case isDataRoute(route):
		want = []string{ScopeReadonly, ScopeFull}
	case strings.HasPrefix(string(route), "GET "):
		want = []string{ScopeReadonly, ScopeEdit}
	}
	return slices.ContainsFunc(s.scopes(token), func(sc string) bool { return slices.Contains(want, sc) })
}

func isDataRoute(route Route) bool {
	_, ok := dataCategory(route)
	return ok
}

// writeScopeError answers as Google does when a token lacks the scope a
// method needs: 403 PERMISSION_DENIED with an ErrorInfo whose reason is
// ACCESS_TOKEN_SCOPE_INSUFFICIENT.
func writeScopeError(w http.ResponseWriter, route Route) {
	service := "analyticsadmin.googleapis.com"
	if isDataRoute(route) {
		service = "analyticsdata.googleapis.com"
	}
	writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{
		"code":    http.StatusForbidden,
		"message": "Request had insufficient authentication scopes.",
		"status":  "PERMISSION_DENIED",
		"details": []any{map[string]any{
			"@type":    "type.googleapis.com/google.rpc.ErrorInfo",
			"reason":   "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
			"domain":   "googleapis.com",
			"metadata": map[string]string{"service": service},
		}},
	}})
}

// call is one authenticated request.
type call struct {
	s     *Server
	w     http.ResponseWriter
	r     *http.Request
	email string
	vars  map[string]string
	body  []byte
}

func (s *Server) record(r *http.Request, route Route) []byte {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, 8<<20))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, Request{
		Route:  route,
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Header: r.Header.Clone(),
		Body:   body,
		Time:   s.now(),
	})
	return body
}

func (s *Server) takeFailure(route Route) (Failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []Route{route, ""} {
		if q := s.failures[k]; len(q) > 0 {
			f := q[0]
			s.failures[k] = q[1:]
			return f, true
		}
	}
	return Failure{}, false
}

// canonical maps an HTTP status onto Google's canonical status.
func canonical(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ALREADY_EXISTS"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	default:
		return "INTERNAL"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":500,"message":"encode failed","status":"INTERNAL"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

func writeError(w http.ResponseWriter, code int, status, message string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
}

func (c *call) fail(code int, message string) {
	writeError(c.w, code, canonical(code), message)
}
