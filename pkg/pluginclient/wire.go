package pluginclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/grpcconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/unixconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/tlsconfig"
)

// wireTransport is how a client reaches a plugin over one of cpex's
// protobuf transports (a grpc: or unix_socket: section): the Dialer its
// slots use, how many slots, and the rebuild budget of each.
type wireTransport struct {
	dial     Dialer
	slots    int
	attempts int
	delay    time.Duration
}

// wireFor returns pl's protobuf transport; ok is false for a plugin without
// a grpc: or unix_socket: section (MCP). sessions is Options.Slots (0:
// DefaultSlots).
//
// gRPC gets one slot: one grpc.ClientConn multiplexes every call over
// HTTP/2. The Unix socket gets one slot too, and unixconn pools sessions
// framed connections in it (one call in flight on each, as an MCP session
// carries one). Neither section has a session, so a rebuild is a fresh
// connection plus the config fetch; the section's reconnect_attempts and
// reconnect_delay (gRPC: cpex's defaults) bound it.
func wireFor(pl config.Plugin, sessions int) (w wireTransport, ok bool, err error) {
	w = wireTransport{slots: 1, attempts: config.DefaultReconnectAttempts, delay: config.DefaultReconnectDelay}
	switch {
	case pl.GRPC != nil:
		g := pl.GRPC
		var tc *tls.Config
		if g.TLS != nil {
			if tc, err = tlsconfig.Client(g.TLS); err != nil {
				return w, true, fmt.Errorf("grpc.tls: %w", err)
			}
		}
		w.dial = func(context.Context) (Conn, error) {
			c, err := grpcconn.FromConfig(g, tc)
			if err != nil {
				return nil, err
			}
			return wireConn{c}, nil
		}
		return w, true, nil
	case pl.UnixSocket != nil:
		u := pl.UnixSocket
		if sessions <= 0 {
			sessions = DefaultSlots
		}
		if u.ReconnectAttempts != nil && *u.ReconnectAttempts > 0 {
			w.attempts = *u.ReconnectAttempts
		}
		if u.ReconnectDelay != nil && u.ReconnectDelay.Duration > 0 {
			w.delay = u.ReconnectDelay.Duration
		}
		w.dial = func(context.Context) (Conn, error) {
			return wireConn{unixconn.FromConfig(u, sessions)}, nil
		}
		return w, true, nil
	}
	return w, false, nil
}

// wireConn adapts a protobuf transport's connection to this package's
// errors, and passes the caller's headers (WithHeaders: x-request-id) as
// gRPC metadata.
type wireConn struct{ c wireconn.Conn }

// PluginConfig implements [Conn].
func (w wireConn) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	raw, found, err := w.c.PluginConfig(withMetadata(ctx), name)
	return raw, found, wireError(err)
}

// InvokeHook implements [Conn].
func (w wireConn) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	reply, err := w.c.InvokeHook(withMetadata(ctx), hook, plugin, payload, pctx)
	return reply, wireError(err)
}

// Health implements [Conn].
func (w wireConn) Health(ctx context.Context) error { return wireError(w.c.Health(ctx)) }

// Close implements [Conn].
func (w wireConn) Close() error { return w.c.Close() }

// wireError maps a transport error to this package's vocabulary: a lost
// connection (wireconn.ErrConnLost is ErrConnLost) and a connection closed
// under the call (it never reached the plugin) are ErrConnLost; a call
// that got no answer, timeouts, cancellations and invalid replies keep
// their cause; anything else was the server's answer refusing this one
// call (a gRPC status, a frame too large) and wraps ErrRefused.
func wireError(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrConnLost), errors.Is(err, wireconn.ErrNoAnswer), errors.Is(err, ErrInvalidReply),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, wireconn.ErrClosed):
		return fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// reservedMetadata are header names gRPC owns; WithHeaders never sets them.
var reservedMetadata = map[string]bool{
	"content-type": true, "te": true, "user-agent": true, "host": true,
	"connection": true, "keep-alive": true, "transfer-encoding": true, "upgrade": true,
}

// withMetadata returns ctx with the headers of WithHeaders as outgoing gRPC
// metadata (lower-case keys). grpcconn then sets traceparent and tracestate
// from ctx's span context, so a plugin's traces nest under the call's span.
// The Unix-socket transport has no place for metadata and ignores it.
func withMetadata(ctx context.Context) context.Context {
	h := wireconn.Headers(ctx)
	if len(h) == 0 {
		return ctx
	}
	md := make(metadata.MD, len(h))
	for k, vs := range h {
		k = strings.ToLower(k)
		if reservedMetadata[k] || strings.HasPrefix(k, "grpc-") || strings.HasPrefix(k, ":") {
			continue
		}
		md[k] = vs
	}
	if old, ok := metadata.FromOutgoingContext(ctx); ok {
		md = metadata.Join(old, md)
	}
	return metadata.NewOutgoingContext(ctx, md)
}
