package localstack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
)

// TestEndToEnd runs the end-to-end driver (the one make demo and make
// kind-e2e use) through the whole local stack: a real MCP client, the
// Envoy stand-in, the sidecar, the example plugin and an MCP server. Every
// scripted step must end as expected, before and after a plugin restart,
// and a load with a plugin restart in the middle must see no failed call.
func TestEndToEnd(t *testing.T) {
	endToEnd(t, MCP)
}

// endToEnd runs the end-to-end checks with the demo policy served over
// transports (see Options.Transports) and returns the stack, closed at
// the end of the test.
func endToEnd(t *testing.T, transports ...Transport) *Stack {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := Start(ctx, Options{Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Transports: transports})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	script := func(phase string) {
		outcomes, err := e2e.Script(ctx, st.URL, nil)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		var out strings.Builder
		if e2e.Print(&out, outcomes) != 0 || len(outcomes) < 7 {
			t.Errorf("%s: not every step ended as expected:\n%s", phase, out.String())
		}
	}
	script("first session")
	if err := st.RestartPlugin(); err != nil {
		t.Fatal(err)
	}
	script("after a plugin restart")

	res := loadWithRestarts(t, st, 10, 3*time.Second, 1)
	if res.Failures > 0 || res.Calls == 0 {
		t.Fatalf("load with a plugin restart: %d calls, %d failed: %v", res.Calls, res.Failures, res.FirstErrors)
	}
	t.Logf("load: %d calls, 0 failed", res.Calls)
	return st
}

// loadWithRestarts runs the load of callers MCP sessions for d through
// st, restarting the plugin servers restarts times, evenly spaced.
func loadWithRestarts(t *testing.T, st *Stack, callers int, d time.Duration, restarts int) e2e.LoadResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	restarted := make(chan error, 1)
	go func() {
		every := d / time.Duration(restarts+1)
		for range restarts {
			select {
			case <-time.After(every):
				if err := st.RestartPlugin(); err != nil {
					restarted <- err
					return
				}
			case <-ctx.Done():
				restarted <- ctx.Err()
				return
			}
		}
		restarted <- nil
	}()
	res := e2e.Load(ctx, st.URL, nil, callers)
	if err := <-restarted; err != nil {
		t.Fatalf("restart during load: %v", err)
	}
	return res
}

// TestEndToEndTypeScriptPlugin runs the same checks with the policy served
// by the plugin server written on the official TypeScript SDK (a Node.js
// process), then 20 callers for 20 s with 3 plugin restarts: no failed call,
// at most one initialize per session (plugin_sessions, default 8) per
// restart.
func TestEndToEndTypeScriptPlugin(t *testing.T) {
	plugintest.NeedNode(t)
	st := endToEnd(t, MCPNode)
	before, ok := st.NodeInitializes()
	if !ok {
		t.Fatal("no initialize count from the Node.js plugin server")
	}
	const restarts, sessions = 3, 8
	res := loadWithRestarts(t, st, 20, 20*time.Second, restarts)
	if res.Failures > 0 || res.Calls == 0 {
		t.Fatalf("%d calls, %d failed: %v", res.Calls, res.Failures, res.FirstErrors)
	}
	after, _ := st.NodeInitializes()
	if n := after - before; n > restarts*sessions {
		t.Errorf("%d initializes for %d restarts, want at most %d", n, restarts, restarts*sessions)
	}
	t.Logf("%d calls, 0 failed, %d initializes for %d restarts", res.Calls, after-before, restarts)
}

// TestEndToEndProtobufTransports runs the same checks with the policy split
// over cpex's protobuf transports in one config: the deny plugin over gRPC,
// the redaction plugin over the Unix socket (both restarted under load).
func TestEndToEndProtobufTransports(t *testing.T) {
	endToEnd(t, GRPC, UnixSocket)
}

// TestEndToEndGRPCUDS serves the whole policy over gRPC on a Unix socket.
func TestEndToEndGRPCUDS(t *testing.T) {
	endToEnd(t, GRPCUDS)
}
