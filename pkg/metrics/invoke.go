package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// invokeSeries keeps the series OnInvoke counts into, looked up in the
// vectors once per plugin, hook and outcome: a lookup by label values
// hashes them and takes the vector's lock, which cost more than the count
// itself on the path of every plugin invocation (a third of an in-process
// built-in's). An invocation reads them without a lock: one map lookup by
// plugin and hook in a map replaced, never modified, when a series is
// added or a plugin forgotten (a read lock's count is a write every core
// contends for, on the path of every plugin call).
type invokeSeries struct {
	mu     sync.Mutex // serializes the writers of byHook
	byHook atomic.Pointer[map[hookKey]*hookSeries]
}

type hookKey struct {
	plugin string
	hook   cpex.HookType
}

// hookSeries is the series of one plugin on one hook, each looked up in
// its vector on first use (so that no outcome that never happened shows
// as a zero series).
type hookSeries struct {
	counts   [executor.NumVerdicts]atomic.Pointer[counter]
	duration atomic.Pointer[observer]
}

type counter struct{ prometheus.Counter }
type observer struct{ prometheus.Observer }

// observe counts one invocation into the vectors of m. A Verdict that is
// none of the executor's (OnInvoke is exported) is counted under its
// String, looked up each time.
func (s *invokeSeries) observe(m *Metrics, plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
	reached := v.Reached()
	var hs *hookSeries
	if cur := s.byHook.Load(); cur != nil {
		hs = (*cur)[hookKey{plugin, hook}]
	}
	if hs == nil || v < 0 || v >= executor.NumVerdicts {
		s.slow(m, plugin, hook, v, reached, d)
		return
	}
	c, o := hs.counts[v].Load(), (*observer)(nil)
	if reached {
		o = hs.duration.Load()
	}
	if c == nil || (reached && o == nil) {
		s.slow(m, plugin, hook, v, reached, d)
		return
	}
	c.Inc()
	if reached {
		o.Observe(d.Seconds())
	}
}

// slow counts one invocation whose series are not kept yet: it looks
// them up in the vectors and keeps them.
func (s *invokeSeries) slow(m *Metrics, plugin string, hook cpex.HookType, v executor.Verdict, reached bool, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hookKey{plugin, hook}
	var hs *hookSeries
	cur := s.byHook.Load()
	if cur != nil {
		hs = (*cur)[k]
	}
	if hs == nil {
		hs = &hookSeries{}
		next := make(map[hookKey]*hookSeries, 1)
		if cur != nil {
			next = maps.Clone(*cur)
		}
		next[k] = hs
		s.byHook.Store(&next)
	}
	var c prometheus.Counter
	if v >= 0 && v < executor.NumVerdicts {
		if p := hs.counts[v].Load(); p != nil {
			c = p.Counter
		} else {
			c = m.invocations.WithLabelValues(plugin, string(hook), v.String())
			hs.counts[v].Store(&counter{c})
		}
	} else {
		c = m.invocations.WithLabelValues(plugin, string(hook), v.String())
	}
	c.Inc()
	if !reached {
		return
	}
	o := hs.duration.Load()
	if o == nil {
		o = &observer{m.invokeDuration.WithLabelValues(plugin, string(hook))}
		hs.duration.Store(o)
	}
	o.Observe(d.Seconds())
}

// forget drops plugin's series, and runs del (which deletes them from the
// vectors) under the same lock, so that no invocation keeps a series that
// del then deletes: one that loaded the series before counts into the
// deleted one once, as it would have counted just before the deletion.
func (s *invokeSeries) forget(plugin string, del func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.byHook.Load(); cur != nil {
		next := maps.Clone(*cur)
		maps.DeleteFunc(next, func(k hookKey, _ *hookSeries) bool { return k.plugin == plugin })
		s.byHook.Store(&next)
	}
	del()
}
