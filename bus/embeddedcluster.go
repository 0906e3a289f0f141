package bus

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// apply checks the cluster settings, puts them into the server's options
// (its name, the address it takes routes on, the routes) and returns the
// cluster's size: the distinct routes, plus this server when none of them
// names it.
func (c *EmbeddedCluster) apply(opts *server.Options) (size int, err error) {
	listenFlag, routesFlag := c.ListenFlag, c.RoutesFlag
	if listenFlag == "" {
		listenFlag = "cluster listen address"
	}
	if routesFlag == "" {
		routesFlag = "routes"
	}
	if c.Listen == "" {
		return 0, fmt.Errorf("%s is needed with %s: the address other members' routes reach this server on", listenFlag, routesFlag)
	}
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want host:port: %w", listenFlag, c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("%s %q: bad port", listenFlag, c.Listen)
	}
	seen := map[string]bool{}
	self := false
	routes := make([]*url.URL, 0, len(c.Routes))
	for _, r := range c.Routes {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" || u.Hostname() == "" || u.Port() == "" {
			return 0, fmt.Errorf("%s: route %q: want nats://host:port", routesFlag, r)
		}
		if c.Password != "" {
			u.User = url.UserPassword(RouteUser, c.Password)
		}
		routes = append(routes, u)
		if seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		if u.Port() == portStr && isLocalHost(u.Hostname(), host) {
			self = true
		}
	}
	size = len(seen)
	if !self {
		size++
	}
	serverName := c.ServerName
	if serverName == "" {
		hostname, err := os.Hostname()
		if err != nil || hostname == "" {
			hostname = "triggerd"
		}
		serverName = hostname + "-" + portStr
	}
	if strings.ContainsAny(serverName, " \t\n") {
		return 0, fmt.Errorf("server name %q: no spaces", serverName)
	}
	opts.ServerName = serverName
	opts.Cluster.Name = c.Name
	if opts.Cluster.Name == "" {
		opts.Cluster.Name = DefaultClusterName
	}
	opts.Cluster.Host, opts.Cluster.Port = host, port
	if c.Password != "" {
		opts.Cluster.Username, opts.Cluster.Password = RouteUser, c.Password
	}
	opts.Routes = routes
	return size, nil
}

// isLocalHost reports whether a route's host names this machine, as the
// cluster listen host does: the same name, a loopback or unspecified
// address, or a name or address of one of its interfaces.
func isLocalHost(routeHost, listenHost string) bool {
	if routeHost == listenHost {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, routeHost)
	if err != nil {
		return false
	}
	listenIP := net.ParseIP(listenHost)
	local, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if listenIP != nil && !listenIP.IsUnspecified() {
			if a.IP.Equal(listenIP) {
				return true
			}
			continue
		}
		for _, l := range local {
			if n, ok := l.(*net.IPNet); ok && n.IP.Equal(a.IP) {
				return true
			}
		}
	}
	return false
}
