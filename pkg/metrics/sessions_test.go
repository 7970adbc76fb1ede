package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

func TestSessionMetrics(t *testing.T) {
	m := New(prometheus.NewRegistry())
	m.OnSessions("Guard", pluginclient.Sessions{Ready: 5, Rebuilding: 1, Down: 2, Draining: 3, Endpoints: 2})
	m.OnRebuildCause("Guard", pluginclient.CauseNotFound)
	m.OnRebuildCause("Guard", pluginclient.CauseNotFound)
	for _, c := range []struct {
		got  float64
		want float64
	}{
		{value(t, m.sess.sessions.WithLabelValues("Guard", "ready")), 5},
		{value(t, m.sess.sessions.WithLabelValues("Guard", "rebuilding")), 1},
		{value(t, m.sess.sessions.WithLabelValues("Guard", "down")), 2},
		{value(t, m.sess.sessions.WithLabelValues("Guard", "draining")), 3},
		{value(t, m.sess.sessions.WithLabelValues("Guard", "connecting")), 0},
		{value(t, m.sess.endpoints.WithLabelValues("Guard")), 2},
		{value(t, m.sess.causes.WithLabelValues("Guard", "not_found")), 2},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	m.ForgetPlugin("Guard")
	for name, c := range map[string]prometheus.Collector{"sessions": m.sess.sessions, "endpoints": m.sess.endpoints, "causes": m.sess.causes} {
		if n := count(c); n != 0 {
			t.Errorf("%d %s series left after ForgetPlugin", n, name)
		}
	}
}

// value reads a gauge's or counter's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}

// count returns how many series c has.
func count(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 100)
	c.Collect(ch)
	close(ch)
	return len(ch)
}
