package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// invoke runs invoke_hook, rebuilding the session and retrying once if it was
// lost.
func (c *Client) invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if pctx == nil {
		pctx = cpex.NewContext(cpex.GlobalContext{})
	}
	params := invokeParams(hook, c.name, payload, pctx)

	s, err := c.acquire(ctx)
	if err != nil {
		return nil, c.wrap(ctx, err)
	}
	reply, ex, err := c.call(ctx, s, params)
	if err == nil || ctx.Err() != nil {
		s.leave()
		return reply, c.wrap(ctx, err)
	}
	switch {
	case ex.gone.Load():
		// This call's own answer said the session is gone: rebuild.
	case answered(err, ex):
		// The server answered this call: whatever it said is the call's
		// error. Calling again would run the plugin twice.
		s.leave()
		return nil, c.wrap(ctx, answerError(err))
	case !s.lost(err):
		// No answer arrived, yet nothing on the wire said the session is
		// gone: a server shutting down ends its SSE streams cleanly before
		// its listener goes away. Ask the session; if it answers, the call
		// is retried on it once, otherwise the lost-session path below
		// rebuilds it.
		perr := s.cs.Ping(ctx, nil)
		if perr == nil || !s.lost(perr) {
			reply, _, err = c.call(ctx, s, params)
			s.leave()
			c.ev.retry(err == nil)
			return reply, c.wrap(ctx, err)
		}
		err = perr
	}
	s.leave()

	// The session is gone: one rebuild for all callers, then one retry.
	cause := s.cause(err)
	c.lossCause.Store(&cause)
	if err := c.sup.Rebuild(ctx, s.epoch); err != nil {
		return nil, c.wrap(ctx, err)
	}
	if s, err = c.enterCurrent(); err != nil {
		return nil, c.wrap(ctx, err)
	}
	defer s.leave()
	reply, _, err = c.call(ctx, s, params)
	if err != nil {
		c.log.Warn().Err(err).Uint64("epoch", s.epoch).Msg("plugin call failed again on the rebuilt session")
	}
	c.ev.retry(err == nil)
	return reply, c.wrap(ctx, err)
}

// answered reports whether err is the server's answer to the call (as
// opposed to no answer at all): a JSON-RPC error, a refusal, a reply that
// is not a valid invoke_hook reply, or anything after a whole JSON body
// arrived.
func answered(err error, ex *exchange) bool {
	return ex.answered.Load() || serverError(err) ||
		errors.Is(err, ErrInvalidReply) || errors.Is(err, ErrRefused)
}

// answerError is the call's error for an answer: an answer that is neither
// a JSON-RPC error nor a refusal could not be understood, hence invalid.
func answerError(err error) error {
	if serverError(err) || errors.Is(err, ErrInvalidReply) || errors.Is(err, ErrRefused) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInvalidReply, err)
}

// sdkCodes are the codes of the go-sdk's own jsonrpc.Error values (client
// closing, server closing, rejected by transport): errors made on this side
// of the wire, not answers.
var sdkCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// serverError reports whether err's tree holds a JSON-RPC error the server
// sent.
func serverError(err error) bool {
	var we *jsonrpc.Error
	if errors.As(err, &we) && !sdkCodes[we.Code] {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if serverError(e) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		return serverError(u.Unwrap())
	}
	return false
}

// call makes one invoke_hook call on s, returning what the wire said of it.
func (c *Client) call(ctx context.Context, s *session, params *mcp.CallToolParams) (*cpex.InvokeHookReply, *exchange, error) {
	ctx, ex := withExchange(ctx)
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return nil, ex, err
	}
	reply, err := parseInvokeReply(res)
	return reply, ex, err
}

// wrap maps err to the package's sentinels, naming the plugin. Context
// errors are judged from ctx itself, not from err's chain.
func (c *Client) wrap(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("plugin %s: %w: %w", c.name, ErrTimeout, context.DeadlineExceeded)
	case ctx.Err() != nil:
		return fmt.Errorf("plugin %s: %w", c.name, ctx.Err())
	case errors.Is(err, reconnect.ErrOpen):
		return fmt.Errorf("plugin %s: %w: %v", c.name, ErrPluginDown, err)
	case errors.Is(err, reconnect.ErrStopped):
		return fmt.Errorf("plugin %s: %w", c.name, ErrClosed)
	case errors.Is(err, reconnect.ErrNotStarted):
		return fmt.Errorf("plugin %s: %w", c.name, ErrNotStarted)
	}
	return fmt.Errorf("plugin %s: %w", c.name, err)
}

// invokeParams are the tools/call params of invoke_hook.
func invokeParams(hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) *mcp.CallToolParams {
	return &mcp.CallToolParams{
		Name: cpex.ToolInvokeHook,
		Arguments: cpex.InvokeHookArgs{
			HookType:   hook,
			PluginName: plugin,
			Payload:    payload,
			Context:    pctx,
		},
	}
}
