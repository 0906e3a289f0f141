//go:build unix

package testenv

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Redis is a throwaway redis-server of one test, for what the shared
// Redis must not be put through: a configuration of the test's own, a
// stall (Pause), a kill.
type Redis struct {
	// URL is where it listens (redis://127.0.0.1:<port>/0).
	URL    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartRedis runs redis-server on a free port with extra arguments (after
// defaults that keep nothing on disk) and waits until it answers PING. It
// is killed when the test ends. A missing redis-server is Missing.
func StartRedis(tb testing.TB, args ...string) *Redis {
	tb.Helper()
	port := strconv.Itoa(FreePort(tb))
	args = append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", tb.TempDir(),
		"--save", "", "--appendonly", "no"}, args...)
	r := runRedisServer(tb, "redis-server", port, args...)
	r.URL = "redis://127.0.0.1:" + port + "/0"
	return r
}

// runRedisServer starts redis-server with args, which must make it listen
// on 127.0.0.1:port, kills it when the test ends, and waits until it
// answers PING; what names it in failures.
func runRedisServer(tb testing.TB, what, port string, args ...string) *Redis {
	tb.Helper()
	cmd := exec.Command(Binary(tb, "redis-server"), args...)
	var out Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", what, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	r := &Redis{addr: "127.0.0.1:" + port, cmd: cmd, exited: exited}
	tb.Cleanup(r.kill)
	Eventually(tb, 10*time.Second, what+" on port "+port+" to answer PING", func() bool {
		select {
		case <-exited:
			tb.Fatalf("%s exited:\n%s", what, out.String())
		default:
		}
		return r.answers(200 * time.Millisecond)
	})
	return r
}

// Pause stops the server (SIGSTOP): connections stay open and nothing is
// answered, as with a stalled or partitioned Redis.
func (r *Redis) Pause(tb testing.TB) {
	tb.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatalf("pause redis-server: %v", err)
	}
}

// Resume continues a paused server (SIGCONT).
func (r *Redis) Resume(tb testing.TB) {
	tb.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		tb.Fatalf("resume redis-server: %v", err)
	}
}

// answers reports whether the server answers PING within d.
func (r *Redis) answers(d time.Duration) bool {
	conn, err := net.DialTimeout("tcp", r.addr, d)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// Addr returns host:port the server listens on.
func (r *Redis) Addr() string { return r.addr }

// Kill stops the server with SIGKILL, as a crash would; it waits for the
// process to exit.
func (r *Redis) Kill(tb testing.TB) {
	tb.Helper()
	r.kill()
}

func (r *Redis) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a paused server dies only once resumed
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// StartSentinels runs n Redis Sentinels (redis-server --sentinel) on free
// ports watching the master at masterAddr as "mymaster", with a quorum of
// two, a second to call it down and five for a failover; they are killed
// when the test ends. It returns their addresses once each answers PING.
func StartSentinels(tb testing.TB, masterAddr string, n int) []string {
	tb.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatal(err)
	}
	var addrs []string
	for range n {
		sport := strconv.Itoa(FreePort(tb))
		dir := tb.TempDir()
		// Sentinels rewrite their configuration: it must be writable.
		conf := filepath.Join(dir, "sentinel.conf")
		text := "port " + sport + "\nbind 127.0.0.1\ndir " + dir + "\n" +
			"sentinel monitor mymaster " + host + " " + port + " 2\n" +
			"sentinel down-after-milliseconds mymaster 1000\n" +
			"sentinel failover-timeout mymaster 5000\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		addrs = append(addrs, runRedisServer(tb, "sentinel", sport, conf, "--sentinel").addr)
	}
	return addrs
}
