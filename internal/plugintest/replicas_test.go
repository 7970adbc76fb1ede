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

// TestReplicaLoadStatefulBreaksTodaysClient documents the failure: two
// stateful replicas behind a per-connection balancer, and today's client,
// whose one session's requests ride several connections, hence both
// replicas. When the client pins each session to its connection, this
// becomes the acceptance test: 0 failed calls, initializes about one per
// pool slot, every replica serving at least 20 % of the hook calls.
func TestReplicaLoadStatefulBreaksTodaysClient(t *testing.T) {
	res := plugintest.RunReplicaLoad(t, plugintest.ReplicaLoad{Client: poolClient})
	t.Log(res)
	if res.Failed == 0 {
		t.Fatalf("today's client survived stateful replicas behind a per-connection balancer: "+
			"turn this test into the acceptance test (want 0 failed calls): %v", res)
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
