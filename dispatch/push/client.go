package push

import (
	"net"
	"net/http"
	"time"

	"github.com/triggerd/triggerd/internal/netguard"
)

// NewClient returns a client for sending runs: requests time out after
// timeout (none if zero), redirects are not followed, proxies from the
// environment are ignored (a proxy would dial for us, unchecked), and,
// unless allowPrivate, netguard.DialControl refuses forbidden addresses.
// allowPrivate is for development and tests against local agents.
func NewClient(timeout time.Duration, allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = netguard.DialControl
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           100,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    10 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
