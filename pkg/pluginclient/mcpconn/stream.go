package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// Stream is an MCP session over a connection that is the session itself:
// a child process's stdin and stdout (STDIO) or the GET stream of the
// legacy HTTP+SSE transport. Calls are multiplexed on it (JSON-RPC ids),
// so one Stream carries any number of calls at once. When the connection
// ends, the session is gone with it: every later call fails with an error
// wrapping ErrConnLost, and the client rebuilds it. Like Session, it never
// retries.
type Stream struct {
	cs   *mcp.ClientSession
	gone func() error // why the peer is gone, nil while it lives; may be nil

	mu  sync.Mutex
	err error // set once the stream is known to be gone
}

// The stream session is a Conn.
var _ wireconn.Conn = (*Stream)(nil)

// DialStream connects client over t (initialize, or none with a server
// that speaks MCP 2026-07-28), bounded by ctx. gone, if not nil, reports
// why the peer is gone (a child process that exited), nil while it lives:
// it tells a call that got no answer from a peer that will never answer.
func DialStream(ctx context.Context, client *mcp.Client, t mcp.Transport, gone func() error) (*Stream, error) {
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	return &Stream{cs: cs, gone: gone}, nil
}

// PluginConfig implements [wireconn.Conn] with the get_plugin_config tool.
func (s *Stream) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      cpex.ToolGetPluginConfig,
		Arguments: map[string]string{"name": name},
	})
	if err != nil {
		return nil, false, s.classify(ctx, err)
	}
	return configJSON(sdkResult(res))
}

// InvokeHook implements [wireconn.Conn] with the invoke_hook tool: one
// call, never retried here.
func (s *Stream) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	res, err := s.cs.CallTool(ctx, invokeParams(ctx, hook, plugin, payload, pctx))
	if err != nil {
		return nil, s.classify(ctx, err)
	}
	return parseInvokeReply(sdkResult(res))
}

// Health implements [wireconn.Conn] with an MCP ping. A ping that gets no
// answer wraps ErrConnLost: the stream is all the session there is.
func (s *Stream) Health(ctx context.Context) error {
	err := s.cs.Ping(ctx, nil)
	if err == nil {
		return nil
	}
	err = s.classify(ctx, err)
	if errors.Is(err, wireconn.ErrNoAnswer) {
		return fmt.Errorf("%w: %w", wireconn.ErrConnLost, err)
	}
	return err
}

// Close implements [wireconn.Conn]: it ends the session (for a child, its
// stdin is closed; for SSE, the GET stream).
func (s *Stream) Close() error {
	err := s.cs.Close()
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Err returns why the stream is known to be gone, or nil.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// lost records err as why the stream is gone (the first reason wins) and
// returns the error of a call that found it so.
func (s *Stream) lost(err error) error {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	return fmt.Errorf("%w: %w", wireconn.ErrConnLost, err)
}

// classify turns a call's error into the wireconn vocabulary:
//
//	what the call got                                  error wraps
//	a JSON-RPC error sent by the server, a refusal     the error itself
//	an answer that is not a valid reply                cpex.ErrInvalidReply
//	the peer gone (child exited), the connection       ErrConnLost
//	closed, the session unknown, 502/503/504
//	anything else (no answer on a live peer)           wireconn.ErrNoAnswer
//
// A context error is returned as is.
func (s *Stream) classify(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case errors.Is(err, wireconn.ErrConnLost):
		return s.lost(err)
	case serverError(err) || errors.Is(err, cpex.ErrInvalidReply) || errors.Is(err, wireconn.ErrRefused):
		return answerError(err)
	}
	if s.gone != nil {
		if why := s.gone(); why != nil {
			return s.lost(fmt.Errorf("%w (%w)", why, err))
		}
	}
	switch {
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing), errors.Is(err, io.EOF):
		return s.lost(err)
	}
	return fmt.Errorf("%w: %w", wireconn.ErrNoAnswer, err)
}
