package oascheck

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// Recorder is an http.RoundTripper that keeps every exchange it carries
// through Base (http.DefaultTransport when nil), bodies read in full.
type Recorder struct {
	Base http.RoundTripper

	mu        sync.Mutex
	exchanges []Exchange
}

// RoundTrip sends req with Base and records the exchange; the caller
// reads the answer's body as if it came from Base.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	base := r.Base
	if base == nil {
		base = http.DefaultTransport
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		// Keep the length known: a body of unknown length goes chunked.
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	kept := *resp
	kept.Body = http.NoBody
	r.mu.Lock()
	r.exchanges = append(r.exchanges, Exchange{Request: req, RequestBody: body, Response: &kept, ResponseBody: respBody})
	r.mu.Unlock()
	return resp, nil
}

// Exchanges returns the exchanges recorded so far, in order.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}
