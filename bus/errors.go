package bus

import (
	"context"
	"errors"
	"net"

	"github.com/nats-io/nats.go"
)

// Unreachable reports whether err, from Connect, says that NATS
// could not be reached (nothing listening, no route, no answer in time, a
// name that does not resolve yet, as a stopped container's does not),
// which may pass by itself. A NATS that refused triggerd (credentials, no
// JetStream) or a malformed URL will not: those are errors for the
// operator.
func Unreachable(err error) bool {
	var addrErr *net.AddrError
	var opErr *net.OpError
	switch {
	case errors.As(err, &addrErr): // "invalid port": the URL's fault
		return false
	case errors.Is(err, nats.ErrNoServers), errors.Is(err, nats.ErrTimeout):
		// nats.go reports a refused connection as no servers.
		return true
	case errors.As(err, &opErr):
		return true
	}
	// The attempt's own deadline: a NATS that accepted the connection
	// and did not answer JetStream's requests in time.
	return errors.Is(err, context.DeadlineExceeded)
}

// Unauthorized reports whether err, from Connect, says that the server
// refused the user or password triggerd connected with.
func Unauthorized(err error) bool { return errors.Is(err, nats.ErrAuthorization) }
