package pluginclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// One client's oversized trace header, refused by the plugin server's HTTP
// layer, fails that client's call alone: concurrent ordinary calls all go
// through, on the same session, with no rebuild.
func TestOversizedHeaderAffectsOnlyItsCall(t *testing.T) {
	for _, limit := range []struct {
		name  string
		bytes int
		big   int // header value size that exceeds it
	}{
		{"node", plugintest.NodeHeaderLimit, 20 << 10},
		{"go", plugintest.GoHeaderLimit, 1<<20 + 8<<10},
	} {
		for _, pinned := range []bool{false, true} {
			name := limit.name
			opts := Options{}
			if pinned {
				name += "/pinned"
			} else {
				opts.HTTPClient = shared(t)
			}
			t.Run(name, func(t *testing.T) {
				const n = 40
				plug := plugintest.NewScripted("guard")
				srv := plugintest.Start(t, pluginserver.New(plug).Handler, plugintest.NotFoundJSON32600, plugintest.HeaderLimit(limit.bytes))
				pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, opts)
				mustInvoke(t, pool, "guard")

				big := http.Header{
					"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
					"Tracestate":  {"k=" + strings.Repeat("v", limit.big)},
				}
				small := http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, "X-Request-Id": {"r-1"}}
				var (
					wg                  sync.WaitGroup
					start               = make(chan struct{})
					bigOK, smallFailed  atomic.Int64
					bigRefused, bigOdd  atomic.Int64
					firstSmall, firstBD atomic.Pointer[error]
				)
				call := func(h http.Header) error {
					ctx, cancel := context.WithTimeout(WithHeaders(context.Background(), h), 10*time.Second)
					defer cancel()
					_, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, testContext("r"))
					return err
				}
				for range n {
					wg.Go(func() {
						<-start
						if err := call(small); err != nil {
							smallFailed.Add(1)
							firstSmall.CompareAndSwap(nil, &err)
						}
					})
					wg.Go(func() {
						<-start
						err := call(big)
						switch {
						case err == nil:
							bigOK.Add(1)
						case errors.Is(err, ErrRefused):
							bigRefused.Add(1)
						default:
							bigOdd.Add(1)
							firstBD.CompareAndSwap(nil, &err)
						}
					})
				}
				close(start)
				wg.Wait()

				if k := smallFailed.Load(); k != 0 {
					t.Errorf("%d of %d ordinary calls failed; first: %v", k, n, *firstSmall.Load())
				}
				if bigOK.Load() != 0 || bigRefused.Load()+bigOdd.Load() != n {
					t.Errorf("oversized calls: %d ok, %d refused, %d other; want all %d failed", bigOK.Load(), bigRefused.Load(), bigOdd.Load(), n)
				}
				if p := firstBD.Load(); p != nil {
					t.Logf("an oversized call failed otherwise than refused: %v", *p)
				}
				// A server that closes the connection after its refusal (node)
				// costs a pinned session its connection, hence a rebuild; no
				// other call fails.
				if k := srv.Initializes(); k != 1 && !pinned {
					t.Errorf("initializes = %d, want 1 (no session rebuild)", k)
				}
				if st := pool.Stats("guard"); st.Rebuilds != 0 && !pinned {
					t.Errorf("stats = %+v, want no rebuild", st)
				}
				mustInvoke(t, pool, "guard")
			})
		}
	}
}
