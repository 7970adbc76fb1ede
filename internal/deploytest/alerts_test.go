package deploytest

import (
	"slices"
	"strings"
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
	sidecar, envoy := sidecarMetrics(t), envoyMetrics()
	for _, err := range checkAlertRules(r.rules, sidecar, envoy) {
		t.Error(err)
	}
	// The check fails when an alert it requires is gone: rename the audit
	// drop alert's metric in a copy.
	var broken []*prometheusRule
	for _, rule := range r.rules {
		c := *rule
		c.Spec.Groups = slices.Clone(rule.Spec.Groups)
		for i := range c.Spec.Groups {
			c.Spec.Groups[i].Rules = slices.Clone(rule.Spec.Groups[i].Rules)
			for j := range c.Spec.Groups[i].Rules {
				a := &c.Spec.Groups[i].Rules[j]
				a.Expr = strings.ReplaceAll(a.Expr, "mcp_extproc_audit_dropped_total", "mcp_extproc_streams_open")
			}
		}
		broken = append(broken, &c)
	}
	errs = checkAlertRules(broken, sidecar, envoy)
	if !slices.ContainsFunc(errs, func(err error) bool {
		return strings.Contains(err.Error(), "no alert on mcp_extproc_audit_dropped_total")
	}) {
		t.Errorf("without an alert on audit drops, checkAlertRules says %v", errs)
	}
}

// alertedSidecarMetrics are the sidecar series an alert must watch: a gap
// in the audit trail, and what a rule or plugin in shadow would block.
var alertedSidecarMetrics = []string{
	"mcp_extproc_audit_dropped_total",
	"mcp_extproc_shadow_decisions_total",
}

// checkAlertRules checks the metric names of every rule, that the Envoy
// counters for an unreachable or timing-out processor are alerted on, and
// that alertedSidecarMetrics are.
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
	for _, m := range alertedSidecarMetrics {
		if !slices.Contains(used, m) {
			p.addf("no alert on %s", m)
		}
	}
	return p.errs
}
