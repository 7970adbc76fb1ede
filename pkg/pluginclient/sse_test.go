package pluginclient

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// sseRig serves pluginserver's guard plugin over the go-sdk's legacy
// HTTP+SSE handler; restart replaces the handler with a fresh one (every
// session of the old one closed, as a restarted server forgets them).
type sseRig struct {
	srv *pluginserver.Server
	ts  *httptest.Server
	cur atomic.Pointer[http.Handler]
}

func newSSERig(t *testing.T) (*sseRig, config.Plugin) {
	t.Helper()
	r := &sseRig{srv: pluginserver.New(guardPlugin())}
	h := r.srv.SSEHandler()
	r.cur.Store(&h)
	r.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		(*r.cur.Load()).ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		r.srv.Close()
		r.ts.CloseClientConnections()
		r.ts.Close()
	})
	pl := config.Plugin{Name: "guard", Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoSSE, URL: r.ts.URL + "/sse",
		ReconnectAttempts: ptr(10), ReconnectDelay: secs(20 * time.Millisecond),
	}}
	return r, pl
}

// restart serves a fresh handler and closes the old one's sessions.
func (r *sseRig) restart() {
	h := r.srv.SSEHandler()
	old := r.cur.Swap(&h)
	_ = (*old).(io.Closer).Close()
}

// TestSSEPolicy: a plugin server on the legacy HTTP+SSE transport allows,
// blocks and redacts, and a restart costs no call.
func TestSSEPolicy(t *testing.T) {
	rig, pl := newSSERig(t)
	pool := newPool(t, []config.Plugin{pl}, Options{})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")
	rig.restart()
	checkPolicy(t, pool, "guard")
}

// TestSSERestartUnderLoad: 20 callers while the SSE server restarts three
// times: no call fails.
func TestSSERestartUnderLoad(t *testing.T) {
	rig, pl := newSSERig(t)
	rec := &recorder{}
	pool := newPool(t, []config.Plugin{pl}, Options{Observer: rec})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	calls := redactUnderLoad(t, pool, rig.restart)
	if rec.rebuilds.Load() < 3 {
		t.Errorf("%d rebuilds, want at least 3 (one per restart)", rec.rebuilds.Load())
	}
	t.Logf("%d calls, %d rebuilds, %d retries", calls, rec.rebuilds.Load(), rec.retriesOK.Load())
}
