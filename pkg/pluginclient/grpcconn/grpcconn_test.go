package grpcconn

import (
	"context"
	"encoding/json"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// A target that resolves to several addresses (a headless Service's Pods)
// gets calls on every one of them.
func TestSpreadsOverResolvedAddresses(t *testing.T) {
	var calls [2]atomic.Int64
	addrs := make([]resolver.Address, 2)
	for i := range calls {
		srv := pluginserver.New(pluginserver.Func(pluginserver.Config{Name: "p", Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
			func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				calls[i].Add(1)
				return pluginserver.Continue("p"), nil
			}))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		g := grpc.NewServer()
		srv.RegisterGRPC(g)
		done := make(chan struct{})
		go func() { defer close(done); _ = g.Serve(lis) }()
		t.Cleanup(func() { g.Stop(); <-done; srv.Close() })
		addrs[i] = resolver.Address{Addr: lis.Addr().String()}
	}
	r := manual.NewBuilderWithScheme("plugins")
	r.InitialState(resolver.State{Addresses: addrs})
	c, err := New("plugins:///p", Options{DialOptions: []grpc.DialOption{grpc.WithResolvers(r)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The second connection may become ready a little after the first.
	for n := 0; n < 10000 && (calls[0].Load() == 0 || calls[1].Load() == 0); n++ {
		if _, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "p", json.RawMessage(`{"name":"t","args":{}}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	if calls[0].Load() == 0 || calls[1].Load() == 0 {
		t.Errorf("calls per address %d, %d: want both used", calls[0].Load(), calls[1].Load())
	}
}
