package fakeanalytics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// field describes a dimension or metric the fake knows.
type field struct {
	apiName, uiName, description, category string
}

// Field tables (read-only).
var (
	coreDimensions = []field{
		{"date", "Date", "The date of the event, formatted as YYYYMMDD.", "Time"},
		{"country", "Country", "The country from which the user activity originated.", "Geography"},
		{"eventName", "Event name", "The name of the event.", "Event"},
		{"pagePath", "Page path", "The portion of the URL between the hostname and query string for web pages visited.", "Page / screen"},
		{"sessionSource", "Session source", "The source that initiated a session on your website or app.", "Traffic source"},
	}
	realtimeDimensions = []string{"country", "eventName", "minutesAgo"}
	metrics            = []field{
		{"activeUsers", "Active users", "The number of distinct users who visited your site or app.", "User"},
		{"sessions", "Sessions", "The number of sessions that began on your site or app.", "Session"},
		{"eventCount", "Event count", "The count of events.", "Event"},
		{"screenPageViews", "Views", "The number of app screens or web pages your users viewed.", "Page / screen"},
		{"keyEvents", "Key events", "The count of key events. Marking an event as a key event affects reports from time of creation.", "Event"},
	}

	// renamedMetrics are metrics GA4 renamed, by their old names: in
	// March 2024 conversions became key events. The old names' grace
	// period is over; the Data API refuses them.
	renamedMetrics = map[string]string{
		"conversions":           "keyEvents",
		"sessionConversionRate": "sessionKeyEventRate",
		"userConversionRate":    "userKeyEventRate",
	}
)

// unknownMetric is Google's message for a metric it does not know, with
// the new name when GA4 renamed it.
func unknownMetric(name string) string {
	msg := fmt.Sprintf("Field %s is not a valid metric. For a list of valid dimensions and metrics, see https://developers.google.com/analytics/devguides/reporting/data/v1/api-schema", name)
	base, event, perEvent := strings.Cut(name, ":")
	if to, ok := renamedMetrics[base]; ok {
		if perEvent {
			to += ":" + event
		}
		msg += fmt.Sprintf(". %s was renamed %s when GA4 renamed conversions to key events; use %s.", name, to, to)
	}
	return msg
}

func isCoreDimension(n string) bool {
	return slices.ContainsFunc(coreDimensions, func(f field) bool { return f.apiName == n })
}

func isMetric(n string) bool {
	return slices.ContainsFunc(metrics, func(f field) bool { return f.apiName == n })
}

// flexInt is an int64 that JSON may carry as a number or a string.
type flexInt struct {
	v   int64
	set bool
}

// UnmarshalJSON accepts 12 and "12".
func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("invalid int64 value %s", b)
	}
	f.v, f.set = v, true
	return nil
}

type nameJSON struct {
	Name string `json:"name"`
}

type reportRequest struct {
	Property   string     `json:"property"`
	Dimensions []nameJSON `json:"dimensions"`
	Metrics    []struct {
		Name       string `json:"name"`
		Expression string `json:"expression"`
		Invisible  bool   `json:"invisible"`
	} `json:"metrics"`
	DateRanges []struct {
		StartDate string `json:"startDate"`
		EndDate   string `json:"endDate"`
		Name      string `json:"name"`
	} `json:"dateRanges"`
	MinuteRanges []struct {
		StartMinutesAgo *int   `json:"startMinutesAgo"`
		EndMinutesAgo   *int   `json:"endMinutesAgo"`
		Name            string `json:"name"`
	} `json:"minuteRanges"`
	DimensionFilter     json.RawMessage `json:"dimensionFilter"`
	MetricFilter        json.RawMessage `json:"metricFilter"`
	OrderBys            []orderByJSON   `json:"orderBys"`
	Limit               flexInt         `json:"limit"`
	Offset              flexInt         `json:"offset"`
	KeepEmptyRows       bool            `json:"keepEmptyRows"`
	ReturnPropertyQuota bool            `json:"returnPropertyQuota"`
	MetricAggregations  []string        `json:"metricAggregations"`
	CurrencyCode        string          `json:"currencyCode"`
}

type orderByJSON struct {
	Metric *struct {
		MetricName string `json:"metricName"`
	} `json:"metric"`
	Dimension *struct {
		DimensionName string `json:"dimensionName"`
		OrderType     string `json:"orderType"`
	} `json:"dimension"`
	Desc bool `json:"desc"`
}

// row is one aggregated report row.
type row struct {
	dims []string
	m    [numMetrics]int64 // by metricIndex
}

// numMetrics is how many metrics the fake knows.
const numMetrics = 5

// metricIndex is a known metric's index in row.m (and metrics).
func metricIndex(name string) int {
	switch name {
	case "activeUsers":
		return 0
	case "sessions":
		return 1
	case "eventCount":
		return 2
	case "screenPageViews":
		return 3
	default: // keyEvents
		return 4
	}
}

// getter reads field values for filters.
type getter interface {
	get(name string) (string, bool)
}

// record views one fact as field values; it is reused across facts so
// filtering and grouping allocate only for new rows.
type record struct {
	core  *Fact
	rt    *RealtimeFact
	dates map[string]string // YYYY-MM-DD → YYYYMMDD
	// keyEvents are the property's key events: their events count in
	// the keyEvents metric.
	keyEvents map[string]bool
}

func (r *record) get(name string) (string, bool) {
	if f := r.core; f != nil {
		switch name {
		case "date":
			d, ok := r.dates[f.Date]
			if !ok {
				d = strings.ReplaceAll(f.Date, "-", "")
				r.dates[f.Date] = d
			}
			return d, true
		case "country":
			return f.Country, true
		case "eventName":
			return f.EventName, true
		case "pagePath":
			return f.PagePath, true
		case "sessionSource":
			if f.SessionSource == "" {
				return "(not set)", true
			}
			return f.SessionSource, true
		}
		return "", false
	}
	f := r.rt
	switch name {
	case "country":
		return f.Country, true
	case "eventName":
		return f.EventName, true
	case "minutesAgo":
		return minutesAgo(f.MinutesAgo), true
	}
	return "", false
}

func minutesAgo(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func (r *record) metric(i int) int64 {
	if f := r.core; f != nil {
		return [numMetrics]int64{f.ActiveUsers, f.Sessions, f.EventCount, f.ScreenPageViews, r.keyEventCount(f.EventName, f.EventCount)}[i]
	}
	f := r.rt
	return [numMetrics]int64{f.ActiveUsers, 0, f.EventCount, f.ScreenPageViews, r.keyEventCount(f.EventName, f.EventCount)}[i]
}

// keyEventCount is count when event is a key event, else 0.
func (r *record) keyEventCount(event string, count int64) int64 {
	if r.keyEvents[event] {
		return count
	}
	return 0
}

// rowView reads an aggregated row's metrics for metric filters.
type rowView struct{ r *row }

func (v rowView) get(name string) (string, bool) {
	if !isMetric(name) {
		return "", false
	}
	return strconv.FormatInt(v.r.m[metricIndex(name)], 10), true
}

type quotaStatusJSON struct {
	Consumed  int64 `json:"consumed"`
	Remaining int64 `json:"remaining"`
}

type propertyQuotaJSON struct {
	TokensPerDay                          quotaStatusJSON `json:"tokensPerDay"`
	TokensPerHour                         quotaStatusJSON `json:"tokensPerHour"`
	ConcurrentRequests                    quotaStatusJSON `json:"concurrentRequests"`
	ServerErrorsPerProjectPerHour         quotaStatusJSON `json:"serverErrorsPerProjectPerHour"`
	PotentiallyThresholdedRequestsPerHour quotaStatusJSON `json:"potentiallyThresholdedRequestsPerHour"`
	TokensPerProjectPerHour               quotaStatusJSON `json:"tokensPerProjectPerHour"`
}

type headerJSON struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

type valueJSON struct {
	Value string `json:"value"`
}

type rowJSON struct {
	DimensionValues []valueJSON `json:"dimensionValues,omitempty"`
	MetricValues    []valueJSON `json:"metricValues,omitempty"`
}

// reportResponse orders its fields as GA4 does; proto3 JSON leaves out
// empty rows and a zero rowCount.
type reportResponse struct {
	DimensionHeaders []headerJSON       `json:"dimensionHeaders"`
	MetricHeaders    []headerJSON       `json:"metricHeaders"`
	Rows             []rowJSON          `json:"rows,omitempty"`
	RowCount         int64              `json:"rowCount,omitempty"`
	Metadata         *metadataJSON      `json:"metadata,omitempty"`
	PropertyQuota    *propertyQuotaJSON `json:"propertyQuota,omitempty"`
	Kind             string             `json:"kind"`
}

type metadataJSON struct {
	CurrencyCode string `json:"currencyCode"`
	TimeZone     string `json:"timeZone"`
}

// enter counts a Data API request for property as in flight and waits
// while reports are held; it reports false (after answering 429) when the
// property's concurrency limit is exceeded. The caller calls the returned
// leave when done.
func (s *Server) enter(c *call, id string, cat Category) (leave func(), ok bool) {
	s.mu.Lock()
	st := s.props[id]
	st.inFlight++
	st.maxFlight = max(st.maxFlight, st.inFlight)
	over := int64(st.inFlight) > st.quota[cat].limits.ConcurrentRequests
	hold := s.hold
	s.notify()
	s.mu.Unlock()
	leave = func() {
		s.mu.Lock()
		st.inFlight--
		s.notify()
		s.mu.Unlock()
	}
	if over {
		leave()
		c.fail(http.StatusTooManyRequests, "Exhausted concurrent requests quota.")
		return nil, false
	}
	if hold != nil {
		select {
		case <-hold:
		case <-c.r.Context().Done():
		}
	}
	return leave, true
}

// notify wakes WaitInFlight. Callers hold mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// viewable checks that the property exists and the caller can read it,
// answering 403 as the Data API does (it does not reveal existence).
func (s *Server) viewable(c *call, id string) bool {
	s.mu.Lock()
	role := s.propertyRole(c.email, id)
	s.mu.Unlock()
	if role < RoleViewer {
		c.fail(http.StatusForbidden, "User does not have sufficient permissions for this property. To learn more about Property ID, see https://developers.google.com/analytics/devguides/reporting/data/v1/property-id.")
		return false
	}
	return true
}

// roll starts new quota windows when the day (Pacific) or hour changed.
// Callers hold mu.
func (s *Server) roll(q *quotaState) {
	now := s.now()
	if day := now.In(s.zone).Format(time.DateOnly); day != q.day {
		q.day, q.dayUsed = day, 0
	}
	if h := now.Truncate(time.Hour); !h.Equal(q.hour) {
		q.hour, q.hourUsed, q.serverErrors = h, 0, 0
	}
}

// spent returns Google's message for the first spent quota, or "".
func spent(q *quotaState) string {
	switch {
	case q.dayUsed >= q.limits.TokensPerDay:
		return "Exhausted property tokens per day. These quota tokens will return in under 24 hours."
	case q.hourUsed >= q.limits.TokensPerHour:
		return "Exhausted property tokens per hour. These quota tokens will return in under an hour."
	case q.hourUsed >= q.limits.TokensPerProjectPerHour:
		return "Exhausted property tokens for a project per hour. These quota tokens will return in under an hour."
	}
	return ""
}

func (s *Server) report(c *call, cat Category) {
	id := c.vars["id"]
	if !s.viewable(c, id) {
		return
	}
	leave, ok := s.enter(c, id, cat)
	if !ok {
		return
	}
	defer leave()
	if msg := s.spentMessage(id, cat); msg != "" {
		c.fail(http.StatusTooManyRequests, msg)
		return
	}

	var req reportRequest
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		c.fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	resp, code, errMsg := s.buildReport(id, cat, &req)
	if errMsg != "" {
		c.fail(code, errMsg)
		return
	}
	s.charge(id, cat, &req, resp)
	writeJSON(c.w, http.StatusOK, resp)
}

// maxBatchRequests is how many reports one batchRunReports may ask for.
const maxBatchRequests = 5

// batchReport answers batchRunReports: up to five runReport requests, all
// for the property of the URL (a request naming another is refused), run
// as one request in flight and charged as one report each. An empty batch
// is refused too.
func (s *Server) batchReport(c *call) {
	id := c.vars["id"]
	if !s.viewable(c, id) {
		return
	}
	leave, ok := s.enter(c, id, Core)
	if !ok {
		return
	}
	defer leave()
	if msg := s.spentMessage(id, Core); msg != "" {
		c.fail(http.StatusTooManyRequests, msg)
		return
	}

	var batch struct {
		Requests []reportRequest `json:"requests"`
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&batch); err != nil {
		c.fail(http.StatusBadRequest, "Invalid JSON payload received. "+err.Error())
		return
	}
	switch n := len(batch.Requests); {
	case n == 0:
		c.fail(http.StatusBadRequest, "At least one request is required.")
		return
	case n > maxBatchRequests:
		c.fail(http.StatusBadRequest, fmt.Sprintf("Batch requests are limited to %d requests; this batch has %d.", maxBatchRequests, n))
		return
	}
	reports := make([]*reportResponse, 0, len(batch.Requests))
	for i := range batch.Requests {
		req := &batch.Requests[i]
		if req.Property != "" && req.Property != "properties/"+id {
			c.fail(http.StatusBadRequest, fmt.Sprintf("Request %d is for %s; all requests of a batch must be for properties/%s.", i, req.Property, id))
			return
		}
		resp, code, errMsg := s.buildReport(id, Core, req)
		if errMsg != "" {
			c.fail(code, fmt.Sprintf("Request %d: %s", i, errMsg))
			return
		}
		reports = append(reports, resp)
	}
	for i, resp := range reports {
		s.charge(id, Core, &batch.Requests[i], resp)
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"reports": reports, "kind": "analyticsData#batchRunReports"})
}

// spentMessage returns Google's message for property id's first spent
// token quota in category c, or "".
func (s *Server) spentMessage(id string, c Category) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.props[id].quota[c]
	s.roll(q)
	return spent(q)
}

// charge takes one report's tokens from property id's quota in category
// c and, when req asked for it, adds the quota left to resp.
func (s *Server) charge(id string, c Category, req *reportRequest, resp *reportResponse) {
	resp.PropertyQuota = s.chargeTokens(id, c, len(req.Dimensions), req.ReturnPropertyQuota)
}

// chargeTokens takes the tokens of one report with dims dimensions from
// property id's quota in category c and returns the quota left when
// wantQuota (else nil).
func (s *Server) chargeTokens(id string, c Category, dims int, wantQuota bool) *propertyQuotaJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.props[id].quota[c]
	cost := s.tokenCost
	if cost <= 0 {
		cost = 1 + int64(dims)
	}
	s.roll(q)
	q.dayUsed += cost
	q.hourUsed += cost
	if !wantQuota {
		return nil
	}
	l := q.limits
	return &propertyQuotaJSON{
		TokensPerDay:                          quotaStatusJSON{cost, max(l.TokensPerDay-q.dayUsed, 0)},
		TokensPerHour:                         quotaStatusJSON{cost, max(l.TokensPerHour-q.hourUsed, 0)},
		ConcurrentRequests:                    quotaStatusJSON{0, l.ConcurrentRequests},
		ServerErrorsPerProjectPerHour:         quotaStatusJSON{0, max(l.ServerErrorsPerProjectPerHour-q.serverErrors, 0)},
		PotentiallyThresholdedRequestsPerHour: quotaStatusJSON{0, l.PotentiallyThresholdedRequestsPerHour},
		TokensPerProjectPerHour:               quotaStatusJSON{cost, max(l.TokensPerProjectPerHour-q.hourUsed, 0)},
	}
}

// buildReport validates req and computes the report, or returns a status
// and message.
func (s *Server) buildReport(id string, cat Category, req *reportRequest) (*reportResponse, int, string) {
	t, code, msg := s.tabulate(id, cat, req)
	if msg != "" {
		return nil, code, msg
	}
	rows := t.rows
	if msg := sortRows(rows, req.OrderBys, t.dims, t.mets); msg != "" {
		return nil, http.StatusBadRequest, msg
	}
	resp := &reportResponse{DimensionHeaders: t.dimensionHeaders(), MetricHeaders: t.metricHeaders(), Kind: "analyticsData#runReport"}
	if cat == Realtime {
		resp.Kind = "analyticsData#runRealtimeReport"
	} else {
		resp.Metadata = &metadataJSON{CurrencyCode: t.p.CurrencyCode, TimeZone: t.p.TimeZone}
	}
	resp.RowCount = int64(len(rows))
	off := min(req.Offset.v, int64(len(rows)))
	end := min(off+t.limit, int64(len(rows)))
	for _, r := range rows[off:end] {
		resp.Rows = append(resp.Rows, t.rowJSON(r))
	}
	return resp, 0, ""
}

// table is a report's rows, filtered and aggregated, before ordering and
// paging.
type table struct {
	p Property
	// dims are the rows' dimensions (with dateRange for several date
	// ranges), mets their metrics.
	dims, mets []string
	rows       []*row
	// limit is the request's limit (default 10,000).
	limit int64
}

func (t *table) dimensionHeaders() []headerJSON {
	out := []headerJSON{}
	for _, d := range t.dims {
		out = append(out, headerJSON{Name: d})
	}
	return out
}

func (t *table) metricHeaders() []headerJSON {
	out := []headerJSON{}
	for _, m := range t.mets {
		out = append(out, headerJSON{Name: m, Type: "TYPE_INTEGER"})
	}
	return out
}

func (t *table) rowJSON(r *row) rowJSON {
	var rj rowJSON
	for _, d := range r.dims {
		rj.DimensionValues = append(rj.DimensionValues, valueJSON{d})
	}
	for _, m := range t.mets {
		rj.MetricValues = append(rj.MetricValues, valueJSON{strconv.FormatInt(r.m[metricIndex(m)], 10)})
	}
	return rj
}

// tabulate validates req and computes its rows, or returns a status and
// message.
func (s *Server) tabulate(id string, cat Category, req *reportRequest) (*table, int, string) {
	s.mu.Lock()
	st := s.props[id]
	p := st.p
	now := s.now()
	facts, realtime := s.tables(st, now)
	keyEvents := map[string]bool{}
	for _, k := range st.keyEvents {
		keyEvents[k.EventName] = true
	}
	s.mu.Unlock()
	loc := s.loc(p.TimeZone)

	if len(req.Dimensions) > 9 {
		return nil, http.StatusBadRequest, "Requests are limited to 9 dimensions."
	}
	if len(req.Metrics) > 10 {
		return nil, http.StatusBadRequest, "Requests are limited to 10 metrics."
	}
	if len(req.Dimensions) == 0 && len(req.Metrics) == 0 {
		return nil, http.StatusBadRequest, "At least one dimension or metric is required."
	}
	var dims, mets []string
	for _, d := range req.Dimensions {
		ok := isCoreDimension(d.Name)
		if cat == Realtime {
			ok = slices.Contains(realtimeDimensions, d.Name)
		}
		if !ok {
			return nil, http.StatusBadRequest, fmt.Sprintf("Field %s is not a valid dimension. For a list of valid dimensions and metrics, see https://developers.google.com/analytics/devguides/reporting/data/v1/api-schema", d.Name)
		}
		if slices.Contains(dims, d.Name) {
			return nil, http.StatusBadRequest, fmt.Sprintf("Duplicate dimension %s.", d.Name)
		}
		dims = append(dims, d.Name)
	}
	for _, m := range req.Metrics {
		if !isMetric(m.Name) || (cat == Realtime && m.Name == "sessions") {
			return nil, http.StatusBadRequest, unknownMetric(m.Name)
		}
		mets = append(mets, m.Name)
	}
	limit := int64(10000)
	if req.Limit.set {
		if req.Limit.v <= 0 {
			return nil, http.StatusBadRequest, "limit must be positive."
		}
		limit = min(req.Limit.v, 250000)
	}
	if req.Offset.set && req.Offset.v < 0 {
		return nil, http.StatusBadRequest, "offset must be non-negative."
	}
	dimFilter, err := parseFilter(req.DimensionFilter)
	if err != nil {
		return nil, http.StatusBadRequest, "Invalid dimensionFilter: " + err.Error() + "."
	}
	metFilter, err := parseFilter(req.MetricFilter)
	if err != nil {
		return nil, http.StatusBadRequest, "Invalid metricFilter: " + err.Error() + "."
	}
	if msg := checkFilterFields(dimFilter, func(n string) bool {
		if cat == Realtime {
			return slices.Contains(realtimeDimensions, n)
		}
		return isCoreDimension(n)
	}, "dimension"); msg != "" {
		return nil, http.StatusBadRequest, msg
	}
	if msg := checkFilterFields(metFilter, isMetric, "metric"); msg != "" {
		return nil, http.StatusBadRequest, msg
	}

	// Each range selects facts; several ranges add the dateRange dimension.
	type span struct {
		name             string
		fromDate, toDate string // YYYY-MM-DD (core)
		from, to         int64  // minutes ago (realtime)
	}
	var spans []span
	if cat == Core {
		if len(req.DateRanges) == 0 {
			return nil, http.StatusBadRequest, "dateRanges must be specified."
		}
		if len(req.DateRanges) > 4 {
			return nil, http.StatusBadRequest, "Requests are limited to 4 dateRanges."
		}
		for i, dr := range req.DateRanges {
			from, err1 := resolveDate(dr.StartDate, now, loc)
			to, err2 := resolveDate(dr.EndDate, now, loc)
			if err := firstErr(err1, err2); err != nil {
				return nil, http.StatusBadRequest, sentence(err.Error())
			}
			if from.After(to) {
				return nil, http.StatusBadRequest, fmt.Sprintf("Date range %d: startDate %s is after endDate %s.", i, dr.StartDate, dr.EndDate)
			}
			spans = append(spans, span{name: rangeName(dr.Name, i), fromDate: from.Format(time.DateOnly), toDate: to.Format(time.DateOnly)})
		}
	} else {
		if len(req.MinuteRanges) > 2 {
			return nil, http.StatusBadRequest, "Requests are limited to 2 minuteRanges."
		}
		if len(req.MinuteRanges) == 0 {
			spans = append(spans, span{name: "date_range_0", from: 0, to: 29})
		}
		for i, mr := range req.MinuteRanges {
			start, end := 29, 0
			if mr.StartMinutesAgo != nil {
				start = *mr.StartMinutesAgo
			}
			if mr.EndMinutesAgo != nil {
				end = *mr.EndMinutesAgo
			}
			if start < 0 || end < 0 || start > 29 || end > start {
				return nil, http.StatusBadRequest, fmt.Sprintf("Minute range %d is invalid: startMinutesAgo must be in 0..29 and not less than endMinutesAgo.", i)
			}
			spans = append(spans, span{name: rangeName(mr.Name, i), from: int64(end), to: int64(start)})
		}
	}
	multi := len(spans) > 1
	outDims := slices.Clone(dims)
	if multi {
		outDims = append(outDims, "dateRange")
	}

	groups := map[string]*row{}
	var order []*row
	var key []byte
	rec := &record{dates: map[string]string{}, keyEvents: keyEvents}
	add := func(spanName string) error {
		if dimFilter != nil {
			ok, err := dimFilter.eval(rec)
			if err != nil || !ok {
				return err
			}
		}
		key = key[:0]
		for _, d := range dims {
			v, _ := rec.get(d)
			key = append(append(key, v...), 0)
		}
		if multi {
			key = append(key, spanName...)
		}
		r := groups[string(key)]
		if r == nil {
			r = &row{}
			for _, d := range dims {
				v, _ := rec.get(d)
				r.dims = append(r.dims, v)
			}
			if multi {
				r.dims = append(r.dims, spanName)
			}
			groups[string(key)] = r
			order = append(order, r)
		}
		for i := range r.m {
			r.m[i] += rec.metric(i)
		}
		return nil
	}
	for _, sp := range spans {
		key = key[:0]
		if cat == Core {
			for i := range facts {
				f := &facts[i]
				if f.Date < sp.fromDate || f.Date > sp.toDate {
					continue
				}
				rec.core, rec.rt = f, nil
				if err := add(sp.name); err != nil {
					return nil, http.StatusBadRequest, sentence(err.Error())
				}
			}
			continue
		}
		for i := range realtime {
			f := &realtime[i]
			if int64(f.MinutesAgo) < sp.from || int64(f.MinutesAgo) > sp.to {
				continue
			}
			rec.core, rec.rt = nil, f
			if err := add(sp.name); err != nil {
				return nil, http.StatusBadRequest, sentence(err.Error())
			}
		}
	}
	var rows []*row
	for _, r := range order {
		if !req.KeepEmptyRows && len(mets) > 0 && !slices.ContainsFunc(mets, func(m string) bool { return r.m[metricIndex(m)] != 0 }) {
			continue
		}
		if metFilter != nil {
			ok, err := metFilter.eval(rowView{r})
			if err != nil {
				return nil, http.StatusBadRequest, sentence(err.Error())
			}
			if !ok {
				continue
			}
		}
		rows = append(rows, r)
	}
	return &table{p: p, dims: outDims, mets: mets, rows: rows, limit: limit}, 0, ""
}

// sentence makes an error text read like Google's messages: capitalised,
// with a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func rangeName(name string, i int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("date_range_%d", i)
}

var daysAgo = regexp.MustCompile(`^([0-9]+)daysAgo$`)

// resolveDate parses a GA4 date in the property's time zone.
func resolveDate(s string, now time.Time, loc *time.Location) (time.Time, error) {
	today := now.In(loc)
	today = time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC)
	switch {
	case s == "today":
		return today, nil
	case s == "yesterday":
		return today.AddDate(0, 0, -1), nil
	case daysAgo.MatchString(s):
		n, err := strconv.Atoi(daysAgo.FindStringSubmatch(s)[1])
		if err != nil {
			return time.Time{}, fmt.Errorf("invalid date %q", s)
		}
		return today.AddDate(0, 0, -n), nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid date %q: dates are YYYY-MM-DD, NdaysAgo, yesterday or today", s)
	}
	return t, nil
}

// sortRows applies orderBys (default: the first metric, descending, then
// the dimensions ascending).
func sortRows(rows []*row, orderBys []orderByJSON, dims, mets []string) string {
	type key struct {
		metric  string
		dim     int
		numeric bool
		fold    bool
		desc    bool
	}
	var keys []key
	for _, o := range orderBys {
		switch {
		case o.Metric != nil && o.Dimension == nil:
			if !slices.Contains(mets, o.Metric.MetricName) {
				return fmt.Sprintf("orderBys: metric %s is not in the request's metrics.", o.Metric.MetricName)
			}
			keys = append(keys, key{metric: o.Metric.MetricName, desc: o.Desc})
		case o.Dimension != nil && o.Metric == nil:
			i := slices.Index(dims, o.Dimension.DimensionName)
			if i < 0 {
				return fmt.Sprintf("orderBys: dimension %s is not in the request's dimensions.", o.Dimension.DimensionName)
			}
			k := key{dim: i, desc: o.Desc}
			switch o.Dimension.OrderType {
			case "", "ALPHANUMERIC", "ORDER_TYPE_UNSPECIFIED":
			case "CASE_INSENSITIVE_ALPHANUMERIC":
				k.fold = true
			case "NUMERIC":
				k.numeric = true
			default:
				return "orderBys: unknown orderType " + o.Dimension.OrderType + "."
			}
			keys = append(keys, k)
		default:
			return "orderBys: each OrderBy needs exactly one of metric or dimension."
		}
	}
	if len(keys) == 0 && len(mets) > 0 {
		keys = append(keys, key{metric: mets[0], desc: true})
	}
	for i := range dims {
		keys = append(keys, key{dim: i})
	}
	slices.SortStableFunc(rows, func(a, b *row) int {
		for _, k := range keys {
			var c int
			switch {
			case k.metric != "":
				c = compareInt(a.m[metricIndex(k.metric)], b.m[metricIndex(k.metric)])
			case k.numeric:
				x, _ := strconv.ParseFloat(a.dims[k.dim], 64)
				y, _ := strconv.ParseFloat(b.dims[k.dim], 64)
				c = compareFloat(x, y)
			case k.fold:
				c = strings.Compare(strings.ToLower(a.dims[k.dim]), strings.ToLower(b.dims[k.dim]))
			default:
				c = strings.Compare(a.dims[k.dim], b.dims[k.dim])
			}
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return ""
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// filterExpr is a parsed GA4 FilterExpression.
type filterExpr struct {
	AndGroup *struct {
		Expressions []*filterExpr `json:"expressions"`
	} `json:"andGroup"`
	OrGroup *struct {
		Expressions []*filterExpr `json:"expressions"`
	} `json:"orGroup"`
	NotExpression *filterExpr `json:"notExpression"`
	Filter        *struct {
		FieldName    string `json:"fieldName"`
		StringFilter *struct {
			MatchType     string `json:"matchType"`
			Value         string `json:"value"`
			CaseSensitive bool   `json:"caseSensitive"`
		} `json:"stringFilter"`
		InListFilter *struct {
			Values        []string `json:"values"`
			CaseSensitive bool     `json:"caseSensitive"`
		} `json:"inListFilter"`
		NumericFilter *struct {
			Operation string       `json:"operation"`
			Value     numericValue `json:"value"`
		} `json:"numericFilter"`
		BetweenFilter *struct {
			FromValue numericValue `json:"fromValue"`
			ToValue   numericValue `json:"toValue"`
		} `json:"betweenFilter"`
		EmptyFilter *struct{} `json:"emptyFilter"`
	} `json:"filter"`
}

type numericValue struct {
	Int64Value  *flexInt `json:"int64Value"`
	DoubleValue *float64 `json:"doubleValue"`
}

func (n numericValue) float() (float64, error) {
	switch {
	case n.Int64Value != nil:
		return float64(n.Int64Value.v), nil
	case n.DoubleValue != nil:
		return *n.DoubleValue, nil
	}
	return 0, fmt.Errorf("a NumericValue needs int64Value or doubleValue")
}

// parseFilter decodes a FilterExpression, accepting the proto field names
// (and_group) as well as the JSON names (andGroup), as Google does.
func parseFilter(raw json.RawMessage) (*filterExpr, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(camelize(v))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f filterExpr
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if err := f.check(0); err != nil {
		return nil, err
	}
	return &f, nil
}

// camelize renames snake_case object keys to lowerCamelCase, recursively.
func camelize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			var b strings.Builder
			up := false
			for _, r := range k {
				if r == '_' {
					up = true
					continue
				}
				if up {
					r = unicode.ToUpper(r)
					up = false
				}
				b.WriteRune(r)
			}
			out[b.String()] = camelize(val)
		}
		return out
	case []any:
		for i := range x {
			x[i] = camelize(x[i])
		}
		return x
	}
	return v
}

func (f *filterExpr) check(depth int) error {
	if depth > 10 {
		return fmt.Errorf("a FilterExpression nests too deeply")
	}
	n := 0
	for _, set := range []bool{f.AndGroup != nil, f.OrGroup != nil, f.NotExpression != nil, f.Filter != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("a FilterExpression needs exactly one of andGroup, orGroup, notExpression, filter")
	}
	switch {
	case f.AndGroup != nil:
		for _, e := range f.AndGroup.Expressions {
			if e == nil {
				return fmt.Errorf("an empty FilterExpression")
			}
			if err := e.check(depth + 1); err != nil {
				return err
			}
		}
	case f.OrGroup != nil:
		for _, e := range f.OrGroup.Expressions {
			if e == nil {
				return fmt.Errorf("an empty FilterExpression")
			}
			if err := e.check(depth + 1); err != nil {
				return err
			}
		}
	case f.NotExpression != nil:
		return f.NotExpression.check(depth + 1)
	default:
		fl := f.Filter
		if fl.FieldName == "" {
			return fmt.Errorf("a Filter needs a fieldName")
		}
		n := 0
		for _, set := range []bool{fl.StringFilter != nil, fl.InListFilter != nil, fl.NumericFilter != nil, fl.BetweenFilter != nil, fl.EmptyFilter != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("the filter on %s needs exactly one of stringFilter, inListFilter, numericFilter, betweenFilter, emptyFilter", fl.FieldName)
		}
	}
	return nil
}

// checkFilterFields checks that every field of f is a known field of the
// right kind.
func checkFilterFields(f *filterExpr, known func(string) bool, kind string) string {
	if f == nil {
		return ""
	}
	switch {
	case f.AndGroup != nil:
		for _, e := range f.AndGroup.Expressions {
			if m := checkFilterFields(e, known, kind); m != "" {
				return m
			}
		}
	case f.OrGroup != nil:
		for _, e := range f.OrGroup.Expressions {
			if m := checkFilterFields(e, known, kind); m != "" {
				return m
			}
		}
	case f.NotExpression != nil:
		return checkFilterFields(f.NotExpression, known, kind)
	case f.Filter != nil:
		if !known(f.Filter.FieldName) {
			return fmt.Sprintf("Field %s is not a valid %s for this filter. A %s filter must reference %ss only.", f.Filter.FieldName, kind, kind, kind)
		}
	}
	return ""
}

// eval reports whether a row with field values get matches.
func (f *filterExpr) eval(get getter) (bool, error) {
	switch {
	case f.AndGroup != nil:
		for _, e := range f.AndGroup.Expressions {
			ok, err := e.eval(get)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case f.OrGroup != nil:
		for _, e := range f.OrGroup.Expressions {
			ok, err := e.eval(get)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case f.NotExpression != nil:
		ok, err := f.NotExpression.eval(get)
		return !ok, err
	}
	fl := f.Filter
	v, _ := get.get(fl.FieldName)
	switch {
	case fl.StringFilter != nil:
		sf := fl.StringFilter
		val, want := v, sf.Value
		if !sf.CaseSensitive {
			val, want = strings.ToLower(val), strings.ToLower(want)
		}
		switch sf.MatchType {
		case "", "EXACT":
			return val == want, nil
		case "BEGINS_WITH":
			return strings.HasPrefix(val, want), nil
		case "ENDS_WITH":
			return strings.HasSuffix(val, want), nil
		case "CONTAINS":
			return strings.Contains(val, want), nil
		case "FULL_REGEXP", "PARTIAL_REGEXP":
			pat := sf.Value
			if sf.MatchType == "FULL_REGEXP" {
				pat = "^(?:" + pat + ")$"
			}
			if !sf.CaseSensitive {
				pat = "(?i)" + pat
			}
			re, err := regexp.Compile(pat)
			if err != nil {
				return false, fmt.Errorf("invalid regular expression %q", sf.Value)
			}
			return re.MatchString(v), nil
		}
		return false, fmt.Errorf("unknown matchType %s", sf.MatchType)
	case fl.InListFilter != nil:
		for _, w := range fl.InListFilter.Values {
			if v == w || (!fl.InListFilter.CaseSensitive && strings.EqualFold(v, w)) {
				return true, nil
			}
		}
		return false, nil
	case fl.NumericFilter != nil:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false, nil
		}
		y, err := fl.NumericFilter.Value.float()
		if err != nil {
			return false, err
		}
		switch fl.NumericFilter.Operation {
		case "EQUAL":
			return x == y, nil
		case "LESS_THAN":
			return x < y, nil
		case "LESS_THAN_OR_EQUAL":
			return x <= y, nil
		case "GREATER_THAN":
			return x > y, nil
		case "GREATER_THAN_OR_EQUAL":
			return x >= y, nil
		}
		return false, fmt.Errorf("unknown numeric operation %s", fl.NumericFilter.Operation)
	case fl.BetweenFilter != nil:
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false, nil
		}
		lo, err1 := fl.BetweenFilter.FromValue.float()
		hi, err2 := fl.BetweenFilter.ToValue.float()
		if err := firstErr(err1, err2); err != nil {
			return false, err
		}
		return x >= lo && x <= hi, nil
	default: // emptyFilter
		return v == "" || v == "(not set)", nil
	}
}

func (s *Server) metadata(c *call) {
	id := c.vars["id"]
	if id != "0" && !s.viewable(c, id) {
		return
	}
	if id != "0" {
		leave, ok := s.enter(c, id, Core)
		if !ok {
			return
		}
		defer leave()
	}
	type dimJSON struct {
		APIName     string `json:"apiName"`
		UIName      string `json:"uiName"`
		Description string `json:"description"`
		Category    string `json:"category"`
	}
	type metJSON struct {
		APIName     string `json:"apiName"`
		UIName      string `json:"uiName"`
		Description string `json:"description"`
		Type        string `json:"type"`
		Category    string `json:"category"`
	}
	out := struct {
		Name       string    `json:"name"`
		Dimensions []dimJSON `json:"dimensions"`
		Metrics    []metJSON `json:"metrics"`
	}{Name: "properties/" + id + "/metadata"}
	for _, d := range coreDimensions {
		out.Dimensions = append(out.Dimensions, dimJSON{d.apiName, d.uiName, d.description, d.category})
	}
	for _, m := range metrics {
		out.Metrics = append(out.Metrics, metJSON{m.apiName, m.uiName, m.description, "TYPE_INTEGER", m.category})
	}
	writeJSON(c.w, http.StatusOK, out)
}
