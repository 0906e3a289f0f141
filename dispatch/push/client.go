package push

import (
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
	return &http.Client{
		Transport:     netguard.Transport(netguard.TransportOptions{AllowPrivate: allowPrivate}),
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
