package provhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{"99999999999999", 24 * time.Hour, true},
		{"Sat, 21 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Sat, 21 Nov 2026 11:00:00 GMT", 0, true},
		{"soon", 0, false},
	} {
		got, ok := RetryAfter(http.Header{"Retry-After": {tc.v}}, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetry(t *testing.T) {
	answers := func(statuses ...int) (func(*http.Request) (*http.Response, error), *int) {
		n := new(int)
		return func(r *http.Request) (*http.Response, error) {
			i := *n
			*n++
			if i < len(statuses) && statuses[i] == 0 {
				return nil, errors.New("connection reset")
			}
			st := http.StatusOK
			if i < len(statuses) {
				st = statuses[i]
			}
			return &http.Response{StatusCode: st, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
		}, n
	}
	req := func(method string) *http.Request {
		r, _ := http.NewRequestWithContext(context.Background(), method, "http://x/", nil)
		return r
	}
	send, n := answers(503, 0, 200)
	if resp, err := Retry(req(http.MethodGet), time.Millisecond, true, send); err != nil || resp.StatusCode != 200 || *n != 3 {
		t.Fatalf("GET after 503 and a reset: %v %v after %d sends, want 200 after 3", resp, err, *n)
	}
	send, n = answers(503)
	if resp, _ := Retry(req(http.MethodPost), time.Millisecond, Idempotent(req(http.MethodPost)), send); resp.StatusCode != 503 || *n != 1 {
		t.Fatalf("POST: %d sends, want 1 (never retried blindly)", *n)
	}
	send, n = answers(503, 503, 503, 503)
	if resp, _ := Retry(req(http.MethodGet), time.Millisecond, true, send); resp.StatusCode != 503 || *n != MaxAttempts {
		t.Fatalf("%d sends, want MaxAttempts", *n)
	}
	send, n = answers(503, 503, 503, 503)
	if resp, _ := RetryAttempts(req(http.MethodGet), time.Millisecond, 2, true, send); resp.StatusCode != 503 || *n != 2 {
		t.Fatalf("RetryAttempts 2: %d sends, want 2", *n)
	}
	send, n = answers(404)
	if Retry(req(http.MethodGet), time.Millisecond, true, send); *n != 1 {
		t.Fatalf("a 404 was retried")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://x/", nil)
	send, n = answers(503, 503)
	if Retry(r, time.Hour, true, send); *n != 1 {
		t.Fatalf("a retry was scheduled past the deadline: %d sends", *n)
	}
}
