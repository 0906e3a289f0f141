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
	bin := Binary(tb, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	args = append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", tb.TempDir(),
		"--save", "", "--appendonly", "no"}, args...)
	cmd := exec.Command(bin, args...)
	var out Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a paused server dies only once resumed
		_ = cmd.Process.Kill()
		<-exited
	})
	r := &Redis{URL: "redis://127.0.0.1:" + port + "/0", addr: "127.0.0.1:" + port, cmd: cmd, exited: exited}
	Eventually(tb, 10*time.Second, "redis-server on port "+port+" to answer PING", func() bool {
		select {
		case <-exited:
			tb.Fatalf("redis-server exited:\n%s", out.String())
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
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// StartSentinels runs n Redis Sentinels (redis-server --sentinel) on free
// ports watching the master at masterAddr as "mymaster", with a quorum of
// two, a second to call it down and five for a failover; they are killed
// when the test ends. It returns their addresses once each answers PING.
func StartSentinels(tb testing.TB, masterAddr string, n int) []string {
	tb.Helper()
	bin := Binary(tb, "redis-server")
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatal(err)
	}
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		sport := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		l.Close()
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
		cmd := exec.Command(bin, conf, "--sentinel")
		var out Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start sentinel: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		tb.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		s := &Redis{addr: "127.0.0.1:" + sport}
		Eventually(tb, 10*time.Second, "sentinel on port "+sport+" to answer PING", func() bool {
			select {
			case <-exited:
				tb.Fatalf("sentinel exited:\n%s", out.String())
			default:
			}
			return s.answers(200 * time.Millisecond)
		})
		addrs = append(addrs, s.addr)
	}
	return addrs
}
