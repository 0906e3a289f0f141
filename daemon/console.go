package daemon

// The web console's wiring (issue 38): the delivery log ingest writes to,
// and the console mounted at /console/ with the services the /v1 API
// uses. buildIngest calls startDeliveryLog, startServices newConsole;
// newHandler mounts it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/triggerd/triggerd/bus"
	"github.com/triggerd/triggerd/console"
	"github.com/triggerd/triggerd/deliverylog"
	"github.com/triggerd/triggerd/dispatch"
	"github.com/triggerd/triggerd/store"
	"github.com/triggerd/triggerd/tenants"
)

// startDeliveryLog starts the writer of the delivery log; stop writes
// what is queued and returns.
func startDeliveryLog(cfg Config, st store.Store, reg prometheus.Registerer, log zerolog.Logger) (*deliverylog.Log, func(), error) {
	dl, err := deliverylog.New(deliverylog.Options{
		Store: st, Retention: cfg.ArchiveRetention, Logger: log, Registerer: reg,
		// The shared endpoints start the default tenant's triggers
		// (sharedTenant): their deliveries are that tenant's.
		SharedTenant: tenants.New(st, nil).Default,
	})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		dl.Run(ctx)
	}()
	return dl, func() { cancel(); <-done }, nil
}

// consoleTenants lists tenants (the store) and creates them (the tenants
// service).
type consoleTenants struct {
	*tenants.Service
	st store.Store
}

func (t consoleTenants) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	return t.st.ListTenants(ctx)
}

// consoleDeps are the services serve has built by the time the console
// is made.
type consoleDeps struct {
	cfg            Config
	st             store.Store
	tenants        *tenants.Service
	accounts       console.Accounts
	registry       console.Registry
	replayer       console.Replayer
	dryRunner      console.DryRunner
	steps          console.Steps
	bus            *bus.Bus
	adminKeys      []string
	unconfigured   []string
	ready          func() bool
	notReadyReason func() string
	reg            prometheus.Gatherer
	log            zerolog.Logger
}

func newConsole(d consoleDeps) (*console.Console, error) {
	unconfigured := map[string]string{}
	for _, c := range d.unconfigured {
		unconfigured[c] = fmt.Sprintf("start triggerd with --%s-client-id and TRIGGERD_%s_CLIENT_SECRET (the provider's app settings show both), or with --sandbox to try it",
			c, strings.ToUpper(c))
	}
	return console.New(console.Options{
		Auth: d.tenants, Tenants: consoleTenants{d.tenants, d.st}, Accounts: d.accounts, Registry: d.registry,
		Records: d.st, Replayer: d.replayer, DryRunner: d.dryRunner, Steps: d.steps, Archive: d.bus, Dead: d.bus,
		Redeliver: &deliverylog.Redeliverer{Bus: d.bus, Store: d.st},
		AdminKeys: d.adminKeys, SecureCookies: strings.HasPrefix(d.cfg.PublicURL, "https://"), PublicURL: d.cfg.PublicURL,
		UnconfiguredConnectors: unconfigured, SharedTenant: tenants.New(d.st, nil).Default,
		Ready: func(ctx context.Context) map[string]error {
			// What /readyz says of NATS, and the store's own ping where it
			// has one (Redis; bolt is a local file, open or not started).
			m := map[string]error{"NATS": nil, "store": nil}
			if !d.ready() {
				m["NATS"] = errors.New(cmp.Or(d.notReadyReason(), "NATS is not reachable") + ": deliveries are spooled")
			}
			if p, ok := d.st.(dispatch.Pinger); ok {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				m["store"] = p.Ping(ctx)
			}
			return m
		},
		Backlog: func(ctx context.Context) []console.Backlog {
			out := []console.Backlog{{Name: "spooled deliveries (this process)", Count: gaugeValue(d.reg, "triggerd_spool_pending")}}
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			n, found, err := d.bus.ConsumerPending(ctx, bus.EventsStream, dispatch.EventsConsumer)
			b := console.Backlog{Name: "events waiting for the dispatcher", Count: int64(n)}
			if err != nil {
				b.Err = err.Error()
			} else if !found {
				b.Err = "no dispatcher consumer (no trigger yet, or --dispatch-workers off)"
			}
			return append(out, b)
		},
		Logger: d.log,
	})
}

// gaugeValue reads a gauge (summed over its labels) from reg; 0 when it
// is not registered.
func gaugeValue(reg prometheus.Gatherer, name string) int64 {
	if reg == nil {
		return 0
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue()
		}
	}
	return int64(sum)
}

// consoleUnavailable answers the console's pages until NATS is reached.
var consoleUnavailable = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "5")
	http.Error(w, "triggerd is starting: NATS is not reachable yet, and the console answers once it is (see the log and /readyz); retry later", http.StatusServiceUnavailable)
})
