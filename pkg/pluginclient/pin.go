package pluginclient

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// pin is the transport of one MCP session, pinned to one connection: the
// session's requests all reach the replica that created it, whatever
// balances connections in between (a ClusterIP Service without affinity, a
// TCP load balancer). It speaks HTTP/1.1 only and keeps at most one
// connection.
//
// When that connection ends after the session exists (arm), the session is
// stale: the client rebuilds it in the background and sends new calls to
// other slots. Requests already queued on it dial again: a new connection
// that reaches the session's replica (one replica, a pod address) keeps it;
// one that lands on another replica gets "session not found", which is a
// lost session, retried elsewhere — never run twice. A stateless session
// (MCP 2026-07-28, any replica serves any call) is never stale.
//
// Go's HTTP/1.1 transport does not pipeline: a pinned session carries one
// call at a time, and the client spreads concurrent calls over its slots.
type pin struct {
	transport *http.Transport
	target    string // host:port to dial instead of the URL's; "" = the URL's

	mu        sync.Mutex
	armed     bool     // the session exists: conn is its connection
	stateless bool     // no session, or a direct address: never stale
	conn      net.Conn // the connection the session was made on
	broken    bool     // conn ended
}

// maxDirectConns bounds the idle connections of a session to a Pod address.
const maxDirectConns = 16

// newPin returns a pinned transport made from tmpl (TLS and timeouts). addr,
// if not empty, is the endpoint address to dial (with port, or joined with
// port); the URL's host stays the Host header and the TLS server name.
//
// direct says addr is known to be one replica (one of several addresses of
// a headless Service, each a Pod): every connection reaches the session's
// replica, so the session may use several at once and is never stale.
func newPin(tmpl *http.Transport, addr, port string, direct bool) *pin {
	p := &pin{}
	if addr != "" {
		p.target = addr
		if _, _, err := net.SplitHostPort(addr); err != nil {
			p.target = net.JoinHostPort(addr, port)
		}
	}
	t := tmpl.Clone()
	t.Proxy = nil // the replica is reached directly, or pinning means nothing
	t.ForceAttemptHTTP2 = false
	t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost, t.MaxIdleConns = 1, 1, 1
	if direct {
		t.MaxConnsPerHost, t.MaxIdleConnsPerHost, t.MaxIdleConns = 0, maxDirectConns, maxDirectConns
		p.stateless = true // never stale: any connection reaches the replica
	}
	t.DialContext = p.dial
	p.transport = t
	return p
}

var dialer net.Dialer

// dial is the transport's DialContext.
func (p *pin) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if p.target != "" {
		addr = p.target
	}
	raw, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := &pinnedConn{Conn: raw, p: p}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		p.conn, p.broken = conn, false
	}
	return conn, nil
}

// arm pins the session to its connection: the session exists now.
func (p *pin) arm() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
	if p.conn == nil {
		p.broken = true // no connection to pin to: the session is stale
	}
}

// unpin records that the session is stateless: it is never stale.
func (p *pin) unpin() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stateless = true
}

// stale reports whether a stateful session's connection is gone.
func (p *pin) stale() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.armed && p.broken && !p.stateless
}

// markBroken records that conn ended.
func (p *pin) markBroken(conn net.Conn) {
	p.mu.Lock()
	if conn == p.conn {
		p.broken = true
	}
	p.mu.Unlock()
}

// close drops the transport's idle connection.
func (p *pin) close() {
	if p != nil {
		p.transport.CloseIdleConnections()
	}
}

// pinnedConn reports the end of the pinned connection: a failed read (the
// server closed it, for example an idle keep-alive timeout) or a close.
type pinnedConn struct {
	net.Conn
	p *pin
}

func (c *pinnedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.p.markBroken(c)
	}
	return n, err
}

func (c *pinnedConn) Close() error {
	c.p.markBroken(c)
	return c.Conn.Close()
}
