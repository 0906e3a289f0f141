// Package netguard keeps outgoing connections off the addresses an
// outsider must not make triggerd reach: loopback, private, link-local and
// other reserved ranges (reliability case 27). CheckURL refuses such a URL
// when it is saved; DialControl refuses such an address at every dial, so
// no name, redirect or DNS rebinding gets around it. Transport is a client
// transport that dials through it: HTTP agents' and providers'.
package netguard

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrForbiddenAddress reports a URL or connection aimed at an address
// outgoing requests may not reach: loopback, private, link-local, unspecified,
// multicast, shared (100.64.0.0/10) or otherwise reserved.
var ErrForbiddenAddress = errors.New("address not allowed")

// CheckURL reports whether raw can be the URL of an outside service (an HTTP agent): absolute http or
// https, with a host, a valid port if any, and no user information. Unless
// allowPrivate, a host that is an IP address in a forbidden range, or
// localhost, is refused too (the error wraps ErrForbiddenAddress). Names
// can resolve anywhere, and differently each time: a client dialing with
// DialControl checks the address it actually dials.
func CheckURL(raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("push: invalid URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("push: URL scheme %q: want http or https", u.Scheme)
	}
	if u.User != nil {
		return errors.New("push: URL must not carry user information")
	}
	host := u.Hostname()
	if u.Opaque != "" || host == "" {
		return errors.New("push: URL has no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("push: URL port %q is invalid", p)
		}
	}
	if allowPrivate {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && forbidden(ip) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, host)
	}
	return nil
}

// DialControl is a net.Dialer Control function that refuses to connect to
// a forbidden address (see ErrForbiddenAddress). It runs on the resolved
// address of every connection attempt, so no name, redirect or DNS
// rebinding gets around it.
func DialControl(network, address string, _ syscall.RawConn) error {
	return check(address, "")
}

// ControlNaming is DialControl with errors that name setting, the
// operator's setting that lets such addresses through
// ("--allow-private-provider-urls (TRIGGERD_...)").
func ControlNaming(setting string) func(network, address string, c syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error { return check(address, setting) }
}

// check refuses address (host:port, as dialed) when it is forbidden.
func check(address, setting string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Address: address, Setting: setting, notIP: true}
	}
	if forbidden(ap.Addr()) {
		return &RefusedError{Address: ap.Addr().String(), Setting: setting}
	}
	return nil
}

// RefusedError is a connection refused by the dial guard. It matches
// ErrForbiddenAddress.
type RefusedError struct {
	// Address is the IP address dialed (or what was dialed, when it was
	// not one).
	Address string
	// Setting names what lets such addresses through; empty when the
	// caller says it elsewhere.
	Setting string
	notIP   bool
}

func (e *RefusedError) Error() string {
	msg := ErrForbiddenAddress.Error() + ": " + e.Address
	if e.notIP {
		return msg + " is not an IP address"
	}
	if e.Setting != "" {
		msg += " is a loopback, private, link-local or reserved address, which the dial guard refuses; the operator can allow such addresses with " + e.Setting
	}
	return msg
}

// Is reports whether target is ErrForbiddenAddress.
func (e *RefusedError) Is(target error) bool { return target == ErrForbiddenAddress }

// TransportOptions configures Transport.
type TransportOptions struct {
	// AllowPrivate turns the guard off: every address may be dialed.
	AllowPrivate bool
	// Setting names the operator's setting that sets AllowPrivate, for the
	// guard's errors.
	Setting string
}

// Transport returns a transport for requests to services outside: proxies
// from the environment are not used (a proxy would dial for us,
// unchecked), and, unless o.AllowPrivate, every connection it makes goes
// to an address that is not forbidden, checked after the name is
// resolved (see DialControl). Share one: it pools connections.
func Transport(o TransportOptions) *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		dialer.Control = ControlNaming(o.Setting)
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// reserved holds the ranges forbidden beyond those netip classifies.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT, some clouds' metadata)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("2001::/32"),       // Teredo, which embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// forbidden reports whether ip is an address agents may not be reached on.
func forbidden(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return true
		}
	}
	// Addresses that embed an IPv4 address are as good as that address.
	b := ip.As16()
	switch {
	case ip.Is6() && nat64.Contains(ip):
		return forbidden(netip.AddrFrom4([4]byte(b[12:16])))
	case ip.Is6() && sixToFour.Contains(ip):
		return forbidden(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}
