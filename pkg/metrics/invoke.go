package metrics

import (
	"maps"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// invokeBuckets are the upper bounds of plugin_invocation_duration_seconds.
var invokeBuckets = [numInvokeBuckets]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

const numInvokeBuckets = 15

// invokeCollector is plugin_invocations_total and
// plugin_invocation_duration_seconds: one count per plugin invocation and
// one duration per invocation that reached the plugin, on the path of
// every plugin call.
//
// The client library's counters and histograms keep one copy of each
// series, which every core writes: a histogram observation alone is four
// atomic writes to lines the other core had last, and a run of three
// in-process plugins spent a third of its time on them in the sidecar
// (0.8 µs of 2.5 µs). Here each series keeps one copy per shard, a core
// keeps to the shard it last used (shardOf), and a scrape adds the shards
// up. Series are found with one lookup in a map that is replaced, never
// modified, when a series is added or a plugin forgotten.
type invokeCollector struct {
	countDesc, durationDesc *prometheus.Desc
	bounds                  [numInvokeBuckets]time.Duration // invokeBuckets, as durations
	shards                  int                             // a power of two

	shardHints sync.Pool     // of uint8: the shard its P last used
	nextShard  atomic.Uint32 // shards handed out, for hints

	mu     sync.Mutex // serializes the writers of byHook and other
	byHook atomic.Pointer[map[hookKey]*hookSeries]
	// other counts outcomes that are not executor verdicts (OnInvoke is
	// exported), by label: never on the executor's path.
	other map[otherKey]uint64
}

type hookKey struct {
	plugin string
	hook   cpex.HookType
}

type otherKey struct {
	hookKey
	outcome string
}

// hookSeries is the series of one plugin on one hook: one invokeShard
// per shard. It is the executor's HookObserver for that pair.
type hookSeries struct {
	c      *invokeCollector
	key    hookKey
	shards []invokeShard
}

// invokeShard is one shard's counts of one series, a whole number of
// cache lines, so that two shards never share one.
type invokeShard struct {
	verdicts [executor.NumVerdicts]atomic.Uint64
	// buckets counts the durations per bucket, not cumulated; the last
	// is +Inf.
	buckets  [numInvokeBuckets + 1]atomic.Uint64
	sumNanos atomic.Uint64
	_        [(64 - (executor.NumVerdicts+numInvokeBuckets+2)*8%64) % 64]byte
}

func newInvokeCollector() *invokeCollector {
	c := &invokeCollector{
		countDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "plugin_invocations_total"),
			"Plugin hook invocations, by plugin, hook and outcome (allow, modify, block, violation_not_enforced, stop, error, timeout, down, invalid, dropped, skipped).",
			[]string{"plugin", "hook", "outcome"}, nil),
		durationDesc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "plugin_invocation_duration_seconds"),
			"Latency of plugin hook invocations that reached the plugin.",
			[]string{"plugin", "hook"}, nil),
		// At least one shard per core, up to 32 (8 KiB a series).
		shards: 1 << bits.Len(uint(min(max(runtime.GOMAXPROCS(0), runtime.NumCPU()), 32)-1)),
		other:  map[otherKey]uint64{},
	}
	for i, b := range invokeBuckets {
		c.bounds[i] = time.Duration(b * float64(time.Second))
	}
	return c
}

// shardOf returns the shard for the calling goroutine and a function
// that gives it back. A sync.Pool keeps one value per P, handed back to
// the same P: a core keeps writing the same shard, whose lines stay in
// its cache. Values lost to a garbage collection are handed out anew.
// A uint8 in an interface is not allocated.
func (c *invokeCollector) shardOf() uint8 {
	if v, ok := c.shardHints.Get().(uint8); ok {
		return v
	}
	return uint8(c.nextShard.Add(1) & uint32(c.shards-1))
}

// observe counts one invocation.
func (c *invokeCollector) observe(plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
	c.series(plugin, hook).Observe(v, d)
}

// series returns the series of plugin on hook, adding it if it is new.
func (c *invokeCollector) series(plugin string, hook cpex.HookType) *hookSeries {
	if cur := c.byHook.Load(); cur != nil {
		if hs := (*cur)[hookKey{plugin, hook}]; hs != nil {
			return hs
		}
	}
	return c.add(hookKey{plugin, hook})
}

// Observe implements executor.HookObserver: it counts one invocation.
func (hs *hookSeries) Observe(v executor.Verdict, d time.Duration) {
	c := hs.c
	if v < 0 || v >= executor.NumVerdicts {
		c.observeOther(hs.key.plugin, hs.key.hook, v)
		return
	}
	i := c.shardOf()
	s := &hs.shards[i]
	s.verdicts[v].Add(1)
	if v.Reached() {
		b := 0
		for b < len(c.bounds) && d > c.bounds[b] {
			b++
		}
		s.buckets[b].Add(1)
		s.sumNanos.Add(uint64(max(d, 0)))
	}
	c.shardHints.Put(i)
}

// add returns the series of k, adding it if it is new.
func (c *invokeCollector) add(k hookKey) *hookSeries {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.byHook.Load()
	if cur != nil {
		if hs := (*cur)[k]; hs != nil {
			return hs
		}
	}
	hs := &hookSeries{c: c, key: k, shards: make([]invokeShard, c.shards)}
	next := make(map[hookKey]*hookSeries, 1)
	if cur != nil {
		next = maps.Clone(*cur)
	}
	next[k] = hs
	c.byHook.Store(&next)
	return hs
}

func (c *invokeCollector) observeOther(plugin string, hook cpex.HookType, v executor.Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.other[otherKey{hookKey{plugin, hook}, v.String()}]++
}

// forget drops plugin's series: an invocation that found them before
// counts into the dropped ones, as it would have counted just before. (The
// executor resolves a plugin's series when it plans the hooks; a plugin is
// forgotten when it left the config, so the next plan has none of its.)
func (c *invokeCollector) forget(plugin string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.byHook.Load(); cur != nil {
		next := maps.Clone(*cur)
		maps.DeleteFunc(next, func(k hookKey, _ *hookSeries) bool { return k.plugin == plugin })
		c.byHook.Store(&next)
	}
	maps.DeleteFunc(c.other, func(k otherKey, _ uint64) bool { return k.plugin == plugin })
}

// Describe implements prometheus.Collector.
func (c *invokeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.countDesc
	ch <- c.durationDesc
}

// Collect implements prometheus.Collector: the shards added up. A count
// that is still zero (an outcome that never happened) is no series, nor a
// duration histogram with no observation, as with the client library's
// vectors, whose series appear on first use.
func (c *invokeCollector) Collect(ch chan<- prometheus.Metric) {
	var byHook map[hookKey]*hookSeries
	if cur := c.byHook.Load(); cur != nil {
		byHook = *cur
	}
	for k, hs := range byHook {
		var verdicts [executor.NumVerdicts]uint64
		var buckets [numInvokeBuckets + 1]uint64
		var sum uint64
		for i := range hs.shards {
			s := &hs.shards[i]
			for v := range verdicts {
				verdicts[v] += s.verdicts[v].Load()
			}
			for b := range buckets {
				buckets[b] += s.buckets[b].Load()
			}
			sum += s.sumNanos.Load()
		}
		for v, n := range verdicts {
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(c.countDesc, prometheus.CounterValue, float64(n), k.plugin, string(k.hook), executor.Verdict(v).String())
			}
		}
		// The count is the buckets' total, read once: it agrees with them
		// even while invocations go on.
		var count uint64
		cumulative := make(map[float64]uint64, len(invokeBuckets))
		for b, upper := range invokeBuckets {
			count += buckets[b]
			cumulative[upper] = count
		}
		if count += buckets[len(invokeBuckets)]; count > 0 {
			ch <- prometheus.MustNewConstHistogram(c.durationDesc, count, time.Duration(sum).Seconds(), cumulative, k.plugin, string(k.hook))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.other {
		ch <- prometheus.MustNewConstMetric(c.countDesc, prometheus.CounterValue, float64(n), k.plugin, string(k.hook), k.outcome)
	}
}
