package registry

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's Prometheus metrics.
type metrics struct {
	redeliveries *prometheus.CounterVec
}

// newMetrics registers the metrics with reg (none when nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_registry_redeliveries_total",
			Help: "Events GitHub failed to deliver to a hook, by what healing did: requested (a redelivery asked for) or abandoned (refused by the receiver, still failing after the last redelivery, or too old).",
		}, []string{"result"}),
	}
	// Both series exist from the start, at 0, so that dashboards and
	// alerts see them before the first outage.
	for _, r := range []string{"requested", "abandoned"} {
		m.redeliveries.WithLabelValues(r)
	}
	if reg != nil {
		if err := reg.Register(m.redeliveries); err != nil {
			return nil, fmt.Errorf("register registry metrics: %w", err)
		}
	}
	return m, nil
}
