package processor_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// pathExchangesEnv sets how many times TestPathOfOneToolsCall runs its
// exchange (default 1). hack/pathcount runs it twice with coverage, at two
// counts, and lists the code every added exchange ran: the path of one
// tools/call that docs/architecture.md describes.
const pathExchangesEnv = "MCP_EXTPROC_PATH_EXCHANGES"

// TestPathOfOneToolsCall is the exchange of docs/architecture.md's "path of
// one tools/call": a tools/call, MCP 2025-11-25 (no Mcp-Method header), a
// tool_pre_invoke plugin that allows it and a tool_post_invoke plugin that
// rewrites its result, no HTTP hooks, identity, rules or pins, the server
// answering with an SSE stream in one chunk. The client gets the rewritten
// result.
func TestPathOfOneToolsCall(t *testing.T) {
	n := 1
	if v := os.Getenv(pathExchangesEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a count of exchanges", pathExchangesEnv, v)
		}
	}
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	rewrite := replaceResult("result", postResult)
	guard.SetFunc(func(ctx context.Context, hook cpex.HookType, p json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if hook == cpex.ToolPreInvoke {
			return pluginserver.Continue("guard"), nil
		}
		return rewrite(ctx, hook, p, pctx)
	})
	h := newHarness(t, oneGuard, guard)
	answer := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Echo: hello\"}]}}\n\n")
	for range n {
		res := h.do(mcpPost(echoCall), sseUpstream(answer))
		if !strings.Contains(string(res.Body), postResult) || strings.Contains(string(res.Body), "Echo: hello") {
			t.Fatalf("client got %s, want the rewritten result %s", res.Body, postResult)
		}
	}
}
