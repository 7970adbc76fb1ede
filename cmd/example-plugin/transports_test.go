package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/grpcconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/unixconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// TestServeGRPCAndUnixSocket: --grpc-addr and --unix-socket serve the same
// policy as the MCP endpoint, until shutdown.
func TestServeGRPCAndUnixSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	dir := t.TempDir()
	grpcSock, unixSock := filepath.Join(dir, "g.sock"), filepath.Join(dir, "u.sock")
	_, stop := startRun(ctx, t, &syncbuf.Buffer{}, "--name", "Guard", "--deny", `rm\s+-rf`,
		"--grpc-addr", "unix://"+grpcSock, "--unix-socket", unixSock)
	gc, err := grpcconn.New(grpcconn.Target("", grpcSock), grpcconn.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]wireconn.Conn{"grpc": gc, "unix socket": unixconn.New(unixSock, unixconn.Options{})} {
		if _, found, err := c.PluginConfig(ctx, "guard"); err != nil || !found {
			t.Errorf("%s: config: %v, %v", name, found, err)
		}
		r, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "Guard", json.RawMessage(`{"name":"shell","args":{"cmd":"rm -rf /"}}`), cpex.NewContext(cpex.GlobalContext{RequestID: "1"}))
		if err != nil || r.Result == nil || r.Result.Continue() || r.Result.Violation == nil {
			t.Errorf("%s: deny: %+v, %v", name, r, err)
		}
		c.Close()
	}
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
