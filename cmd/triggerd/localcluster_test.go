//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/triggerd/triggerd/internal/testenv"
)

// scripts/local-cluster.sh starts docker-compose.yml's topology from local
// binaries: three nats-servers, Redis with a replica and three sentinels,
// two triggerd processes. Both take deliveries into the one R3 events
// stream, a delivery one accepted is a duplicate for the other, and stop
// ends every process start started.
func TestLocalClusterScript(t *testing.T) {
	testenv.Binary(t, "redis-server")
	testenv.Binary(t, "curl")
	natsServer := testenv.NATSServerBinary(t)
	ports := func(n int) string {
		var p []string
		for range n {
			p = append(p, strconv.Itoa(testenv.FreePort(t)))
		}
		return strings.Join(p, ",")
	}
	httpPorts := ports(2)
	dir := t.TempDir()
	env := append(cleanEnv(),
		"NATS_PORTS="+ports(3), "NATS_ROUTE_PORTS="+ports(3), "NATS_MONITOR_PORTS="+ports(3),
		"REDIS_PORTS="+ports(2), "SENTINEL_PORTS="+ports(3), "TRIGGERD_HTTP_PORTS="+httpPorts,
		"NATS_SERVER_BIN="+natsServer, "TRIGGERD_BIN="+binary,
		"TRIGGERD_CODEHOST_WEBHOOK_SECRET=local-cluster-secret")
	script := filepath.Join("..", "..", "scripts", "local-cluster.sh")
	run := func(cmd string) string {
		t.Helper()
		c := exec.Command("bash", script, cmd, dir)
		c.Env = env
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		done := make(chan error, 1)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("local-cluster.sh %s: %v\n%s\n%s", cmd, err, out.String(), clusterLogs(dir))
			}
		case <-time.After(3 * time.Minute):
			c.Process.Kill()
			<-done
			t.Fatalf("local-cluster.sh %s still running after 3 minutes:\n%s", cmd, out.String())
		}
		return out.String()
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			run("stop")
		}
	})
	out := run("start")
	t.Log(out)
	pids := map[string]int{}
	for _, name := range []string{"nats-1", "nats-2", "nats-3", "redis", "redis-replica", "sentinel-1", "sentinel-2", "sentinel-3", "triggerd-1", "triggerd-2"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
		if err != nil {
			t.Fatalf("no pid file for %s: %v", name, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(pid, 0) != nil {
			t.Fatalf("%s (pid %q) is not running", name, b)
		}
		pids[name] = pid
	}

	urls := strings.Split(httpPorts, ",")
	body := issueBody(1)
	r, err := post("http://127.0.0.1:"+urls[0], "local-cluster-secret", delivery{event: "issues", id: "local-1", body: body})
	if err != nil || r.status != 202 || r.body.Spooled || r.body.Duplicate || len(r.body.Events) == 0 {
		t.Fatalf("delivery to triggerd-1: %v, %d %+v", err, r.status, r.body)
	}
	r, err = post("http://127.0.0.1:"+urls[1], "local-cluster-secret", delivery{event: "issues", id: "local-1", body: body})
	if err != nil || r.status/100 != 2 || !r.body.Duplicate {
		t.Fatalf("the same delivery to triggerd-2: %v, %d %+v; want a duplicate", err, r.status, r.body)
	}
	natsURL := strings.TrimSpace(strings.SplitN(strings.SplitAfter(out, "NATS cluster up: ")[1], "\n", 2)[0])
	for _, stream := range []string{"TRIGGERD_EVENTS", "TRIGGERD_AGENTS"} {
		if n, leader := streamReplicas(t, natsURL, stream); n != 3 || leader == "" {
			t.Errorf("stream %s: %d replicas, leader %q; want 3 and a leader", stream, n, leader)
		}
	}

	run("stop")
	stopped = true
	for name, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("%s (pid %d) still runs after stop", name, pid)
		}
	}
}

// clusterLogs returns the tail of each log in dir, for a failure's message.
func clusterLogs(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}
