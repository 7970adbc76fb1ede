package pluginclient

import (
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// TestSSETypeScriptSDK: the TypeScript SDK's legacy SSE server transport
// (SSEServerTransport, a real Node.js process) as an SSE plugin allows,
// blocks and redacts; killed and started again three times under 20
// callers, no call fails (the pool applies no on_error: any error counts),
// and the client rebuilds its session after each restart, with a new
// initialize on each new process.
func TestSSETypeScriptSDK(t *testing.T) {
	srv := plugintest.StartNode(t, nodeplugin.Options{Policy: tsPolicy, SSE: true})
	// Node takes a while to listen again: the reconnect backoff (attempts
	// of at most 100 ms, newPool's MaxReconnectDelay) must outlast that, as
	// in TestRestartsUnderLoadBothFamilies.
	const nodeRestartTime = 8 * time.Second
	pl := config.Plugin{Name: "guard", Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoSSE, URL: srv.URL(),
		ReconnectAttempts: ptr(int(nodeRestartTime / (50 * time.Millisecond))), ReconnectDelay: secs(50 * time.Millisecond),
	}}
	rec := &recorder{}
	pool := newPool(t, []config.Plugin{pl}, Options{Observer: rec})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")

	const restarts = 3
	calls := redactUnderLoad(t, pool, srv.Restart)
	if rec.rebuilds.Load() < restarts {
		t.Errorf("%d rebuilds, want at least %d (one per restart)", rec.rebuilds.Load(), restarts)
	}
	tot := srv.Totals()
	if tot.Initializes < restarts+1 {
		t.Errorf("%d initializes over the processes, want at least %d (one per process)", tot.Initializes, restarts+1)
	}
	checkPolicy(t, pool, "guard")
	t.Logf("%d calls, %d rebuilds, %d retries, node totals %+v", calls, rec.rebuilds.Load(), rec.retriesOK.Load(), tot)
}
