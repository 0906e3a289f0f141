//go:build unix

package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/agent"
	"github.com/triggerd/triggerd/bus/bustest"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/match"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/triggers"
)

// The Redis master is killed with SIGKILL while the dispatcher starts
// agents and runs their tool steps through the store on Sentinel, half a
// second after its replica stopped receiving the master's writes (the
// link up, the data dropped): Redis replicates asynchronously, so what
// the master took meanwhile is lost when the replica is promoted. The store
// acknowledges a run write only once a replica holds it, so what is lost
// only delays: the failover completes, every event gets its run, every
// agent is started once (one message per run in its stream) and no tool
// step runs twice. (With run writes acknowledged by the master alone,
// steps whose records were lost ran again after the failover.)
func TestSentinelFailoverUnderDispatch(t *testing.T) {
	master := testenv.StartRedis(t, "--appendonly", "yes")
	link := newLink(t, master.Addr())
	replica := testenv.StartRedis(t, "--appendonly", "yes", "--replicaof", "127.0.0.1", strings.TrimPrefix(link.addr, "127.0.0.1:"))
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rc.Close()
	ctx := context.Background()
	testenv.Eventually(t, 30*time.Second, "the replica's link to the master to be up", func() bool {
		info, err := rc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	sentinels := testenv.StartSentinels(t, master.Addr(), 3)
	url := fmt.Sprintf("redis://%s/0?master_name=mymaster&addr=%s&addr=%s", sentinels[0], sentinels[1], sentinels[2])
	st, err := redisstore.Open(ctx, url, redisstore.Options{Prefix: "failover:"})
	if err != nil {
		t.Fatalf("open the store through the sentinels: %v", err)
	}
	t.Cleanup(func() { st.Close() })

	b, emb := bustest.Start(t)
	h := newHarnessWith(t, dispatch.Options{}, b, emb, st)
	h.agent("a1", store.PipelineStep{Name: "comment", Step: "codehost.create_comment", Account: "acc1",
		Input: json.RawMessage(`{"issue_number": "{{ .resource.number }}"}`)})
	h.trigger("tr1", "a1", triggers.NewIssue, match.Params{}, "")
	h.start()

	const (
		n       = 120
		pauseAt = 30
		killAt  = 50
	)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var killed time.Time
	for i := range n {
		<-tick.C
		if i == pauseAt {
			// The replica stops receiving the master's writes, its link
			// up, as over a congested network: whatever the master
			// acknowledges from now on is lost when the replica is
			// promoted.
			link.drop.Store(true)
		}
		if i == killAt {
			master.Kill(t)
			killed = time.Now()
		}
		h.deliver(fmt.Sprintf("d-failover-%03d", i), "octo-org/api", i+1)
	}

	testenv.Eventually(t, 60*time.Second, "the store to answer through the promoted replica", func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return st.Ping(pctx) == nil
	})
	failover := time.Since(killed)
	var finished, failed int
	lastLog := time.Now()
	statuses := map[store.RunStatus]int{}
	defer func() {
		if t.Failed() {
			t.Logf("runs by status at the end: %v", statuses)
		}
	}()
	testenv.Eventually(t, 90*time.Second, "every event's run to finish after the failover", func() bool {
		runs, err := st.ListRuns(ctx, store.RunFilter{TenantID: "t1", Limit: 1000})
		if err != nil {
			return false
		}
		finished, failed = 0, 0
		clear(statuses)
		for _, r := range runs {
			statuses[r.Status]++
			switch r.Status {
			case store.RunSucceeded:
				finished++
			case store.RunFailed:
				finished++
				failed++
			}
		}
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			t.Logf("%s after the kill: runs by status %v", time.Since(killed).Round(time.Second), statuses)
		}
		return finished == n
	})
	resumed := time.Since(killed)

	h.steps.mu.Lock()
	calls := map[string]int{}
	for _, c := range h.steps.calls {
		calls[fmt.Sprint(c.Input["issue_number"])]++
	}
	total := len(h.steps.calls)
	h.steps.mu.Unlock()
	for number, c := range calls {
		if c > 1 {
			t.Errorf("the step of issue %s ran %d times", number, c)
		}
	}
	if got := h.subjectCount(agent.Stream, agent.RunsSubject("a1")); got != n {
		t.Errorf("%d runs published to the agent, want %d: one start per event", got, n)
	}
	t.Logf("master killed at event %d; the store answered again %s later; all %d runs finished %s after the kill (%d failed: a step whose outcome a lost write hid is not run again); %d steps ran",
		killAt, failover.Round(time.Millisecond), n, resumed.Round(time.Millisecond), failed, total)
}

// link forwards a replica's connection to its master, and drops what the
// master sends once drop is set, the connection kept open.
type link struct {
	addr string
	drop atomic.Bool
}

func newLink(t *testing.T, master string) *link {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lk := &link{addr: l.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", master)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				io.Copy(out, in)
				out.Close()
			}()
			go func() {
				defer wg.Done()
				defer in.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 && !lk.drop.Load() {
						if _, werr := in.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return lk
}
