package localstack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/e2e"
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
// transports (see Options.Transports).
func endToEnd(t *testing.T, transports ...Transport) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := Start(ctx, Options{Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel), Transports: transports})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
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

	lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
	defer lcancel()
	restarted := make(chan error, 1)
	go func() {
		select {
		case <-time.After(time.Second):
			restarted <- st.RestartPlugin()
		case <-lctx.Done():
			restarted <- lctx.Err()
		}
	}()
	res := e2e.Load(lctx, st.URL, nil, 10)
	if err := <-restarted; err != nil {
		t.Fatalf("restart during load: %v", err)
	}
	if res.Failures > 0 || res.Calls == 0 {
		t.Fatalf("load with a plugin restart: %d calls, %d failed: %v", res.Calls, res.Failures, res.FirstErrors)
	}
	t.Logf("load: %d calls, 0 failed", res.Calls)
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
