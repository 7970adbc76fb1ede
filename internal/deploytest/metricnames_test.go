package deploytest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// envoyExtProcStats are the counters of Envoy's ext_proc filter
// (source/extensions/filters/http/ext_proc/ext_proc.h, "Statistics" of the
// filter's documentation, Envoy 1.37), emitted as
// http.<HCM stat_prefix>.ext_proc.<filter stat_prefix>.<name>.
var envoyExtProcStats = []string{
	"streams_started", "stream_msgs_sent", "stream_msgs_received", "spurious_msgs_received",
	"streams_closed", "streams_failed", "failure_mode_allowed", "message_timeouts",
	"rejected_header_mutations", "override_message_timeout_ignored", "clear_route_cache_ignored",
	"clear_route_cache_disabled", "clear_route_cache_upstream_ignored",
	"send_immediate_resp_upstream_ignored", "http_not_ok_resp_received",
}

// envoyExtProcPrefix is the Prometheus form of those stats in the shipped
// configs: Envoy's /stats/prometheus writes "envoy_", the name with dots as
// underscores, and moves the HTTP connection manager's prefix ("mcp", or
// the gateway's) into the label envoy_http_conn_manager_prefix (a default
// tag extractor). Counters get no _total suffix. mcp_extproc is the ext_proc
// filter's stat_prefix in envoy/envoy.yaml and the Istio EnvoyFilter.
const envoyExtProcPrefix = "envoy_http_ext_proc_mcp_extproc_"

// envoyOtherStats are the few other Envoy series the dashboard reads: the
// ext_proc cluster's (cluster.mcp_extproc.*, the cluster name becoming the
// label envoy_cluster_name) and the MCP listener's responses by class
// (http.mcp.downstream_rq_xx, the class becoming envoy_response_code_class).
var envoyOtherStats = []string{
	"envoy_cluster_upstream_cx_connect_fail",
	"envoy_cluster_upstream_cx_active",
	"envoy_cluster_upstream_rq_active",
	"envoy_http_downstream_rq_xx",
}

// envoyMetrics is the table of Envoy series names a query may use.
func envoyMetrics() map[string]bool {
	out := map[string]bool{}
	for _, s := range envoyExtProcStats {
		out[envoyExtProcPrefix+s] = true
	}
	for _, s := range envoyOtherStats {
		out[s] = true
	}
	return out
}

// recordingRegisterer records the collectors registered on it.
type recordingRegisterer struct{ cs []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.cs = append(r.cs, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }
func (r *recordingRegisterer) Unregister(prometheus.Collector) bool    { return false }

// descName matches the fully qualified name in a prometheus.Desc's String.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// sidecarMetrics returns every series name the sidecar's /metrics can
// export: what pkg/metrics registers (read from the collectors' Descs, so a
// vector with no child yet counts too), the Go and process collectors the
// sidecar adds, and a histogram's _bucket, _sum and _count.
func sidecarMetrics(t testing.TB) map[string]bool {
	t.Helper()
	rec := &recordingRegisterer{}
	metrics.New(rec)
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	out := map[string]bool{}
	for _, c := range rec.cs {
		ch := make(chan *prometheus.Desc, 256)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			out[m[1]] = true
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d metric names registered by pkg/metrics", len(out))
	}
	return out
}

// exported reports whether series name comes from one of the known metric
// families (a histogram's series included).
func exported(known map[string]bool, name string) bool {
	if known[name] {
		return true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, suf); ok && known[b] {
			return true
		}
	}
	return false
}

// PromQL's words that look like names (keywords, aggregation modifiers).
var promqlWords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlBraces    = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlIdent     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlNumberish = regexp.MustCompile(`^[0-9]`)
)

// metricNames extracts the metric names a PromQL expression selects:
// identifiers that are not function calls, keywords, label names (inside
// braces or grouping clauses), strings or durations.
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	for {
		next := promqlBraces.ReplaceAllString(e, " ")
		next = promqlGrouping.ReplaceAllString(next, " ")
		if next == e {
			break
		}
		e = next
	}
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		w := e[loc[0]:loc[1]]
		if promqlWords[strings.ToLower(w)] || promqlNumberish.MatchString(w) || strings.HasPrefix(w, "$") {
			continue
		}
		if loc[0] > 0 && (e[loc[0]-1] == '$' || isDigit(e[loc[0]-1]) || e[loc[0]-1] == '.') {
			continue // a Grafana variable, or the exponent/unit of a number
		}
		if strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(") {
			continue // a function
		}
		out = append(out, w)
	}
	return out
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// unknownMetrics returns an error for each metric name of expr that is
// neither in sidecar nor in envoy.
func unknownMetrics(where, expr string, sidecar, envoy map[string]bool) []error {
	var errs []error
	names := metricNames(expr)
	if len(names) == 0 {
		errs = append(errs, fmt.Errorf("%s: no metric name in %q", where, expr))
	}
	for _, n := range names {
		if !exported(sidecar, n) && !exported(envoy, n) {
			errs = append(errs, fmt.Errorf("%s: metric %s is exported neither by the sidecar (pkg/metrics) nor by Envoy (envoyExtProcStats)", where, n))
		}
	}
	return errs
}

// TestMetricNames checks the PromQL name extraction on the shapes the
// dashboard and the alerts use, and that unknownMetrics catches a made-up
// name.
func TestMetricNames(t *testing.T) {
	sidecar, envoy := sidecarMetrics(t), envoyMetrics()
	for _, tc := range []struct {
		expr    string
		want    string // the names found, space-separated
		unknown int
	}{
		{`sum by (outcome) (rate(mcp_extproc_plugin_invocations_total{namespace="$namespace", outcome=~"a|b"}[$__rate_interval]))`,
			"mcp_extproc_plugin_invocations_total", 0},
		{`histogram_quantile(0.99, sum by (le, plugin) (rate(mcp_extproc_plugin_invocation_duration_seconds_bucket[5m])))`,
			"mcp_extproc_plugin_invocation_duration_seconds_bucket", 0},
		{`max by (plugin) (mcp_extproc_plugin_circuit_open) == 1 and on (pod) up`, "mcp_extproc_plugin_circuit_open up", 1},
		{`sum(rate(envoy_http_ext_proc_mcp_extproc_streams_failed[5m])) / sum(rate(envoy_http_ext_proc_mcp_extproc_streams_started[5m])) > 1e-3`,
			"envoy_http_ext_proc_mcp_extproc_streams_failed envoy_http_ext_proc_mcp_extproc_streams_started", 0},
		{`rate(mcp_extproc_plugin_invocations_totl[5m])`, "mcp_extproc_plugin_invocations_totl", 1},
		{`sum(rate(envoy_http_ext_proc_mcp_extproc_streams_exploded[5m]))`, "envoy_http_ext_proc_mcp_extproc_streams_exploded", 1},
		{`go_goroutines{job="x"} offset 5m`, "go_goroutines", 0},
	} {
		if got := strings.Join(metricNames(tc.expr), " "); got != tc.want {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
		if got := len(unknownMetrics("case", tc.expr, sidecar, envoy)); got != tc.unknown {
			t.Errorf("unknownMetrics(%q): %d unknown, want %d", tc.expr, got, tc.unknown)
		}
	}
}
