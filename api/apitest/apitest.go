// Package apitest checks HTTP exchanges with triggerd against the API's
// OpenAPI document (api.OpenAPI), so that tests that call the API fail
// when the handlers and the document disagree. Tests route their calls
// through a Checker: Transport for a real client, Serve for a handler.
//
// The rule a Checker applies to each exchange: the answer must be one the
// document lists for the route, with its status and body; the request must
// be one the document takes, unless the answer refuses it (4xx), which is
// how tests that send wrong requests on purpose pass.
package apitest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/triggerd/triggerd/api"
)

// Checker validates exchanges against the document.
type Checker struct {
	t testing.TB
	s *shared
}

// shared is the validator of the embedded document, built once per test
// binary: building it compiles every schema of the document, about two
// seconds here, and the document cannot change while the binary runs.
type shared struct {
	mu sync.Mutex // the validator's caches are not documented as safe for concurrent use
	v  validator.Validator
}

var once = sync.OnceValues(func() (*shared, error) {
	v, err := build()
	if err != nil {
		return nil, err
	}
	return &shared{v: v}, nil
})

// New returns a Checker reporting to t; it fails t if the document does not
// build.
func New(t testing.TB) *Checker {
	t.Helper()
	s, err := once()
	if err != nil {
		t.Fatal(err)
	}
	return &Checker{t: t, s: s}
}

// build makes a validator of the API's document.
func build() (validator.Validator, error) {
	raw, err := api.OpenAPI()
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("apitest: the OpenAPI document: %w", err)
	}
	// Security is checked by the tests themselves (a request without a key
	// must be answered 401, which the document lists).
	v, errs := validator.NewValidator(doc, config.WithoutSecurityValidation())
	if len(errs) > 0 {
		return nil, fmt.Errorf("apitest: the OpenAPI document: %v", errs)
	}
	return v, nil
}

// Validate returns an error if the document does not build or is not
// valid OpenAPI: for a test of the document itself.
func Validate() error {
	s, err := once()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok, verrs := s.v.ValidateDocument(); !ok {
		return fmt.Errorf("apitest: the OpenAPI document is not valid OpenAPI: %s", describe(verrs))
	}
	return nil
}

// Check checks one exchange; reqBody and respBody are the bodies sent and
// received (req's and resp's own are not read).
func (c *Checker) Check(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	c.t.Helper()
	if err := c.Verify(req, reqBody, resp, respBody); err != nil {
		c.t.Errorf("%s %s answered %d against the OpenAPI document (api/openapi.yaml): %v", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
	}
}

// Verify is Checker.Verify for a caller with no test at hand.
func Verify(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	s, err := once()
	if err != nil {
		return err
	}
	return (&Checker{s: s}).Verify(req, reqBody, resp, respBody)
}

// Verify is Check returning what is wrong instead of failing the test.
func (c *Checker) Verify(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	return c.verify(req, reqBody, true, resp, respBody)
}

// verify is Verify; without wholeRequest (the handler answered before it
// read the whole body) the request is taken as the route's, unchecked.
func (c *Checker) verify(req *http.Request, reqBody []byte, wholeRequest bool, resp *http.Response, respBody []byte) error {
	if !strings.HasPrefix(req.URL.Path, "/v1/") && !strings.HasPrefix(req.URL.Path, "/webhooks/") {
		return nil // the probes and /metrics are not part of the contract
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	r.ContentLength = int64(len(reqBody))
	reqOK, reqErrs := c.s.v.ValidateHttpRequestSync(r)
	if !reqOK && !wholeRequest && !missingRoute(reqErrs) {
		reqOK = true
	}
	if !reqOK && missingRoute(reqErrs) {
		// A route the document lacks: only echo's own refusals may answer.
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("the route is not in the document: %s", describe(reqErrs))
	}
	if !reqOK && (resp.StatusCode < 400 || resp.StatusCode >= 500) {
		return fmt.Errorf("the request is not one the document takes, yet it was answered %d: %s", resp.StatusCode, describe(reqErrs))
	}
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	w := *resp
	w.Body = io.NopCloser(bytes.NewReader(respBody))
	w.ContentLength = int64(len(respBody))
	if ok, errs := c.s.v.ValidateHttpResponse(r, &w); !ok {
		return fmt.Errorf("the answer is not one the document lists: %s\nbody: %.600s", describe(errs), respBody)
	}
	return nil
}

func missingRoute(errs []*verrors.ValidationError) bool {
	for _, e := range errs {
		if e.ValidationType == "path" && (e.ValidationSubType == "missing" || e.ValidationSubType == "missingOperation") {
			return true
		}
	}
	return false
}

func describe(errs []*verrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  - %s: %s", e.Message, e.Reason)
		for _, se := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s", se.FieldPath, se.Reason)
		}
	}
	return b.String()
}

// Serve answers req with h into a recorder, checks the exchange and
// returns the recorder. The request's body reaches h as it comes (a test
// may stream it, or send more than h reads): the request is checked with
// what h read, and only when h read it whole.
func (c *Checker) Serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	c.t.Helper()
	body := &recordedBody{}
	if req.Body != nil && req.Body != http.NoBody {
		body.r = req.Body
		req.Body = body
	} else {
		body.eof = true
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if err := c.verify(req, body.buf.Bytes(), body.eof, rec.Result(), rec.Body.Bytes()); err != nil {
		c.t.Errorf("%s %s answered %d against the OpenAPI document (api/openapi.yaml): %v", req.Method, req.URL.RequestURI(), rec.Code, err)
	}
	return rec
}

// recordedBody keeps what a handler reads of a request body, and whether
// it read to the end.
type recordedBody struct {
	r   io.ReadCloser
	buf bytes.Buffer
	eof bool
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.buf.Write(p[:n])
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *recordedBody) Close() error { return b.r.Close() }

// Handler returns h checking every exchange it serves: for a test server
// standing in for triggerd (httptest.NewServer(c.Handler(mux))), so that a
// client's requests, and the stand-in's answers, are held to the document.
func (c *Checker) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := c.Serve(h, req)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// Transport returns a RoundTripper that checks every exchange it carries
// through base (http.DefaultTransport when nil).
func (c *Checker) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{c: c, base: base}
}

// StrictTransport returns a RoundTripper that fails a round trip whose
// exchange disagrees with the document (through base, or
// http.DefaultTransport when nil), its error saying what is wrong: for a
// client that a package's tests share, with no one test at hand.
func StrictTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return transport{base: base}
}

// transport checks exchanges with c, or fails them when c is nil
// (StrictTransport).
type transport struct {
	c    *Checker
	base http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		// Keep the length known: a body of unknown length goes chunked,
		// and an empty one would no longer look empty to the server.
		req.ContentLength = int64(len(body))
		req.Body = http.NoBody
		if len(body) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	if t.c == nil {
		if err := Verify(req, body, resp, respBody); err != nil {
			return nil, fmt.Errorf("%s %s answered %d against the OpenAPI document (api/openapi.yaml): %w", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
		}
		return resp, nil
	}
	t.c.Check(req, body, resp, respBody)
	return resp, nil
}
