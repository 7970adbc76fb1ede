package deploytest

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/metrics"
)

// TestAlertRules renders manifests/alerts and checks that every metric an
// alert expression names is one the sidecar exports, so a renamed metric
// cannot leave an alert that never fires.
func TestAlertRules(t *testing.T) {
	s := loadSnapshot(t)
	r, errs := render(s, "manifests/alerts")
	for _, err := range errs {
		t.Error(err)
	}
	if r == nil || len(r.rules) == 0 {
		t.Fatal("manifests/alerts renders no PrometheusRule")
	}
	exported := exportedMetrics(t)
	names := regexp.MustCompile(`mcp_extproc_[a-z_]+`)
	alerts := 0
	for _, rule := range r.rules {
		for _, g := range rule.Spec.Groups {
			for _, a := range g.Rules {
				alerts++
				for _, name := range names.FindAllString(a.Expr, -1) {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
					if !exported[base] {
						t.Errorf("alert %s: metric %s is not exported by pkg/metrics", a.Alert, name)
					}
				}
			}
		}
	}
	if alerts < 3 {
		t.Errorf("%d alerts; want at least plugin down, block rate and latency", alerts)
	}
}

// exportedMetrics returns the names pkg/metrics registers.
func exportedMetrics(t *testing.T) map[string]bool {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	// Touch every vector so it shows up in Gather.
	m.Message("request_headers")
	m.Immediate("blocked")
	m.BodyInspected("request", 1)
	m.ModeOverride("skip")
	m.OnInvoke("p", "tool_pre_invoke", executor.Allowed, 1)
	m.OnRebuild("p")
	m.OnRetry("p", true)
	m.OnHealthCheck("p", true)
	m.SetPluginState("p", 0)
	m.OnStateChange("p", 0, 1)
	m.Reload(true)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
	}
	return out
}
