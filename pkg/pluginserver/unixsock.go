package pluginserver

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
)

// DefaultSocketIdleTimeout is how long a Unix-socket connection may stay
// without a request before the server closes it (cpex: 300 s).
const DefaultSocketIdleTimeout = 300 * time.Second

// SocketServer serves a [Server] over cpex's raw Unix-socket transport:
// frames of a 4-byte big-endian length and a protobuf message, answered one
// at a time, in order, on each connection. Create it with
// [Server.NewSocketServer].
type SocketServer struct {
	srv  *Server
	idle time.Duration

	ctx    context.Context // cancelled by Close; bounds every hook
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	lns   map[net.Listener]struct{}
	conns map[net.Conn]struct{}
}

// NewSocketServer returns a Unix-socket server for s. idle closes
// connections without a request for that long; 0 means
// [DefaultSocketIdleTimeout].
func (s *Server) NewSocketServer(idle time.Duration) *SocketServer {
	if idle <= 0 {
		idle = DefaultSocketIdleTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &SocketServer{srv: s, idle: idle, ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{}}
}

// Serve accepts connections on l (from [ListenUnix]) until Close, then
// returns nil; other accept errors are returned.
func (u *SocketServer) Serve(l net.Listener) error {
	if !u.track(l, nil) {
		l.Close()
		return nil
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if u.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !u.track(nil, c) {
			c.Close()
			return nil
		}
		u.wg.Add(1)
		go u.serveConn(c)
	}
}

// track records a listener or a connection; false once closed.
func (u *SocketServer) track(l net.Listener, c net.Conn) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ctx.Err() != nil {
		return false
	}
	if l != nil {
		u.lns[l] = struct{}{}
	}
	if c != nil {
		u.conns[c] = struct{}{}
	}
	return true
}

// Close stops accepting, cancels running hooks, closes every connection and
// waits for their goroutines. The socket file is removed with the listener.
func (u *SocketServer) Close() error {
	u.mu.Lock()
	u.cancel()
	var errs []error
	for l := range u.lns {
		errs = append(errs, l.Close())
	}
	for c := range u.conns {
		c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
	return errors.Join(errs...)
}

func (u *SocketServer) serveConn(c net.Conn) {
	defer u.wg.Done()
	defer func() {
		u.mu.Lock()
		delete(u.conns, c)
		u.mu.Unlock()
		c.Close()
	}()
	var in, out []byte
	for {
		if err := c.SetReadDeadline(time.Now().Add(u.idle)); err != nil {
			return
		}
		msg, err := cpexpb.ReadFrame(c, in)
		if err != nil {
			if !errors.Is(err, io.EOF) && u.ctx.Err() == nil {
				u.srv.log.Debug().Err(err).Msg("unix socket connection ends")
			}
			return
		}
		in = msg[:0]
		out, err = cpexpb.AppendFrame(out[:0], u.answer(msg))
		if err != nil {
			u.srv.log.Warn().Err(err).Msg("unix socket reply")
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer tells the request kind from the fields set, as cpex does: an
// InvokeHookRequest has hook_type and plugin_name; else a
// GetPluginConfigRequest has a name (field 1 of both); else a frame of at
// most 2 bytes asks for all configs. Anything else is an unknown message.
func (u *SocketServer) answer(msg []byte) proto.Message {
	var inv cpexpb.InvokeHookRequest
	if err := proto.Unmarshal(msg, &inv); err == nil {
		switch {
		case inv.GetHookType() != "" && inv.GetPluginName() != "":
			return u.srv.pbInvoke(u.ctx, &inv)
		case inv.GetHookType() != "":
			return u.srv.pbConfig(inv.GetHookType())
		}
	}
	if len(msg) <= 2 {
		return u.srv.pbConfigs()
	}
	return unknownMessage()
}
