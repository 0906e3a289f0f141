//go:build unix

package testenv

import (
	"bufio"
	"net"
	"os/exec"
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
	URL  string
	addr string
	cmd  *exec.Cmd
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
	r := &Redis{URL: "redis://127.0.0.1:" + port + "/0", addr: "127.0.0.1:" + port, cmd: cmd}
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
