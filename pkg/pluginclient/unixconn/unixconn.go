// Package unixconn is the client of a cpex plugin server over cpex's raw
// Unix-socket transport: frames of a 4-byte big-endian length and a
// protobuf message, one request in flight per connection. A small pool of
// connections carries concurrent calls; a connection that fails is closed
// and dialled again (reconnect_attempts times, reconnect_delay apart) by
// the next call that needs it.
//
// Errors follow [wireconn]: a call whose connection was reset or closed
// before the reply wraps [wireconn.ErrNoAnswer] (the server may still be
// there: the plugin client asks Health, which dials afresh, before its one
// retry); a socket nobody listens on (the dial fails) wraps
// [wireconn.ErrConnLost]. Nothing is retried here. A call that waits
// longer than the read timeout or its context fails with a context error;
// its connection is closed (a late reply would answer the next request).
//
// # No trace context
//
// A call carries no trace context (traceparent, tracestate) and no caller
// headers: a frame holds the InvokeHookRequest message alone, and cpex's
// protocol (the same messages as gRPC, without gRPC's metadata) has no field
// for them. Adding one would change cpex's wire contract, which this client
// does not own. What reaches a Unix-socket plugin is what is in the request
// message: the processor's global_context.metadata, which holds the
// request's own traceparent (not the invocation span's).
package unixconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// Defaults of [Options], as cpex's unix_socket section defines them
// (except PoolSize, which is this client's own).
const (
	DefaultPoolSize          = 4
	DefaultReconnectAttempts = config.DefaultReconnectAttempts
	DefaultReconnectDelay    = config.DefaultReconnectDelay
	DefaultTimeout           = config.DefaultSocketTimeout
)

// Options configures a [Conn]. Zero fields take the defaults.
type Options struct {
	PoolSize          int           // connections, i.e. calls in flight (default 4)
	ReconnectAttempts int           // dial attempts per connection (default 3); negative: 1
	ReconnectDelay    time.Duration // first delay between attempts, doubling (default 0.1 s)
	Timeout           time.Duration // read timeout of one reply (default 30 s)
}

// Conn is a pool of connections to one plugin server's Unix socket. It is
// safe for concurrent use and implements [wireconn.Conn].
type Conn struct {
	path  string
	opts  Options
	slots chan *pooledConn // idle connections; a call holds one
	done  chan struct{}

	closeOnce sync.Once
}

var _ wireconn.Conn = (*Conn)(nil)

// pooledConn is one connection of the pool (nil until dialled, and after
// a failure) with its buffers; only the call holding it touches it.
type pooledConn struct {
	c       net.Conn
	in, out []byte
}

// New returns a pool for the socket at path; nothing is dialled until a
// call needs a connection.
func New(path string, opts Options) *Conn {
	if opts.PoolSize <= 0 {
		opts.PoolSize = DefaultPoolSize
	}
	if opts.ReconnectAttempts == 0 {
		opts.ReconnectAttempts = DefaultReconnectAttempts
	}
	if opts.ReconnectAttempts < 0 {
		opts.ReconnectAttempts = 1
	}
	if opts.ReconnectDelay <= 0 {
		opts.ReconnectDelay = DefaultReconnectDelay
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Conn{path: path, opts: opts, slots: make(chan *pooledConn, opts.PoolSize), done: make(chan struct{})}
	for range opts.PoolSize {
		c.slots <- &pooledConn{}
	}
	return c
}

// PluginConfig implements [wireconn.Conn.PluginConfig].
func (c *Conn) PluginConfig(ctx context.Context, name string) (json.RawMessage, bool, error) {
	if name == "" {
		return nil, false, errors.New("plugin config: empty name") // the server would list all configs
	}
	return wireconn.PluginConfig(ctx, name, func(ctx context.Context, req *cpexpb.GetPluginConfigRequest) (*cpexpb.GetPluginConfigResponse, error) {
		resp := new(cpexpb.GetPluginConfigResponse)
		return resp, c.roundTrip(ctx, "GetPluginConfig", req, resp)
	})
}

// InvokeHook implements [wireconn.Conn.InvokeHook].
func (c *Conn) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	return wireconn.InvokeHook(ctx, hook, plugin, payload, pctx, func(ctx context.Context, req *cpexpb.InvokeHookRequest) (*cpexpb.InvokeHookResponse, error) {
		resp := new(cpexpb.InvokeHookResponse)
		return resp, c.roundTrip(ctx, "InvokeHook", req, resp)
	})
}

// Health implements [wireconn.Conn.Health]: the transport has no health
// message, so it asks for the config list (an empty frame).
func (c *Conn) Health(ctx context.Context) error {
	var resp cpexpb.GetPluginConfigsResponse
	return c.roundTrip(ctx, "Health", &cpexpb.GetPluginConfigsRequest{}, &resp)
}

// Close implements [wireconn.Conn.Close]: idle connections close now, busy
// ones when their call ends; later calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	c.dropIdle()
	return nil
}

func (c *Conn) dropIdle() {
	for {
		select {
		case s := <-c.slots:
			s.drop()
		default:
			return
		}
	}
}

func (s *pooledConn) drop() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

// roundTrip sends req and reads resp on a pooled connection: one attempt.
func (c *Conn) roundTrip(ctx context.Context, what string, req, resp proto.Message) error {
	var s *pooledConn
	select {
	case s = <-c.slots:
	case <-c.done:
		return fmt.Errorf("%s: %w", what, wireconn.ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for a connection: %w", what, ctx.Err())
	}
	defer c.release(s)
	if err := c.exchange(ctx, s, req, resp); err != nil {
		return fmt.Errorf("%s %s: %w", what, c.path, err)
	}
	return nil
}

func (c *Conn) release(s *pooledConn) {
	c.slots <- s
	select {
	case <-c.done: // closed meanwhile: do not keep it open
		c.dropIdle()
	default:
	}
}

// exchange runs one request on s, dialling first if needed. Any failure
// drops the connection. A pooled connection the server closed while it was
// idle (a restart: the write fails, so the request never left) is dialled
// again and the request sent on the new one: that is the call's first
// attempt, not a retry (pluginclient retries; a transport never repeats a
// request that reached the server).
func (c *Conn) exchange(ctx context.Context, s *pooledConn, req, resp proto.Message) error {
	reused := s.c != nil
	for {
		if s.c == nil {
			conn, err := c.dial(ctx)
			if err != nil {
				return err
			}
			s.c = conn
		}
		err := c.exchangeOn(ctx, s, req, resp)
		if err == nil {
			return nil
		}
		s.drop()
		if !reused || !errors.Is(err, errNotSent) || ctx.Err() != nil {
			return err
		}
		reused = false
	}
}

// errNotSent is wrapped by the error of a request whose write failed: it
// never reached the server.
var errNotSent = errors.New("request not sent")

func (c *Conn) exchangeOn(ctx context.Context, s *pooledConn, req, resp proto.Message) error {
	deadline := time.Now().Add(c.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := s.c.SetDeadline(deadline); err != nil {
		return fmt.Errorf("%w: %v", wireconn.ErrConnLost, err)
	}
	// A cancelled ctx unblocks the I/O. If it fires, wait for it before
	// the connection goes back to the pool, so that its past deadline
	// cannot land on the next call.
	conn, fired := s.c, make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = conn.SetDeadline(time.Unix(1, 0))
	})
	defer func() {
		if !stop() {
			<-fired
		}
	}()
	var err error
	if s.out, err = cpexpb.AppendFrame(s.out[:0], req); err != nil {
		return err
	}
	if _, err := s.c.Write(s.out); err != nil {
		return fmt.Errorf("%w: %w", errNotSent, c.ioError(ctx, err))
	}
	msg, err := cpexpb.ReadFrame(s.c, s.in)
	if err != nil {
		return c.ioError(ctx, err)
	}
	s.in = msg[:0]
	if err := proto.Unmarshal(msg, resp); err != nil {
		return fmt.Errorf("decode reply: %w: %w", cpex.ErrInvalidReply, err)
	}
	return nil
}

// ioError tells a lost connection (EOF, reset, broken pipe) from a timeout
// or a cancelled call.
func (c *Conn) ioError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("no reply within the read timeout: %w", context.DeadlineExceeded)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return fmt.Errorf("%w: %v", wireconn.ErrNoAnswer, err)
	}
	return err
}

// dial connects, trying ReconnectAttempts times with a doubling delay,
// within ctx.
func (c *Conn) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	delay := c.opts.ReconnectDelay
	var err error
	for attempt := range c.opts.ReconnectAttempts {
		if attempt > 0 {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("%w: dial: %v (%v)", wireconn.ErrConnLost, err, ctx.Err())
			case <-t.C:
			}
			delay *= 2
		}
		var conn net.Conn
		if conn, err = d.DialContext(ctx, "unix", c.path); err == nil {
			return conn, nil
		}
	}
	return nil, fmt.Errorf("%w: dial after %d attempts: %v", wireconn.ErrConnLost, c.opts.ReconnectAttempts, err)
}

// FromConfig returns a pool for a plugin's unix_socket: section, with
// poolSize connections (0: DefaultPoolSize).
func FromConfig(u *config.UnixSocket, poolSize int) *Conn {
	opts := Options{PoolSize: poolSize}
	if u.ReconnectAttempts != nil {
		opts.ReconnectAttempts = *u.ReconnectAttempts
		if opts.ReconnectAttempts == 0 {
			opts.ReconnectAttempts = 1 // 0 attempts would mean the default here
		}
	}
	if u.ReconnectDelay != nil {
		opts.ReconnectDelay = u.ReconnectDelay.Duration
	}
	if u.Timeout != nil {
		opts.Timeout = u.Timeout.Duration
	}
	return New(u.Path, opts)
}
