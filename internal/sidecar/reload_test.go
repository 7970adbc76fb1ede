package sidecar_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// reloadPlugins are the two plugin servers of the reload tests: Guard (on
// srv1) lets everything through, Guard2 (on srv2) blocks the tool danger2.
type reloadPlugins struct {
	guard, guard2 *plugintest.Scripted
	srv1, srv2    *plugintest.Server
	one, two      string // configs: Guard only; Guard and Guard2
}

func newReloadPlugins(t *testing.T) *reloadPlugins {
	p := &reloadPlugins{
		guard:  plugintest.NewScripted("Guard", cpex.ToolPreInvoke),
		guard2: plugintest.NewScripted("Guard2", cpex.ToolPreInvoke),
	}
	p.guard2.SetFunc(byTool(map[string]pluginserver.HookFunc{
		"danger2": plugintest.Block(cpex.PluginViolation{Reason: "denied", Description: "danger2 is denied", Code: "DENY2"}),
	}))
	p.srv1 = plugintest.StartPlugins(t, plugintest.GoSDK, nil, p.guard)
	p.srv2 = plugintest.StartPlugins(t, plugintest.GoSDK, nil, p.guard2)
	p.one = configYAML(pluginEntry("Guard", p.srv1.URL(), "fail", ""))
	p.two = configYAML(pluginEntry("Guard", p.srv1.URL(), "fail", ""), pluginEntry("Guard2", p.srv2.URL(), "fail", ""))
	return p
}

// blockedBy fails the test unless res is a block by plugin.
func blockedBy(t *testing.T, res *envoytest.Result, plugin string) {
	t.Helper()
	if e := refusal(t, res); e.Code != -32000 || !strings.Contains(string(e.Data), plugin) {
		t.Fatalf("got error %+v, want a block (-32000) by %s", e, plugin)
	}
}

// TestReloadConfigMap swaps a Kubernetes-style ConfigMap mount:
// a valid change applies without dropping an open stream and keeps the
// sessions of unchanged plugins; an invalid one is rejected and the old
// config stays in force.
func TestReloadConfigMap(t *testing.T) {
	p := newReloadPlugins(t)
	dir := newConfigMapDir(t, p.one)
	sc := startSidecar(t, dir.path(), nil)
	sc.waitReady("Guard")
	passed(t, sc.call("danger2", nil)) // not yet enforced
	inits := p.srv1.Initializes()

	// A stream held open at the upstream across the reload.
	arrived, release := make(chan struct{}), make(chan struct{})
	held := make(chan *envoytest.Result, 1)
	go func() {
		res, err := sc.do(mcpPost(toolCall("safe", nil)), upstream(nil, arrived, release))
		if err != nil {
			t.Errorf("held exchange: %v", err)
		}
		held <- res
	}()
	select {
	case <-arrived:
	case res := <-held:
		t.Fatalf("held exchange ended early: %+v", res)
	}

	dir.swap(p.two)
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	close(release)
	res := <-held
	if res == nil {
		t.FailNow()
	}
	if res.LocalError != "" || res.Reset || res.StreamErr != nil {
		t.Fatalf("held stream broken by the reload: %s (%s), reset %v, stream error %v", res.LocalError, res.Details, res.Reset, res.StreamErr)
	}
	passed(t, res)

	sc.waitReady("Guard", "Guard2")
	blockedBy(t, sc.call("danger2", nil), "Guard2")
	passed(t, sc.call("safe", nil))
	if got := p.srv1.Initializes(); got != inits {
		t.Errorf("unchanged plugin Guard re-initialized on reload: %d initializes, want %d", got, inits)
	}
	if p.guard.CallCount() == 0 || p.guard2.CallCount() == 0 {
		t.Errorf("calls: Guard %d, Guard2 %d; want both consulted", p.guard.CallCount(), p.guard2.CallCount())
	}

	// Invalid changes are rejected one by one; the last good config stays.
	rejected := 0.0
	for _, bad := range []string{
		strings.Replace(p.two, "kind: external", "kind: bogus", 1),
		strings.Replace(p.two, "url: "+p.srv2.URL(), "script: plugin.py", 1),
		"plugins: [",
	} {
		dir.swap(bad)
		rejected++
		sc.waitMetric(rejected, "mcp_extproc_config_reloads_total", "result", "rejected")
		blockedBy(t, sc.call("danger2", nil), "Guard2")
	}
	if got := sc.scrape().value("mcp_extproc_config_reloads_total", "result", "applied"); got != 1 {
		t.Errorf("applied reloads = %v, want 1", got)
	}
	if code, rz := sc.readyz(); code != http.StatusOK || len(rz.Plugins) != 2 {
		t.Errorf("after rejected reloads: /readyz %d %+v, want 200 with both plugins", code, rz)
	}

	// Back to one plugin: Guard2 is no longer consulted.
	dir.swap(p.one)
	sc.waitMetric(2, "mcp_extproc_config_reloads_total", "result", "applied")
	passed(t, sc.call("danger2", nil))
	if got := p.srv1.Initializes(); got != inits {
		t.Errorf("unchanged plugin Guard re-initialized on reload: %d initializes, want %d", got, inits)
	}
}

// signal sends one reload signal, failing the test if Run does not take it.
func signal(t *testing.T, hup chan<- struct{}) {
	t.Helper()
	select {
	case hup <- struct{}{}:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not receive the reload signal")
	}
}

// TestReloadSignal reloads on Options.Reload (SIGHUP) with polling off.
func TestReloadSignal(t *testing.T) {
	p := newReloadPlugins(t)
	path := writeConfig(t, p.one)
	hup := make(chan struct{})
	sc := startSidecar(t, path, func(o *sidecar.Options) {
		o.ReloadInterval = -1
		o.Reload = hup
	})
	sc.waitReady("Guard")
	passed(t, sc.call("danger2", nil))

	// An editor-style replace of the file.
	tmp := filepath.Join(filepath.Dir(path), "plugins.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(p.two), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	signal(t, hup)
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	sc.waitReady("Guard", "Guard2")
	blockedBy(t, sc.call("danger2", nil), "Guard2")

	// A signal with an invalid file is rejected.
	if err := os.WriteFile(path, []byte(strings.Replace(p.two, "kind: external", "kind: bogus", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	signal(t, hup)
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "rejected")
	blockedBy(t, sc.call("danger2", nil), "Guard2")
}
