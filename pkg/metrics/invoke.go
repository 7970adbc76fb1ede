package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// invokeSeries keeps the series OnInvoke counts into, looked up in the
// vectors once per plugin, hook and outcome: a lookup by label values
// hashes them and takes the vector's lock, which cost more than the count
// itself on the path of every plugin invocation (a third of an in-process
// built-in's).
type invokeSeries struct {
	mu        sync.RWMutex
	counts    map[invokeKey]prometheus.Counter
	durations map[invokeKey]prometheus.Observer // by plugin and hook (v unset)
}

type invokeKey struct {
	plugin string
	hook   cpex.HookType
	v      executor.Verdict
}

// observe counts one invocation into the vectors of m.
func (s *invokeSeries) observe(m *Metrics, plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
	k, dk := invokeKey{plugin, hook, v}, invokeKey{plugin: plugin, hook: hook}
	reached := v.Reached()
	s.mu.RLock()
	c := s.counts[k]
	var o prometheus.Observer
	if reached {
		o = s.durations[dk]
	}
	s.mu.RUnlock()
	if c == nil || (reached && o == nil) {
		c, o = s.add(m, k, dk, reached)
	}
	c.Inc()
	if reached {
		o.Observe(d.Seconds())
	}
}

// add looks up the series of k (and of dk when reached) in the vectors and
// keeps them.
func (s *invokeSeries) add(m *Metrics, k, dk invokeKey, reached bool) (prometheus.Counter, prometheus.Observer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts, s.durations = map[invokeKey]prometheus.Counter{}, map[invokeKey]prometheus.Observer{}
	}
	c := s.counts[k]
	if c == nil {
		c = m.invocations.WithLabelValues(k.plugin, string(k.hook), k.v.String())
		s.counts[k] = c
	}
	var o prometheus.Observer
	if reached {
		if o = s.durations[dk]; o == nil {
			o = m.invokeDuration.WithLabelValues(dk.plugin, string(dk.hook))
			s.durations[dk] = o
		}
	}
	return c, o
}

// forget drops plugin's series, and runs del (which deletes them from the
// vectors) under the same lock, so that no invocation caches a series
// that del then deletes.
func (s *invokeSeries) forget(plugin string, del func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.counts {
		if k.plugin == plugin {
			delete(s.counts, k)
		}
	}
	for k := range s.durations {
		if k.plugin == plugin {
			delete(s.durations, k)
		}
	}
	del()
}
