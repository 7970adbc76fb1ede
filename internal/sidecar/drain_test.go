package sidecar_test

import (
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestDrain cancels Run while a stream is open (issue 2): health turns
// NOT_SERVING (or the server is gone) at once, new streams are refused, the
// open stream completes once its upstream answers, Run returns nil, and the
// plugin session is closed with a DELETE.
func TestDrain(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	sc := startSidecar(t, writeConfig(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", ""))), nil)
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
		st, err := sc.health("")
		if err != nil {
			return status.Code(err) == codes.Unavailable, err.Error()
		}
		return st == healthpb.HealthCheckResponse_NOT_SERVING, st.String()
	})
	eventually(t, "a new stream refused", func() (bool, string) {
		res, err := sc.do(mcpPost(toolCall("late", nil)), upstream(nil, nil, nil))
		if err != nil {
			return false, err.Error()
		}
		return res.UpstreamRequest == nil && res.LocalError == envoytest.LocalGRPCError,
			fmt.Sprintf("status %d, local error %q", res.Status, res.LocalError)
	})
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
