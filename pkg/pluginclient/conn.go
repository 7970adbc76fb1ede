package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// ErrConnLost marks an error of a [Conn] meaning the connection (or session)
// is gone: the caller rebuilds it and retries the call once. Any other error
// from a Conn is an answer about that call (or a timeout): it is returned,
// never retried, so a plugin never runs twice for one hook.
var ErrConnLost = errors.New("plugin connection lost")

// Conn is what one connection to a plugin server provides, whatever the
// transport: the seam where the MCP session of this package, and gRPC or
// framed Unix-socket connections (which have no session: a restart is a
// broken connection), plug in under the same supervisor (single-flight
// rebuild, backoff, circuit breaker), health check, metrics and tracing.
//
// A transport implements Conn in its own package (for example
// pluginclient/grpc…), wrapping ErrConnLost into the errors that mean the
// connection is gone and nothing else, and ErrInvalidReply into replies it
// cannot decode. Today [Client] drives the MCP session directly; moving it
// onto Conn (a Dialer per transport chosen from the plugin's config section)
// is the next step, and this interface is what it needs.
type Conn interface {
	// PluginConfig fetches the plugin server's config for name; found is
	// false when the server does not know the plugin.
	PluginConfig(ctx context.Context, name string) (cfg json.RawMessage, found bool, err error)
	// InvokeHook runs hook of plugin once.
	InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
	// Health probes the connection (MCP ping, cpex.Health/Check).
	Health(ctx context.Context) error
	// Close releases the connection.
	Close() error
}

// Dialer makes a new Conn to one plugin server, bounded by ctx.
type Dialer func(ctx context.Context) (Conn, error)

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
	raw, err := toolJSON(res)
	if err != nil {
		return nil, false, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidReply, err)
	}
	return raw, len(probe) > 0, nil
}

// InvokeHook implements [Conn] with the invoke_hook tool.
func (s *session) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	ctx, ex := withExchange(ctx)
	res, err := s.cs.CallTool(ctx, invokeParams(hook, plugin, payload, pctx))
	if err != nil {
		return nil, s.connErr(err, ex)
	}
	return parseInvokeReply(res)
}

// Health implements [Conn] with an MCP ping.
func (s *session) Health(ctx context.Context) error {
	if err := s.cs.Ping(ctx, nil); err != nil {
		return s.connErr(err, nil)
	}
	return nil
}

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
