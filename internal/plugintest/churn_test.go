package plugintest_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// closingHandler is LateStreamEnd over a pluginserver Handler that Stop can
// still close.
type closingHandler struct {
	http.Handler
	io.Closer
}

// TestCallsReuseConnectionsWhenStreamsEndLate: calls made one after the
// other against a stateless plugin whose SSE streams end a millisecond
// after the answer must reuse their keep-alive connections (one per
// session), not open one per call. Without the drain grace of
// pkg/pluginclient a client opened about one per call (476 for 500
// measured): the go-sdk delivers the answer before it reads the stream to
// its end, the caller returns and cancels its context, and that aborts the
// body read.
func TestCallsReuseConnectionsWhenStreamsEndLate(t *testing.T) {
	ps := pluginserver.NewWithOptions(&pluginserver.Options{Stateless: true},
		pluginserver.Func(pluginserver.Config{Name: plugintest.ReplicaPlugin}, nil))
	srv := plugintest.Start(t, func() http.Handler {
		h := ps.Handler()
		return closingHandler{plugintest.LateStreamEnd(h, time.Millisecond), h.(io.Closer)}
	}, plugintest.GoSDK)
	lb := plugintest.StartBalancer(t, srv.Addr())
	c := poolClient(t, lb.URL())
	const calls = 200
	for i := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		_, err := c.Invoke(ctx, plugintest.ReplicaPlugin, cpex.ToolPreInvoke, []byte(`{"name":"t","args":{}}`), nil)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	// One connection, plus the few a call opens while the previous stream
	// is still draining.
	if n := lb.Total(); n > calls/10 {
		t.Errorf("%d connections for %d calls, want at most %d", n, calls, calls/10)
	}
}
