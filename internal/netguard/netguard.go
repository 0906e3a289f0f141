// Package netguard keeps outgoing connections off the addresses an
// outsider must not make triggerd reach: loopback, private, link-local and
// other reserved ranges (reliability case 27). CheckURL refuses such a URL
// when it is saved; DialControl refuses such an address at every dial, so
// no name, redirect or DNS rebinding gets around it.
package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
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
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address", ErrForbiddenAddress, address)
	}
	if forbidden(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrForbiddenAddress, ap.Addr())
	}
	return nil
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
