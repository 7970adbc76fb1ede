package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// dashboardFile is the Grafana dashboard; the chart ships a copy.
const dashboardFile = "manifests/observability/grafana-dashboard.json"

// readRepoFile reads a file by its slash path in the repository.
func readRepoFile(root, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
}

// grafanaDashboard is the part of Grafana's dashboard JSON the checks read.
type grafanaDashboard struct {
	Title      string         `json:"title"`
	UID        string         `json:"uid"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // of a collapsed row
}

// labelValuesQuery matches a template variable's label_values(SELECTOR, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)$`)

// dashboardCovers are the series the dashboard must show: decisions by
// outcome, plugin latency, sessions by state, rebuilds by cause, circuit
// state, what the rules decided and how long they took, audit events
// dropped and shadow decisions, and Envoy's ext_proc stats.
var dashboardCovers = []string{
	"mcp_extproc_plugin_invocations_total",
	"mcp_extproc_plugin_invocation_duration_seconds_bucket",
	"mcp_extproc_plugin_sessions",
	"mcp_extproc_plugin_session_rebuild_causes_total",
	"mcp_extproc_plugin_circuit_open",
	"mcp_extproc_rule_decisions_total",
	"mcp_extproc_rule_evaluation_duration_seconds_bucket",
	"mcp_extproc_audit_dropped_total",
	"mcp_extproc_shadow_decisions_total",
	envoyExtProcPrefix + "streams_failed",
	envoyExtProcPrefix + "message_timeouts",
	envoyExtProcPrefix + "failure_mode_allowed",
}

// checkDashboard parses a dashboard and checks every panel's (and template
// variable's) queries: each metric name must be exported by the sidecar or
// by Envoy, and the dashboard must cover dashboardCovers.
func checkDashboard(data []byte, sidecar, envoy map[string]bool) []error {
	var p problems
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return []error{fmt.Errorf("dashboard: %w", err)}
	}
	if d.Title == "" || d.UID == "" {
		p.addf("dashboard: no title or uid")
	}
	var used []string
	var walk func(panels []grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, pn := range panels {
			walk(pn.Panels)
			if pn.Type == "row" {
				continue
			}
			if len(pn.Targets) == 0 {
				p.addf("dashboard: panel %q has no query", pn.Title)
			}
			for i, tg := range pn.Targets {
				where := fmt.Sprintf("dashboard: panel %q target %d", pn.Title, i)
				p.errs = append(p.errs, unknownMetrics(where, tg.Expr, sidecar, envoy)...)
				used = append(used, metricNames(tg.Expr)...)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // a plain string
		}
		m := labelValuesQuery.FindStringSubmatch(q.Query)
		if m == nil {
			p.addf("dashboard: variable %s: query %q is not label_values(SELECTOR, label)", v.Name, q.Query)
			continue
		}
		p.errs = append(p.errs, unknownMetrics("dashboard: variable "+v.Name, m[1], sidecar, envoy)...)
	}
	for _, want := range dashboardCovers {
		if !slices.Contains(used, want) {
			p.addf("dashboard: no panel shows %s", want)
		}
	}
	return p.errs
}

// TestDashboard checks the shipped dashboard, and that the checks fail on a
// panel querying a metric nobody exports.
func TestDashboard(t *testing.T) {
	data, err := readRepoFile(repoRoot(t), dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	sidecar, envoy := sidecarMetrics(t), envoyMetrics()
	for _, err := range checkDashboard(data, sidecar, envoy) {
		t.Error(err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"made-up sidecar metric", "mcp_extproc_plugin_circuit_open{", "mcp_extproc_plugin_circuit_opened{",
			"metric mcp_extproc_plugin_circuit_opened is exported neither"},
		{"made-up Envoy stat", "envoy_http_ext_proc_mcp_extproc_streams_failed{", "envoy_http_ext_proc_mcp_extproc_streams_exploded{",
			"metric envoy_http_ext_proc_mcp_extproc_streams_exploded is exported neither"},
		{"Envoy stat without the filter prefix", "envoy_http_ext_proc_mcp_extproc_message_timeouts{", "envoy_http_ext_proc_message_timeouts{",
			"metric envoy_http_ext_proc_message_timeouts is exported neither"},
		{"made-up variable metric", "label_values(mcp_extproc_streams_open, namespace)", "label_values(mcp_extproc_stream_open, namespace)",
			"variable namespace: metric mcp_extproc_stream_open"},
		{"a topic missing", "mcp_extproc_plugin_session_rebuild_causes_total{", "mcp_extproc_plugin_session_rebuilds_total{",
			"no panel shows mcp_extproc_plugin_session_rebuild_causes_total"},
		{"audit drops missing", "mcp_extproc_audit_dropped_total{", "mcp_extproc_audit_dropped{",
			"no panel shows mcp_extproc_audit_dropped_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := regexp.MustCompile(regexp.QuoteMeta(tc.old)).ReplaceAllLiteralString(string(data), tc.new)
			if broken == string(data) {
				t.Fatalf("%q does not occur in %s", tc.old, dashboardFile)
			}
			for _, err := range checkDashboard([]byte(broken), sidecar, envoy) {
				if regexp.MustCompile(regexp.QuoteMeta(tc.want)).MatchString(err.Error()) {
					return
				}
			}
			t.Errorf("no problem mentions %q", tc.want)
		})
	}
}
