package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// replicaCounts are the plugin replica counts of the replicas scenario.
var replicaCounts = []int{1, 2, 4}

// replicaStreams is the number of concurrent exchanges of the replicas
// scenario.
const replicaStreams = 16

// replicaSet is one sidecar whose plugin runs as several replicas behind a
// per-connection round-robin balancer.
type replicaSet struct {
	sc      *Endpoint
	lb      *roundRobin
	plugins []*PluginServer
}

// startReplicaSet starts n replicas of a plugin on tool_pre_invoke, the
// balancer in front of them and a sidecar whose plugin URL is the
// balancer's (default plugin_sessions). Everything it starts is added to cl.
func startReplicaSet(ctx context.Context, cl *closers, n int) (*replicaSet, error) {
	rs := &replicaSet{}
	var addrs []string
	for range n {
		ps, err := StartPlugin(DelayPlugin("Guard", 0, cpex.ToolPreInvoke))
		if err != nil {
			return nil, err
		}
		cl.add(ps)
		u, err := url.Parse(ps.URL)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, u.Host)
		rs.plugins = append(rs.plugins, ps)
	}
	lb, err := balance(addrs...)
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

// calls returns the hook calls each replica has served.
func (rs *replicaSet) calls() []int64 {
	out := make([]int64, len(rs.plugins))
	for i, p := range rs.plugins {
		out[i] = p.Calls()
	}
	return out
}

// replicas: hook calls per second through the sidecar with 1, 2 and 4
// replicas of the plugin behind a per-connection balancer, side by side.
func (r *runner) replicas(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	p, ok, err := preparedToolsCall()
	if err != nil {
		return err
	}
	d := &Driver{}
	sets := make([]*replicaSet, len(replicaCounts))
	ops := make([]Op, len(replicaCounts))
	before := make([][]int64, len(replicaCounts))
	for i, n := range replicaCounts {
		if sets[i], err = startReplicaSet(ctx, &cl, n); err != nil {
			return fmt.Errorf("%d replicas: %w", n, err)
		}
		ops[i] = exchangeOp(d, sets[i].sc, p, ok)
		before[i] = sets[i].calls()
	}
	cmp, err := CompareLoad(ctx, r.load, replicaStreams, ops...)
	if err != nil {
		return err
	}
	t := Table{
		Title: fmt.Sprintf("8. Plugin replicas: tools/call echo with one plugin on tool_pre_invoke, %d concurrent streams, the plugin's replicas behind a per-connection round-robin balancer", replicaStreams),
		Header: []string{"replicas", "hook calls/s", "p50", "p99", "calls/s / 1 replica",
			"share of calls per replica", "connections per replica"},
		Notes: []string{
			"sidecar: internal/sidecar.Run, default plugin_sessions; each replica a pkg/pluginserver server (Streamable HTTP) answering at once; the balancer hands each new TCP connection to the next replica, as kube-proxy does for a ClusterIP Service without session affinity.",
			"every call is one tools/call through the sidecar and one hook call; all replica counts run side by side in the same rounds, in one process on the same cores, so the replicas share the CPUs with the sidecar and the driver.",
		},
	}
	for i, n := range replicaCounts {
		s := cmp.Median(i)
		t.Rows = append(t.Rows, []string{strconv.Itoa(n), rate(s.Throughput), dur(s.P50), dur(s.P99),
			ratio(cmp.Ratio(i, 0, MetricThroughput)), shares(before[i], sets[i].calls()), ints(sets[i].lb.Handed())})
		r.logf("replicas %d: %s hook calls/s, p50 %s", n, rate(s.Throughput), dur(s.P50))
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
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
func ints(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, " / ")
}
