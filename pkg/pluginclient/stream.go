package pluginclient

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/mcpconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/stdioconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/tlsconfig"
)

// streamFor returns the Dialer of an mcp section whose proto is STDIO (a
// child process per connection, stdioconn) or SSE (the legacy HTTP+SSE
// transport, mcpconn.DialSSE); ok is false for any other plugin. Both
// multiplex every call on one connection, which is the session: the
// client keeps one slot, rebuilt (a new child, a new event stream) when
// it is lost, within mcp.reconnect_attempts and mcp.reconnect_delay.
func streamFor(pl config.Plugin, log zerolog.Logger) (d Dialer, ok bool, err error) {
	m := pl.MCP
	if m == nil {
		return nil, false, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc", Version: "0.1.0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	switch strings.ToUpper(m.Proto) {
	case config.ProtoSTDIO:
		cfg, err := stdioconn.FromConfig(m)
		if err != nil {
			return nil, true, err
		}
		cfg.Client, cfg.Logger = client, log
		return func(ctx context.Context) (Conn, error) {
			c, err := stdioconn.Dial(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return c, nil
		}, true, nil
	case config.ProtoSSE:
		t := http.DefaultTransport.(*http.Transport).Clone()
		if m.TLS != nil {
			tc, err := tlsconfig.Client(m.TLS)
			if err != nil {
				return nil, true, fmt.Errorf("mcp.tls: %w", err)
			}
			t.TLSClientConfig = tc
		}
		cfg := mcpconn.SSEConfig{URL: m.URL, Client: client, Transport: t}
		return func(ctx context.Context) (Conn, error) {
			c, err := mcpconn.DialSSE(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return c, nil
		}, true, nil
	}
	return nil, false, nil
}

// exiter is implemented by a Conn whose peer can end by itself (a child
// process): Done is closed when it did.
type exiter interface {
	Done() <-chan struct{}
}

// watchExit invalidates h as soon as its peer ends (a child process that
// exited), so the slot is rebuilt at once with backoff rather than by the
// next call; it stops when h is replaced or closed, or ctx (the client's
// life) ends.
func (c *Client) watchExit(ctx context.Context, sl *slot, h *held) {
	e, ok := h.conn.(exiter)
	if !ok {
		return
	}
	c.wg.Go(func() {
		select {
		case <-e.Done():
			if !h.isRetiring() {
				sl.invalidate(h, fmt.Errorf("%w: %w", ErrConnLost, stdioconn.ErrExited))
			}
		case <-ctx.Done():
		}
	})
}
