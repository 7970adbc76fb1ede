package pluginclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// The MCP session is a Conn.
var _ Conn = (*session)(nil)

// PluginConfig implements [Conn] with the get_plugin_config tool.
func (s *session) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      cpex.ToolGetPluginConfig,
		Arguments: map[string]string{"name": name},
	})
	if err != nil {
		return nil, false, s.connErr(err, nil)
	}
	return configJSON(res)
}

// InvokeHook implements [Conn] with the invoke_hook tool. A call whose SSE
// stream ended cleanly without an answer (a server shutting down ends its
// streams before its listener goes away) is neither an answer nor a loss:
// the session is pinged, and the call retried once on it if it answers.
func (s *session) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	params := invokeParams(hook, plugin, payload, pctx)
	reply, ex, err := s.call(ctx, params)
	if err == nil || ctx.Err() != nil {
		return reply, err
	}
	if ex.gone.Load() || answered(err, ex) || s.lost(err) {
		return nil, s.connErr(err, ex)
	}
	perr := s.cs.Ping(ctx, nil)
	if perr != nil && s.lost(perr) {
		return nil, s.connErr(perr, nil)
	}
	reply, _, err = s.call(ctx, params)
	if s.onRetry != nil {
		s.onRetry(err == nil)
	}
	return reply, err
}

// call makes one invoke_hook call on s, returning what the wire said of it.
func (s *session) call(ctx context.Context, params *mcp.CallToolParams) (*cpex.InvokeHookReply, *exchange, error) {
	ctx, ex := withExchange(ctx)
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return nil, ex, err
	}
	reply, err := parseInvokeReply(res)
	return reply, ex, err
}

// Health implements [Conn] with an MCP ping.
func (s *session) Health(ctx context.Context) error {
	if err := s.cs.Ping(ctx, nil); err != nil {
		return s.connErr(err, nil)
	}
	return nil
}

// Stale implements [Stale]: the pinned connection of a stateful session is
// gone, so the session is (the next request could not reach its replica).
func (s *session) Stale() bool { return s.pin != nil && s.pin.stale() }

// Close implements [Conn]: see close.
func (s *session) Close() error { return s.close(context.Background()) }

// connErr classifies err from a call on s (ex: the call's exchange, or nil):
// wrapped in ErrConnLost when the session is gone and the call got no
// answer; otherwise as the answer's error.
func (s *session) connErr(err error, ex *exchange) error {
	if ex == nil {
		ex = &exchange{}
	}
	if ex.gone.Load() || (!answered(err, ex) && s.lost(err)) {
		return fmt.Errorf("%w: %w", ErrConnLost, s.cause(err))
	}
	if answered(err, ex) {
		return answerError(err)
	}
	return err
}
