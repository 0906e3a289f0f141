package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/store/boltstore"
	"github.com/triggerd/triggerd/store/redisstore"
	"github.com/triggerd/triggerd/store/storetest"
)

// BenchmarkPages measures the server time of the list and detail pages
// with N deliveries, N event records and N runs of one tenant stored
// (N = $TRIGGERD_CONSOLE_BENCH_N, default 100,000), spread over the last
// two days, on bbolt and on Redis. Seeding takes a while: run it alone,
//
//	go test -run XXX -bench BenchmarkPages -benchtime 20x ./console
func BenchmarkPages(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("TRIGGERD_CONSOLE_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	backends := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"bolt", func(b *testing.B) store.Store {
			st, err := boltstore.Open(filepath.Join(b.TempDir(), "store.db"), boltstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
		{"redis", func(b *testing.B) store.Store {
			st, err := redisstore.Open(context.Background(), storetest.RedisURL(b), redisstore.Options{Prefix: storetest.Prefix(b), AllowVolatile: true})
			if err != nil {
				b.Fatal(err)
			}
			return st
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			b.Cleanup(func() { st.Close() })
			ids := seed(b, st, n)
			c, err := New(Options{Auth: fakeAuth{}, Accounts: &fakeAccounts{}, Registry: &fakeRegistry{}, Records: st, Logger: zerolog.Nop()})
			if err != nil {
				b.Fatal(err)
			}
			cookie, _ := c.sessions.create(false, "t1", "")
			for _, pg := range []struct{ name, path string }{
				{"deliveries", "/console/deliveries"},
				{"deliveries-page-200", "/console/deliveries?before=" + ids.delivery},
				{"deliveries-refused", "/console/deliveries?answer=refused"},
				{"deliveries-last-hour", "/console/deliveries?range=1h"},
				{"delivery", "/console/deliveries/" + ids.delivery},
				{"events", "/console/events"},
				{"event", "/console/events/" + ids.event},
				{"runs", "/console/runs"},
				{"runs-failed", "/console/runs?status=failed"},
				{"runs-page-after-200", "/console/runs?before=" + ids.runCursor},
				{"run", "/console/runs/" + ids.run},
				{"overview", "/console/"},
			} {
				b.Run(pg.name, func(b *testing.B) {
					for b.Loop() {
						req := httptest.NewRequest(http.MethodGet, pg.path, nil)
						req.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
						rec := httptest.NewRecorder()
						c.ServeHTTP(rec, req)
						if rec.Code != http.StatusOK {
							b.Fatalf("%s: %d", pg.path, rec.Code)
						}
					}
				})
			}
		})
	}
}

type seeded struct{ delivery, event, run, runCursor string }

// seed stores n deliveries (one in ten refused), n event records and n
// runs (one in ten failed) of tenant t1, received over the last two
// days, newest last.
func seed(b *testing.B, st store.Store, n int) seeded {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	now := time.Now()
	step := 48 * time.Hour / time.Duration(n)
	at := func(i int) time.Time { return now.Add(-48 * time.Hour).Add(time.Duration(i) * step) }
	var out seeded
	batch := make([]store.DeliveryRecord, 0, 1000)
	for i := range n {
		answer, status := store.AnswerAccepted, 202
		if i%10 == 0 {
			answer, status = store.AnswerRefused, 401
		}
		d := store.DeliveryRecord{ID: store.NewDeliveryID(at(i)), TenantID: "t1", Connector: "codehost",
			DeliveryID: fmt.Sprintf("gh-%d", i), Key: fmt.Sprintf("h1/gh-%d", i), Hook: "h1", Event: "issues", Action: "opened",
			Answer: answer, Status: status, ReceivedAt: at(i),
			Events: []store.DeliveryEvent{{ID: fmt.Sprintf("ev-%d", i), Kind: "new_issue"}}}
		batch = append(batch, d)
		if i == n-200 {
			out.delivery = d.ID
		}
		if len(batch) == cap(batch) || i == n-1 {
			if err := st.PutDeliveries(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 1)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				status := store.RunSucceeded
				if i%10 == 0 {
					status = store.RunFailed
				}
				r := store.Run{ID: fmt.Sprintf("run-%d", i), TenantID: "t1", EventID: fmt.Sprintf("ev-%d", i), TriggerID: "tr1",
					AgentID: "ag1", Kind: "new_issue", Status: status, Delivery: store.DeliverNATS, CreatedAt: at(i),
					Steps: []store.StepRun{{Name: "s", Step: "codehost.create_issue_comment", Status: store.StepSucceeded,
						Input: []byte(`{"body":"Thanks"}`), Output: []byte(`{"id":1}`)}}}
				e := store.EventRecord{TenantID: "t1", EventID: r.EventID, Kind: "new_issue", Subject: "triggers.codehost.new_issue.o.r",
					DeliveryID: fmt.Sprintf("gh-%d", i), ReceivedAt: at(i), DispatchedAt: at(i),
					Outcomes: []store.Outcome{{TriggerID: "tr1", AgentID: "ag1", Result: "started", RunID: r.ID}}}
				if _, err := st.CreateRun(ctx, r); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				if err := st.PutEvent(ctx, e); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	out.event, out.run = fmt.Sprintf("ev-%d", n-200), fmt.Sprintf("run-%d", n-200)
	out.runCursor = store.RunCursor{CreatedAt: at(n - 200), ID: out.run}.String()
	b.Logf("seeded %d deliveries, events and runs in %s", n, time.Since(start).Round(time.Millisecond))
	return out
}
