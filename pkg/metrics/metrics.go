// Package metrics exports what mcp-extproc does as Prometheus metrics. A
// *Metrics implements the observer interfaces of the processor, the executor
// and the plugin pool, so those packages stay free of Prometheus. Labels come
// from small fixed sets (hook, outcome, message type, reason) plus the plugin
// name from the config; never request ids, tool names or arguments.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

const namespace = "mcp_extproc"

// Metrics holds the collectors. Create it with New.
type Metrics struct {
	streamsOpen     prometheus.Gauge
	messages        oneLabel
	immediate       oneLabel
	bodies          oneLabel
	bodyBytes       oneLabel
	modeOverrides   oneLabel
	rebuilds        *prometheus.CounterVec
	retries         *prometheus.CounterVec
	circuitOpen     *prometheus.GaugeVec
	healthChecks    *prometheus.CounterVec
	pluginState     *prometheus.GaugeVec
	stateChanges    *prometheus.CounterVec
	reloads         *prometheus.CounterVec
	configTimestamp prometheus.Gauge
	sess            sessionMetrics     // sessions.go
	attr            attributionMetrics // attribution.go
	rules           ruleMetrics        // rules.go
	inv             *invokeCollector   // invoke.go
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		streamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "streams_open",
			Help: "ext_proc streams (HTTP requests) being processed."}),
		messages: newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "messages_total",
			Help: "ext_proc messages received from Envoy, by type."}, []string{"type"}),
		immediate: newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "immediate_responses_total",
			Help: "Requests answered by the sidecar instead of the MCP server, by reason."}, []string{"reason"}),
		bodies: newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "bodies_inspected_total",
			Help: "JSON-RPC bodies (or SSE event payloads) parsed, by direction."}, []string{"direction"}),
		bodyBytes: newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "body_inspected_bytes_total",
			Help: "Bytes of the bodies parsed, by direction."}, []string{"direction"}),
		modeOverrides: newOneLabel(prometheus.CounterOpts{Namespace: namespace, Name: "mode_overrides_total",
			Help: "Processing modes chosen by mode_override, by mode."}, []string{"mode"}),
		inv: newInvokeCollector(),
		rebuilds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "plugin_session_rebuilds_total",
			Help: "MCP session rebuilds after a session loss, by plugin."}, []string{"plugin"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "plugin_retries_total",
			Help: "Calls retried on a rebuilt session, by plugin and result (ok, failed)."}, []string{"plugin", "result"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "plugin_circuit_open",
			Help: "1 while the plugin's circuit is open (plugin down: its on_error policy applies at once)."}, []string{"plugin"}),
		healthChecks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "plugin_health_checks_total",
			Help: "Background MCP ping health checks, by plugin and result (ok, failed)."}, []string{"plugin", "result"}),
		pluginState: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "plugin_state",
			Help: "1 for the plugin's current connection state (connecting, ready, down), 0 for the others."}, []string{"plugin", "state"}),
		stateChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "plugin_state_changes_total",
			Help: "Plugin connection state transitions, by plugin and new state."}, []string{"plugin", "state"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "config_reloads_total",
			Help: "Configuration reloads, by result (applied, rejected)."}, []string{"result"}),
		configTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "config_last_applied_timestamp_seconds",
			Help: "Unix time the configuration in force was applied."}),
	}
	reg.MustRegister(m.streamsOpen, m.messages.vec, m.immediate.vec, m.bodies.vec, m.bodyBytes.vec, m.modeOverrides.vec,
		m.inv, m.rebuilds, m.retries, m.circuitOpen, m.healthChecks,
		m.pluginState, m.stateChanges, m.reloads, m.configTimestamp)
	m.sess = newSessionMetrics(reg)
	m.attr = newAttributionMetrics(reg)
	m.rules = newRuleMetrics(reg)
	return m
}

// StreamOpened implements processor.Observer.
func (m *Metrics) StreamOpened() { m.streamsOpen.Inc() }

// StreamClosed implements processor.Observer.
func (m *Metrics) StreamClosed() { m.streamsOpen.Dec() }

// Message implements processor.Observer.
func (m *Metrics) Message(kind string) { m.messages.with(kind).Inc() }

// ModeOverride implements processor.Observer.
func (m *Metrics) ModeOverride(mode string) { m.modeOverrides.with(mode).Inc() }

// Immediate implements processor.Observer.
func (m *Metrics) Immediate(reason string) { m.immediate.with(reason).Inc() }

// BodyInspected implements processor.Observer.
func (m *Metrics) BodyInspected(direction string, bytes int) {
	m.bodies.with(direction).Inc()
	m.bodyBytes.with(direction).Add(float64(bytes))
}

// OnInvoke implements executor.Observer: the outcome label is the
// verdict's String. Invocations that never reached the plugin (down,
// skipped, dropped) are counted but not timed.
func (m *Metrics) OnInvoke(plugin string, hook cpex.HookType, v executor.Verdict, d time.Duration) {
	m.inv.observe(plugin, hook, v, d)
}

// Series implements executor.SeriesObserver: the series of plugin on
// hook, counted as OnInvoke counts.
func (m *Metrics) Series(plugin string, hook cpex.HookType) executor.HookObserver {
	return m.inv.series(plugin, hook)
}

// OnRebuild implements pluginclient.Observer.
func (m *Metrics) OnRebuild(plugin string) { m.rebuilds.WithLabelValues(plugin).Inc() }

// OnRetry implements pluginclient.Observer.
func (m *Metrics) OnRetry(plugin string, ok bool) {
	m.retries.WithLabelValues(plugin, result(ok)).Inc()
}

// OnHealthCheck implements pluginclient.Observer.
func (m *Metrics) OnHealthCheck(plugin string, ok bool) {
	m.healthChecks.WithLabelValues(plugin, result(ok)).Inc()
}

// OnStateChange implements pluginclient.Observer.
func (m *Metrics) OnStateChange(plugin string, _, to reconnect.State) {
	m.SetPluginState(plugin, to)
	m.stateChanges.WithLabelValues(plugin, stateLabel(to)).Inc()
}

// SetPluginState sets the state gauges of plugin (also used at start, before
// any transition).
func (m *Metrics) SetPluginState(plugin string, st reconnect.State) {
	for _, s := range []reconnect.State{reconnect.Connecting, reconnect.Ready, reconnect.Down} {
		v := 0.0
		if s == st {
			v = 1
		}
		m.pluginState.WithLabelValues(plugin, stateLabel(s)).Set(v)
	}
	open := 0.0
	if st == reconnect.Down {
		open = 1
	}
	m.circuitOpen.WithLabelValues(plugin).Set(open)
}

// ForgetPlugin removes the series of a plugin that left the config.
func (m *Metrics) ForgetPlugin(plugin string) {
	m.inv.forget(plugin)
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.rebuilds, m.retries, m.circuitOpen, m.healthChecks, m.pluginState, m.stateChanges,
	} {
		v.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	}
	m.sess.forget(plugin)
}

// Reload counts a configuration reload.
func (m *Metrics) Reload(applied bool) {
	if applied {
		m.reloads.WithLabelValues("applied").Inc()
		m.ConfigApplied(time.Now())
		return
	}
	m.reloads.WithLabelValues("rejected").Inc()
}

// ConfigApplied records when the configuration in force was applied.
func (m *Metrics) ConfigApplied(t time.Time) { m.configTimestamp.Set(float64(t.UnixNano()) / 1e9) }

func result(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}

func stateLabel(s reconnect.State) string {
	switch s {
	case reconnect.Connecting:
		return "connecting"
	case reconnect.Ready:
		return "ready"
	case reconnect.Down:
		return "down"
	}
	return "unknown"
}

// oneLabel is a counter vector with one label whose values come from a
// small fixed set (message types, directions, modes, reasons), each series
// looked up in the vector once and kept: a lookup by label value hashes it
// and takes the vector's lock, on the path of every ext_proc message.
type oneLabel struct {
	vec    *prometheus.CounterVec
	series *sync.Map // label value → prometheus.Counter
}

func newOneLabel(opts prometheus.CounterOpts, label []string) oneLabel {
	return oneLabel{vec: prometheus.NewCounterVec(opts, label), series: &sync.Map{}}
}

// with returns the series of label value v.
func (l oneLabel) with(v string) prometheus.Counter {
	if c, ok := l.series.Load(v); ok {
		return c.(prometheus.Counter)
	}
	c, _ := l.series.LoadOrStore(v, l.vec.WithLabelValues(v))
	return c.(prometheus.Counter)
}
