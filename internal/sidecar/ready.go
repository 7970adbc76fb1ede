package sidecar

import (
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// readiness implements the documented rule: the sidecar is ready once every
// plugin that must be consulted (on_error fail, not disabled) has completed
// its start-up sequence at least once. Plugins that fail open never hold
// readiness back. Once ready, the sidecar stays ready until it drains: a
// later plugin outage, or a plugin added by a config reload that cannot be
// reached, is handled by that plugin's on_error policy, not by taking every
// sidecar pod out of its Service at the same moment (which would turn one
// plugin's trouble into a full outage of the MCP server).
type readiness struct {
	current  func() *generation
	draining atomic.Bool

	mu      sync.Mutex
	started map[string]bool
	ready   bool // latched: true once the start-up rule held
}

// gates reports whether plugin p must have started before the sidecar is ready.
func gates(p *config.Plugin, s config.PluginSettings) bool {
	return p.EffectiveMode() != config.ModeDisabled && p.EffectiveOnError(s) == config.OnErrorFail
}

// check updates the latches and reports readiness.
func (r *readiness) check() bool {
	if r.draining.Load() {
		return false
	}
	g := r.current()
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := true
	for i := range g.cfg.Plugins {
		p := &g.cfg.Plugins[i]
		if g.set.State(p.Name) == pluginclient.Ready {
			r.started[p.Name] = true
		}
		if gates(p, g.cfg.PluginSettings) && !r.started[p.Name] {
			ok = false
		}
	}
	r.ready = r.ready || ok
	return r.ready
}

type pluginStatus struct {
	State      string `json:"state"`
	Started    bool   `json:"started"`
	GatesReady bool   `json:"gates_readiness"`
}

func (r *readiness) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	ok := r.check()
	g := r.current()
	body := struct {
		Ready   bool                    `json:"ready"`
		Plugins map[string]pluginStatus `json:"plugins"`
	}{Ready: ok, Plugins: map[string]pluginStatus{}}
	r.mu.Lock()
	for i := range g.cfg.Plugins {
		p := &g.cfg.Plugins[i]
		body.Plugins[p.Name] = pluginStatus{
			State:      g.set.State(p.Name).String(),
			Started:    r.started[p.Name],
			GatesReady: gates(p, g.cfg.PluginSettings),
		}
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}
