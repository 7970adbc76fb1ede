package plugintest_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// poolClient is a ReplicaLoad.Client: today's pluginclient.Pool with one
// plugin at url.
func poolClient(t testing.TB, url string) plugintest.Invoker {
	attempts := 3
	pl := config.Plugin{Name: plugintest.ReplicaPlugin, Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoStreamableHTTP, URL: url, ReconnectAttempts: &attempts,
		ReconnectDelay: &config.Seconds{Duration: 10 * time.Millisecond},
	}}
	p, err := pluginclient.NewPool([]config.Plugin{pl}, config.PluginSettings{}, pluginclient.Options{
		HealthCheckInterval: -1, MaxReconnectDelay: 50 * time.Millisecond,
	})
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

// TestReplicaLoadStateful: two stateful replicas behind a per-connection
// balancer (a ClusterIP Service without affinity). Each session of the
// client is pinned to the connection it was made on, hence to one replica:
// no call fails, initializes stay about one per session, and both replicas
// serve a fair share.
func TestReplicaLoadStateful(t *testing.T) {
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{Client: poolClient})
	t.Log(res)
	checkReplicaLoad(t, res, pluginclient.DefaultSlots)
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

// TestReplicaLoadStatelessServesEveryCall: with stateless replicas any
// replica serves any call, even for today's client (which still sends an
// initialize, answered without a session).
func TestReplicaLoadStatelessServesEveryCall(t *testing.T) {
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{
		Client: poolClient,
		Server: &pluginserver.Options{Stateless: true},
	})
	t.Log(res)
	if res.Failed != 0 {
		t.Fatalf("failed calls: %v", res)
	}
	for i, n := range res.HookCalls {
		if n == 0 {
			t.Errorf("replica %d served no call: %v", i, res)
		}
	}
}
