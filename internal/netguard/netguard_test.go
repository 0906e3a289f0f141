package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	valid := []string{
		"https://agent.example.com/hook",
		"http://example.com:8080/x?y=1",
		"https://93.184.216.34/hook",
		"https://[2606:2800:220:1:248:1893:25c8:1946]/hook",
	}
	invalid := []string{
		"", "example.com/hook", "ftp://example.com/", "javascript:alert(1)", "https:///path",
		"https://user:pw@example.com/", "https://user@example.com/", "https://example.com:99999/",
		"https://example.com:0/", "http://[::1", "mailto:someone@example.com", "https:opaque",
	}
	private := []string{
		"http://127.0.0.1/", "http://127.1.2.3:8080/", "http://localhost:8080/", "http://LOCALHOST./",
		"http://agent.localhost/", "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1/",
		"http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://[fe80::1%25eth0]/",
		"http://0.0.0.0/", "http://[::]/", "http://[::ffff:127.0.0.1]/", "http://100.100.100.200/",
		"http://[64:ff9b::a9fe:a9fe]/", "http://[2002:7f00:1::]/", "http://224.0.0.1/",
		"http://255.255.255.255/", "http://[fd00::1]/", "http://[ff02::1]/",
	}
	for _, u := range valid {
		if err := CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
	for _, u := range invalid {
		for _, allow := range []bool{false, true} {
			if err := CheckURL(u, allow); err == nil {
				t.Errorf("CheckURL(%q, %v) accepted it", u, allow)
			}
		}
	}
	for _, u := range private {
		if err := CheckURL(u, false); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("CheckURL(%q, false) = %v, want ErrForbiddenAddress", u, err)
		}
		if err := CheckURL(u, true); err != nil {
			t.Errorf("CheckURL(%q, true) = %v", u, err)
		}
	}
}

// The guarded transport refuses, at dial time, every address CheckURL
// would, named by IP or by a name that resolves to one, and says which
// setting lets them through; allowed, it connects.
func TestTransportRefusesForbiddenAddressesAtDialTime(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	const setting = "--allow-private-things (TRIGGERD_ALLOW_PRIVATE_THINGS)"
	get := func(tr *http.Transport, url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	guarded := Transport(TransportOptions{Setting: setting})
	for _, u := range []string{
		srv.URL,                    // loopback, the test server itself
		"http://localhost:" + port, // a name that resolves to loopback
		"http://169.254.169.254/latest/meta-data/", // cloud metadata
		"http://10.0.0.1:" + port,                  // private
	} {
		err := get(guarded, u)
		var re *RefusedError
		if !errors.Is(err, ErrForbiddenAddress) || !errors.As(err, &re) || !strings.Contains(err.Error(), setting) {
			t.Errorf("GET %s through the guard: %v, want a refusal naming %s", u, err, setting)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the test server got %d requests through the guard, want none", n)
	}
	allowed := Transport(TransportOptions{AllowPrivate: true, Setting: setting})
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		if err := get(allowed, u); err != nil {
			t.Fatalf("GET %s, allowed: %v", u, err)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("the test server got %d requests once allowed, want 2", n)
	}
	// Unnamed, the refusal stays as DialControl words it.
	if err := DialControl("tcp", "127.0.0.1:80", nil); err == nil || err.Error() != "address not allowed: 127.0.0.1" {
		t.Fatalf("DialControl: %v", err)
	}
}
