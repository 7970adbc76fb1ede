package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ruleMetrics are the series of extproc.rules: what each rule decided, and
// how long the rules took.
type ruleMetrics struct {
	decisions *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	// pinChanges counts the definitions extproc.tool_pinning found changed.
	pinChanges *prometheus.CounterVec
	// shadowed counts what would have been enforced (extproc.shadow,
	// rules in mode shadow).
	shadowed *prometheus.CounterVec
	// auditDropped counts the audit events the sink never wrote.
	auditDropped *prometheus.CounterVec
	// listReads counts the list answers read for the rules, pinning or a
	// list hook, by where their parse came from.
	listReads oneLabel
}

func newRuleMetrics(reg prometheus.Registerer) ruleMetrics {
	r := ruleMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "rule_decisions_total",
			Help: "What each rule of extproc.rules did, by rule and decision (deny: a request refused; hide: a list item dropped)."},
			[]string{"rule", "decision"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "rule_evaluation_duration_seconds",
			Help:    "Time the rules took, by phase (request: one message checked against every rule; list: one list result filtered).",
			Buckets: []float64{.000001, .0000025, .000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .01}},
			[]string{"phase"}),
		pinChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "tool_pin_changes_total",
			Help: "Definitions a list showed changed since they were pinned (extproc.tool_pinning), by kind (tool, prompt, resourceTemplate) and action (alert, hide, block)."},
			[]string{"kind", "action"}),
	}
	r.shadowed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "shadow_decisions_total",
		Help: "What a plugin, rule or pin would have enforced and was not let to (extproc.shadow, or a rule in mode shadow), by who (plugin, rule, pin), name and decision (would_deny, would_modify)."},
		[]string{"by", "name", "decision"})
	r.auditDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "audit_dropped_total",
		Help: "Audit events never written, by reason (queue_full: the sink is behind; sink_error; shutdown; closed). Any increase is a gap in the audit trail."},
		[]string{"reason"})
	r.listReads = newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "list_answers_read_total",
		Help: "List answers (4 KiB and up) read for the rules, pinning or a list hook, by where their parse came from (memo: the same bytes were read before and remembered; scan: read now)."},
		[]string{"from"})
	reg.MustRegister(r.decisions, r.duration, r.pinChanges, r.shadowed, r.auditDropped, r.listReads.vec)
	return r
}

// RuleDecision implements processor.Observer.
func (m *Metrics) RuleDecision(rule, decision string, n int) {
	m.rules.decisions.WithLabelValues(rule, decision).Add(float64(n))
}

// RuleEvaluation implements processor.Observer.
func (m *Metrics) RuleEvaluation(phase string, d time.Duration) {
	m.rules.duration.WithLabelValues(phase).Observe(d.Seconds())
}

// PinChange implements processor.Observer.
func (m *Metrics) PinChange(kind, action string) {
	m.rules.pinChanges.WithLabelValues(kind, action).Inc()
}

// Shadowed implements processor.Observer.
func (m *Metrics) Shadowed(by, name, decision string) {
	m.rules.shadowed.WithLabelValues(by, name, decision).Inc()
}

// ListRead implements processor.Observer.
func (m *Metrics) ListRead(from string) { m.rules.listReads.with(from).Inc() }

// AuditDropped counts an audit event the sink never wrote; it is the
// audit logger's OnDrop.
func (m *Metrics) AuditDropped(reason string) {
	m.rules.auditDropped.WithLabelValues(reason).Inc()
}
