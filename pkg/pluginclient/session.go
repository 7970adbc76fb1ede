package pluginclient

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/reconnect"
)

// session is one MCP session with its RoundTripper. A replaced session is
// retiring: it takes no new calls, and is closed once the calls in flight on
// it are done (see closeWhenIdle).
type session struct {
	cs    *mcp.ClientSession
	rt    *sessionRT
	epoch uint64 // the supervisor's connection number

	mu       sync.Mutex
	active   int           // calls in flight
	retiring bool          // replaced: no new calls
	idle     chan struct{} // closed once retiring with no call in flight
}

func newSession(cs *mcp.ClientSession, rt *sessionRT, epoch uint64) *session {
	return &session{cs: cs, rt: rt, epoch: epoch, idle: make(chan struct{})}
}

// enter registers a call on s; it fails once s is retiring.
func (s *session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retiring {
		return false
	}
	s.active++
	return true
}

// leave ends a call registered by enter.
func (s *session) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.retiring && s.active == 0 {
		close(s.idle)
	}
}

// retire stops s taking calls and returns a channel closed once the calls
// in flight on it are done.
func (s *session) retire() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.retiring {
		s.retiring = true
		if s.active == 0 {
			close(s.idle)
		}
	}
	return s.idle
}

// lost reports whether err (from a call on s) means the session is gone:
// the RoundTripper saw it go, the SDK says so, or s was retired or closed
// while the call ran.
func (s *session) lost(err error) bool {
	return s.rt.lostErr() != nil || s.rt.ctx.Err() != nil ||
		errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, mcp.ErrConnectionClosed)
}

// cause returns the best description of why s is lost.
func (s *session) cause(err error) error {
	if c := s.rt.lostErr(); c != nil {
		return c
	}
	return err
}

// close ends the session: requests in flight are aborted and, unless the
// session is lost, a DELETE bounded by ctx and deleteTimeout tells the
// server.
func (s *session) close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	s.rt.shutdown(ctx)
	return s.cs.Close()
}

// closeWhenIdle retires s and closes it in the background once the calls in
// flight on it are done, so that a rebuild never fails them: they finish on
// s (a dead server fails them by itself, and they are retried on the new
// session). The wait is bounded by the plugin timeout (the longest a call
// without its own deadline runs) plus deleteTimeout, and ends at once when
// ctx (the client's life) ends.
func (c *Client) closeWhenIdle(ctx context.Context, s *session) {
	idle := s.retire()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTimer(c.timeout + deleteTimeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			c.log.Debug().Msg("closing a replaced plugin session with calls still in flight")
		case <-ctx.Done():
		}
		if err := s.close(context.WithoutCancel(ctx)); err != nil {
			c.log.Debug().Err(err).Msg("close plugin session")
		}
	}()
}

// healthLoop pings the plugin every interval until ctx is done.
func (c *Client) healthLoop(ctx context.Context) {
	defer c.wg.Done()
	t := time.NewTicker(c.health)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.healthCheck(ctx)
	}
}

// healthCheck pings the current session once. A lost session is rebuilt
// right away, before a request finds it dead. While the circuit is open or
// the first connection is pending, the supervisor's loop does the probing.
func (c *Client) healthCheck(ctx context.Context) {
	if c.sup.State() != reconnect.Ready {
		return
	}
	s, err := c.acquire(ctx)
	if err != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, min(c.timeout, c.health))
	err = s.cs.Ping(pctx, nil)
	cancel()
	s.leave()
	if ctx.Err() != nil {
		return
	}
	if err == nil {
		c.ev.health(true)
		return
	}
	c.ev.health(false)
	c.log.Warn().Err(err).Msg("plugin health check failed")
	if s.lost(err) {
		cause := s.cause(err)
		c.lossCause.Store(&cause)
		_ = c.sup.Rebuild(ctx, s.epoch) // outcome logged by the supervisor hooks
	}
}
