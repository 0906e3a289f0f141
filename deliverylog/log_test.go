package deliverylog

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/triggerd/triggerd/ingest"
	"github.com/triggerd/triggerd/internal/testenv"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/store/storetest"
	"github.com/triggerd/triggerd/triggers"
)

func openStore(t testing.TB) *boltstore.Store {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "store.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func run(t testing.TB, l *Log) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestRecordsReachTheStore(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	if _, err := st.CreateHook(ctx, store.Hook{ID: "h1", TenantID: "t1", Connector: "codehost", Scope: store.HookRepository, Target: "o/r"}); err != nil {
		t.Fatal(err)
	}
	l, err := New(Options{Store: st, FlushEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, l)
	at := time.Now()
	scope := &triggers.Scope{Hook: "h1", Tenant: "t1"}
	l.Record(ingest.DeliveryOutcome{Connector: triggers.CodeHost, Hook: "h1", Scope: scope, DeliveryID: "d1", Key: "h1/d1",
		Event: "issues", Action: "opened", Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at,
		Events: []triggers.Event{{ID: "e1", Kind: triggers.NewIssue, Resource: triggers.Resource{Type: "issue", Number: 7, Title: "Crash"}}}})
	// Refused before the hook was resolved: the tenant comes from the hook.
	l.Record(ingest.DeliveryOutcome{Connector: triggers.CodeHost, Hook: "h1", DeliveryID: "d2", Key: "h1/d2",
		Answer: store.AnswerRefused, Status: 401, Code: "invalid_signature", ReceivedAt: at.Add(time.Millisecond)})
	// A hook that does not exist: no tenant, not recorded.
	l.Record(ingest.DeliveryOutcome{Connector: triggers.CodeHost, Hook: "nope", Answer: store.AnswerRefused, Status: 400, ReceivedAt: at})
	var ds []store.DeliveryRecord
	testenv.Eventually(t, 5*time.Second, "two records in the store", func() bool {
		ds, err = st.ListDeliveries(ctx, store.DeliveryFilter{TenantID: "t1"})
		return err == nil && len(ds) == 2
	})
	if ds[0].DeliveryID != "d2" || ds[0].Key != "" || ds[0].Code != "invalid_signature" {
		t.Errorf("newest record %+v: want d2, refused, not archived", ds[0])
	}
	if ds[1].DeliveryID != "d1" || ds[1].Key != "h1/d1" || len(ds[1].Events) != 1 || ds[1].Events[0].Kind != "new_issue" {
		t.Errorf("older record %+v: want d1 with its event", ds[1])
	}
	if ds[1].Summary != "#7 Crash" || len(ds[1].Events) != 1 || ds[1].Events[0].Summary != "#7 Crash" {
		t.Errorf("older record %+v: want the issue's number and title as its summary and its event's", ds[1])
	}
}

// slowStore blocks its writes until released.
type slowStore struct {
	*boltstore.Store
	release chan struct{}
}

func (s *slowStore) PutDeliveries(ctx context.Context, ds []store.DeliveryRecord) error {
	<-s.release
	return s.Store.PutDeliveries(ctx, ds)
}

func TestRecordNeverBlocks(t *testing.T) {
	st := &slowStore{Store: openStore(t), release: make(chan struct{})}
	l, err := New(Options{Store: st, Buffer: 4, Batch: 1, FlushEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, l)
	t.Cleanup(func() { close(st.release) })
	scope := &triggers.Scope{Hook: "h", Tenant: "t"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			l.Record(ingest.DeliveryOutcome{Scope: scope, Hook: "h", Answer: store.AnswerAccepted, ReceivedAt: time.Now()})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked while the store was stuck")
	}
}

// BenchmarkRecord is what recording adds to a delivery to a hook on
// ingest's path.
func BenchmarkRecord(b *testing.B) {
	l, err := New(Options{Store: openStore(b)})
	if err != nil {
		b.Fatal(err)
	}
	run(b, l)
	o := ingest.DeliveryOutcome{Connector: triggers.CodeHost, Hook: "h", Scope: &triggers.Scope{Hook: "h", Tenant: "t"},
		DeliveryID: "d", Key: "h/d", Event: "issues", Action: "opened", Answer: store.AnswerAccepted, Status: 202,
		Events: []triggers.Event{{ID: "e", Kind: triggers.NewIssue}}, ReceivedAt: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		l.Record(o)
	}
}

// BenchmarkWrite is the writer's cost per recorded delivery, off ingest's
// path: turning outcomes into records and storing them in batches of 500
// in bbolt. Its cpu-ns/op is the figure to compare.
func BenchmarkWrite(b *testing.B) {
	benchWrite(b, openStore(b))
}

// BenchmarkWriteRedis is BenchmarkWrite with the Redis store (storetest's
// server, a key prefix of its own); redis-cpu-ns/op is what the Redis
// server spent per record (INFO cpu: it may serve others meanwhile).
func BenchmarkWriteRedis(b *testing.B) {
	url, prefix := storetest.RedisURL(b), storetest.Prefix(b)
	st, err := redisstore.Open(b.Context(), url, redisstore.Options{Prefix: prefix, AllowVolatile: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer func() { _ = rdb.Close() }()
	serverCPU := func() float64 {
		info, err := rdb.Info(b.Context(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		sum := 0.0
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				sum += f
			}
		}
		return sum
	}
	cpu0 := serverCPU()
	benchWrite(b, st)
	b.ReportMetric((serverCPU()-cpu0)*1e9/float64(b.N), "redis-cpu-ns/op")
}

func benchWrite(b *testing.B, st Store) {
	l, err := New(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	o := ingest.DeliveryOutcome{Connector: triggers.CodeHost, Hook: "h", Scope: &triggers.Scope{Hook: "h", Tenant: "t"},
		DeliveryID: "d", Key: "h/d", Event: "issues", Action: "opened", Answer: store.AnswerAccepted, Status: 202,
		Events: []triggers.Event{{ID: "e", Kind: triggers.NewIssue}}, ReceivedAt: time.Now()}
	batch := make([]store.DeliveryRecord, 0, benchBatch)
	start := o.ReceivedAt
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	i := 0
	for b.Loop() {
		// 5,000 deliveries a second, as a busy ingest receives them.
		o.ReceivedAt = start.Add(time.Duration(i) * 200 * time.Microsecond)
		i++
		rec, _ := l.record(context.Background(), o)
		batch = append(batch, rec)
		if len(batch) == cap(batch) {
			if err := st.PutDeliveries(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// CPU rather than wall time: the fsyncs wait, and other processes
	// share the host.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Deliveries to the shared endpoints (no hook) go to the shared tenant's
// log.
func TestSharedEndpointDeliveries(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	l, err := New(Options{Store: st, FlushEvery: 10 * time.Millisecond,
		SharedTenant: func(context.Context) (string, error) { return "t-default", nil }})
	if err != nil {
		t.Fatal(err)
	}
	run(t, l)
	at := time.Now()
	l.Record(ingest.DeliveryOutcome{Connector: triggers.CodeHost, DeliveryID: "d1", Key: "d1", Event: "issues", Action: "opened",
		Answer: store.AnswerAccepted, Status: 202, ReceivedAt: at})
	l.Record(ingest.DeliveryOutcome{Connector: triggers.Deploy, Answer: store.AnswerRefused, Status: 401, Code: "invalid_signature", ReceivedAt: at})
	var ds []store.DeliveryRecord
	testenv.Eventually(t, 5*time.Second, "two records of the shared tenant", func() bool {
		ds, err = st.ListDeliveries(ctx, store.DeliveryFilter{TenantID: "t-default"})
		return err == nil && len(ds) == 2
	})
	for _, d := range ds {
		if d.Hook != "" {
			t.Errorf("record %+v: want no hook (a shared endpoint)", d)
		}
	}
}

// benchBatch is BenchmarkWrite's batch.
const benchBatch = 500
