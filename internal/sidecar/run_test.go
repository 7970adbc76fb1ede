package sidecar_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestRunListenError: an address in use makes Run return an error naming
// it, without connecting to any plugin and without leaving goroutines.
func TestRunListenError(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Guard", cpex.ToolPreInvoke))
	cfg, err := config.Load(writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", ""))))
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	for _, tc := range []struct{ name, grpc, admin string }{
		{"grpc", taken.Addr().String(), "127.0.0.1:0"},
		{"admin", "127.0.0.1:0", taken.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			err := sidecar.Run(ctx, sidecar.Options{Config: cfg, GRPCAddr: tc.grpc, AdminAddr: tc.admin})
			if err == nil || !strings.Contains(err.Error(), taken.Addr().String()) {
				t.Fatalf("Run = %v, want an error naming %s", err, taken.Addr())
			}
			if ctx.Err() != nil {
				t.Fatal("Run did not return before its context ended")
			}
			// Nothing was connected: the plugin never saw a request.
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("plugin server saw %d requests from a sidecar that failed to start", n)
			}
		})
	}
}

// TestTraceHeadersReachPlugins: the request's trace context and request id
// travel with the plugin call (the sidecar wires pluginclient.WithHeaders
// into the processor).
func TestTraceHeadersReachPlugins(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Guard", cpex.ToolPreInvoke))
	sc := startSidecar(t, writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", ""))), nil)
	sc.waitReady("Guard")
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req := mcpPost(toolCall("safe", nil))
	req.Headers.Set("Traceparent", traceparent)
	req.Headers.Set("X-Request-Id", "req-42")
	passed(t, sc.exchange(req, upstream(nil, nil, nil)))
	call, ok := srv.LastToolCall("invoke_hook")
	if !ok {
		t.Fatal("the plugin saw no invoke_hook")
	}
	if got := call.Header.Get("Traceparent"); got != traceparent {
		t.Errorf("plugin call traceparent = %q, want %q", got, traceparent)
	}
	if got := call.Header.Get("X-Request-Id"); got != "req-42" {
		t.Errorf("plugin call x-request-id = %q, want req-42", got)
	}
}

// TestAdminEndpoints: /healthz always answers, /metrics is served, and
// pprof is served only when asked for.
func TestAdminEndpoints(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Guard", cpex.ToolPreInvoke))
	path := writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", "")))
	for _, pprof := range []bool{false, true} {
		sc := startSidecar(t, path, func(o *sidecar.Options) { o.Pprof = pprof })
		want := map[string]int{"/healthz": http.StatusOK, "/metrics": http.StatusOK, "/debug/pprof/": http.StatusNotFound}
		if pprof {
			want["/debug/pprof/"] = http.StatusOK
		}
		for p, code := range want {
			if got, _, err := sc.get(p); err != nil || got != code {
				t.Errorf("pprof %v: GET %s = %d %v, want %d", pprof, p, got, err, code)
			}
		}
		if err := sc.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}

// TestAdminClosesIdleConnections: an idle keep-alive connection to the
// admin server is closed by the server after the idle timeout.
func TestAdminClosesIdleConnections(t *testing.T) {
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plugintest.NewScripted("Guard", cpex.ToolPreInvoke))
	path := writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", "")))
	r := startSidecar(t, path, func(o *sidecar.Options) { o.AdminIdleTimeout = 100 * time.Millisecond })

	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(r.adminURL, "http://"), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(waitTimeout)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz = %d, close %v; want 200 keep-alive", resp.StatusCode, resp.Close)
	}
	// Now idle: the server must close the connection (read sees EOF)
	// within 5 s, before the admin read timeout (10 s), which would close
	// it too.
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection read = %d, %v; want EOF (closed by the server)", n, err)
	}
}
