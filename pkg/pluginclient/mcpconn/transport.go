package mcpconn

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
)

// maxDirectConns bounds the idle connections of a session to a Pod address.
const maxDirectConns = 16

// transport is the HTTP transport of one session, made from the client's
// template (TLS and timeouts); it speaks HTTP/1.1 only.
//
// On an address that may balance connections (a Service's, or the URL's
// host), it keeps at most one connection: every request of the session
// rides it while it lives, so all reach the replica that made the session.
// When that connection ends (the server's idle keep-alive timeout, 5 s on
// Node.js and uvicorn; Connection: close; a restart), the next request dials
// again. With one replica behind the address the session goes on; another
// replica answers "session not found", which is the server's word: the
// session is rebuilt and the call, which did not run, retried once. A
// connection that ends is never a verdict by itself.
//
// Go's HTTP/1.1 transport does not pipeline: such a session carries one
// call at a time, and the client spreads concurrent calls over its slots.
// On a Pod address (direct), every connection reaches the session's replica,
// so the session may use several at once.
type transport struct {
	*http.Transport
	target string       // host:port to dial instead of the URL's; "" = the URL's
	dials  atomic.Int64 // connections dialled
}

// newTransport returns a session's transport made from tmpl. addr, if not
// empty, is the endpoint address to dial (with port, or joined with port);
// the URL's host stays the Host header and the TLS server name. direct says
// addr is known to be one replica.
func newTransport(tmpl *http.Transport, addr, port string, direct bool) *transport {
	t := &transport{}
	if addr != "" {
		t.target = addr
		if _, _, err := net.SplitHostPort(addr); err != nil {
			t.target = net.JoinHostPort(addr, port)
		}
	}
	ht := tmpl.Clone()
	ht.Proxy = nil // the replica is reached directly, or one connection means nothing
	ht.ForceAttemptHTTP2 = false
	ht.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // HTTP/1.1 only
	ht.MaxConnsPerHost, ht.MaxIdleConnsPerHost, ht.MaxIdleConns = 1, 1, 1
	if direct {
		ht.MaxConnsPerHost, ht.MaxIdleConnsPerHost, ht.MaxIdleConns = 0, maxDirectConns, maxDirectConns
	}
	ht.DialContext = t.dial
	t.Transport = ht
	return t
}

// dial is the transport's DialContext.
func (t *transport) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.target != "" {
		addr = t.target
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		t.dials.Add(1)
	}
	return conn, err
}

// close drops the transport's idle connections.
func (t *transport) close() {
	if t != nil {
		t.CloseIdleConnections()
	}
}
