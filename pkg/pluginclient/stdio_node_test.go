package pluginclient

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// tsPolicy is the TypeScript SDK server's policy matching guardPlugin.
const tsPolicy = `{"plugins":[{"name":"guard","hooks":["tool_pre_invoke"],"deny":["forbidden"],"redact":[{"pattern":"secret","replacement":"[redacted]"}]}]}`

// newNodeStdioRig is a STDIO plugin config running the TypeScript SDK
// plugin server (internal/nodeplugin/tsplugin) on stdio; a shell records
// its pid and execs node, so the pid is node's.
func newNodeStdioRig(t *testing.T) (config.Plugin, stdioRig) {
	t.Helper()
	if err := nodeplugin.Check(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	rig := stdioRig{pids: filepath.Join(dir, "pids"), count: filepath.Join(dir, "count")}
	pl := config.Plugin{Name: "guard", Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoSTDIO,
		Cmd:   []string{"sh", "-c", `echo $$ >> "$PIDS"; exec node "$SERVER"`},
		Env: map[string]string{"TRANSPORT": "stdio", "POLICY": tsPolicy, "PIDS": rig.pids,
			"SERVER": filepath.Join(nodeplugin.Dir(), "server.mjs")},
		Cwd:               dir,
		ReconnectAttempts: ptr(10), ReconnectDelay: secs(50 * time.Millisecond),
	}}
	return pl, rig
}

// TestStdioTypeScriptSDK: the TypeScript SDK's plugin server on stdio
// allows, blocks and redacts; killed three times under 20 callers no call
// fails; after Close no process is left.
func TestStdioTypeScriptSDK(t *testing.T) {
	pl, rig := newNodeStdioRig(t)
	pool := newPool(t, []config.Plugin{pl}, Options{PluginTimeout: 20 * time.Second})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if live := rig.livePids(t); len(live) != 0 {
		t.Fatalf("processes left after Close: %v", live)
	}
	killedUnderLoad(t, pl, rig)
}
