// Package grpcconn is the client of a cpex plugin server over gRPC (TCP,
// with optional TLS or mutual TLS, or gRPC over a Unix socket): one
// grpc.ClientConn per plugin server, multiplexing every call over HTTP/2.
//
// Errors follow [wireconn]: a call that got no answer (status UNAVAILABLE:
// gRPC does not tell a call that never left from one whose connection died
// under it) wraps [wireconn.ErrNoAnswer]; it is never retried here. The
// plugin client alone retries, once: on this connection when [Conn.Health]
// (which waits up to a second for the connection to be ready again)
// answers, else on a rebuilt one. A plugin-reported error comes back with
// status OK and is in the reply.
package grpcconn

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// Defaults of [Options] (ReconnectDelay is cpex's reconnect_delay).
const (
	DefaultReconnectDelay = config.DefaultReconnectDelay
	DefaultMaxBackoff     = 2 * time.Second
	// HealthReadyWait bounds how long Health waits for the connection to
	// be ready.
	HealthReadyWait = time.Second
	// Keepalive pings only while a call is open, no more often than once a
	// minute: inside the default enforcement policy of grpc-go and Python
	// gRPC servers (which answer more frequent pings with GOAWAY), and
	// enough to find a peer that vanished without a reset (a node lost in
	// Kubernetes) while a long call waits.
	DefaultKeepaliveTime    = 60 * time.Second
	DefaultKeepaliveTimeout = 20 * time.Second
)

// roundRobin spreads calls over every address the target resolves to: a
// headless Service's Pods, each replica with its own HTTP/2 connection. A
// name that resolves to one address (a ClusterIP Service) is one
// connection, as with gRPC's default pick_first.
const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// Options configures a [Conn]. The zero value is plaintext with defaults.
type Options struct {
	// TLS, when set, secures the connection (set Certificates for mutual
	// TLS). Nil: plaintext, as for gRPC over a Unix socket.
	TLS *tls.Config
	// ReconnectDelay is the first delay between reconnection attempts,
	// growing to MaxBackoff (cpex's reconnect_delay; default 0.1 s).
	ReconnectDelay time.Duration
	// MaxBackoff caps the delay between reconnection attempts (default 2 s).
	MaxBackoff time.Duration
	// DialOptions are appended to the ones built here.
	DialOptions []grpc.DialOption
}

// Conn is a gRPC connection to one plugin server. It is safe for
// concurrent use and implements [wireconn.Conn].
type Conn struct {
	cc      *grpc.ClientConn
	plugins cpexpb.PluginServiceClient
	health  cpexpb.HealthClient
}

var _ wireconn.Conn = (*Conn)(nil)

// Target is the gRPC target of a grpc: plugin section: "unix://"+uds for a
// Unix socket, else target (host:port, resolved with DNS).
func Target(target, uds string) string {
	if uds != "" {
		return "unix://" + uds
	}
	return "dns:///" + target
}

// New returns a connection to target (see [Target]). It does not connect:
// the first call does, and the connection is re-established after a loss.
func New(target string, opts Options) (*Conn, error) {
	if opts.ReconnectDelay <= 0 {
		opts.ReconnectDelay = DefaultReconnectDelay
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	creds := insecure.NewCredentials()
	if opts.TLS != nil {
		creds = credentials.NewTLS(opts.TLS)
	}
	bo := backoff.DefaultConfig
	bo.BaseDelay, bo.MaxDelay = opts.ReconnectDelay, opts.MaxBackoff
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(roundRobin),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 5 * time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: DefaultKeepaliveTime, Timeout: DefaultKeepaliveTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(cpexpb.MaxFrameSize)),
	}, opts.DialOptions...)
	cc, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("grpc client for %s: %w", target, err)
	}
	return &Conn{cc: cc, plugins: cpexpb.NewPluginServiceClient(cc), health: cpexpb.NewHealthClient(cc)}, nil
}

// PluginConfig implements [wireconn.Conn.PluginConfig].
func (c *Conn) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	return wireconn.PluginConfig(ctx, name, func(ctx context.Context, req *cpexpb.GetPluginConfigRequest) (resp *cpexpb.GetPluginConfigResponse, err error) {
		err = c.call(ctx, "GetPluginConfig", func(ctx context.Context, o ...grpc.CallOption) (err error) {
			resp, err = c.plugins.GetPluginConfig(ctx, req, o...)
			return err
		})
		return resp, err
	})
}

// InvokeHook implements [wireconn.Conn.InvokeHook]. The call carries the
// trace context of ctx's span context as the W3C metadata traceparent and
// tracestate (withTraceMetadata).
func (c *Conn) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	return wireconn.InvokeHook(withTraceMetadata(ctx), hook, plugin, payload, pctx, func(ctx context.Context, req *cpexpb.InvokeHookRequest) (resp *cpexpb.InvokeHookResponse, err error) {
		err = c.call(ctx, "InvokeHook", func(ctx context.Context, o ...grpc.CallOption) (err error) {
			resp, err = c.plugins.InvokeHook(ctx, req, o...)
			return err
		})
		return resp, err
	})
}

// Health implements [wireconn.Conn.Health] with cpex.Health/Check (cpex
// servers do not serve grpc.health.v1).
//
// The probe waits for the connection to be ready for at most
// [HealthReadyWait] (inside ctx): after a plugin restart, grpc-go
// reconnects by itself, and a call that got no answer is then retried on
// this connection.
func (c *Conn) Health(ctx context.Context) error {
	var resp *cpexpb.HealthCheckResponse
	err := c.call(ctx, "Health", func(ctx context.Context, o ...grpc.CallOption) (err error) {
		hctx, cancel := context.WithTimeout(ctx, HealthReadyWait)
		defer cancel()
		resp, err = c.health.Check(hctx, &cpexpb.HealthCheckRequest{}, append(o, grpc.WaitForReady(true))...)
		if err != nil && hctx.Err() != nil && ctx.Err() == nil {
			err = status.Error(codes.Unavailable, "not ready within "+HealthReadyWait.String())
		}
		return err
	})
	if err != nil {
		return err
	}
	if s := resp.GetStatus(); s != cpexpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("plugin server health: %s", s)
	}
	return nil
}

// withTraceMetadata returns ctx whose outgoing metadata carries the trace
// context of ctx's span context (wireconn.TraceContext) under the W3C keys
// traceparent and tracestate, replacing whatever traceparent and tracestate
// the metadata had (a caller's headers): the span current when the plugin
// is called is the parent. Without a valid span context it returns ctx,
// allocating nothing.
func withTraceMetadata(ctx context.Context) context.Context {
	parent, state := wireconn.TraceContext(ctx)
	if parent == "" {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = make(metadata.MD, 2)
	}
	md.Set(wireconn.TraceparentKey, parent)
	md.Delete(wireconn.TracestateKey)
	if state != "" {
		md.Set(wireconn.TracestateKey, state)
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// Close implements [wireconn.Conn.Close].
func (c *Conn) Close() error { return c.cc.Close() }

// call runs one RPC and classifies its error: one attempt, whatever
// happens (pluginclient decides whether to try again).
func (c *Conn) call(ctx context.Context, what string, rpc func(context.Context, ...grpc.CallOption) error) error {
	return classify(what, rpc(ctx))
}

// classify maps a gRPC error: UNAVAILABLE (nothing answered) wraps
// ErrConnLost; a closed client is ErrClosed; deadline and cancellation
// wrap the context errors; other statuses were answered by the server.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.Unavailable:
		return fmt.Errorf("%s: %w: %s", what, wireconn.ErrNoAnswer, st.Message())
	case codes.Canceled:
		if errors.Is(err, grpc.ErrClientConnClosing) || st.Message() == grpc.ErrClientConnClosing.Error() {
			return fmt.Errorf("%s: %w", what, wireconn.ErrClosed)
		}
		return fmt.Errorf("%s: %w: %s", what, context.Canceled, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w: %s", what, context.DeadlineExceeded, st.Message())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// FromConfig returns a connection for a plugin's grpc: section. tlsConf is
// the client TLS built from g.TLS (nil for plaintext and for uds).
func FromConfig(g *config.GRPC, tlsConf *tls.Config) (*Conn, error) {
	return New(Target(g.Target, g.UDS), Options{TLS: tlsConf})
}
