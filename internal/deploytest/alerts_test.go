package deploytest

import (
	"slices"
	"testing"
)

// TestAlertRules renders manifests/alerts and checks that every metric an
// alert expression names is one the sidecar or Envoy exports, so a renamed
// metric cannot leave an alert that never fires, and that the alerts cover
// Envoy's view of an unreachable or slow processor.
func TestAlertRules(t *testing.T) {
	s := loadSnapshot(t)
	r, errs := render(s, "manifests/alerts")
	for _, err := range errs {
		t.Error(err)
	}
	if r == nil || len(r.rules) == 0 {
		t.Fatal("manifests/alerts renders no PrometheusRule")
	}
	for _, err := range checkAlertRules(r.rules, sidecarMetrics(t), envoyMetrics()) {
		t.Error(err)
	}
}

// checkAlertRules checks the metric names of every rule and that the Envoy
// counters for an unreachable or timing-out processor are alerted on.
func checkAlertRules(rules []*prometheusRule, sidecar, envoy map[string]bool) []error {
	var p problems
	var used []string
	alerts := 0
	for _, rule := range rules {
		for _, g := range rule.Spec.Groups {
			for _, a := range g.Rules {
				alerts++
				p.errs = append(p.errs, unknownMetrics("alert "+a.Alert, a.Expr, sidecar, envoy)...)
				used = append(used, metricNames(a.Expr)...)
			}
		}
	}
	if alerts < 3 {
		p.addf("%d alerts; want at least plugin down, block rate and latency", alerts)
	}
	for _, stat := range []string{"streams_failed", "message_timeouts", "failure_mode_allowed"} {
		if !slices.Contains(used, envoyExtProcPrefix+stat) {
			p.addf("no alert on Envoy's %s%s (ext_proc unreachable or timing out)", envoyExtProcPrefix, stat)
		}
	}
	return p.errs
}
