package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Timing is the latency of one operation.
type Timing struct {
	// TTFB is until the first response byte could reach the client; Total
	// until the last one.
	TTFB, Total time.Duration
	// Plugins is the part of Total spent in direct plugin calls (baselines).
	Plugins time.Duration
}

// Op is one measured operation (one exchange, possibly followed by direct
// plugin calls). It must be safe to call from many goroutines at once.
type Op func(ctx context.Context) (Timing, error)

// Stats summarizes one run of one target.
type Stats struct {
	Ops        int
	P50, P99   time.Duration // of Timing.Total
	TTFB50     time.Duration // p50 of Timing.TTFB
	Plugins50  time.Duration // p50 of Timing.Plugins
	Throughput float64       // operations per second
	// AllocsPerOp and BytesPerOp are heap allocations per operation in the
	// whole process (driver, gRPC both ends, servers, plugins).
	AllocsPerOp, BytesPerOp float64
	// Concurrent runs only: the largest values seen while the run lasted.
	Goroutines int
	RSS        int64 // VmRSS, bytes
	HeapBytes  int64 // live and not yet swept heap objects, bytes
}

// Config sets how long a comparison runs.
type Config struct {
	// Rounds is how many times each target runs; the order of the targets
	// rotates from round to round.
	Rounds int
	// Duration is how long one target runs in one round, and MinOps how
	// many operations it makes at least (whichever ends later).
	Duration time.Duration
	MinOps   int
	// Warmup operations per target before the first round.
	Warmup int
}

// Comparison holds the per-round stats of targets measured side by side.
type Comparison struct {
	// Rounds[r][t] is target t's stats in round r.
	Rounds [][]Stats
}

// Median returns target t's stats, each field the median over the rounds.
func (c *Comparison) Median(t int) Stats {
	f := func(get func(Stats) float64) float64 {
		vs := make([]float64, len(c.Rounds))
		for r := range c.Rounds {
			vs[r] = get(c.Rounds[r][t])
		}
		return median(vs)
	}
	d := func(get func(Stats) time.Duration) time.Duration {
		return time.Duration(f(func(s Stats) float64 { return float64(get(s)) }))
	}
	return Stats{
		Ops:         int(f(func(s Stats) float64 { return float64(s.Ops) })),
		P50:         d(func(s Stats) time.Duration { return s.P50 }),
		P99:         d(func(s Stats) time.Duration { return s.P99 }),
		TTFB50:      d(func(s Stats) time.Duration { return s.TTFB50 }),
		Plugins50:   d(func(s Stats) time.Duration { return s.Plugins50 }),
		Throughput:  f(func(s Stats) float64 { return s.Throughput }),
		AllocsPerOp: f(func(s Stats) float64 { return s.AllocsPerOp }),
		BytesPerOp:  f(func(s Stats) float64 { return s.BytesPerOp }),
		Goroutines:  int(f(func(s Stats) float64 { return float64(s.Goroutines) })),
		RSS:         int64(f(func(s Stats) float64 { return float64(s.RSS) })),
		HeapBytes:   int64(f(func(s Stats) float64 { return float64(s.HeapBytes) })),
	}
}

// Ratio returns the median over the rounds of metric(a)/metric(b), each
// ratio taken within one round.
func (c *Comparison) Ratio(a, b int, metric func(Stats) float64) float64 {
	vs := make([]float64, 0, len(c.Rounds))
	for _, r := range c.Rounds {
		if den := metric(r[b]); den > 0 {
			vs = append(vs, metric(r[a])/den)
		}
	}
	return median(vs)
}

// RatioOfPairs is [Comparison.Ratio] for targets measured on two
// instances each: the median over the rounds of (a+a2)/(b+b2). Started in
// mirrored order (a, b, ..., b2, a2), the two instances of a target stand
// in both places, and an effect of which instance serves it cancels.
func (c *Comparison) RatioOfPairs(a, a2, b, b2 int, metric func(Stats) float64) float64 {
	vs := make([]float64, 0, len(c.Rounds))
	for _, r := range c.Rounds {
		if den := metric(r[b]) + metric(r[b2]); den > 0 {
			vs = append(vs, (metric(r[a])+metric(r[a2]))/den)
		}
	}
	return median(vs)
}

// Metrics for [Comparison.Ratio].

// MetricP50 is the median latency.
func MetricP50(s Stats) float64 { return float64(s.P50) }

// MetricP99 is the 99th percentile latency.
func MetricP99(s Stats) float64 { return float64(s.P99) }

// MetricTTFB is the median time to first byte.
func MetricTTFB(s Stats) float64 { return float64(s.TTFB50) }

// MetricThroughput is operations per second.
func MetricThroughput(s Stats) float64 { return s.Throughput }

// Compare measures ops side by side: after a warm-up, it runs each of them
// sequentially (one operation at a time) for cfg.Duration in each of
// cfg.Rounds rounds, rotating their order every round, so that drifts of a
// shared, noisy machine hit all of them alike.
func Compare(ctx context.Context, cfg Config, ops ...Op) (*Comparison, error) {
	return compare(ctx, cfg, ops, func(ctx context.Context, op Op) (Stats, error) {
		return sequential(ctx, op, cfg.Duration, cfg.MinOps)
	})
}

// CompareLoad is [Compare] with workers concurrent operations per target.
func CompareLoad(ctx context.Context, cfg Config, workers int, ops ...Op) (*Comparison, error) {
	return compare(ctx, cfg, ops, func(ctx context.Context, op Op) (Stats, error) {
		return concurrent(ctx, op, workers, cfg.Duration)
	})
}

func compare(ctx context.Context, cfg Config, ops []Op, run func(context.Context, Op) (Stats, error)) (*Comparison, error) {
	for i, op := range ops {
		for range cfg.Warmup {
			if _, err := op(ctx); err != nil {
				return nil, fmt.Errorf("warm-up of target %d: %w", i, err)
			}
		}
	}
	c := &Comparison{}
	for r := range max(cfg.Rounds, 1) {
		stats := make([]Stats, len(ops))
		for k := range ops {
			t := (r + k) % len(ops) // ABC, BCA, CAB, ...
			s, err := run(ctx, ops[t])
			if err != nil {
				return nil, fmt.Errorf("round %d, target %d: %w", r, t, err)
			}
			stats[t] = s
		}
		c.Rounds = append(c.Rounds, stats)
	}
	return c, nil
}

// sequential runs op one at a time for d and at least minOps times.
func sequential(ctx context.Context, op Op, d time.Duration, minOps int) (Stats, error) {
	settle()
	var total, ttfb, plugins []time.Duration
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	for len(total) < minOps || time.Since(start) < d {
		t, err := op(ctx)
		if err != nil {
			return Stats{}, err
		}
		total = append(total, t.Total)
		ttfb = append(ttfb, t.TTFB)
		plugins = append(plugins, t.Plugins)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	n := float64(len(total))
	return Stats{
		Ops: len(total), P50: percentile(total, 0.50), P99: percentile(total, 0.99), TTFB50: percentile(ttfb, 0.50),
		Plugins50:   percentile(plugins, 0.50),
		Throughput:  n / elapsed.Seconds(),
		AllocsPerOp: float64(m1.Mallocs-m0.Mallocs) / n,
		BytesPerOp:  float64(m1.TotalAlloc-m0.TotalAlloc) / n,
	}, nil
}

// concurrent runs op in workers goroutines for d, sampling goroutines, RSS
// and heap meanwhile.
func concurrent(ctx context.Context, op Op, workers int, d time.Duration) (Stats, error) {
	settle()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		all   []time.Duration
		first error
	)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	deadline := time.Now().Add(d)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			var lat []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t, err := op(ctx)
				if err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					break
				}
				lat = append(lat, t.Total)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	var s Stats
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	sampled := make(chan struct{})
	go func() { // ends with the workers
		defer close(sampled)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			s.Goroutines = max(s.Goroutines, runtime.NumGoroutine())
			s.RSS = max(s.RSS, vmRSS())
			metrics.Read(heap) // no stop-the-world, unlike ReadMemStats
			s.HeapBytes = max(s.HeapBytes, int64(heap[0].Value.Uint64()))
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			if time.Now().After(deadline) {
				return
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	cancel()
	<-sampled
	runtime.ReadMemStats(&m1)
	if first != nil {
		return Stats{}, first
	}
	n := float64(len(all))
	s.Ops = len(all)
	s.P50, s.P99 = percentile(all, 0.50), percentile(all, 0.99)
	s.Throughput = n / elapsed.Seconds()
	s.AllocsPerOp = float64(m1.Mallocs-m0.Mallocs) / n
	s.BytesPerOp = float64(m1.TotalAlloc-m0.TotalAlloc) / n
	return s, nil
}

// settle starts every run from the same state: garbage collected and freed
// memory returned to the OS (so RSS samples belong to the run).
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// vmRSS reads the resident set size of this process (Linux); 0 elsewhere.
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// percentile returns the p-quantile (nearest rank) of ds; it sorts ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(p*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}
