//go:build unix

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// natsServerModule is the module whose main package is nats-server: the
// version go.mod requires is the one triggerd embeds.
const natsServerModule = "github.com/nats-io/nats-server/v2"

var natsServerBuild struct {
	once sync.Once
	path string
	err  error
}

// NATSServerBinary returns a nats-server executable of the version go.mod
// requires, built with the Go toolchain on first use and kept in the user's
// cache directory (one build per version, shared by every package's
// tests). Debian's nats-server is too old for what triggerd uses. When it
// cannot be built, it is Missing.
func NATSServerBinary(tb testing.TB) string {
	tb.Helper()
	b := &natsServerBuild
	b.once.Do(func() { b.path, b.err = buildNATSServer() })
	if b.err != nil {
		Missing(tb, "a nats-server built from go.mod's "+natsServerModule, b.err)
	}
	return b.path
}

func buildNATSServer() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	out, err := command(root, "go", "list", "-m", "-f", "{{.Version}}", natsServerModule)
	if err != nil {
		return "", err
	}
	version := strings.TrimSpace(out)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "triggerd-test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "nats-server-"+version)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path, nil
	}
	// Build beside the final name and rename: packages testing at once
	// each see a whole binary or none.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if _, err := command(root, "go", "build", "-o", tmp, natsServerModule); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above " + dir)
		}
	}
}

func command(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// NATSNode is one server of a NATSCluster.
type NATSNode struct {
	// Name is its server_name.
	Name string
	// URL is where clients connect (nats://127.0.0.1:<port>).
	URL string
	// ClusterURL is its route address (nats://127.0.0.1:<port>).
	ClusterURL string
	monitor    string
	conf       string
	env        []string
	out        *Buffer
	cmd        *exec.Cmd
	exited     chan struct{}
}

// NATSCluster is a JetStream cluster of nats-server processes on
// loopback, stopped when the test ends.
type NATSCluster struct {
	Nodes []*NATSNode
	bin   string
}

// FreePort returns a loopback port nothing listens on right now.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartNATSCluster starts n nats-server processes with JetStream, routed
// to one another as cluster "triggerd-test", and waits until every one
// reports JetStream healthy (a meta leader elected). n may be 1: a lone
// server, outside any cluster.
func StartNATSCluster(tb testing.TB, n int) *NATSCluster {
	tb.Helper()
	c := &NATSCluster{bin: NATSServerBinary(tb)}
	dir := tb.TempDir()
	for i := range n {
		c.Nodes = append(c.Nodes, &NATSNode{
			Name:       fmt.Sprintf("n%d", i+1),
			URL:        fmt.Sprintf("nats://127.0.0.1:%d", FreePort(tb)),
			ClusterURL: fmt.Sprintf("nats://127.0.0.1:%d", FreePort(tb)),
			monitor:    fmt.Sprintf("127.0.0.1:%d", FreePort(tb)),
		})
	}
	var routes []string
	for _, node := range c.Nodes {
		routes = append(routes, strconv.Quote(node.ClusterURL))
	}
	for _, node := range c.Nodes {
		var conf strings.Builder
		fmt.Fprintf(&conf, "server_name: %s\nlisten: %q\nhttp: %q\n", node.Name, strings.TrimPrefix(node.URL, "nats://"), node.monitor)
		fmt.Fprintf(&conf, "jetstream { store_dir: %q }\n", filepath.Join(dir, node.Name))
		if n > 1 {
			fmt.Fprintf(&conf, "cluster { name: triggerd-test, listen: %q, routes: [%s] }\n",
				strings.TrimPrefix(node.ClusterURL, "nats://"), strings.Join(routes, ", "))
		}
		node.conf = filepath.Join(dir, node.Name+".conf")
		if err := os.WriteFile(node.conf, []byte(conf.String()), 0o600); err != nil {
			tb.Fatal(err)
		}
		c.start(tb, node)
	}
	tb.Cleanup(func() {
		for _, node := range c.Nodes {
			node.kill()
			if tb.Failed() {
				tb.Logf("the last lines nats-server %s logged:\n%s", node.Name, lastLines(node.Output(), 25))
			}
		}
	})
	c.WaitHealthy(tb, 30*time.Second)
	return c
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StartNATSClusterFromConfig starts n nats-servers (n at most 3) from
// one configuration file, as an operator would, each given its own
// settings in the environment: SERVER_NAME, CLIENT_LISTEN, CLUSTER_LISTEN,
// MONITOR_LISTEN, STORE_DIR and every member's route URL in ROUTE_1 to
// ROUTE_n, plus env (passwords, say). It waits until every server reports
// JetStream healthy; they are stopped when the test ends.
func StartNATSClusterFromConfig(tb testing.TB, conf string, n int, env ...string) *NATSCluster {
	tb.Helper()
	c := &NATSCluster{bin: NATSServerBinary(tb)}
	dir := tb.TempDir()
	for i := range n {
		c.Nodes = append(c.Nodes, &NATSNode{
			Name:       fmt.Sprintf("nats-%d", i+1),
			URL:        fmt.Sprintf("nats://127.0.0.1:%d", FreePort(tb)),
			ClusterURL: fmt.Sprintf("nats://127.0.0.1:%d", FreePort(tb)),
			monitor:    fmt.Sprintf("127.0.0.1:%d", FreePort(tb)),
			conf:       conf,
		})
	}
	var routes []string
	for i, node := range c.Nodes {
		routes = append(routes, fmt.Sprintf("ROUTE_%d=%s", i+1, node.ClusterURL))
	}
	for _, node := range c.Nodes {
		node.env = append([]string{
			"SERVER_NAME=" + node.Name,
			"CLIENT_LISTEN=" + strings.TrimPrefix(node.URL, "nats://"),
			"CLUSTER_LISTEN=" + strings.TrimPrefix(node.ClusterURL, "nats://"),
			"MONITOR_LISTEN=" + node.monitor,
			"STORE_DIR=" + filepath.Join(dir, node.Name),
		}, append(slices.Clone(routes), env...)...)
		c.start(tb, node)
	}
	tb.Cleanup(func() {
		for _, node := range c.Nodes {
			node.kill()
		}
	})
	c.WaitHealthy(tb, 60*time.Second)
	return c
}

// URL returns every node's client URL, comma-separated, as nats.go and
// triggerd's --nats-url take them.
func (c *NATSCluster) URL() string {
	var urls []string
	for _, node := range c.Nodes {
		urls = append(urls, node.URL)
	}
	return strings.Join(urls, ",")
}

// Node returns the node named name, or nil.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, node := range c.Nodes {
		if node.Name == name {
			return node
		}
	}
	return nil
}

func (c *NATSCluster) start(tb testing.TB, node *NATSNode) {
	tb.Helper()
	node.out = &Buffer{}
	node.cmd = exec.Command(c.bin, "-c", node.conf)
	if node.env != nil {
		node.cmd.Env = append(os.Environ(), node.env...)
	}
	node.cmd.Stdout, node.cmd.Stderr = node.out, node.out
	if err := node.cmd.Start(); err != nil {
		tb.Fatalf("start nats-server %s: %v", node.Name, err)
	}
	node.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(node.cmd, node.exited)
}

// Kill stops node with SIGKILL, as a power loss would, and waits for it to
// exit.
func (c *NATSCluster) Kill(tb testing.TB, node *NATSNode) {
	tb.Helper()
	node.kill()
}

func (node *NATSNode) kill() {
	if node.cmd == nil {
		return
	}
	_ = node.cmd.Process.Signal(syscall.SIGKILL)
	<-node.exited
	node.cmd = nil
}

// Restart starts a killed node again on its ports and store.
func (c *NATSCluster) Restart(tb testing.TB, node *NATSNode) {
	tb.Helper()
	node.kill()
	c.start(tb, node)
}

// Output returns what node's server has logged.
func (node *NATSNode) Output() string { return node.out.String() }

// Healthy reports whether node answers its health check (JetStream
// enabled and current with the cluster).
func (node *NATSNode) Healthy() bool {
	if node.cmd == nil {
		return false
	}
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + node.monitor + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitHealthy waits until every running node is healthy.
func (c *NATSCluster) WaitHealthy(tb testing.TB, d time.Duration) {
	tb.Helper()
	Eventually(tb, d, "every nats-server of the cluster to report JetStream healthy", func() bool {
		for _, node := range c.Nodes {
			if node.cmd == nil {
				continue
			}
			select {
			case <-node.exited:
				tb.Fatalf("nats-server %s exited:\n%s", node.Name, node.Output())
			default:
			}
			if !node.Healthy() {
				return false
			}
		}
		return true
	})
}
