package ingest

import (
	"errors"
	"fmt"
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
		events: newPublishedCounter(),
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
		for _, c := range []prometheus.Collector{m.deliveries, m.latencies} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
		var err error
		if m.events, err = registerPublished(reg, m.events); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// newPublishedCounter returns the counter of events published to NATS.
// The Server counts the events it commits, the Spooler those it forwards
// (a spooled delivery's events reach NATS only then, if at all: NATS may
// hold them already).
func newPublishedCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "triggerd_ingest_events_published_total",
		Help: "Trigger events published to NATS, by kind: committed by the webhook endpoints, or forwarded from the spool.",
	}, []string{"kind"})
}

// registerPublished registers c with reg, or returns the counter already
// registered there: the Server and the Spooler share one.
func registerPublished(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("ingest: register the published events counter: %w", err)
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
