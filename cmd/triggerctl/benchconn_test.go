package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestBenchConn posts over one keep-alive connection, plain and TLS, and
// checks that the server saw every header, the body and a reused
// connection, and that a "Connection: close" answer makes the next request
// dial again.
func TestBenchConn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(http.Handler) *httptest.Server
	}{{"http", httptest.NewServer}, {"https", httptest.NewTLSServer}} {
		t.Run(tc.name, func(t *testing.T) {
			conns := map[string]int{}
			srv := tc.start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				conns[r.RemoteAddr]++
				if r.Method != http.MethodPost || r.URL.Path != "/webhooks/codehost" || r.Header.Get("X-Github-Delivery") != "d-1" || string(body) != `{"a":1}` {
					http.Error(w, "unexpected request", http.StatusBadRequest)
					return
				}
				if r.Header.Get("X-Close") != "" {
					w.Header().Set("Connection", "close")
				}
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, `{"events":[{}]}`)
			}))
			defer srv.Close()
			bc, err := newBenchConn(srv.URL + "/webhooks/codehost")
			if err != nil {
				t.Fatal(err)
			}
			if srv.TLS != nil {
				bc.tlsConf.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			}
			defer bc.Close()
			var answer bytes.Buffer
			header := [][2]string{{"Content-Type", "application/json"}, {"X-Github-Delivery", "d-1"}}
			for i := range 3 {
				h := header
				if i == 1 {
					h = append(h, [2]string{"X-Close", "1"})
				}
				status, err := bc.post(context.Background(), h, []byte(`{"a":1}`), &answer)
				if err != nil || status != http.StatusAccepted || answer.String() != `{"events":[{}]}` {
					t.Fatalf("request %d: %d %q %v", i, status, answer.String(), err)
				}
			}
			if len(conns) != 2 {
				t.Fatalf("requests came over %d connections (%v), want 2: one reused, one after the close", len(conns), conns)
			}
		})
	}
	if _, err := newBenchConn("ftp://example.com/x"); err == nil {
		t.Fatal("an ftp URL was accepted")
	}
}
