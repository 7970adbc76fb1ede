package pluginclient

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// pluginProcess is a plugin server of either SDK family as the scenarios
// below see it: where it listens, a restart, and what it counted.
type pluginProcess struct {
	url, addr string
	// restartTime bounds how long a restart leaves the server away: the
	// rebuild budget must outlast it (a Node.js process takes up to a few
	// seconds to listen on two loaded cores).
	restartTime time.Duration
	restart     func()
	initializes func() int64
	connections func() int64
}

// keepAlive is the idle timeout of the servers in the quiet-period
// scenarios: Node's shortest (its timer ticks in seconds); the real
// servers' 5 s would only make the tests slower.
const keepAlive = time.Second

// family starts a plugin server of one SDK family, serving plugin "guard"
// (allow everything), closing idle connections after idle (0: never).
type family struct {
	name  string
	start func(t *testing.T, idle time.Duration) pluginProcess
}

// families are the plugin servers the scenarios run against: the Go SDK
// server with Node's framing habits, and the real TypeScript SDK server on
// Node.js (skipped without node).
func families() []family {
	return []family{
		{"go-sdk", func(t *testing.T, idle time.Duration) pluginProcess {
			ps := pluginserver.NewWithOptions(&pluginserver.Options{}, plugintest.NewScripted("guard"))
			srv := plugintest.Start(t, ps.Handler, plugintest.GoSDK,
				plugintest.WithHabits(plugintest.Habits{ChunkedEmpty202: true, IdleTimeout: idle}))
			return pluginProcess{url: srv.URL(), addr: srv.Addr(), restart: srv.Restart, restartTime: time.Second,
				initializes: srv.Initializes, connections: srv.Connections}
		}},
		{"typescript-sdk", func(t *testing.T, idle time.Duration) pluginProcess {
			srv := plugintest.StartNode(t, nodeplugin.Options{Policy: `{"plugins":[{"name":"guard"}]}`, KeepAlive: idle})
			return pluginProcess{url: srv.URL(), addr: srv.Addr(), restart: srv.Restart, restartTime: 8 * time.Second,
				initializes: func() int64 { return int64(srv.Totals().Initializes) },
				connections: func() int64 { return int64(srv.Totals().Connections) }}
		}},
	}
}

// load runs callers concurrent callers against pool for d, with during
// running beside them; it returns the calls made and fails t on any failed
// call.
func load(t *testing.T, pool *Pool, callers int, d time.Duration, during func()) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var calls, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for ctx.Err() == nil {
				calls.Add(1)
				if _, err := invoke(pool, "guard"); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	if during != nil {
		during()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed; first: %v", n, calls.Load(), *firstErr.Load())
	}
	return calls.Load()
}

// Under load, each plugin restart costs at most one initialize per
// session and no failed call, whatever the SDK family of the server.
func TestRestartsUnderLoadBothFamilies(t *testing.T) {
	const slots, restarts = 4, 3
	for _, fam := range families() {
		t.Run(fam.name, func(t *testing.T) {
			p := fam.start(t, 0)
			pl := external("guard", p.url)
			// Attempts of at most 100 ms each (newPool's MaxReconnectDelay).
			pl.MCP.ReconnectAttempts = ptr(int(p.restartTime / (50 * time.Millisecond)))
			pool := newPool(t, []config.Plugin{pl}, Options{Slots: slots})
			eventually(t, "every session ready", func() bool { return pool.Stats("guard").Sessions.Ready == slots })
			calls := load(t, pool, 20, 4*time.Second, func() {
				for range restarts {
					time.Sleep(800 * time.Millisecond)
					p.restart()
				}
			})
			if n, max := p.initializes(), int64(slots*(1+restarts)); n > max {
				t.Errorf("%d initializes for %d restarts, want at most %d (one per session per restart)", n, restarts, max)
			}
			t.Logf("%d calls, %d initializes, stats %+v", calls, p.initializes(), pool.Stats("guard"))
		})
	}
}

// Quiet periods longer than the server's keep-alive close every idle
// connection; the sessions live on in the server: no rebuild, no failed
// call, no initialize, and the first call after a quiet period costs one
// new connection.
func TestQuietPeriodsKeepSessions(t *testing.T) {
	const slots = 4
	for _, fam := range families() {
		t.Run(fam.name, func(t *testing.T) {
			p := fam.start(t, keepAlive)
			pool := newPool(t, []config.Plugin{external("guard", p.url)}, Options{Slots: slots})
			load(t, pool, 8, 300*time.Millisecond, nil)
			inits := p.initializes()
			for range 2 {
				time.Sleep(5 * keepAlive / 2)
				conns := p.connections()
				mustInvoke(t, pool, "guard")
				if n := p.connections() - conns; n != 1 {
					t.Errorf("the first call after a quiet period opened %d connections, want 1", n)
				}
				load(t, pool, 8, 300*time.Millisecond, nil)
			}
			st := pool.Stats("guard")
			if st.Rebuilds != 0 || p.initializes() != inits {
				t.Errorf("stats %+v, %d initializes after %d: want no rebuild, no initialize", st, p.initializes(), inits)
			}
		})
	}
}

// Two replicas behind a per-connection balancer: after a quiet period a
// session's new connection may reach the other replica, which answers
// "session not found" before anything ran: that session is rebuilt there
// (at most once per quiet period) and no call fails.
func TestQuietPeriodsTwoReplicas(t *testing.T) {
	const slots = 4
	for _, fam := range families() {
		t.Run(fam.name, func(t *testing.T) {
			a, b := fam.start(t, keepAlive), fam.start(t, keepAlive)
			lb := plugintest.StartBalancer(t, a.addr, b.addr)
			causes := &causeRecorder{}
			pool := newPool(t, []config.Plugin{external("guard", lb.URL())}, Options{Slots: slots, Observer: causes})
			load(t, pool, 8, 300*time.Millisecond, nil)
			for i := range 2 {
				before := pool.Stats("guard").Rebuilds
				time.Sleep(5 * keepAlive / 2)
				load(t, pool, 8, 300*time.Millisecond, nil)
				if n := pool.Stats("guard").Rebuilds - before; n > slots {
					t.Errorf("quiet period %d: %d rebuilds, want at most one per session (%d)", i+1, n, slots)
				}
			}
			// The other replica said so: every rebuild is counted as not_found.
			if got, n := causes.counts(), pool.Stats("guard").Rebuilds; got[CauseNotFound] != int(n) || len(got) > 1 {
				t.Errorf("rebuild causes %v for %d rebuilds, want all %s", got, n, CauseNotFound)
			}
			t.Logf("stats %+v; initializes %d + %d", pool.Stats("guard"), a.initializes(), b.initializes())
		})
	}
}

// causeRecorder is an Observer that also counts rebuilds by cause
// (SessionObserver).
type causeRecorder struct {
	recorder
	mu sync.Mutex
	by map[string]int
}

func (c *causeRecorder) OnRebuildCause(_, cause string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]int{}
	}
	c.by[cause]++
}

func (c *causeRecorder) OnSessions(string, Sessions) {}

func (c *causeRecorder) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.by)
}
