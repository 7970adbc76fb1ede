package metrics_test

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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

// TestInvocationsAsTheClientLibraryCounts: the sharded series expose what
// the client library's own counter and histogram vectors would, fed the
// same invocations from several goroutines at once: the same series, the
// same counts per outcome and per bucket (durations on the bounds too),
// the same sums up to rounding.
func TestInvocationsAsTheClientLibraryCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	ref := prometheus.NewRegistry()
	counts := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcp_extproc", Name: "plugin_invocations_total"},
		[]string{"plugin", "hook", "outcome"})
	durs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "mcp_extproc", Name: "plugin_invocation_duration_seconds",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"plugin", "hook"})
	ref.MustRegister(counts, durs)

	durations := []time.Duration{0, time.Nanosecond, 499 * time.Microsecond, 500 * time.Microsecond, 500*time.Microsecond + 1,
		time.Millisecond, 2500 * time.Microsecond, 7 * time.Millisecond, 250 * time.Millisecond, time.Second, 2500 * time.Millisecond,
		30 * time.Second, 31 * time.Second, time.Hour}
	var mu sync.Mutex // the reference's vectors are safe, but the feed order is not what is tested
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				plugin := []string{"A", "B", "C"}[(g+i)%3]
				hook := []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}[i%2]
				v := executor.Verdict((g*7 + i) % int(executor.NumVerdicts))
				d := durations[(g+i*3)%len(durations)]
				m.OnInvoke(plugin, hook, v, d)
				mu.Lock()
				counts.WithLabelValues(plugin, string(hook), v.String()).Inc()
				if v.Reached() {
					durs.WithLabelValues(plugin, string(hook)).Observe(d.Seconds())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got, want := gathered(t, reg), gathered(t, ref)
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: missing", k)
		case g.GetCounter().GetValue() != w.GetCounter().GetValue():
			t.Errorf("%s = %v, want %v", k, g.GetCounter().GetValue(), w.GetCounter().GetValue())
		case w.GetHistogram() != nil:
			gh, wh := g.GetHistogram(), w.GetHistogram()
			if gh.GetSampleCount() != wh.GetSampleCount() || math.Abs(gh.GetSampleSum()-wh.GetSampleSum()) > 1e-6*wh.GetSampleSum() {
				t.Errorf("%s: count %d sum %v, want %d, %v", k, gh.GetSampleCount(), gh.GetSampleSum(), wh.GetSampleCount(), wh.GetSampleSum())
			}
			for i, b := range wh.GetBucket() {
				if gb := gh.GetBucket()[i]; gb.GetUpperBound() != b.GetUpperBound() || gb.GetCumulativeCount() != b.GetCumulativeCount() {
					t.Errorf("%s: bucket le=%v: %d, want le=%v: %d", k, gb.GetUpperBound(), gb.GetCumulativeCount(), b.GetUpperBound(), b.GetCumulativeCount())
				}
			}
		}
	}
}

// gathered returns the invocation series of reg by name and labels.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "mcp_extproc_plugin_invoc") {
			continue
		}
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range m.GetLabel() {
				k += "," + l.GetName() + "=" + l.GetValue()
			}
			out[k] = m
		}
	}
	return out
}

// An outcome that is none of the executor's verdicts is still counted,
// under its name.
func TestOtherOutcomeCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Verdict(99), time.Millisecond)
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Verdict(99), time.Millisecond)
	if got := invocations(t, reg, executor.Verdict(99).String()); got != 2 {
		t.Errorf("outcome %q = %v, want 2", executor.Verdict(99).String(), got)
	}
	m.ForgetPlugin("P")
	if got := invocations(t, reg, executor.Verdict(99).String()); got != 0 {
		t.Errorf("outcome %q = %v after ForgetPlugin", executor.Verdict(99).String(), got)
	}
}

// A series handed to the executor counts as OnInvoke does, into the same
// series.
func TestSeriesCountsAsOnInvoke(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	s := m.Series("P", cpex.ToolPreInvoke)
	s.Observe(executor.Allowed, time.Millisecond)
	s.Observe(executor.Allowed, time.Millisecond)
	m.OnInvoke("P", cpex.ToolPreInvoke, executor.Allowed, time.Millisecond)
	s.Observe(executor.Skipped, 0)
	if got := invocations(t, reg, "allow"); got != 3 {
		t.Errorf("allow = %v, want 3", got)
	}
	if got := invocations(t, reg, "skipped"); got != 1 {
		t.Errorf("skipped = %v, want 1", got)
	}
	if n, _ := durations(t, reg); n != 3 {
		t.Errorf("durations observed %d, want 3", n)
	}
}
