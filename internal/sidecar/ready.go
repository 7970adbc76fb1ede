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
// readiness back. Readiness latches per plugin: a plugin outage later is
// handled by its on_error policy, not by taking every sidecar pod out of its
// Service at once (which would turn one plugin's outage into a full outage).
type readiness struct {
	pool     *pluginclient.Pool
	must     []string // plugins that gate readiness
	all      []string
	draining atomic.Bool

	mu      sync.Mutex
	started map[string]bool
}

func newReadiness(cfg *config.Config, pool *pluginclient.Pool) *readiness {
	r := &readiness{pool: pool, started: map[string]bool{}}
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		r.all = append(r.all, p.Name)
		if p.EffectiveMode() != config.ModeDisabled && p.EffectiveOnError(cfg.PluginSettings) == config.OnErrorFail {
			r.must = append(r.must, p.Name)
		}
	}
	return r
}

// check updates the latches and reports readiness.
func (r *readiness) check() bool {
	if r.draining.Load() {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range r.all {
		if r.pool.State(name) == pluginclient.Ready {
			r.started[name] = true
		}
	}
	for _, name := range r.must {
		if !r.started[name] {
			return false
		}
	}
	return true
}

type pluginStatus struct {
	State      string `json:"state"`
	Started    bool   `json:"started"`
	GatesReady bool   `json:"gates_readiness"`
}

func (r *readiness) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	ok := r.check()
	body := struct {
		Ready   bool                    `json:"ready"`
		Plugins map[string]pluginStatus `json:"plugins"`
	}{Ready: ok, Plugins: map[string]pluginStatus{}}
	r.mu.Lock()
	for _, name := range r.all {
		st := pluginStatus{State: r.pool.State(name).String(), Started: r.started[name]}
		for _, m := range r.must {
			st.GatesReady = st.GatesReady || m == name
		}
		body.Plugins[name] = st
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(body)
}
