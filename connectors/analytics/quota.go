package analytics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	// Quota resets are computed in America/Los_Angeles and Create
	// properties validates IANA time zones; embed the database so neither
	// depends on the host's.
	_ "time/tzdata"

	"github.com/triggerd/triggerd/connectors"
)

// Quota policy constants.
const (
	// maxConcurrentPerProperty is the Data API's concurrent-request limit
	// of a standard property.
	maxConcurrentPerProperty = 10
	// concurrencyRetry is the wait suggested after Google refuses a
	// request for too many concurrent ones.
	concurrencyRetry = 5 * time.Second
	// quotaResetZone is where Google resets daily quotas: "Daily quotas
	// refresh at midnight PST" (Data API limits and quotas).
	quotaResetZone = "America/Los_Angeles"
)

// quotaCategory is a Data API quota category: each request charges one.
type quotaCategory int

const (
	coreQuota quotaCategory = iota
	realtimeQuota
)

// categoryOf is the quota category a Data API method charges.
func categoryOf(method string) quotaCategory {
	if method == "runRealtimeReport" {
		return realtimeQuota
	}
	return coreQuota
}

// String names the category as Google does.
func (c quotaCategory) String() string {
	if c == realtimeQuota {
		return "realtime"
	}
	return "core"
}

// QuotaStatus is one quota of a PropertyQuota: what the request consumed
// and what is left.
type QuotaStatus struct {
	Consumed  int64 `json:"consumed"`
	Remaining int64 `json:"remaining"`
}

// PropertyQuota is the Data API's report of a property's quotas in the
// category a request charged.
type PropertyQuota struct {
	TokensPerDay                          *QuotaStatus `json:"tokens_per_day,omitempty"`
	TokensPerHour                         *QuotaStatus `json:"tokens_per_hour,omitempty"`
	ConcurrentRequests                    *QuotaStatus `json:"concurrent_requests,omitempty"`
	ServerErrorsPerProjectPerHour         *QuotaStatus `json:"server_errors_per_project_per_hour,omitempty"`
	PotentiallyThresholdedRequestsPerHour *QuotaStatus `json:"potentially_thresholded_requests_per_hour,omitempty"`
	TokensPerProjectPerHour               *QuotaStatus `json:"tokens_per_project_per_hour,omitempty"`
}

// propertyQuotaJSON is PropertyQuota as Google spells it.
type propertyQuotaJSON struct {
	TokensPerDay                          *QuotaStatus `json:"tokensPerDay"`
	TokensPerHour                         *QuotaStatus `json:"tokensPerHour"`
	ConcurrentRequests                    *QuotaStatus `json:"concurrentRequests"`
	ServerErrorsPerProjectPerHour         *QuotaStatus `json:"serverErrorsPerProjectPerHour"`
	PotentiallyThresholdedRequestsPerHour *QuotaStatus `json:"potentiallyThresholdedRequestsPerHour"`
	TokensPerProjectPerHour               *QuotaStatus `json:"tokensPerProjectPerHour"`
}

func (q *propertyQuotaJSON) out() *PropertyQuota {
	if q == nil {
		return nil
	}
	p := PropertyQuota(*q)
	return &p
}

// quotaTracker keeps, per property, a semaphore bounding the Data API
// requests in flight and, per quota category, what the latest answers
// said about the token budgets. It is shared by every account of a
// Toolkit: Google's property quotas are per property (and Cloud project),
// not per user.
type quotaTracker struct {
	now   func() time.Time
	zone  *time.Location
	limit int

	mu    sync.Mutex
	props map[string]*propertyBudget
	// onWait, when set, is called when a request starts waiting for a
	// slot (tests use it to observe queueing without sleeping).
	onWait func(property string)
}

// propertyBudget is the tracker's state of one property.
type propertyBudget struct {
	sem     chan struct{}
	blocked [2]budgetBlock // by quotaCategory
}

// budgetBlock says a category's budget is spent until a time.
type budgetBlock struct {
	until  time.Time
	reason string
}

func newQuotaTracker(now func() time.Time, limit int) *quotaTracker {
	zone, err := time.LoadLocation(quotaResetZone)
	if err != nil {
		zone = time.FixedZone("PST", -8*3600)
	}
	return &quotaTracker{now: now, zone: zone, limit: limit, props: map[string]*propertyBudget{}}
}

func (t *quotaTracker) budget(property string) *propertyBudget {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.props[property]
	if b == nil {
		b = &propertyBudget{sem: make(chan struct{}, t.limit)}
		t.props[property] = b
	}
	return b
}

// acquire takes one of the property's request slots, waiting while all
// are in use, at most until ctx ends. The caller calls release once.
func (t *quotaTracker) acquire(ctx context.Context, property string) (release func(), err error) {
	b := t.budget(property)
	release = func() { <-b.sem }
	select {
	case b.sem <- struct{}{}:
		return release, nil
	default:
	}
	t.mu.Lock()
	onWait := t.onWait
	t.mu.Unlock()
	if onWait != nil {
		onWait(property)
	}
	select {
	case b.sem <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, &connectors.Error{
			Code:       connectors.CodeRateLimited,
			Message:    fmt.Sprintf("properties/%s already has %d requests in flight and the step ended while waiting: %v", property, t.limit, ctx.Err()),
			RetryAfter: time.Second,
			Retryable:  true,
		}
	}
}

// check refuses a request whose category budget is known to be spent.
func (t *quotaTracker) check(property string, c quotaCategory) error {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.props[property]
	if b == nil {
		return nil
	}
	blk := b.blocked[c]
	if blk.until.IsZero() || !now.Before(blk.until) {
		b.blocked[c] = budgetBlock{}
		return nil
	}
	return &connectors.Error{
		Code: connectors.CodeRateLimited,
		Message: fmt.Sprintf("the %s %s quota of properties/%s is spent until %s; nothing was sent",
			c, blk.reason, property, blk.until.UTC().Format(time.RFC3339)),
		RetryAfter: blk.until.Sub(now),
		Retryable:  true,
	}
}

// observe records what an answer's propertyQuota says: a spent daily
// budget blocks the category until the next midnight in
// America/Los_Angeles, a spent hourly one (tokens, tokens per project,
// server errors) until the next full hour; otherwise any block is lifted.
// Concurrency and potentially-thresholded requests are not budgets this
// blocks on (the semaphore handles the first; the second only affects
// thresholded reports).
func (t *quotaTracker) observe(property string, c quotaCategory, q *propertyQuotaJSON) {
	if q == nil {
		return
	}
	spent := func(s *QuotaStatus) bool { return s != nil && s.Remaining <= 0 }
	now := t.now()
	var blk budgetBlock
	switch {
	case spent(q.TokensPerDay):
		blk = budgetBlock{until: t.nextDay(now), reason: "tokens per day"}
	case spent(q.TokensPerHour):
		blk = budgetBlock{until: nextHour(now), reason: "tokens per hour"}
	case spent(q.TokensPerProjectPerHour):
		blk = budgetBlock{until: nextHour(now), reason: "tokens per project per hour"}
	case spent(q.ServerErrorsPerProjectPerHour):
		blk = budgetBlock{until: nextHour(now), reason: "server errors per project per hour"}
	}
	b := t.budget(property)
	t.mu.Lock()
	b.blocked[c] = blk
	t.mu.Unlock()
}

// exhausted records a 429 RESOURCE_EXHAUSTED answer and returns how long
// to wait, read from Google's message.
func (t *quotaTracker) exhausted(property string, c quotaCategory, message string) time.Duration {
	now := t.now()
	wait, blk := t.classify(message, now)
	if !blk.until.IsZero() {
		b := t.budget(property)
		t.mu.Lock()
		if blk.until.After(b.blocked[c].until) {
			b.blocked[c] = blk
		}
		t.mu.Unlock()
	}
	return wait
}

// classify reads a RESOURCE_EXHAUSTED message: "Exhausted property tokens
// per day." waits until the next midnight in America/Los_Angeles; the
// hourly quotas ("per hour", "for a project per hour", server errors)
// until the next full hour; "Exhausted concurrent requests quota." a few
// seconds; potentially-thresholded requests and anything unrecognised
// until the next full hour without blocking other requests.
func (t *quotaTracker) classify(message string, now time.Time) (time.Duration, budgetBlock) {
	m := strings.ToLower(message)
	switch {
	case strings.Contains(m, "concurrent"):
		return concurrencyRetry, budgetBlock{}
	case strings.Contains(m, "thresholded"):
		return nextHour(now).Sub(now), budgetBlock{}
	case strings.Contains(m, "per day"):
		until := t.nextDay(now)
		return until.Sub(now), budgetBlock{until: until, reason: "tokens per day"}
	// Server errors first: their quota is also "per project per hour".
	case strings.Contains(m, "server error"):
		until := nextHour(now)
		return until.Sub(now), budgetBlock{until: until, reason: "server errors per project per hour"}
	case strings.Contains(m, "per project per hour"), strings.Contains(m, "for a project per hour"):
		until := nextHour(now)
		return until.Sub(now), budgetBlock{until: until, reason: "tokens per project per hour"}
	case strings.Contains(m, "per hour") && strings.Contains(m, "token"):
		until := nextHour(now)
		return until.Sub(now), budgetBlock{until: until, reason: "tokens per hour"}
	}
	return nextHour(now).Sub(now), budgetBlock{}
}

// nextHour is the next full hour after now (the same instant in UTC and
// in every whole-hour time zone, Pacific included).
func nextHour(now time.Time) time.Time {
	return now.Truncate(time.Hour).Add(time.Hour)
}

// nextDay is the next midnight in America/Los_Angeles after now.
func (t *quotaTracker) nextDay(now time.Time) time.Time {
	l := now.In(t.zone)
	return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, t.zone)
}

// extractQuota finds the propertyQuota of a Data API answer without
// decoding the rows: the last "propertyQuota" key (one preceded by '{' or
// ',', which a JSON string cannot hold unescaped) is decoded in place.
// batchRunReports answers hold one per report; the last is the latest.
func extractQuota(body []byte) *propertyQuotaJSON {
	key := []byte(`"propertyQuota"`)
	for i := bytes.LastIndex(body, key); i >= 0; i = bytes.LastIndex(body[:i], key) {
		j := i - 1
		for j >= 0 && isSpace(body[j]) {
			j--
		}
		if j < 0 || (body[j] != '{' && body[j] != ',') {
			continue
		}
		rest := bytes.TrimLeft(body[i+len(key):], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		var q propertyQuotaJSON
		if err := json.NewDecoder(bytes.NewReader(rest[1:])).Decode(&q); err == nil {
			return &q
		}
	}
	return nil
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\r' || b == '\n'
}
