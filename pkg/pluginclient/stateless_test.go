package pluginclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// TestStatelessServerRestarts: a go-sdk plugin server serving MCP
// 2026-07-28 only (stateless: no initialize, no Mcp-Session-Id) allows,
// blocks and redacts; 20 callers see no failed call while it restarts
// three times (a fresh handler, every connection cut); no initialize and
// no session id ever reach it.
func TestStatelessServerRestarts(t *testing.T) {
	ps := pluginserver.NewWithOptions(&pluginserver.Options{Stateless: true}, guardPlugin())
	var cur atomic.Pointer[http.Handler]
	h := ps.Handler()
	cur.Store(&h)
	var inits, sessionIDs atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") != "" {
			sessionIDs.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"method":"initialize"`) {
			inits.Add(1)
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		(*cur.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ps.Close(); ts.CloseClientConnections(); ts.Close() })
	pool := newPool(t, []config.Plugin{external("guard", ts.URL+"/mcp")}, Options{Slots: 4})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")

	calls := redactUnderLoad(t, pool, func() {
		h := ps.Handler()
		old := cur.Swap(&h)
		_ = (*old).(io.Closer).Close()
		ts.CloseClientConnections()
	})
	if inits.Load() != 0 || sessionIDs.Load() != 0 {
		t.Errorf("%d initializes, %d requests with a session id; want none", inits.Load(), sessionIDs.Load())
	}
	t.Logf("%d calls", calls)
}
