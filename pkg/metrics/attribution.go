package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// attributionMetrics are the series of the shared attribution store
// (extproc.attribution.store: redis): round trips, their errors, and the
// answers given (or writes dropped) without it.
type attributionMetrics struct {
	duration  *prometheus.HistogramVec
	errors    *prometheus.CounterVec
	fallbacks *prometheus.CounterVec
}

func newAttributionMetrics(reg prometheus.Registerer) attributionMetrics {
	a := attributionMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "attribution_store_duration_seconds",
			Help:    "Round trips to the shared attribution store, by operation (lookup, lookup_task, write: one pipeline of queued writes).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}},
			[]string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "attribution_store_errors_total",
			Help: "Failed round trips to the shared attribution store, by operation."}, []string{"op"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "attribution_store_fallbacks_total",
			Help: "Lookups answered from this replica's memory alone and writes dropped, by operation and reason (error, down: in the backoff after an error, queue_full)."},
			[]string{"op", "reason"}),
	}
	reg.MustRegister(a.duration, a.errors, a.fallbacks)
	return a
}

// StoreOp implements redisstore.Observer.
func (m *Metrics) StoreOp(op string, d time.Duration, err error) {
	m.attr.duration.WithLabelValues(op).Observe(d.Seconds())
	if err != nil {
		m.attr.errors.WithLabelValues(op).Inc()
	}
}

// StoreFallback implements redisstore.Observer.
func (m *Metrics) StoreFallback(op, reason string) {
	m.attr.fallbacks.WithLabelValues(op, reason).Inc()
}
