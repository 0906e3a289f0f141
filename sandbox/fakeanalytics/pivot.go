package fakeanalytics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// maxPivotCells is the most cells a pivot report may ask for: the
// product of its pivots' limits.
const maxPivotCells = 250000

// pivotJSON is one pivot of a RunPivotReportRequest.
type pivotJSON struct {
	FieldNames         []string      `json:"fieldNames"`
	OrderBys           []orderByJSON `json:"orderBys"`
	Offset             flexInt       `json:"offset"`
	Limit              flexInt       `json:"limit"`
	MetricAggregations []string      `json:"metricAggregations"`
}

// pivotRequest is a RunPivotReportRequest: a report request without
// limit, offset or orderBys (each pivot has its own) and with pivots.
type pivotRequest struct {
	Property        string          `json:"property"`
	Dimensions      []nameJSON      `json:"dimensions"`
	Metrics         json.RawMessage `json:"metrics"`
	DateRanges      json.RawMessage `json:"dateRanges"`
	Pivots          []pivotJSON     `json:"pivots"`
	DimensionFilter json.RawMessage `json:"dimensionFilter"`
	MetricFilter    json.RawMessage `json:"metricFilter"`
	CurrencyCode    string          `json:"currencyCode"`
	KeepEmptyRows   bool            `json:"keepEmptyRows"`
	// ReturnPropertyQuota is as in runReport.
	ReturnPropertyQuota bool `json:"returnPropertyQuota"`
}

// pivotHeaderJSON is one pivot's columns in the answer.
type pivotHeaderJSON struct {
	PivotDimensionHeaders []pivotDimensionHeaderJSON `json:"pivotDimensionHeaders,omitempty"`
	RowCount              int64                      `json:"rowCount,omitempty"`
}

type pivotDimensionHeaderJSON struct {
	DimensionValues []valueJSON `json:"dimensionValues"`
}

// pivotResponse is a RunPivotReportResponse, in GA4's field order.
type pivotResponse struct {
	PivotHeaders     []pivotHeaderJSON  `json:"pivotHeaders"`
	DimensionHeaders []headerJSON       `json:"dimensionHeaders"`
	MetricHeaders    []headerJSON       `json:"metricHeaders"`
	Rows             []rowJSON          `json:"rows,omitempty"`
	Metadata         *metadataJSON      `json:"metadata,omitempty"`
	PropertyQuota    *propertyQuotaJSON `json:"propertyQuota,omitempty"`
	Kind             string             `json:"kind"`
}

// decodePivot decodes one RunPivotReportRequest strictly.
func decodePivot(raw []byte) (*pivotRequest, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req pivotRequest
	if err := dec.Decode(&req); err != nil {
		return nil, "Invalid JSON payload received. " + err.Error()
	}
	return &req, ""
}

// pivotReport answers runPivotReport.
func (s *Server) pivotReport(c *call) {
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
	req, msg := decodePivot(c.body)
	if msg != "" {
		c.fail(http.StatusBadRequest, msg)
		return
	}
	resp, code, msg := s.buildPivot(id, req)
	if msg != "" {
		c.fail(code, msg)
		return
	}
	resp.PropertyQuota = s.chargeTokens(id, Core, len(req.Dimensions), req.ReturnPropertyQuota)
	writeJSON(c.w, http.StatusOK, resp)
}

// batchPivotReport answers batchRunPivotReports: up to five pivot
// reports for the property of the URL, as batchRunReports does.
func (s *Server) batchPivotReport(c *call) {
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
		Requests []json.RawMessage `json:"requests"`
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
	var reqs []*pivotRequest
	var reports []*pivotResponse
	for i, raw := range batch.Requests {
		req, msg := decodePivot(raw)
		if msg != "" {
			c.fail(http.StatusBadRequest, fmt.Sprintf("Request %d: %s", i, msg))
			return
		}
		if req.Property != "" && req.Property != "properties/"+id {
			c.fail(http.StatusBadRequest, fmt.Sprintf("Request %d is for %s; all requests of a batch must be for properties/%s.", i, req.Property, id))
			return
		}
		resp, code, msg := s.buildPivot(id, req)
		if msg != "" {
			c.fail(code, fmt.Sprintf("Request %d: %s", i, msg))
			return
		}
		reqs = append(reqs, req)
		reports = append(reports, resp)
	}
	for i, resp := range reports {
		resp.PropertyQuota = s.chargeTokens(id, Core, len(reqs[i].Dimensions), reqs[i].ReturnPropertyQuota)
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"pivotReports": reports, "kind": "analyticsData#batchRunPivotReports"})
}

// buildPivot validates a pivot request and computes its answer. Every
// requested dimension belongs to exactly one pivot; each pivot selects,
// in its order, limit (required) of the distinct combinations of its
// fields' values after offset, and rowCount is how many there are in
// all. The rows are the combinations of the selected values that have
// data, in the pivots' orders.
func (s *Server) buildPivot(id string, req *pivotRequest) (*pivotResponse, int, string) {
	if len(req.Pivots) == 0 {
		return nil, http.StatusBadRequest, "At least one pivot is required."
	}
	cells := int64(1)
	owner := map[string]int{}
	for i, pv := range req.Pivots {
		if len(pv.FieldNames) == 0 {
			return nil, http.StatusBadRequest, fmt.Sprintf("Pivot %d: fieldNames must name at least one dimension.", i)
		}
		if !pv.Limit.set || pv.Limit.v <= 0 {
			return nil, http.StatusBadRequest, fmt.Sprintf("Pivot %d: limit is required and must be positive.", i)
		}
		if pv.Offset.set && pv.Offset.v < 0 {
			return nil, http.StatusBadRequest, fmt.Sprintf("Pivot %d: offset must be non-negative.", i)
		}
		cells *= pv.Limit.v
		if cells > maxPivotCells {
			return nil, http.StatusBadRequest, fmt.Sprintf("The product of the pivots' limits must be at most %d.", maxPivotCells)
		}
		for _, f := range pv.FieldNames {
			if j, dup := owner[f]; dup {
				return nil, http.StatusBadRequest, fmt.Sprintf("Dimension %s is in pivots %d and %d; each dimension belongs to one pivot.", f, j, i)
			}
			owner[f] = i
		}
	}
	// The rows of a report over every dimension, unpaged and unordered.
	var base reportRequest
	base.Dimensions = req.Dimensions
	base.DimensionFilter, base.MetricFilter = req.DimensionFilter, req.MetricFilter
	base.KeepEmptyRows = req.KeepEmptyRows
	for _, part := range []struct {
		raw json.RawMessage
		out any
	}{{req.Metrics, &base.Metrics}, {req.DateRanges, &base.DateRanges}} {
		if len(part.raw) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(part.raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(part.out); err != nil {
			return nil, http.StatusBadRequest, "Invalid JSON payload received. " + err.Error()
		}
	}
	t, code, msg := s.tabulate(id, Core, &base)
	if msg != "" {
		return nil, code, msg
	}
	for _, d := range t.dims {
		if _, ok := owner[d]; !ok {
			return nil, http.StatusBadRequest, fmt.Sprintf("Dimension %s is in no pivot; every dimension must be in exactly one pivot's fieldNames.", d)
		}
	}
	for f := range owner {
		if !slices.Contains(t.dims, f) {
			return nil, http.StatusBadRequest, fmt.Sprintf("Pivot field %s is not one of the request's dimensions.", f)
		}
	}

	resp := &pivotResponse{DimensionHeaders: t.dimensionHeaders(), MetricHeaders: t.metricHeaders(),
		Metadata: &metadataJSON{CurrencyCode: t.p.CurrencyCode, TimeZone: t.p.TimeZone}, Kind: "analyticsData#runPivotReport"}
	// rank[i] maps a row's key in pivot i to its place among the
	// selected combinations.
	rank := make([]map[string]int, len(req.Pivots))
	for i, pv := range req.Pivots {
		idx := make([]int, len(pv.FieldNames))
		for j, f := range pv.FieldNames {
			idx[j] = slices.Index(t.dims, f)
		}
		// One aggregated row per combination of the pivot's values.
		groups := map[string]*row{}
		var combos []*row
		for _, r := range t.rows {
			k := pivotKey(r, idx)
			g := groups[k]
			if g == nil {
				g = &row{}
				for _, j := range idx {
					g.dims = append(g.dims, r.dims[j])
				}
				groups[k] = g
				combos = append(combos, g)
			}
			for m := range g.m {
				g.m[m] += r.m[m]
			}
		}
		if msg := sortRows(combos, pv.OrderBys, pv.FieldNames, t.mets); msg != "" {
			return nil, http.StatusBadRequest, fmt.Sprintf("Pivot %d: %s", i, msg)
		}
		off := min(pv.Offset.v, int64(len(combos)))
		end := min(off+pv.Limit.v, int64(len(combos)))
		h := pivotHeaderJSON{RowCount: int64(len(combos))}
		rank[i] = map[string]int{}
		for n, g := range combos[off:end] {
			var vals []valueJSON
			for _, v := range g.dims {
				vals = append(vals, valueJSON{v})
			}
			h.PivotDimensionHeaders = append(h.PivotDimensionHeaders, pivotDimensionHeaderJSON{vals})
			rank[i][strings.Join(g.dims, "\x00")] = n
		}
		resp.PivotHeaders = append(resp.PivotHeaders, h)
		// Keep the rows whose combination this pivot selected.
		kept := t.rows[:0:0]
		for _, r := range t.rows {
			if _, ok := rank[i][pivotKey(r, idx)]; ok {
				kept = append(kept, r)
			}
		}
		t.rows = kept
	}
	// Order the rows by the pivots' orders, the first pivot first.
	keys := make([][]int, len(req.Pivots))
	for i, pv := range req.Pivots {
		for _, f := range pv.FieldNames {
			keys[i] = append(keys[i], slices.Index(t.dims, f))
		}
	}
	slices.SortStableFunc(t.rows, func(a, b *row) int {
		for i := range keys {
			if c := rank[i][pivotKey(a, keys[i])] - rank[i][pivotKey(b, keys[i])]; c != 0 {
				return c
			}
		}
		return 0
	})
	for _, r := range t.rows {
		resp.Rows = append(resp.Rows, t.rowJSON(r))
	}
	return resp, 0, ""
}

// pivotKey joins row r's values at idx.
func pivotKey(r *row, idx []int) string {
	var b strings.Builder
	for n, j := range idx {
		if n > 0 {
			b.WriteByte(0)
		}
		b.WriteString(r.dims[j])
	}
	return b.String()
}
