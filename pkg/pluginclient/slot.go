package pluginclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// Rebuild causes, reported to a [SessionObserver]: what the call or health
// check that found the connection gone saw.
const (
	// CauseNotFound: the server answered that it does not know the session
	// (it restarted, or a new connection reached another replica).
	CauseNotFound = "not_found"
	// CauseUnavailable: something in front of the plugin answered that
	// nothing is behind it (HTTP 502, 503, 504).
	CauseUnavailable = "unavailable"
	// CauseUnreachable: the server could not be reached (connection refused
	// or reset, no answer to a call and then none to a ping), or the
	// connection broke for good.
	CauseUnreachable = "unreachable"
)

// rebuildCause returns the rebuild cause of err, a connection loss (a
// label of the rebuild metric).
func rebuildCause(err error) string {
	switch {
	case errors.Is(err, wireconn.ErrSessionGone):
		return CauseNotFound
	case errors.Is(err, wireconn.ErrUnavailable):
		return CauseUnavailable
	}
	return CauseUnreachable
}

// slot is one of a client's connections: its own supervisor (single-flight
// rebuild, backoff, circuit) and the Conn it holds. A draining slot takes no
// new calls and is closed once its calls in flight are done.
type slot struct {
	c    *Client
	addr string // the endpoint address it dials; "" = the URL's host
	dial Dialer
	sup  *reconnect.Supervisor

	inflight atomic.Int64
	draining atomic.Bool
	cause    atomic.Pointer[string] // cause of the next rebuild
	lossErr  atomic.Pointer[error]  // why the last connection was lost, for logs

	mu  sync.Mutex
	cur *held // nil before the first connection
}

func (c *Client) newSlot(addr string, dial Dialer) *slot {
	sl := &slot{c: c, addr: addr, dial: dial}
	sl.sup = reconnect.New(reconnect.Config{
		Connect:  sl.connect,
		Attempts: c.attempts,
		Backoff:  c.backoff,
		OnRebuild: func() {
			cause := CauseUnreachable
			if p := sl.cause.Load(); p != nil {
				cause = *p
			}
			ev := c.log.Warn().Str("addr", sl.addr).Str("cause", cause)
			if err := sl.lossErr.Load(); err != nil {
				ev = ev.AnErr("error", *err)
			}
			ev.Msg("plugin session lost; rebuilding")
			c.ev.rebuild(cause)
			c.slotsChanged()
		},
		OnConnected: c.slotsChanged,
		OnAttemptFailed: func(attempt int, err error) {
			c.log.Debug().Str("addr", sl.addr).Int("attempt", attempt).Err(err).Msg("plugin connect attempt failed")
			c.refreshEndpoints()
		},
		OnStateChange: func(_, _ reconnect.State) { c.slotsChanged() },
	})
	return sl
}

// current returns the Conn the slot holds.
func (sl *slot) current() *held {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.cur
}

// usable reports whether the slot takes a call now: not draining, its
// circuit closed, no rebuild running, a connection held. A quiet slot costs
// nothing: an idle connection the server closed is dialled again by the
// next call, never rebuilt in the background.
func (sl *slot) usable() bool {
	return !sl.draining.Load() && sl.sup.Usable() && sl.current() != nil
}

// invalidate reports h's connection lost (err says what was seen): the
// slot is rebuilt in the background (once, however many report it).
func (sl *slot) invalidate(h *held, err error) {
	if sl.draining.Load() {
		return
	}
	cause := rebuildCause(err)
	h.lost.Store(true)
	sl.lossErr.Store(&err)
	sl.cause.Store(&cause)
	sl.sup.Invalidate(h.epoch)
}

// connect makes a new Conn (dial, get_plugin_config, merge) and installs it
// as connection epoch. It implements reconnect.Config.Connect.
func (sl *slot) connect(ctx context.Context, epoch uint64) error {
	c := sl.c
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := sl.dial(actx)
	if err != nil {
		return err
	}
	h := newHeld(conn, epoch)
	raw, found, err := conn.PluginConfig(actx, c.name)
	var remote config.Plugin
	if err == nil {
		remote, err = decodeRemoteConfig(raw, found)
	}
	if err != nil {
		c.closeWhenIdle(ctx, h)
		return fmt.Errorf("%s: %w", cpex.ToolGetPluginConfig, err)
	}
	sl.mu.Lock()
	old := sl.cur
	sl.cur = h
	sl.mu.Unlock()
	if old != nil {
		c.closeWhenIdle(ctx, old)
	}
	c.watchExit(ctx, sl, h)
	c.count.connects.Add(1)
	c.setEffective(merge(c.local, remote))
	c.log.Info().Uint64("epoch", epoch).Str("addr", sl.addr).Msg("plugin session established")
	return nil
}

// close stops the slot's supervisor and closes its Conn once the calls in
// flight on it are done (at once when ctx, the client's life, ends).
func (sl *slot) close(ctx context.Context) {
	sl.draining.Store(true)
	sl.sup.Close()
	if h := sl.current(); h != nil {
		sl.c.closeWhenIdle(ctx, h)
	}
}

// held is a Conn in use by a slot, with the calls in flight on it. A
// replaced Conn is retiring: it takes no new calls, and is closed once the
// calls in flight on it are done (see closeWhenIdle).
type held struct {
	conn  Conn
	epoch uint64      // the supervisor's connection number
	lost  atomic.Bool // reported lost: closed without telling the server

	mu       sync.Mutex
	active   int
	retiring bool
	idle     chan struct{} // closed once retiring with no call in flight
}

func newHeld(conn Conn, epoch uint64) *held {
	return &held{conn: conn, epoch: epoch, idle: make(chan struct{})}
}

// enter registers a call on h; it fails once h is retiring.
func (h *held) enter() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.retiring {
		return false
	}
	h.active++
	return true
}

// leave ends a call registered by enter.
func (h *held) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.active--
	if h.retiring && h.active == 0 {
		close(h.idle)
	}
}

// isRetiring reports whether h was replaced or closed.
func (h *held) isRetiring() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.retiring
}

// retire stops h taking calls and returns a channel closed once the calls
// in flight on it are done.
func (h *held) retire() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.retiring {
		h.retiring = true
		if h.active == 0 {
			close(h.idle)
		}
	}
	return h.idle
}

// retireGrace is how much longer than the plugin timeout a replaced
// connection waits for its calls in flight before it is closed.
const retireGrace = time.Second

// closeWhenIdle retires h and closes it in the background once the calls in
// flight on it are done, so that a rebuild never fails them: they finish on
// h (a dead server fails them by itself, and they are retried elsewhere).
// The wait is bounded by the plugin timeout (the longest a call without its
// own deadline runs) plus retireGrace, and ends at once when ctx (the
// client's life) ends.
func (c *Client) closeWhenIdle(ctx context.Context, h *held) {
	idle := h.retire()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(c.timeout + retireGrace)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			c.log.Debug().Msg("closing a replaced plugin connection with calls still in flight")
		case <-ctx.Done():
		}
		if err := h.close(); err != nil {
			c.log.Debug().Err(err).Msg("close plugin connection")
		}
	}()
}

// abandoner is implemented by a Conn that can be closed without telling
// the server (an MCP session: no DELETE), for a connection that was lost:
// the server does not know it any more, or cannot be reached.
type abandoner interface {
	Abandon() error
}

// close closes h's Conn, abandoning it if it was lost.
func (h *held) close() error {
	if a, ok := h.conn.(abandoner); ok && h.lost.Load() {
		return a.Abandon()
	}
	return h.conn.Close()
}
