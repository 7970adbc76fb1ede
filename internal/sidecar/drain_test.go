package sidecar_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestDrain cancels Run while a stream is open: health turns
// NOT_SERVING (or the server is gone) at once, new streams are refused, the
// open stream completes once its upstream answers, Run returns nil, and the
// plugin session is closed with a DELETE.
func TestDrain(t *testing.T) {
	// A post hook keeps the stream open while the upstream works (the
	// response headers are asked for); with pre hooks only, Envoy ends the
	// stream once the request body is answered and there is nothing to drain.
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	entry := strings.Replace(pluginEntry("Guard", srv.URL(), "fail", ""), "hooks: [tool_pre_invoke]", "hooks: [tool_pre_invoke, tool_post_invoke]", 1)
	sc := startSidecar(t, writeConfig(t, configYAML(entry)), nil)
	sc.waitReady("Guard")
	sc.waitHealth(healthpb.HealthCheckResponse_SERVING)

	arrived, release := make(chan struct{}), make(chan struct{})
	held := make(chan *envoytest.Result, 1)
	go func() {
		res, err := sc.do(mcpPost(toolCall("slow", nil)), upstream(nil, arrived, release))
		if err != nil {
			t.Errorf("held exchange: %v", err)
		}
		held <- res
	}()
	select {
	case <-arrived:
	case res := <-held:
		close(release)
		t.Fatalf("held exchange ended early: %+v", res)
	}

	sc.cancel()
	eventually(t, "gRPC health NOT_SERVING or unavailable", func() (bool, string) {
		for _, svc := range []string{"", sidecar.ExtProcService} {
			st, err := sc.health(svc)
			if err != nil && status.Code(err) != codes.Unavailable {
				return false, fmt.Sprintf("service %q: %v", svc, err)
			}
			if err == nil && st != healthpb.HealthCheckResponse_NOT_SERVING {
				return false, fmt.Sprintf("service %q: %v", svc, st)
			}
		}
		return true, ""
	})
	eventually(t, "a new stream refused", func() (bool, string) {
		res, err := sc.do(mcpPost(toolCall("late", nil)), upstream(nil, nil, nil))
		if err != nil {
			return false, err.Error()
		}
		return res.UpstreamRequest == nil && res.LocalError == envoytest.LocalGRPCError,
			fmt.Sprintf("status %d, local error %q", res.Status, res.LocalError)
	})
	// The admin server stays up while streams drain, reporting not ready
	// so that the pod leaves its Service.
	if code, rz := sc.readyz(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d %+v, want 503", code, rz)
	}
	if code, _, err := sc.get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz while draining = %d %v, want 200", code, err)
	}
	select {
	case err := <-sc.done:
		t.Fatalf("Run returned (%v) while a stream was open", err)
	default:
	}

	close(release)
	res := <-held
	if res == nil {
		t.FailNow()
	}
	if res.LocalError != "" || res.Reset || res.StreamErr != nil {
		t.Fatalf("open stream broken by the drain: %s (%s), reset %v, stream error %v", res.LocalError, res.Details, res.Reset, res.StreamErr)
	}
	passed(t, res)
	if err := sc.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	var deletes int
	for _, r := range srv.Requests() {
		if r.Method == http.MethodDelete {
			deletes++
			if r.SessionID == "" {
				t.Errorf("DELETE without Mcp-Session-Id")
			}
		}
	}
	if deletes != 1 {
		t.Errorf("plugin server saw %d DELETEs, want 1 (session closed on shutdown)", deletes)
	}
}

// TestDrainAfterReload: a stream that started before a reload keeps its
// generation through a shutdown. The plugin the reload removed must still
// serve that stream's response hook while the stream drains, and only then
// get its session closed.
func TestDrainAfterReload(t *testing.T) {
	post := plugintest.NewScripted("Post", cpex.ToolPostInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, post)
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv2 := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	postEntry := strings.Replace(pluginEntry("Post", srv.URL(), "fail", ""), "[tool_pre_invoke]", "[tool_post_invoke]", 1)
	dir := newConfigMapDir(t, configYAML(postEntry))
	sc := startSidecar(t, dir.path(), nil)
	sc.waitReady("Post")

	arrived, release := make(chan struct{}), make(chan struct{})
	held := make(chan *envoytest.Result, 1)
	go func() {
		res, err := sc.do(mcpPost(toolCall("slow", nil)), upstream(nil, arrived, release))
		if err != nil {
			t.Errorf("held exchange: %v", err)
		}
		held <- res
	}()
	select {
	case <-arrived:
	case res := <-held:
		close(release)
		t.Fatalf("held exchange ended early: %+v", res)
	}

	dir.swap(configYAML(pluginEntry("Guard", srv2.URL(), "fail", "")))
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	sc.waitReady("Guard")

	sc.cancel()
	eventually(t, "a new stream refused", func() (bool, string) {
		res, err := sc.do(mcpPost(toolCall("late", nil)), upstream(nil, nil, nil))
		if err != nil {
			return false, err.Error()
		}
		return res.UpstreamRequest == nil && res.LocalError == envoytest.LocalGRPCError,
			fmt.Sprintf("status %d, local error %q", res.Status, res.LocalError)
	})
	close(release)
	res := <-held
	if res == nil {
		t.FailNow()
	}
	if res.LocalError != "" || res.Reset || res.StreamErr != nil {
		t.Fatalf("open stream broken by the drain: %s (%s), reset %v, stream error %v", res.LocalError, res.Details, res.Reset, res.StreamErr)
	}
	passed(t, res)
	if n := post.CallCount(); n != 1 {
		t.Errorf("removed plugin Post saw %d post hooks, want 1 (the draining stream's)", n)
	}
	if err := sc.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, s := range []*plugintest.Server{srv, srv2} {
		var deletes int
		for _, r := range s.Requests() {
			if r.Method == http.MethodDelete {
				deletes++
			}
		}
		if deletes != 1 {
			t.Errorf("plugin server %s saw %d DELETEs, want 1", s.URL(), deletes)
		}
	}
}
