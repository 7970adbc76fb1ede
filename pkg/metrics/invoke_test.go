package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// durations returns the count of plugin P's invocation duration
// histogram, and whether the series exists.
func durations(t *testing.T, reg *prometheus.Registry) (uint64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "mcp_extproc_plugin_invocation_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "plugin" && l.GetValue() == "P" {
					return m.GetHistogram().GetSampleCount(), true
				}
			}
		}
	}
	return 0, false
}

// TestInvocationSeriesKept: the series OnInvoke keeps between calls count
// like a lookup per call would, a skip creates no duration series, and a
// plugin forgotten (it left the config) starts from zero when it comes
// back rather than counting into the series deleted.
func TestInvocationSeriesKept(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Skipped, 0)
	if _, ok := durations(t, reg); ok {
		t.Error("a skip made a duration series")
	}
	for range 3 {
		m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Millisecond)
	}
	if got := invocations(t, reg, "allow"); got != 3 {
		t.Errorf("allow = %v, want 3", got)
	}
	if n, _ := durations(t, reg); n != 3 {
		t.Errorf("durations observed %d, want 3", n)
	}
	m.ForgetPlugin("P")
	if got := invocations(t, reg, "allow"); got != 0 {
		t.Errorf("allow = %v after ForgetPlugin", got)
	}
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Millisecond)
	if got := invocations(t, reg, "allow"); got != 1 {
		t.Errorf("allow = %v after the plugin came back, want 1", got)
	}
	if n, _ := durations(t, reg); n != 1 {
		t.Errorf("durations observed %d after the plugin came back, want 1", n)
	}
}

// An invocation whose series are kept allocates nothing.
func TestOnInvokeKeptAllocatesNothing(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Millisecond)
	if n := testing.AllocsPerRun(100, func() {
		m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Millisecond)
	}); n != 0 {
		t.Errorf("OnInvoke allocates %v times per call, want 0", n)
	}
}

// BenchmarkOnInvoke is the count and duration of one plugin invocation, on
// every core at once, as the built-ins' calls make it.
func BenchmarkOnInvoke(b *testing.B) {
	m := metrics.New(prometheus.NewRegistry())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Microsecond)
		}
	})
}
