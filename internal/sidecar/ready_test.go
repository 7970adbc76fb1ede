package sidecar_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// waitHealth waits until the gRPC health service reports want for both the
// overall server and the ext_proc service.
func (r *running) waitHealth(want healthpb.HealthCheckResponse_ServingStatus) {
	r.t.Helper()
	eventually(r.t, "gRPC health "+want.String(), func() (bool, string) {
		for _, svc := range []string{"", sidecar.ExtProcService} {
			st, err := r.health(svc)
			if err != nil || st != want {
				return false, fmt.Sprintf("service %q: %v %v", svc, st, err)
			}
		}
		return true, ""
	})
}

// TestReadinessPluginDownAtStart starts the sidecar while its enforcing
// plugin is down (issues 2 and 4): it starts anyway, reports not ready on
// /readyz and gRPC health, refuses calls at once with a JSON-RPC error
// naming the plugin, and becomes ready and enforcing once the plugin is up.
// A fail-open plugin that stays down never holds readiness back.
func TestReadinessPluginDownAtStart(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	guard.SetFunc(byTool(map[string]pluginserver.HookFunc{
		"danger": plugintest.Block(cpex.PluginViolation{Reason: "denied", Description: "danger is denied", Code: "DENY"}),
	}))
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	srv.Stop()
	optional := plugintest.NewScripted("Optional", cpex.ToolPreInvoke)
	optSrv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, optional)
	optSrv.Stop()

	const pluginTimeout = 10 * time.Second
	cfg := strings.Replace(configYAML(
		pluginEntry("Guard", srv.URL(), "fail", ""),
		pluginEntry("Optional", optSrv.URL(), "ignore", ""),
	), "plugin_timeout: 2", fmt.Sprintf("plugin_timeout: %d", int(pluginTimeout.Seconds())), 1)
	sc := startSidecar(t, writeConfig(t, cfg), nil)

	eventually(t, "Guard reported down", func() (bool, string) {
		code, rz := sc.readyz()
		return code == http.StatusServiceUnavailable && rz.Plugins["Guard"].State == "down", fmt.Sprintf("%d %+v", code, rz)
	})
	_, rz := sc.readyz()
	if g, o := rz.Plugins["Guard"], rz.Plugins["Optional"]; !g.GatesReady || g.Started || o.GatesReady {
		t.Errorf("/readyz plugins = %+v: want Guard gating and not started, Optional not gating", rz.Plugins)
	}
	sc.waitHealth(healthpb.HealthCheckResponse_NOT_SERVING)

	// A plugin known to be down is not waited on: the policy applies at
	// once (far below plugin_timeout, which would be the wait otherwise).
	start := time.Now()
	res := sc.call("danger", nil)
	elapsed := time.Since(start)
	e := refusal(t, res)
	if e.Code != -32603 || !strings.Contains(e.Message, "Guard") {
		t.Errorf("call while Guard is down: got error %+v, want -32603 naming Guard", e)
	}
	if elapsed > pluginTimeout/10 {
		t.Errorf("call while Guard is down took %v; a down plugin must not be waited on (plugin_timeout %v)", elapsed, pluginTimeout)
	}
	if n := guard.CallCount(); n != 0 {
		t.Fatalf("plugin saw %d calls while down", n)
	}

	srv.Restart()
	sc.waitReady("Guard")
	sc.waitHealth(healthpb.HealthCheckResponse_SERVING)
	if _, rz := sc.readyz(); rz.Plugins["Optional"].State == "ready" {
		t.Fatalf("Optional should still be down: %+v", rz.Plugins)
	}
	blockedBy(t, sc.call("danger", nil), "Guard")
	passed(t, sc.call("safe", nil))
	if n := guard.CallCount(); n != 2 {
		t.Errorf("plugin saw %d calls after its restart, want 2", n)
	}
}

// TestReadinessFailOpenOnly: a sidecar whose only plugin fails open is ready
// at once even though that plugin is down, and lets calls through.
func TestReadinessFailOpenOnly(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Optional", cpex.ToolPreInvoke))
	srv.Stop()
	sc := startSidecar(t, writeConfig(t, configYAML(pluginEntry("Optional", srv.URL(), "ignore", ""))), nil)
	sc.waitHealth(healthpb.HealthCheckResponse_SERVING)
	code, rz := sc.readyz()
	if code != http.StatusOK || rz.Plugins["Optional"].GatesReady || rz.Plugins["Optional"].State == "ready" {
		t.Fatalf("/readyz = %d %+v, want 200 with Optional not gating and not ready", code, rz)
	}
	passed(t, sc.call("safe", nil))
}

// TestReloadAddingUnreachablePluginKeepsReady: a reload that adds a
// fail-closed plugin nobody can reach must not take the pod out of its
// Service (every pod would reload at once): readiness stays, and the new
// plugin's policy refuses the calls it applies to.
func TestReloadAddingUnreachablePluginKeepsReady(t *testing.T) {
	good := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Good", cpex.ToolPreInvoke))
	gone := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Gone", cpex.ToolPreInvoke))
	gone.Stop()
	cm := newConfigMapDir(t, configYAML(pluginEntry("Good", good.URL(), "fail", "")))
	sc := startSidecar(t, cm.path(), func(o *sidecar.Options) { o.ReloadInterval = 20 * time.Millisecond })
	sc.waitReady("Good")
	cm.swap(configYAML(pluginEntry("Good", good.URL(), "fail", ""), pluginEntry("Gone", gone.URL(), "fail", "")))
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	if code, rz := sc.readyz(); code != http.StatusOK {
		t.Fatalf("/readyz = %d %+v after the reload; want 200", code, rz)
	}
	if st, err := sc.health(""); err != nil || st != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC health = %v, %v; want SERVING", st, err)
	}
	if e := refusal(t, sc.call("safe", nil)); !strings.Contains(e.Message, "Gone") {
		t.Errorf("refusal %+v does not name the unreachable plugin", e)
	}
}
