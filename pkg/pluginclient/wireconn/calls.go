package wireconn

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
)

// PluginConfig asks for the config of the named plugin with call, which
// carries the request over a transport, and converts the answer as
// [Conn.PluginConfig] returns it.
func PluginConfig(ctx context.Context, name string,
	call func(context.Context, *cpexpb.GetPluginConfigRequest) (*cpexpb.GetPluginConfigResponse, error),
) (json.RawMessage, bool, error) {
	resp, err := call(ctx, &cpexpb.GetPluginConfigRequest{Name: name})
	if err != nil || !resp.GetFound() {
		return nil, false, err
	}
	raw, err := cpexpb.StructToJSON(nil, resp.GetConfig())
	if err != nil {
		return nil, false, fmt.Errorf("plugin config %s: %w: %w", name, cpex.ErrInvalidReply, err)
	}
	return raw, true, nil
}

// InvokeHook builds the request of one hook call, carries it with call and
// converts the reply as [Conn.InvokeHook] returns it.
func InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext,
	call func(context.Context, *cpexpb.InvokeHookRequest) (*cpexpb.InvokeHookResponse, error),
) (*cpex.InvokeHookReply, error) {
	req, err := cpexpb.NewInvokeHookRequest(hook, plugin, payload, pctx)
	if err != nil {
		return nil, fmt.Errorf("invoke_hook %s/%s: %w", plugin, hook, err)
	}
	resp, err := call(ctx, req)
	if err != nil {
		return nil, err
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The server saw the deadline first (gRPC carries it) and answered
		// with its hook's cancellation as a plugin error just before the
		// client's own timer fired: it is a timeout, as the caller sees it.
		return nil, fmt.Errorf("invoke_hook %s/%s: %w", plugin, hook, ctxErr)
	}
	reply, err := cpexpb.ReplyFromPB(resp)
	if err != nil {
		return nil, fmt.Errorf("invoke_hook %s/%s reply: %w: %w", plugin, hook, cpex.ErrInvalidReply, err)
	}
	return reply, nil
}
