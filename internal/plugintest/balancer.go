package plugintest

import (
	"context"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/tcpbalance"
)

// Balancer is a [tcpbalance.Balancer] (round robin per TCP connection, as
// kube-proxy balances a ClusterIP Service without sessionAffinity) in front
// of plugin servers.
type Balancer struct {
	*tcpbalance.Balancer
}

// StartBalancer listens on 127.0.0.1 and balances over backends (host:port
// addresses). It is closed in t.Cleanup.
func StartBalancer(t testing.TB, backends ...string) *Balancer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rebindTimeout)
	defer cancel()
	b, err := tcpbalance.Start(ctx, backends...)
	if err != nil {
		t.Fatalf("plugintest: balancer: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return &Balancer{Balancer: b}
}

// URL returns the plugin endpoint URL through the balancer,
// http://127.0.0.1:PORT/mcp.
func (b *Balancer) URL() string { return "http://" + b.Addr() + Path }
