package ingest

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/triggerd/triggerd/triggers"
)

// metrics are the ingest server's Prometheus series.
type metrics struct {
	deliveries *prometheus.CounterVec
	events     *prometheus.CounterVec
	latencies  *prometheus.HistogramVec
	// known is the set of source events used as label values; anything
	// else is "other", so senders cannot grow the label set.
	known map[string]bool
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_ingest_deliveries_total",
			Help: "Webhook deliveries by source, event and outcome (accepted, ignored, spooled, duplicate, ping, unavailable, or the error code of a rejection).",
		}, []string{"source", "event", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "triggerd_ingest_events_published_total",
			Help: "Trigger events made durable, by kind.",
		}, []string{"kind"}),
		latencies: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "triggerd_ingest_latency_seconds",
			Help:    "Time from receiving a delivery to answering it durably, by source.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"source"}),
		known: map[string]bool{"ping": true},
	}
	for _, k := range triggers.Kinds() {
		for _, src := range k.Sources {
			name, _, _ := strings.Cut(src, " ")
			if k.Connector == triggers.CodeHost {
				name, _, _ = strings.Cut(name, ".")
			}
			m.known[name] = true
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.deliveries, m.events, m.latencies} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) eventLabel(c triggers.Connector, sourceEvent string) string {
	if m.known[sourceEvent] {
		return sourceEvent
	}
	return "other"
}

func (m *metrics) delivery(c triggers.Connector, event, outcome string) {
	m.deliveries.WithLabelValues(string(c), event, outcome).Inc()
}

func (m *metrics) published(k triggers.Kind) { m.events.WithLabelValues(string(k)).Inc() }

func (m *metrics) latency(c triggers.Connector, d time.Duration) {
	m.latencies.WithLabelValues(string(c)).Observe(d.Seconds())
}
