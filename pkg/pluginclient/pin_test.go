package pluginclient

import (
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// A pinned session rides one connection: many calls, one connection per
// session, even through a per-connection balancer.
func TestPinnedSessionOneConnection(t *testing.T) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	lb := plugintest.StartBalancer(t, srv.Addr())
	const slots = 3
	pool := newPool(t, []config.Plugin{external("guard", lb.URL())}, Options{Slots: slots})
	for range 30 {
		mustInvoke(t, pool, "guard")
	}
	if n := lb.Total(); n != slots {
		t.Errorf("%d connections for %d sessions, want one each", n, slots)
	}
	if n := srv.Initializes(); n != slots {
		t.Errorf("%d initializes, want %d", n, slots)
	}
}

// A restart closes the pinned connection: the session is stale, rebuilt
// before (or when) the next call needs it, and no call fails.
func TestPinnedSessionRestart(t *testing.T) {
	for _, f := range []plugintest.Flavour{plugintest.GoSDK, plugintest.NotFoundJSON32001} {
		t.Run(f.String(), func(t *testing.T) {
			plug := plugintest.NewScripted("guard")
			srv := plugintest.StartPlugins(t, f, &pluginserver.Options{}, plug)
			pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{})
			mustInvoke(t, pool, "guard")
			srv.Restart()
			mustInvoke(t, pool, "guard")
			st := pool.Stats("guard")
			if st.Rebuilds != 1 || st.RetryFailures != 0 || st.Connects != 2 || plug.CallCount() != 2 {
				t.Errorf("stats = %+v, plugin ran %d times; want 1 rebuild, 2 connects, 2 runs", st, plug.CallCount())
			}
		})
	}
}
