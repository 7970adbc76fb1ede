package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/tcpbalance"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// replicaCounts are the plugin replica counts of the replicas scenario.
var replicaCounts = []int{1, 2, 4}

// replicaStreams is the number of concurrent exchanges of the replicas
// scenario.
const replicaStreams = 16

// replicaWork is how long a plugin replica takes per hook call, one call at
// a time: a single-threaded plugin runtime (a Python plugin serves about
// one call at a time) whose ceiling is 1/replicaWork calls per second. It
// waits rather than computes: on a machine of two cores, computing
// replicas would take the CPU the sidecar needs, while in a cluster each
// replica brings its own.
const replicaWork = 2 * time.Millisecond

// oneAtATime serves one hook call at a time, as a single-threaded plugin
// runtime does.
type oneAtATime struct {
	pluginserver.Plugin
	mu sync.Mutex
}

func (o *oneAtATime) InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Plugin.InvokeHook(ctx, hook, payload, pctx)
}

// replicaSet is one sidecar whose plugin runs as several replicas behind a
// per-connection round-robin balancer.
type replicaSet struct {
	sc      *Endpoint
	lb      *tcpbalance.Balancer
	addrs   []string // of the replicas, in order
	plugins []*PluginServer
}

// startReplicaSet starts n replicas of a plugin on tool_pre_invoke that
// serve one call at a time and take work per call, the balancer in front
// of them and a sidecar whose plugin URL is the
// balancer's (default plugin_sessions). Everything it starts is added to cl.
func startReplicaSet(ctx context.Context, cl *closers, n int, work time.Duration) (*replicaSet, error) {
	rs := &replicaSet{}
	for range n {
		ps, err := StartPlugin(&oneAtATime{Plugin: DelayPlugin("Guard", work, cpex.ToolPreInvoke)})
		if err != nil {
			return nil, err
		}
		cl.add(ps)
		u, err := url.Parse(ps.URL)
		if err != nil {
			return nil, err
		}
		rs.addrs = append(rs.addrs, u.Host)
		rs.plugins = append(rs.plugins, ps)
	}
	lb, err := tcpbalance.Start(ctx, rs.addrs...)
	if err != nil {
		return nil, err
	}
	cl.add(lb)
	rs.lb = lb
	spec := PluginSpec{Name: "Guard", URL: "http://" + lb.Addr() + "/mcp", Hooks: []cpex.HookType{cpex.ToolPreInvoke}}
	rs.sc, err = StartSidecar(ctx, fmt.Sprintf("sidecar, %d replicas", n), SidecarConfig(0, spec))
	if err != nil {
		return nil, err
	}
	cl.add(rs.sc)
	return rs, nil
}

// handed returns the TCP connections the balancer handed to each replica.
func (rs *replicaSet) handed() []int64 {
	conns := rs.lb.Connections()
	out := make([]int64, len(rs.addrs))
	for i, a := range rs.addrs {
		out[i] = conns[a]
	}
	return out
}

// calls returns the hook calls each replica has served.
func (rs *replicaSet) calls() []int64 {
	out := make([]int64, len(rs.plugins))
	for i, p := range rs.plugins {
		out[i] = p.Calls()
	}
	return out
}

// replicaWorks are the per-call times of the replicas scenario's plugin
// replicas: a single-threaded plugin that is the bottleneck, and one that
// answers at once (the machine's cores are then the limit).
var replicaWorks = []time.Duration{replicaWork, 0}

// replicas: hook calls per second through the sidecar with 1, 2 and 4
// replicas of the plugin behind a per-connection balancer, side by side.
func (r *runner) replicas(ctx context.Context) error {
	t := Table{
		Title: fmt.Sprintf("8. Plugin replicas: tools/call echo with one plugin on tool_pre_invoke, %d concurrent streams, the plugin's replicas behind a per-connection round-robin balancer", replicaStreams),
		Header: []string{"work per call", "replicas", "hook calls/s", "p50", "p99", "calls/s / 1 replica",
			"share of calls per replica", "connections per replica"},
		Notes: []string{
			"sidecar: internal/sidecar.Run, default plugin_sessions; each replica a pkg/pluginserver server (Streamable HTTP) that serves one hook call at a time and waits the work per call (a single-threaded plugin: at most 1 / work calls/s per replica; 0: it answers at once); the balancer hands each new TCP connection to the next replica, as kube-proxy does for a ClusterIP Service without session affinity.",
			"every call is one tools/call through the sidecar and one hook call; the replica counts of a work value run side by side in the same rounds, in one process on the same cores, so the replicas share the CPUs with the sidecar and the driver.",
		},
	}
	for _, work := range replicaWorks {
		rows, err := r.replicaRows(ctx, work)
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, rows...)
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}

// replicaRows measures the replica counts whose replicas take work per call.
func (r *runner) replicaRows(ctx context.Context, work time.Duration) (rows [][]string, err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	p, ok, err := preparedToolsCall()
	if err != nil {
		return nil, err
	}
	d := &Driver{}
	sets := make([]*replicaSet, len(replicaCounts))
	ops := make([]Op, len(replicaCounts))
	before := make([][]int64, len(replicaCounts))
	for i, n := range replicaCounts {
		if sets[i], err = startReplicaSet(ctx, &cl, n, work); err != nil {
			return nil, fmt.Errorf("%d replicas: %w", n, err)
		}
		ops[i] = exchangeOp(d, sets[i].sc, p, ok)
		before[i] = sets[i].calls()
	}
	cmp, err := CompareLoad(ctx, r.load, replicaStreams, ops...)
	if err != nil {
		return nil, err
	}
	for i, n := range replicaCounts {
		s := cmp.Median(i)
		share := shares(before[i], sets[i].calls())
		rows = append(rows, []string{work.String(), strconv.Itoa(n), rate(s.Throughput), dur(s.P50), dur(s.P99),
			ratio(cmp.Ratio(i, 0, MetricThroughput)), share, ints(sets[i].handed())})
		r.logf("replicas %d, work %s: %s hook calls/s, p50 %s, shares %s", n, work, rate(s.Throughput), dur(s.P50), share)
	}
	return rows, nil
}

// shares renders each replica's part of the calls made between before and
// after, in percent.
func shares(before, after []int64) string {
	var total int64
	for i := range after {
		total += after[i] - before[i]
	}
	parts := make([]string, len(after))
	for i := range after {
		parts[i] = fmt.Sprintf("%.0f %%", 100*float64(after[i]-before[i])/float64(max(total, 1)))
	}
	return strings.Join(parts, " / ")
}

// ints renders ns separated by slashes.
func ints(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(parts, " / ")
}
