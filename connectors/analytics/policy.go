package analytics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/triggerd/triggerd/connectors/internal/provhttp"
)

// Retry policy and body bounds.
const (
	defaultRetryBase = 250 * time.Millisecond
	// maxAttempts bounds the sends of one request: a 5xx (or a network
	// error) is retried once. Each 5xx spends one of the ten
	// serverErrorsPerProjectPerHour a standard property allows, and a
	// spent quota fails every request to the property until the hour
	// ends, so three attempts per call would let four failing calls lock
	// the property.
	maxAttempts = 2
	// maxDataBody bounds a Data API answer (a report may be large).
	maxDataBody = 32 << 20
)

// readMethods are the Data API custom methods that only read: POSTs that
// are safe to send again.
var readMethods = []string{
	"runReport", "runPivotReport", "batchRunReports", "batchRunPivotReports",
	"runRealtimeReport", "checkCompatibility", "runFunnelReport",
}

// policy is the HTTP policy every analytics step (API Call steps
// included) runs under. One policy serves every account of a Toolkit.
type policy struct {
	data      *url.URL
	quota     *quotaTracker
	retryBase time.Duration
}

// wrap is Toolkit.Wrap.
func (p *policy) wrap(_ string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &policyTransport{p: p, base: base}
}

type policyTransport struct {
	p    *policy
	base http.RoundTripper
}

// dataCall recognises a Data API request on a property:
// {data}/v1beta/properties/{id}:{method} or …/properties/{id}/metadata.
func (p *policy) dataCall(u *url.URL) (property, method string, ok bool) {
	if p.data == nil || u.Scheme != p.data.Scheme || u.Host != p.data.Host {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(u.Path, strings.TrimRight(p.data.Path, "/")+"/")
	if !ok {
		return "", "", false
	}
	_, rest, ok = strings.Cut(rest, "/") // the version: v1beta, v1alpha
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest, "properties/")
	if !ok {
		return "", "", false
	}
	if id, m, ok := strings.Cut(rest, ":"); ok && digits(id) && !strings.Contains(m, "/") {
		return id, m, true
	}
	if id, ok := strings.CutSuffix(rest, "/metadata"); ok && digits(id) {
		return id, "metadata", true
	}
	return "", "", false
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// RoundTrip sends a request under the policy. A Data API request on a
// property first takes one of the property's ten request slots (waiting
// while all are busy, until the context ends) and is refused, unsent, with
// CodeRateLimited when its quota category is known to be spent; its answer
// is read whole so the slot is freed and its propertyQuota (or a 429's
// message) updates what is known. Reads — GET, HEAD, and the Data API's
// report methods — are retried once on a network error or a 5xx answer.
func (t *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	prop, method, isData := t.p.dataCall(req.URL)
	read := provhttp.Idempotent(req) || (isData && req.Method == http.MethodPost && slices.Contains(readMethods, method))
	if !isData {
		return provhttp.RetryAttempts(req, t.p.retryBase, maxAttempts, read, t.base.RoundTrip)
	}
	cat := categoryOf(method)
	release, err := t.p.quota.acquire(req.Context(), prop)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	defer release()
	if err := t.p.quota.check(prop, cat); err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := provhttp.RetryAttempts(req, t.p.retryBase, maxAttempts, read, t.base.RoundTrip)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDataBody+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if len(body) > maxDataBody {
		return nil, fmt.Errorf("the answer exceeds %d bytes", maxDataBody)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		t.p.quota.observe(prop, cat, extractQuota(body))
	case http.StatusTooManyRequests:
		t.p.quota.exhausted(prop, cat, googleMessage(body))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// googleMessage is the message of Google's error envelope, or "".
func googleMessage(body []byte) string {
	var e googleError
	_ = json.Unmarshal(body, &e) // a foreign body leaves it empty
	return e.Error.Message
}
