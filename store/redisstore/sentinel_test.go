//go:build unix

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
)

// Through Sentinel: the store finds the master, and after the master is
// killed with SIGKILL it finds the replica the sentinels promote. Writes
// acknowledged before the kill and not yet replicated may be lost (Redis
// replicates asynchronously): the test reports how many were.
func TestSentinelFailover(t *testing.T) {
	master := testenv.StartRedis(t, "--appendonly", "yes")
	replica := testenv.StartRedis(t, "--appendonly", "yes", "--replicaof", "127.0.0.1", strings.TrimPrefix(master.Addr(), "127.0.0.1:"))
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	defer rc.Close()
	testenv.Eventually(t, 30*time.Second, "the replica's link to the master to be up", func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	sentinels := testenv.StartSentinels(t, master.Addr(), 3)
	url := fmt.Sprintf("redis://%s/0?master_name=mymaster&addr=%s&addr=%s", sentinels[0], sentinels[1], sentinels[2])
	if !IsSentinelURL(url) {
		t.Fatalf("IsSentinelURL(%q) is false", url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Open(ctx, url, Options{Prefix: "sentinel-test:"})
	if err != nil {
		t.Fatalf("open through the sentinels: %v", err)
	}
	defer s.Close()
	created := time.Now().UTC().Truncate(time.Second)
	agent := func(i int) store.Agent {
		return store.Agent{ID: fmt.Sprintf("ag%03d", i), TenantID: "t1", Name: "a", Delivery: store.DeliverNATS, CreatedAt: created, UpdatedAt: created}
	}
	const before = 50
	for i := range before {
		if _, err := s.CreateAgent(ctx, agent(i)); err != nil {
			t.Fatalf("create agent %d before the failover: %v", i, err)
		}
	}
	if _, err := s.GetAgent(ctx, "t1", agent(0).ID); err != nil {
		t.Fatalf("read back before the failover: %v", err)
	}
	master.Kill(t)
	killed := time.Now()
	// Writes fail until the sentinels have promoted the replica (down
	// after 1 s, then the election and the promotion).
	testenv.Eventually(t, 60*time.Second, "a write to succeed through the promoted replica", func() bool {
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		defer wcancel()
		_, err := s.CreateAgent(wctx, agent(before))
		return err == nil
	})
	t.Logf("writes resumed %s after the master was killed; promoted %s", time.Since(killed).Round(time.Millisecond), replica.Addr())
	lost := 0
	for i := range before {
		if _, err := s.GetAgent(ctx, "t1", agent(i).ID); err != nil {
			lost++
		}
	}
	t.Logf("of %d writes acknowledged before the kill, %d were lost by the failover (asynchronous replication)", before, lost)
}

// A node of a Redis Cluster is refused at startup, saying what to run
// instead.
func TestRedisClusterRefused(t *testing.T) {
	node := testenv.StartRedis(t, "--appendonly", "yes", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, node.URL, Options{Prefix: "cluster-test:"})
	if err == nil {
		s.Close()
		t.Fatal("opened a Redis Cluster node; want a refusal")
	}
	if !errors.Is(err, ErrRedisCluster) || !strings.Contains(err.Error(), "Sentinel") {
		t.Fatalf("error %v; want ErrRedisCluster naming Sentinel", err)
	}
}
