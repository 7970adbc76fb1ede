package pluginclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	for i := range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := invokeText(pool, "guard", fmt.Sprintf("caller %d secret", i))
				calls.Add(1)
				if err == nil && (r.Result == nil || !strings.Contains(string(r.Result.ModifiedPayload), "[redacted]")) {
					err = fmt.Errorf("unexpected reply %+v", r)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		h := ps.Handler()
		old := cur.Swap(&h)
		_ = (*old).(io.Closer).Close()
		ts.CloseClientConnections()
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed; first: %v", n, calls.Load(), *firstErr.Load())
	}
	if inits.Load() != 0 || sessionIDs.Load() != 0 {
		t.Errorf("%d initializes, %d requests with a session id; want none", inits.Load(), sessionIDs.Load())
	}
	t.Logf("%d calls", calls.Load())
}
