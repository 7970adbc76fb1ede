package plugintest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// poolClient is a ReplicaLoad.Client: a pluginclient.Pool with one plugin
// at url, default options.
func poolClient(t testing.TB, url string) plugintest.Invoker {
	return poolClientWith(t, url, pluginclient.Options{})
}

// poolClientWith is poolClient with opts (health checks off, short
// reconnect delays).
func poolClientWith(t testing.TB, url string, opts pluginclient.Options) *pluginclient.Pool {
	attempts := 3
	pl := config.Plugin{Name: plugintest.ReplicaPlugin, Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoStreamableHTTP, URL: url, ReconnectAttempts: &attempts,
		ReconnectDelay: &config.Seconds{Duration: 10 * time.Millisecond},
	}}
	opts.HealthCheckInterval, opts.MaxReconnectDelay = -1, 50*time.Millisecond
	p, err := pluginclient.NewPool([]config.Plugin{pl}, config.PluginSettings{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	p.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("close pool: %v", err)
		}
	})
	return p
}

// TestReplicaLoadStateful: stateful replicas behind a per-connection
// balancer (a ClusterIP Service without affinity), 20 callers. Each session
// of the client is pinned to the connection it was made on, hence to one
// replica: no call fails, initializes stay about one per session, and two
// replicas each serve a fair share. The two-replica run is the long one
// (20 s; 2 s with -short).
func TestReplicaLoadStateful(t *testing.T) {
	long := 20 * time.Second
	if testing.Short() {
		long = 2 * time.Second
	}
	for _, c := range []struct {
		replicas int
		d        time.Duration
	}{{2, long}, {3, 2 * time.Second}} {
		t.Run(fmt.Sprintf("%d replicas", c.replicas), func(t *testing.T) {
			res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{Replicas: c.replicas, Duration: c.d, Client: poolClient})
			t.Log(res)
			checkReplicaLoad(t, res, pluginclient.DefaultSlots)
		})
	}
}

// checkReplicaLoad asserts the acceptance of a load run without restarts:
// 0 failed calls, at most about one initialize per session (plus a few
// sessions replaced after an idle or broken connection), and every replica
// serving at least 20 % of the hook calls when there are two.
func checkReplicaLoad(t *testing.T, res plugintest.ReplicaResult, sessions int) {
	t.Helper()
	if res.Failed != 0 {
		t.Errorf("failed calls: %v", res)
	}
	var inits, hooks int64
	for i := range res.HookCalls {
		inits += res.Initializes[i]
		hooks += res.HookCalls[i]
	}
	if inits > int64(2*sessions) {
		t.Errorf("%d initializes for %d sessions: %v", inits, sessions, res)
	}
	if len(res.HookCalls) == 2 {
		for i, n := range res.HookCalls {
			if n*5 < hooks {
				t.Errorf("replica %d served %d of %d hook calls, want at least 20 %%: %v", i, n, hooks, res)
			}
		}
	}
}

// TestReplicaLoadStateless: stateless (MCP 2026-07-28) replicas behind the
// balancer: no call fails, no initialize at all, and the client keeps its
// connections (about one per session), not one per call.
func TestReplicaLoadStateless(t *testing.T) {
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{
		Client: poolClient,
		Server: &pluginserver.Options{Stateless: true},
	})
	t.Log(res)
	var inits, conns int64
	for i := range res.HookCalls {
		inits += res.Initializes[i]
		conns += res.Connections[i]
		if res.HookCalls[i] == 0 {
			t.Errorf("replica %d served no call", i)
		}
	}
	if res.Failed != 0 || inits != 0 {
		t.Errorf("failed %d, initializes %d; want 0, 0: %v", res.Failed, inits, res)
	}
	if conns > 2*pluginclient.DefaultSlots {
		t.Errorf("%d connections for %d calls, want about %d (one per session)", conns, res.Calls, pluginclient.DefaultSlots)
	}
}

// TestRollingRestart: stateful replicas killed one by one under load, each
// replaced by a new server on its address (empty session store): no call
// fails.
func TestRollingRestart(t *testing.T) {
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{
		Replicas: 2,
		Duration: 3 * time.Second,
		Client:   poolClient,
		During: func(ctx context.Context, r *plugintest.Replicas) {
			for _, s := range r.Servers {
				if !sleepCtx(ctx, 500*time.Millisecond) {
					return
				}
				s.Stop()
				if !sleepCtx(ctx, 100*time.Millisecond) {
					s.Restart()
					return
				}
				s.Restart()
			}
		},
	})
	t.Log(res)
	if res.Failed != 0 {
		t.Errorf("failed calls: %v", res)
	}
	var inits int64
	for _, n := range res.Initializes {
		inits += n
	}
	// One per session, plus one per session lost with each restart.
	if limit := int64(4 * pluginclient.DefaultSlots); inits > limit {
		t.Errorf("%d initializes, want at most %d: %v", inits, limit, res)
	}
}

// TestHeadlessFollowsEndpoints: the plugin host resolves (like a headless
// Service; the injected resolver answers for "localhost", whose Host
// header the go-sdk server accepts) to 1, then 3, then 2 replica addresses during a load run; the
// client's sessions follow: each address gets sessions while listed, the
// removed one drains, no call fails.
func TestHeadlessFollowsEndpoints(t *testing.T) {
	var listed atomic.Int32
	listed.Store(1)
	var pool *pluginclient.Pool
	following := func(ctx context.Context, n int) bool {
		listed.Store(int32(n))
		for ctx.Err() == nil {
			s := pool.Stats(plugintest.ReplicaPlugin).Sessions
			if s.Endpoints == n && s.Draining == 0 && s.Ready == pluginclient.DefaultSlots {
				return true
			}
			sleepCtx(ctx, 10*time.Millisecond)
		}
		return false
	}
	var followed [2]bool
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{
		Replicas: 3,
		Duration: 3 * time.Second,
		ClientFor: func(t testing.TB, r *plugintest.Replicas) plugintest.Invoker {
			resolve := func(context.Context, string) ([]string, error) {
				addrs := make([]string, listed.Load())
				for i := range addrs {
					addrs[i] = r.Servers[i].Addr()
				}
				return addrs, nil
			}
			pool = poolClientWith(t, "http://localhost"+plugintest.Path, pluginclient.Options{
				Resolver: resolve, ResolveInterval: 20 * time.Millisecond,
			})
			return pool
		},
		During: func(ctx context.Context, r *plugintest.Replicas) {
			if sleepCtx(ctx, 500*time.Millisecond) {
				followed[0] = following(ctx, 3)
			}
			if sleepCtx(ctx, 500*time.Millisecond) {
				followed[1] = following(ctx, 2)
			}
		},
	})
	t.Log(res)
	if res.Failed != 0 {
		t.Errorf("failed calls: %v", res)
	}
	if !followed[0] || !followed[1] {
		t.Errorf("sessions did not follow the addresses (1 → 3: %v, 3 → 2: %v): %+v", followed[0], followed[1],
			pool.Stats(plugintest.ReplicaPlugin).Sessions)
	}
	for i, n := range res.HookCalls {
		if n == 0 {
			t.Errorf("replica %d served no call while listed: %v", i, res)
		}
	}
	if n := res.Connections; n[0]+n[1]+n[2] != 0 {
		t.Errorf("the client went through the balancer: %v", res)
	}
}

// sleepCtx waits d or until ctx ends, reporting whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
