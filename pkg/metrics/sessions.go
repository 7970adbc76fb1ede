package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// sessionMetrics are the per-session series of the plugin clients: how
// many sessions each plugin has in each state, over how many endpoint
// addresses, and why sessions were rebuilt.
type sessionMetrics struct {
	sessions  *prometheus.GaugeVec
	endpoints *prometheus.GaugeVec
	causes    *prometheus.CounterVec
}

func newSessionMetrics(reg prometheus.Registerer) sessionMetrics {
	s := sessionMetrics{
		sessions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "plugin_sessions",
			Help: "Sessions (connections) to each plugin by state: ready, connecting, rebuilding, down, draining."},
			[]string{"plugin", "state"}),
		endpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "plugin_endpoints",
			Help: "Endpoint addresses each plugin's sessions are spread over (1 for a Service address)."},
			[]string{"plugin"}),
		causes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "plugin_session_rebuild_causes_total",
			Help: "Session rebuilds by what was seen: not_found (the server does not know the session: a restart, or another replica), unavailable (HTTP 502, 503, 504 in front of the plugin), unreachable (no answer, and none to a ping)."},
			[]string{"plugin", "cause"}),
	}
	reg.MustRegister(s.sessions, s.endpoints, s.causes)
	return s
}

// OnSessions implements pluginclient.SessionObserver.
func (m *Metrics) OnSessions(plugin string, s pluginclient.Sessions) {
	for state, n := range map[string]int{
		"ready": s.Ready, "connecting": s.Connecting, "rebuilding": s.Rebuilding, "down": s.Down, "draining": s.Draining,
	} {
		m.sess.sessions.WithLabelValues(plugin, state).Set(float64(n))
	}
	m.sess.endpoints.WithLabelValues(plugin).Set(float64(s.Endpoints))
}

// OnRebuildCause implements pluginclient.SessionObserver.
func (m *Metrics) OnRebuildCause(plugin, cause string) {
	m.sess.causes.WithLabelValues(plugin, cause).Inc()
}

// forget removes plugin's session series.
func (s sessionMetrics) forget(plugin string) {
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{s.sessions, s.endpoints, s.causes} {
		v.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	}
}

var _ pluginclient.SessionObserver = (*Metrics)(nil)
