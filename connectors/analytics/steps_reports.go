package analytics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors"
)

// Report request bounds (Data API v1beta).
const (
	maxDimensions   = 9
	maxMetrics      = 10
	maxDateRanges   = 4
	maxMinuteRanges = 2
	maxReportLimit  = 250000
	maxFilterDepth  = 10
)

var (
	fieldPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_:]{0,99}$`)
	datePattern  = regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2}|today|yesterday|[0-9]{1,4}daysAgo)$`)
	eventPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,39}$`)
)

// orderTypes are a dimension OrderBy's orderType values.
var orderTypes = []string{"ALPHANUMERIC", "CASE_INSENSITIVE_ALPHANUMERIC", "NUMERIC"}

type dateRangeInput struct {
	StartDate string `json:"start_date"`
	EndDate   string `json:"end_date"`
	Name      string `json:"name"`
}

type minuteRangeInput struct {
	StartMinutesAgo *int   `json:"start_minutes_ago"`
	EndMinutesAgo   *int   `json:"end_minutes_ago"`
	Name            string `json:"name"`
}

type orderByInput struct {
	Metric    string `json:"metric"`
	Dimension string `json:"dimension"`
	Desc      bool   `json:"desc"`
	OrderType string `json:"order_type"`
}

type runReportsIn struct {
	Property        string           `json:"property"`
	Metrics         []string         `json:"metrics"`
	Dimensions      []string         `json:"dimensions"`
	DateRanges      []dateRangeInput `json:"date_ranges"`
	DimensionFilter json.RawMessage  `json:"dimension_filter"`
	MetricFilter    json.RawMessage  `json:"metric_filter"`
	OrderBys        []orderByInput   `json:"order_bys"`
	Limit           *int64           `json:"limit"`
	Offset          *int64           `json:"offset"`
	KeepEmptyRows   bool             `json:"keep_empty_rows"`
}

type realtimeIn struct {
	Property        string             `json:"property"`
	Metrics         []string           `json:"metrics"`
	Dimensions      []string           `json:"dimensions"`
	MinuteRanges    []minuteRangeInput `json:"minute_ranges"`
	DimensionFilter json.RawMessage    `json:"dimension_filter"`
	MetricFilter    json.RawMessage    `json:"metric_filter"`
	OrderBys        []orderByInput     `json:"order_bys"`
	Limit           *int64             `json:"limit"`
}

// Wire shapes of the Data API.
type (
	gaName struct {
		Name string `json:"name"`
	}
	gaDateRange struct {
		StartDate string `json:"startDate"`
		EndDate   string `json:"endDate"`
		Name      string `json:"name,omitempty"`
	}
	gaMinuteRange struct {
		StartMinutesAgo *int   `json:"startMinutesAgo,omitempty"`
		EndMinutesAgo   *int   `json:"endMinutesAgo,omitempty"`
		Name            string `json:"name,omitempty"`
	}
	gaOrderBy struct {
		Metric *struct {
			MetricName string `json:"metricName"`
		} `json:"metric,omitempty"`
		Dimension *struct {
			DimensionName string `json:"dimensionName"`
			OrderType     string `json:"orderType,omitempty"`
		} `json:"dimension,omitempty"`
		Desc bool `json:"desc,omitempty"`
	}
	gaReportRequest struct {
		Dimensions          []gaName        `json:"dimensions,omitempty"`
		Metrics             []gaName        `json:"metrics"`
		DateRanges          []gaDateRange   `json:"dateRanges,omitempty"`
		MinuteRanges        []gaMinuteRange `json:"minuteRanges,omitempty"`
		DimensionFilter     json.RawMessage `json:"dimensionFilter,omitempty"`
		MetricFilter        json.RawMessage `json:"metricFilter,omitempty"`
		OrderBys            []gaOrderBy     `json:"orderBys,omitempty"`
		Limit               string          `json:"limit,omitempty"`
		Offset              string          `json:"offset,omitempty"`
		KeepEmptyRows       bool            `json:"keepEmptyRows,omitempty"`
		ReturnPropertyQuota bool            `json:"returnPropertyQuota"`
	}
	gaValue struct {
		Value string `json:"value"`
	}
	gaReportResponse struct {
		DimensionHeaders []gaName `json:"dimensionHeaders"`
		MetricHeaders    []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"metricHeaders"`
		Rows []struct {
			DimensionValues []gaValue `json:"dimensionValues"`
			MetricValues    []gaValue `json:"metricValues"`
		} `json:"rows"`
		RowCount int64 `json:"rowCount"`
		Metadata *struct {
			CurrencyCode          string `json:"currencyCode"`
			TimeZone              string `json:"timeZone"`
			SubjectToThresholding bool   `json:"subjectToThresholding"`
			DataLossFromOtherRow  bool   `json:"dataLossFromOtherRow"`
		} `json:"metadata"`
		PropertyQuota *propertyQuotaJSON `json:"propertyQuota"`
	}
)

// Report is the output of Run Reports and Run Realtime Report. A report
// without data has Rows [] and RowCount 0.
type Report struct {
	// DimensionHeaders name the dimensions of each row, in order
	// ("dateRange" is added when several date ranges were asked for).
	DimensionHeaders []string `json:"dimension_headers"`
	// MetricHeaders name the metrics of each row, with their types
	// (TYPE_INTEGER, TYPE_FLOAT, TYPE_SECONDS, TYPE_CURRENCY, …).
	MetricHeaders []MetricHeader `json:"metric_headers"`
	Rows          []ReportRow    `json:"rows"`
	// RowCount is the number of rows the report has in all, regardless of
	// limit and offset.
	RowCount int64 `json:"row_count"`
	// PropertyQuota is the property's quota after this request, nil when
	// Google did not say.
	PropertyQuota *PropertyQuota `json:"property_quota"`
	// TimeZone and CurrencyCode are the property's (not in realtime
	// reports).
	TimeZone              string `json:"time_zone,omitempty"`
	CurrencyCode          string `json:"currency_code,omitempty"`
	SubjectToThresholding bool   `json:"subject_to_thresholding,omitempty"`
	DataLossFromOtherRow  bool   `json:"data_loss_from_other_row,omitempty"`

	// DataMayChangeFrom (Run Reports) is the first date, YYYY-MM-DD in
	// the property's time zone, whose figures may still change: GA4
	// processes most data within 24 hours and all of it (attribution,
	// session stitching, key events) within 48, so every date whose end
	// is less than 48 hours ago is not final.
	DataMayChangeFrom string `json:"data_may_change_from,omitempty"`
	// MayChange says the report covers data that may still change: a
	// date range reaching DataMayChangeFrom, or any realtime report,
	// whose data is not processed.
	MayChange bool `json:"may_change"`
	// CoversMinutes (Run Realtime Report) is how many of the last
	// minutes the report covers: 30 unless minute ranges say otherwise.
	CoversMinutes int `json:"covers_minutes,omitempty"`
	// Freshness says the above in a sentence.
	Freshness string `json:"freshness"`
}

// Processing delays of GA4 data (the product spec's limits; Google's
// "Data freshness" help page).
const (
	// processingDelay is how long after its day ends a date's figures
	// may still change.
	processingDelay = 48 * time.Hour
	// realtimeWindow is the default window of realtime reports.
	realtimeWindow = 30
)

// mayChangeFrom returns the first date, in loc, whose figures may still
// change at now: the first day that ended less than processingDelay ago
// (the day of now-48h: two days before today).
func mayChangeFrom(now time.Time, loc *time.Location) time.Time {
	t := now.In(loc).Add(-processingDelay)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// reportDay resolves a report date (YYYY-MM-DD, NdaysAgo, yesterday,
// today) against today; ok is false for a date that does not parse.
func reportDay(d string, today time.Time) (time.Time, bool) {
	switch {
	case d == "today":
		return today, true
	case d == "yesterday":
		return today.AddDate(0, 0, -1), true
	case strings.HasSuffix(d, "daysAgo"):
		n, err := strconv.Atoi(strings.TrimSuffix(d, "daysAgo"))
		return today.AddDate(0, 0, -n), err == nil
	}
	t, err := time.Parse(time.DateOnly, d)
	return t, err == nil
}

// markCoreFreshness fills rep's freshness fields for a core report over
// ranges, in the property's time zone as the answer gave it.
func markCoreFreshness(rep *Report, ranges []gaDateRange, now time.Time) {
	loc := time.UTC
	if l, err := time.LoadLocation(rep.TimeZone); err == nil && rep.TimeZone != "" {
		loc = l
	}
	from := mayChangeFrom(now, loc)
	local := now.In(loc)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, time.UTC)
	rep.DataMayChangeFrom = from.Format(time.DateOnly)
	for _, r := range ranges {
		if end, ok := reportDay(r.EndDate, today); !ok || !end.Before(from) {
			rep.MayChange = true
		}
	}
	zone := rep.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	reach := "this report's dates end before it, so its figures are final"
	if rep.MayChange {
		reach = "this report reaches it, so its figures for those dates are provisional"
	}
	rep.Freshness = fmt.Sprintf("Figures from %s on (%s) may still change: GA4 processes most data within 24 hours and all of it (attribution, session stitching, key events) within 48 hours; %s.", rep.DataMayChangeFrom, zone, reach)
}

// markRealtimeFreshness fills rep's freshness fields for a realtime
// report over ranges (none: the default last 30 minutes).
func markRealtimeFreshness(rep *Report, ranges []gaMinuteRange) {
	rep.MayChange = true
	rep.CoversMinutes = realtimeWindow
	if len(ranges) > 0 {
		rep.CoversMinutes = 0
		for _, r := range ranges {
			start := realtimeWindow - 1
			if r.StartMinutesAgo != nil {
				start = *r.StartMinutesAgo
			}
			rep.CoversMinutes = max(rep.CoversMinutes, start+1)
		}
	}
	rep.Freshness = fmt.Sprintf("Covers the last %d minutes of activity, before GA4's processing: figures lack processed signals (such as attribution) and differ from Run Reports' for the same events.", rep.CoversMinutes)
}

// MetricHeader names a metric column.
type MetricHeader struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ReportRow is one report row: dimension values as strings (GA4's own
// formats, e.g. date as YYYYMMDD) and metric values as JSON numbers.
type ReportRow struct {
	Dimensions []string      `json:"dimensions"`
	Metrics    []json.Number `json:"metrics"`
}

// runReports runs Run Reports: POST v1beta/properties/{id}:runReport with
// returnPropertyQuota.
func (tk *toolkit) runReports(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in runReportsIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	req, err := baseRequest(in.Metrics, in.Dimensions, in.DimensionFilter, in.MetricFilter, in.OrderBys, in.Limit)
	if err != nil {
		return nil, err
	}
	ranges := in.DateRanges
	if len(ranges) == 0 {
		ranges = []dateRangeInput{{StartDate: "28daysAgo", EndDate: "yesterday"}}
	}
	if len(ranges) > maxDateRanges {
		return nil, connectors.Errorf(connectors.CodeValidation, "date_ranges: at most %d", maxDateRanges)
	}
	for i, r := range ranges {
		if err := checkDateRange(i, r); err != nil {
			return nil, err
		}
		req.DateRanges = append(req.DateRanges, gaDateRange{StartDate: r.StartDate, EndDate: r.EndDate, Name: r.Name})
	}
	if in.Offset != nil {
		if *in.Offset < 0 {
			return nil, connectors.Errorf(connectors.CodeValidation, "offset must not be negative")
		}
		req.Offset = strconv.FormatInt(*in.Offset, 10)
	}
	req.KeepEmptyRows = in.KeepEmptyRows
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	rep, err := c.report(ctx, id, "runReport", req)
	if err != nil {
		return nil, err
	}
	markCoreFreshness(rep, req.DateRanges, tk.now())
	return rep, nil
}

// runRealtimeReport runs Run Realtime Report: POST
// v1beta/properties/{id}:runRealtimeReport with returnPropertyQuota.
func (tk *toolkit) runRealtimeReport(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in realtimeIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	req, err := baseRequest(in.Metrics, in.Dimensions, in.DimensionFilter, in.MetricFilter, in.OrderBys, in.Limit)
	if err != nil {
		return nil, err
	}
	if len(in.MinuteRanges) > maxMinuteRanges {
		return nil, connectors.Errorf(connectors.CodeValidation, "minute_ranges: at most %d", maxMinuteRanges)
	}
	for i, r := range in.MinuteRanges {
		start, end := 29, 0
		if r.StartMinutesAgo != nil {
			start = *r.StartMinutesAgo
		}
		if r.EndMinutesAgo != nil {
			end = *r.EndMinutesAgo
		}
		if start < 0 || end < 0 || start > 59 || end > start {
			return nil, connectors.Errorf(connectors.CodeValidation, "minute_ranges[%d]: want 0 <= end_minutes_ago <= start_minutes_ago <= 59", i)
		}
		req.MinuteRanges = append(req.MinuteRanges, gaMinuteRange{StartMinutesAgo: r.StartMinutesAgo, EndMinutesAgo: r.EndMinutesAgo, Name: r.Name})
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	rep, err := c.report(ctx, id, "runRealtimeReport", req)
	if err != nil {
		return nil, err
	}
	markRealtimeFreshness(rep, req.MinuteRanges)
	return rep, nil
}

// baseRequest validates and converts what both report steps share.
func baseRequest(metrics, dimensions []string, dimFilter, metFilter json.RawMessage, orderBys []orderByInput, limit *int64) (*gaReportRequest, error) {
	req := &gaReportRequest{ReturnPropertyQuota: true}
	if len(metrics) == 0 {
		return nil, connectors.Errorf(connectors.CodeValidation, "metrics: name at least one metric, e.g. activeUsers")
	}
	if len(metrics) > maxMetrics {
		return nil, connectors.Errorf(connectors.CodeValidation, "metrics: at most %d", maxMetrics)
	}
	if len(dimensions) > maxDimensions {
		return nil, connectors.Errorf(connectors.CodeValidation, "dimensions: at most %d", maxDimensions)
	}
	for _, list := range []struct {
		field string
		names []string
		out   *[]gaName
	}{{"metrics", metrics, &req.Metrics}, {"dimensions", dimensions, &req.Dimensions}} {
		for i, n := range list.names {
			if !fieldPattern.MatchString(n) {
				return nil, connectors.Errorf(connectors.CodeValidation, "%s[%d]: %q is not a field name", list.field, i, n)
			}
			if list.field == "metrics" {
				if err := checkRenamed(i, n); err != nil {
					return nil, err
				}
			}
			if slices.Contains(list.names[:i], n) {
				return nil, connectors.Errorf(connectors.CodeValidation, "%s: %s is named twice", list.field, n)
			}
			*list.out = append(*list.out, gaName{Name: n})
		}
	}
	for _, f := range []struct {
		field string
		raw   json.RawMessage
		out   *json.RawMessage
	}{{"dimension_filter", dimFilter, &req.DimensionFilter}, {"metric_filter", metFilter, &req.MetricFilter}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		var v any
		if err := json.Unmarshal(f.raw, &v); err != nil {
			return nil, connectors.Errorf(connectors.CodeValidation, "%s: %v", f.field, err)
		}
		if err := checkFilter(f.field, v, 0); err != nil {
			return nil, err
		}
		*f.out = f.raw
	}
	for i, o := range orderBys {
		var g gaOrderBy
		g.Desc = o.Desc
		switch {
		case o.Metric != "" && o.Dimension == "":
			if !slices.Contains(metrics, o.Metric) {
				return nil, connectors.Errorf(connectors.CodeValidation, "order_bys[%d]: metric %s is not among metrics", i, o.Metric)
			}
			if o.OrderType != "" {
				return nil, connectors.Errorf(connectors.CodeValidation, "order_bys[%d]: order_type applies to dimensions only", i)
			}
			g.Metric = &struct {
				MetricName string `json:"metricName"`
			}{o.Metric}
		case o.Dimension != "" && o.Metric == "":
			if !slices.Contains(dimensions, o.Dimension) {
				return nil, connectors.Errorf(connectors.CodeValidation, "order_bys[%d]: dimension %s is not among dimensions", i, o.Dimension)
			}
			if o.OrderType != "" && !slices.Contains(orderTypes, o.OrderType) {
				return nil, connectors.Errorf(connectors.CodeValidation, "order_bys[%d]: order_type %q is not one of ALPHANUMERIC, CASE_INSENSITIVE_ALPHANUMERIC, NUMERIC", i, o.OrderType)
			}
			g.Dimension = &struct {
				DimensionName string `json:"dimensionName"`
				OrderType     string `json:"orderType,omitempty"`
			}{o.Dimension, o.OrderType}
		default:
			return nil, connectors.Errorf(connectors.CodeValidation, "order_bys[%d]: name exactly one of metric or dimension", i)
		}
		req.OrderBys = append(req.OrderBys, g)
	}
	if limit != nil {
		if *limit < 1 || *limit > maxReportLimit {
			return nil, connectors.Errorf(connectors.CodeValidation, "limit %d is outside 1..%d", *limit, maxReportLimit)
		}
		req.Limit = strconv.FormatInt(*limit, 10)
	}
	return req, nil
}

// renamedMetrics are metrics GA4 renamed, by their old names: in March
// 2024 conversions became key events, and after the grace period the
// Data API refuses the old names.
var renamedMetrics = map[string]string{
	"conversions":           "keyEvents",
	"sessionConversionRate": "sessionKeyEventRate",
	"userConversionRate":    "userKeyEventRate",
}

// checkRenamed refuses metric i when GA4 renamed it, naming the new name
// (conversions:purchase becomes keyEvents:purchase).
func checkRenamed(i int, name string) error {
	base, event, perEvent := strings.Cut(name, ":")
	to, ok := renamedMetrics[base]
	if !ok {
		return nil
	}
	if perEvent {
		to += ":" + event
	}
	return connectors.Errorf(connectors.CodeValidation, "metrics[%d]: GA4 renamed %s to %s when conversions became key events; ask for %s", i, name, to, to)
}

// checkDateRange validates one date range: YYYY-MM-DD, NdaysAgo,
// yesterday or today; absolute dates must be real and in order.
func checkDateRange(i int, r dateRangeInput) error {
	var abs [2]time.Time
	for j, d := range []string{r.StartDate, r.EndDate} {
		if !datePattern.MatchString(d) {
			return connectors.Errorf(connectors.CodeValidation, "date_ranges[%d]: %q is not YYYY-MM-DD, NdaysAgo, yesterday or today", i, d)
		}
		if len(d) == 10 && d[4] == '-' {
			t, err := time.Parse(time.DateOnly, d)
			if err != nil {
				return connectors.Errorf(connectors.CodeValidation, "date_ranges[%d]: %q is not a date", i, d)
			}
			abs[j] = t
		}
	}
	if !abs[0].IsZero() && !abs[1].IsZero() && abs[0].After(abs[1]) {
		return connectors.Errorf(connectors.CodeValidation, "date_ranges[%d]: start_date %s is after end_date %s", i, r.StartDate, r.EndDate)
	}
	return nil
}

// filterKinds are a Filter's one-of members, by JSON and proto name.
var filterKinds = [][2]string{
	{"stringFilter", "string_filter"}, {"inListFilter", "in_list_filter"}, {"numericFilter", "numeric_filter"},
	{"betweenFilter", "between_filter"}, {"emptyFilter", "empty_filter"},
}

// checkFilter validates the structure of a GA4 FilterExpression (passed
// through as it is): an object with exactly one of andGroup, orGroup,
// notExpression or filter (proto names such as and_group too), groups of
// expressions, and filters with a fieldName and exactly one kind.
func checkFilter(path string, v any, depth int) error {
	if depth > maxFilterDepth {
		return connectors.Errorf(connectors.CodeValidation, "%s: filters nest deeper than %d levels", path, maxFilterDepth)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return connectors.Errorf(connectors.CodeValidation, "%s: want a FilterExpression object", path)
	}
	get := func(m map[string]any, names ...string) (any, bool) {
		for _, n := range names {
			if x, ok := m[n]; ok {
				return x, true
			}
		}
		return nil, false
	}
	var kind string
	var val any
	n := 0
	for _, k := range [][2]string{{"andGroup", "and_group"}, {"orGroup", "or_group"}, {"notExpression", "not_expression"}, {"filter", "filter"}} {
		if x, ok := get(obj, k[0], k[1]); ok {
			kind, val = k[0], x
			n++
		}
	}
	if n != 1 || len(obj) != 1 {
		return connectors.Errorf(connectors.CodeValidation, "%s: a FilterExpression has exactly one of andGroup, orGroup, notExpression, filter", path)
	}
	switch kind {
	case "andGroup", "orGroup":
		g, ok := val.(map[string]any)
		if !ok {
			return connectors.Errorf(connectors.CodeValidation, "%s.%s: want an object with expressions", path, kind)
		}
		exprs, ok := g["expressions"].([]any)
		if !ok || len(exprs) == 0 {
			return connectors.Errorf(connectors.CodeValidation, "%s.%s: want a non-empty expressions list", path, kind)
		}
		for i, e := range exprs {
			if err := checkFilter(fmt.Sprintf("%s.%s.expressions[%d]", path, kind, i), e, depth+1); err != nil {
				return err
			}
		}
	case "notExpression":
		return checkFilter(path+".notExpression", val, depth+1)
	default:
		f, ok := val.(map[string]any)
		if !ok {
			return connectors.Errorf(connectors.CodeValidation, "%s.filter: want an object", path)
		}
		name, _ := get(f, "fieldName", "field_name")
		if s, ok := name.(string); !ok || !fieldPattern.MatchString(s) {
			return connectors.Errorf(connectors.CodeValidation, "%s.filter: want a fieldName naming a dimension or metric", path)
		}
		kinds := 0
		for _, k := range filterKinds {
			if x, ok := get(f, k[0], k[1]); ok {
				if _, isObj := x.(map[string]any); !isObj {
					return connectors.Errorf(connectors.CodeValidation, "%s.filter.%s: want an object", path, k[0])
				}
				kinds++
			}
		}
		if kinds != 1 {
			return connectors.Errorf(connectors.CodeValidation, "%s.filter: want exactly one of stringFilter, inListFilter, numericFilter, betweenFilter, emptyFilter", path)
		}
	}
	return nil
}

// report sends a report request and shapes its answer.
func (c *client) report(ctx context.Context, id, method string, req *gaReportRequest) (*Report, error) {
	resp, err := c.RunReport(ctx, id, method, req)
	if err != nil {
		return nil, err
	}
	return toReport(id, resp)
}

// toReport shapes a report answer; missing rows (GA4 leaves them out when
// there is no data) become an empty list.
func toReport(id string, r *gaReportResponse) (*Report, error) {
	out := &Report{
		DimensionHeaders: make([]string, 0, len(r.DimensionHeaders)),
		MetricHeaders:    make([]MetricHeader, 0, len(r.MetricHeaders)),
		Rows:             make([]ReportRow, 0, len(r.Rows)),
		RowCount:         r.RowCount,
		PropertyQuota:    r.PropertyQuota.out(),
	}
	for _, h := range r.DimensionHeaders {
		out.DimensionHeaders = append(out.DimensionHeaders, h.Name)
	}
	for _, h := range r.MetricHeaders {
		out.MetricHeaders = append(out.MetricHeaders, MetricHeader{Name: h.Name, Type: h.Type})
	}
	if m := r.Metadata; m != nil {
		out.TimeZone, out.CurrencyCode = m.TimeZone, m.CurrencyCode
		out.SubjectToThresholding, out.DataLossFromOtherRow = m.SubjectToThresholding, m.DataLossFromOtherRow
	}
	for i, row := range r.Rows {
		rr := ReportRow{Dimensions: make([]string, len(row.DimensionValues)), Metrics: make([]json.Number, len(row.MetricValues))}
		for j, v := range row.DimensionValues {
			rr.Dimensions[j] = v.Value
		}
		for j, v := range row.MetricValues {
			if !jsonNumber(v.Value) {
				return nil, connectors.Errorf(connectors.CodeUpstream, "report on properties/%s: row %d metric %d is %q, not a number", id, i, j, v.Value)
			}
			rr.Metrics[j] = json.Number(v.Value)
		}
		out.Rows = append(out.Rows, rr)
	}
	if out.RowCount < int64(len(out.Rows)) {
		out.RowCount = int64(len(out.Rows))
	}
	return out, nil
}

// jsonNumber reports whether s is a JSON number.
func jsonNumber(s string) bool {
	i := 0
	n := len(s)
	if i < n && s[i] == '-' {
		i++
	}
	start := i
	for i < n && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start || (s[start] == '0' && i-start > 1) {
		return false
	}
	if i < n && s[i] == '.' {
		i++
		f := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == f {
			return false
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == e {
			return false
		}
	}
	return i == n
}

type metadataIn struct {
	Property string `json:"property"`
}

// Metadata is the output of Get Metadata.
type Metadata struct {
	Dimensions []DimensionInfo `json:"dimensions"`
	Metrics    []MetricInfo    `json:"metrics"`
}

// DimensionInfo describes a dimension.
type DimensionInfo struct {
	APIName          string   `json:"api_name"`
	UIName           string   `json:"ui_name"`
	Description      string   `json:"description"`
	Category         string   `json:"category,omitempty"`
	CustomDefinition bool     `json:"custom_definition"`
	DeprecatedNames  []string `json:"deprecated_api_names,omitempty"`
}

// MetricInfo describes a metric.
type MetricInfo struct {
	APIName          string   `json:"api_name"`
	UIName           string   `json:"ui_name"`
	Description      string   `json:"description"`
	Type             string   `json:"type"`
	Expression       string   `json:"expression,omitempty"`
	Category         string   `json:"category,omitempty"`
	CustomDefinition bool     `json:"custom_definition"`
	BlockedReasons   []string `json:"blocked_reasons,omitempty"`
}

// getMetadata runs Get Metadata: GET v1beta/properties/{id}/metadata
// (properties/0 lists the fields common to every property).
func (tk *toolkit) getMetadata(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in metadataIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	resp, err := c.GetMetadata(ctx, id)
	if err != nil {
		return nil, err
	}
	out := Metadata{Dimensions: []DimensionInfo{}, Metrics: []MetricInfo{}}
	for _, d := range resp.Dimensions {
		out.Dimensions = append(out.Dimensions, DimensionInfo{d.APIName, d.UIName, d.Description, d.Category, d.CustomDefinition, d.DeprecatedAPINames})
	}
	for _, m := range resp.Metrics {
		out.Metrics = append(out.Metrics, MetricInfo{m.APIName, m.UIName, m.Description, m.Type, m.Expression, m.Category, m.CustomDefinition, m.BlockedReasons})
	}
	return out, nil
}

type createKeyEventIn struct {
	Property       string `json:"property"`
	EventName      string `json:"event_name"`
	CountingMethod string `json:"counting_method"`
}

// KeyEvent is a GA4 key event.
type KeyEvent struct {
	// Name is properties/{id}/keyEvents/{keyEventId}.
	Name           string `json:"name"`
	KeyEventID     string `json:"key_event_id"`
	Property       string `json:"property"`
	EventName      string `json:"event_name"`
	CountingMethod string `json:"counting_method"`
	CreateTime     string `json:"create_time,omitempty"`
	Deletable      bool   `json:"deletable"`
	Custom         bool   `json:"custom"`
	// EventCount30d is how often the event was collected in the last 30
	// days (Create Key Events only): the processed count, or, when
	// processing has not caught up with the event yet, the count of the
	// realtime report's last 30 minutes.
	EventCount30d *int64 `json:"event_count_30d,omitempty"`
	// AlreadyExisted says the event was a key event before this step.
	AlreadyExisted bool `json:"already_existed,omitempty"`
}

func (k gaKeyEvent) out() KeyEvent {
	prop, id := splitName(k.Name, "keyEvents")
	return KeyEvent{Name: k.Name, KeyEventID: id, Property: prop, EventName: k.EventName,
		CountingMethod: k.CountingMethod, CreateTime: k.CreateTime, Deletable: k.Deletable, Custom: k.Custom}
}

// createKeyEvent runs Create Key Events. The product allows marking only
// events already collected, so it first runs a report (eventName ×
// eventCount, 30daysAgo..today, filtered to the event); GA4's processed
// data lags 24–48 hours, so when that finds no count it asks the realtime
// report (the last 30 minutes) the same question, and refuses with
// CodeValidation, sending nothing else, when neither has a count; then it
// POSTs v1beta/properties/{id}/keyEvents. An event that already is a
// key event (409, or a 400 while the event is listed) is read back and
// returned with already_existed.
func (tk *toolkit) createKeyEvent(ctx context.Context, env connectors.Env, input json.RawMessage) (any, error) {
	var in createKeyEventIn
	if err := decodeInput(input, &in); err != nil {
		return nil, err
	}
	id, err := propertyID("property", in.Property)
	if err != nil {
		return nil, err
	}
	if !eventPattern.MatchString(in.EventName) {
		return nil, connectors.Errorf(connectors.CodeValidation, "event_name %q: want up to 40 letters, digits and underscores, starting with a letter", in.EventName)
	}
	method := in.CountingMethod
	switch method {
	case "":
		method = "ONCE_PER_EVENT"
	case "ONCE_PER_EVENT", "ONCE_PER_SESSION":
	default:
		return nil, connectors.Errorf(connectors.CodeValidation, "counting_method %q is not ONCE_PER_EVENT or ONCE_PER_SESSION", method)
	}
	c, err := tk.newClient(env)
	if err != nil {
		return nil, err
	}
	check := &gaReportRequest{
		Dimensions:          []gaName{{Name: "eventName"}},
		Metrics:             []gaName{{Name: "eventCount"}},
		DateRanges:          []gaDateRange{{StartDate: "30daysAgo", EndDate: "today"}},
		DimensionFilter:     json.RawMessage(fmt.Sprintf(`{"filter":{"fieldName":"eventName","stringFilter":{"matchType":"EXACT","value":%q,"caseSensitive":true}}}`, in.EventName)),
		Limit:               "1",
		ReturnPropertyQuota: true,
	}
	count, err := c.eventCount(ctx, id, "runReport", check, in.EventName)
	if err != nil {
		return nil, err
	}
	if count <= 0 {
		// The same question of the last 30 minutes, which realtime
		// reports answer before processing catches up.
		check.DateRanges = nil
		if count, err = c.eventCount(ctx, id, "runRealtimeReport", check, in.EventName); err != nil {
			return nil, err
		}
	}
	if count <= 0 {
		return nil, connectors.Errorf(connectors.CodeValidation, "event %s has not been collected in properties/%s in the last 30 days; send it first, then mark it as a key event", in.EventName, id)
	}
	ke, err := c.CreateKeyEvent(ctx, id, in.EventName, method)
	// Google's status for a duplicate is not documented (409 ALREADY_EXISTS
	// or 400 INVALID_ARGUMENT): on either, look for the event among the
	// key events before reporting the error.
	var ce *connectors.Error
	if err != nil && errors.As(err, &ce) && (ce.Status == http.StatusConflict || ce.Status == http.StatusBadRequest) {
		existing, findErr := c.findKeyEvent(ctx, id, in.EventName)
		if findErr != nil || existing == nil {
			return nil, err
		}
		out := existing.out()
		out.AlreadyExisted = true
		out.EventCount30d = &count
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	out := ke.out()
	out.EventCount30d = &count
	return out, nil
}

// eventCount runs the report check (eventName × eventCount) with method
// and returns event's count.
func (c *client) eventCount(ctx context.Context, id, method string, check *gaReportRequest, event string) (int64, error) {
	rep, err := c.report(ctx, id, method, check)
	if err != nil {
		return 0, err
	}
	var count int64
	for _, r := range rep.Rows {
		if len(r.Dimensions) > 0 && r.Dimensions[0] == event && len(r.Metrics) > 0 {
			if n, err := r.Metrics[0].Int64(); err == nil {
				count += n
			}
		}
	}
	return count, nil
}

// findKeyEvent looks an event's key event up among the property's.
func (c *client) findKeyEvent(ctx context.Context, id, event string) (*gaKeyEvent, error) {
	items, _, err := c.ListKeyEvents(ctx, id, maxListLimit, "")
	if err != nil {
		return nil, err
	}
	for i := range items {
		if items[i].EventName == event {
			return &items[i], nil
		}
	}
	return nil, nil
}
