package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures the in-process NATS server that triggerd runs
// when no external NATS is given.
type EmbeddedOptions struct {
	// Listen is host:port for agents and tools to connect to; port 0 picks
	// a free one.
	Listen string
	// DataDir is triggerd's data directory; JetStream stores under
	// DataDir/jetstream.
	DataDir string
	// MaxPayload is the largest message the server accepts, in bytes.
	// Zero means DefaultEmbeddedMaxPayload.
	MaxPayload int32
	// Logger receives the server's own log lines; nil discards them.
	Logger server.Logger
	// ListenFlag names the setting Listen came from, for error messages
	// ("--nats-listen").
	ListenFlag string
	// DropBehind writes each stream's sealed blocks to disk and drops them
	// from the page cache as they are sealed (Linux only; see
	// dropbehind.go for why). StartEmbedded fails on other platforms.
	DropBehind bool
	// Auth, when set, is who may connect (see ClientAuth); without it
	// the server is open to anyone who reaches Listen, as tests and the
	// bench's own servers are.
	Auth *ClientAuth
	// Cluster, when its Routes are set, makes the server a member of a
	// JetStream cluster of embedded (or other) servers.
	Cluster EmbeddedCluster
}

// EmbeddedCluster is how an embedded server joins a JetStream cluster.
type EmbeddedCluster struct {
	// Name is the cluster's name (DefaultClusterName if empty); every
	// member must give the same.
	Name string
	// ServerName is this server's name, unique in the cluster and kept
	// across restarts (JetStream knows its peers by it). Empty, it is
	// the host name and the cluster port.
	ServerName string
	// Listen is host:port the server takes routes from other members on.
	Listen string
	// Routes are the members' route URLs (nats://host:port); they may
	// include this server's own.
	Routes []string
	// Password, when set, is what members authenticate their routes with
	// (user RouteUser): every member must be given the same.
	Password string
	// ListenFlag and RoutesFlag name the settings, for errors.
	ListenFlag, RoutesFlag string
}

// DefaultClusterName is the name of a cluster of embedded servers.
const DefaultClusterName = "triggerd"

// RouteUser is the user members of a cluster of embedded servers
// authenticate their routes as.
const RouteUser = "triggerd-route"

// DefaultEmbeddedMaxPayload is the embedded server's max payload: 8 MiB,
// the largest size NATS recommends. Bodies over it are archived in chunks.
const DefaultEmbeddedMaxPayload = 8 << 20

// ErrListenBusy reports that the embedded server's address is taken.
var ErrListenBusy = errors.New("address already in use")

// ErrStoreLocked reports that another process runs an embedded server on
// the same data directory. nats-server does not lock its store itself, and
// two servers writing one store would corrupt it.
var ErrStoreLocked = errors.New("the NATS store is in use by another process")

// storeLockFile is the lock StartEmbedded holds in StoreDir, beside the
// directory nats-server writes (StoreDir/jetstream).
const storeLockFile = "triggerd.lock"

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	srv *server.Server
	// clusterSize is the members of its cluster (0 outside any).
	clusterSize int
	// stopDrop stops the drop-behind goroutine and waits for it; nil
	// when none runs.
	stopDrop func()
	// unlock releases the store's lock.
	unlock func()
}

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections. A busy address is an error wrapping
// ErrListenBusy that names the setting to change; a data directory whose
// store another process's embedded server holds is one wrapping
// ErrStoreLocked.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	flagName := o.ListenFlag
	if flagName == "" {
		flagName = "listen address"
	}
	if o.DropBehind && !DropBehindSupported {
		return nil, ErrDropBehindUnsupported
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s %q: want host:port: %w", flagName, o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%s %q: bad port", flagName, o.Listen)
	}
	storeDir := filepath.Join(o.DataDir, "jetstream")
	if err := os.MkdirAll(storeDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded nats: create the store: %w", err)
	}
	lock := filepath.Join(storeDir, storeLockFile)
	unlock, err := lockStore(lock)
	if errors.Is(err, ErrStoreLocked) {
		return nil, fmt.Errorf("data directory %s: %w (%s is held): stop that process, give this one a data directory of its own, or connect it to the first one's NATS with --nats-url", o.DataDir, err, lock)
	} else if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			unlock()
		}
	}()
	if port != 0 {
		// nats-server reports a busy port only through its logger and then
		// never becomes ready; check first so the error is clear.
		ln, lerr := net.Listen("tcp", o.Listen)
		if lerr != nil {
			if errors.Is(lerr, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("%s %s: %w (is another NATS server running? choose another address with %s, or connect to that server with --nats-url)", flagName, o.Listen, ErrListenBusy, flagName)
			}
			return nil, fmt.Errorf("%s %s: %w", flagName, o.Listen, lerr)
		}
		ln.Close()
	}
	maxPayload := o.MaxPayload
	if maxPayload == 0 {
		maxPayload = DefaultEmbeddedMaxPayload
	}
	opts := &server.Options{
		ServerName:             "triggerd",
		Host:                   host,
		Port:                   port,
		JetStream:              true,
		StoreDir:               storeDir,
		MaxPayload:             maxPayload,
		NoSigs:                 true,
		DisableJetStreamBanner: true,
		NoLog:                  o.Logger == nil,
	}
	if port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	clusterSize := 0
	if len(o.Cluster.Routes) > 0 {
		if clusterSize, err = o.Cluster.apply(opts); err != nil {
			return nil, err
		}
	}
	var auth *authenticator
	if o.Auth != nil {
		if auth, err = newAuthenticator(*o.Auth); err != nil {
			return nil, err
		}
		opts.CustomClientAuthentication = auth
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if logger := o.Logger; logger != nil {
		if clusterSize > 0 && auth != nil {
			logger = clusterLogger{logger}
		}
		srv.SetLoggerV2(logger, false, false, false)
	}
	if auth != nil {
		if err := auth.setServer(srv); err != nil {
			return nil, err
		}
	}
	srv.Start()
	if !srv.ReadyForConnections(15 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats on %s did not become ready in 15s (is %s busy?)", o.Listen, flagName)
	}
	started = true
	e := &Embedded{srv: srv, unlock: unlock, clusterSize: clusterSize}
	if o.DropBehind {
		e.stopDrop = startDropBehind(opts.StoreDir, o.Logger)
	}
	return e, nil
}

// ClusterSize returns how many servers the cluster the server is a member
// of has, its own included, as its routes name them; 0 outside any
// cluster. Connect reads it through Options.Embedded.
func (e *Embedded) ClusterSize() int { return e.clusterSize }

// ClientURL returns the URL clients connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// InProcessConn returns a connection to the server that bypasses the
// network stack; Connect uses it when Options.Embedded is set.
func (e *Embedded) InProcessConn() (net.Conn, error) { return e.srv.InProcessConn() }

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	if e.stopDrop != nil {
		e.stopDrop()
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	e.unlock()
}
