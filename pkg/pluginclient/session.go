package pluginclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one MCP session: its go-sdk ClientSession, the RoundTripper
// that watches its requests, and the pinned transport its requests ride
// (nil when Options.HTTPClient provides a shared one).
type session struct {
	cs      *mcp.ClientSession
	rt      *sessionRT
	pin     *pin
	onRetry func(ok bool) // a call retried on s after a clean stream end
}

// dialMCP returns the Dialer of a slot: a new MCP session to the plugin
// URL, on a transport of its own pinned to one connection (to addr, an
// endpoint address, if not empty; direct: addr is one replica, see newPin).
func (c *Client) dialMCP(addr string, direct bool) Dialer {
	return func(ctx context.Context) (Conn, error) {
		base, p := c.base, (*pin)(nil)
		if base == nil {
			p = newPin(c.tmpl, addr, c.port, direct)
			base = p.transport
		}
		rt := newSessionRT(base)
		transport := &mcp.StreamableClientTransport{
			Endpoint:   c.url,
			HTTPClient: &http.Client{Transport: rt},
			// The SDK's own retries (SSE resumption, 1 s+ backoff) would
			// hide a dead server from us for seconds; we rebuild instead.
			MaxRetries: -1,
			// Plugins never send server-initiated messages we need. The
			// standalone GET stream would hold the session's one
			// connection; health checks find dead sessions instead.
			DisableStandaloneSSE: true,
		}
		// No ProtocolVersion: the go-sdk asks server/discover first and
		// uses a 2026-07-28 server statelessly (no initialize, nothing to
		// rebuild); older servers get the 2025-11-25 initialize.
		cs, err := c.mcp.Connect(ctx, transport, nil)
		if err != nil {
			rt.retire(err)
			p.close()
			return nil, fmt.Errorf("connect %s: %w", c.url, err)
		}
		if stateless(cs) {
			p.unpin()
		}
		p.arm()
		return &session{cs: cs, rt: rt, pin: p, onRetry: c.ev.retry}, nil
	}
}

// statelessVersion is the first MCP version without sessions.
const statelessVersion = "2026-07-28"

// stateless reports whether cs speaks a sessionless MCP version.
func stateless(cs *mcp.ClientSession) bool {
	res := cs.InitializeResult()
	return res != nil && res.ProtocolVersion >= statelessVersion
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
	err := s.cs.Close()
	s.pin.close()
	return err
}

// deleteTimeout bounds the DELETE that ends a live session. It is
// best-effort: a server that does not answer must not hold up a rebuild or
// Close.
const deleteTimeout = time.Second
