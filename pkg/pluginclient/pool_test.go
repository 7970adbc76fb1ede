package pluginclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func TestNewPoolRejects(t *testing.T) {
	good := func() config.Plugin { return external("p", "http://127.0.0.1:1/mcp") }
	tests := []struct {
		name   string
		mutate func(*config.Plugin)
		want   string
	}{
		{"native kind", func(p *config.Plugin) { p.Kind = "native" }, "kind"},
		// A built-in plugin runs in-process through its own Dialer (the
		// sidecar's), never over its transport section.
		{"built-in kind", func(p *config.Plugin) { p.Kind = "plugins.deny_filter.deny.DenyListPlugin" }, "kind"},
		{"no mcp", func(p *config.Plugin) { p.MCP = nil }, "mcp"},
		{"sse missing ca", func(p *config.Plugin) {
			p.MCP.Proto, p.MCP.TLS = "SSE", &config.TLS{CABundle: "/nonexistent/ca.pem"}
		}, "ca_bundle"},
		{"stdio without a command", func(p *config.Plugin) { p.MCP.Proto = "STDIO" }, "STDIO"},
		{"stdio script of another kind", func(p *config.Plugin) { p.MCP.Proto, p.MCP.Script = "STDIO", "plugin.rb" }, "script"},
		{"bad url", func(p *config.Plugin) { p.MCP.URL = "unix:///tmp/sock" }, "url"},
		{"no name", func(p *config.Plugin) { p.Name = "" }, "name"},
		{"missing ca", func(p *config.Plugin) { p.MCP.TLS = &config.TLS{CABundle: "/nonexistent/ca.pem"} }, "ca_bundle"},
		{"cert without key", func(p *config.Plugin) { p.MCP.TLS = &config.TLS{CertFile: "c.pem"} }, "keyfile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := good()
			tt.mutate(&pl)
			_, err := NewPool([]config.Plugin{good2(), pl}, config.PluginSettings{}, Options{})
			if err == nil {
				t.Fatal("NewPool accepted it")
			}
			if !strings.Contains(err.Error(), `"`+pl.Name+`"`) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want it to name plugin %q and mention %q", err, pl.Name, tt.want)
			}
		})
	}
	if _, err := NewPool([]config.Plugin{good(), good()}, config.PluginSettings{}, Options{}); err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Errorf("duplicate names: err = %v", err)
	}
	if _, err := NewPool([]config.Plugin{good()}, config.PluginSettings{}, Options{}); err != nil {
		t.Errorf("valid plugin rejected: %v", err)
	}
}

func good2() config.Plugin { return external("other", "https://example.com/mcp") }

func TestInvokeBasics(t *testing.T) {
	plug := plugintest.NewScripted("guard")
	other := plugintest.NewScripted("Other")
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug, other)
	pool := newPool(t, []config.Plugin{external("guard", srv.URL()), external("Other", srv.URL())}, Options{})

	// Arguments reach the plugin as sent.
	mustInvoke(t, pool, "guard")
	calls := plug.Calls()
	if len(calls) != 1 || calls[0].Hook != cpex.ToolPreInvoke || string(calls[0].Payload) != string(testPayload) ||
		calls[0].Context == nil || calls[0].Context.GlobalContext.RequestID != "req-1" {
		t.Fatalf("plugin saw %+v", calls)
	}

	// A nil context is sent as an empty one.
	if _, err := pool.Invoke(context.Background(), "guard", cpex.ToolPostInvoke, testPayload, nil); err != nil {
		t.Fatal(err)
	}

	// Blocking is a result.
	plug.SetFunc(plugintest.Block(cpex.PluginViolation{Reason: "no", Code: "DENY"}))
	reply := mustInvoke(t, pool, "guard")
	if reply.Result.Continue() || reply.Result.Violation == nil || reply.Result.Violation.Code != "DENY" {
		t.Errorf("block reply = %+v", reply.Result)
	}

	// A plugin error reply is returned as the reply, not as a Go error.
	plug.SetFunc(plugintest.Fail(cpex.PluginErrorModel{Message: "broken", Code: "E1"}))
	reply, err := invoke(pool, "guard")
	if err != nil || reply.Error == nil || reply.Error.Message != "broken" {
		t.Errorf("error reply = %+v, %v", reply, err)
	}

	// Neither result nor error: ErrInvalidReply, not a panic.
	plug.SetFunc(plugintest.Reply(cpex.InvokeHookReply{PluginName: "guard"}))
	if _, err := invoke(pool, "guard"); !errors.Is(err, ErrInvalidReply) {
		t.Errorf("empty reply: err = %v, want ErrInvalidReply", err)
	}
	plug.SetFunc(nil)

	if _, err := invoke(pool, "nope"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("unknown plugin: err = %v", err)
	}

	// Concurrent callers of both plugins share one session each.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			name := "guard"
			if i%2 == 1 {
				name = "Other"
			}
			if _, err := invoke(pool, name); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := srv.Initializes(); n != 2 {
		t.Errorf("initializes = %d, want 2 (one session per plugin)", n)
	}
}

func TestNotStarted(t *testing.T) {
	pool, err := NewPool([]config.Plugin{external("p", "http://127.0.0.1:1/mcp")}, config.PluginSettings{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(pool, "p"); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Invoke before Start = %v, want ErrNotStarted", err)
	}
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool.Start(context.Background()) // no-op after Close
	if _, err := invoke(pool, "p"); !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNotStarted) {
		t.Errorf("Invoke after Close = %v", err)
	}
}

func TestEffectiveConfig(t *testing.T) {
	plug := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	plug.SetConfig(pluginserver.Config{Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Mode: "enforce", Priority: ptr(7)})
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	srv.Stop()

	local := external("guard", srv.URL())
	local.OnError = config.OnErrorIgnore
	localOnly := external("later", "http://127.0.0.1:1/mcp")
	localOnly.MCP.ReconnectAttempts = ptr(1)
	pool := newPool(t, []config.Plugin{local, localOnly}, Options{})

	gen0, plugins := pool.Effective()
	if len(plugins) != 2 || plugins[0].Name != "guard" || plugins[0].Hooks != nil || plugins[1].Name != "later" {
		t.Fatalf("before connecting: %+v", plugins)
	}

	srv.Restart()
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	gen1, plugins := pool.Effective()
	if gen1 <= gen0 {
		t.Errorf("generation %d after connecting, was %d", gen1, gen0)
	}
	g := plugins[0]
	if len(g.Hooks) != 1 || g.Hooks[0] != cpex.ToolPreInvoke || g.Mode != config.ModeSequential ||
		g.Priority == nil || *g.Priority != 7 || g.OnError != config.OnErrorIgnore || g.MCP != local.MCP {
		t.Errorf("merged = %+v", g)
	}

	// Reconnecting to the same config keeps the generation.
	srv.Restart()
	mustInvoke(t, pool, "guard")
	if gen, _ := pool.Effective(); gen != gen1 {
		t.Errorf("generation %d after reconnecting to an unchanged config, want %d", gen, gen1)
	}

	// A plugin server that comes back with another config bumps it.
	plug.SetConfig(pluginserver.Config{Hooks: []cpex.HookType{cpex.ToolPostInvoke}, Priority: ptr(7)})
	srv.Restart()
	mustInvoke(t, pool, "guard")
	gen2, plugins := pool.Effective()
	if gen2 <= gen1 || len(plugins[0].Hooks) != 1 || plugins[0].Hooks[0] != cpex.ToolPostInvoke {
		t.Errorf("after config change: gen %d (was %d), hooks %v", gen2, gen1, plugins[0].Hooks)
	}
}

func TestUnknownRemotePluginStaysDown(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("guard"))
	pl := external("missing", srv.URL())
	pl.MCP.ReconnectAttempts = ptr(1)
	pool := newPool(t, []config.Plugin{pl}, Options{})
	eventually(t, "down", func() bool { return pool.State("missing") == Down })
	_, err := invoke(pool, "missing")
	if !errors.Is(err, ErrPluginDown) || !strings.Contains(err.Error(), "unable to retrieve configuration") {
		t.Errorf("err = %v, want ErrPluginDown mentioning the empty config", err)
	}
	// Its sessions were ended properly.
	eventually(t, "DELETE of the unusable session", func() bool {
		for _, r := range srv.Requests() {
			if r.Method == http.MethodDelete {
				return true
			}
		}
		return false
	})
}

func TestHeadersReachPlugin(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("guard"))
	pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{})
	ctx := WithHeaders(context.Background(), http.Header{"Traceparent": {"00-abc-def-01"}, "X-Request-Id": {"r-7"}})
	if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, testContext("r-7")); err != nil {
		t.Fatal(err)
	}
	req, ok := srv.LastToolCall(cpex.ToolInvokeHook)
	if !ok {
		t.Fatal("no invoke_hook recorded")
	}
	if req.Header.Get("Traceparent") != "00-abc-def-01" || req.Header.Get("X-Request-Id") != "r-7" {
		t.Errorf("plugin request headers = %v", req.Header)
	}
}

func TestCloseDeletesLiveSession(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("guard"))
	pool, err := NewPool([]config.Plugin{external("guard", srv.URL())}, config.PluginSettings{}, Options{HealthCheckInterval: -1, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool.Start(context.Background())
	mustInvoke(t, pool, "guard")
	if err := pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var deletes int
	for _, r := range srv.Requests() {
		if r.Method == http.MethodDelete && r.SessionID != "" {
			deletes++
		}
	}
	if deletes != 1 {
		t.Errorf("%d DELETEs at Close, want 1", deletes)
	}
}
