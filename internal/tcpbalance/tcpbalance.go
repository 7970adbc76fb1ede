// Package tcpbalance is a TCP load balancer on loopback for tests and
// benchmarks: it hands every new client connection to the next backend,
// round robin, and then relays bytes both ways until either side closes,
// what kube-proxy does for a Kubernetes ClusterIP Service without
// sessionAffinity. It knows nothing of HTTP, so two requests on one
// keep-alive connection reach the same backend, and two connections of one
// client usually do not.
package tcpbalance

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the balancer's dial to a backend.
const dialTimeout = 2 * time.Second

// Balancer is the round-robin TCP proxy.
//
// A backend that refuses the dial gets the connection anyway, as a Service
// whose endpoint list is not yet updated would do: the client connection is
// closed at once.
type Balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[string]int64 // connections handed to each backend
	refused  map[string]int64 // of those, the ones whose dial failed
	open     map[net.Conn]struct{}
	closed   bool

	wg sync.WaitGroup // accept loop and relays
}

// Start listens on a free port of 127.0.0.1 and balances over backends
// (host:port addresses) until Close.
func Start(ctx context.Context, backends ...string) (*Balancer, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpbalance: listen: %w", err)
	}
	b := &Balancer{
		ln: ln, backends: append([]string(nil), backends...),
		conns: make(map[string]int64), refused: make(map[string]int64), open: make(map[net.Conn]struct{}),
	}
	b.wg.Add(1)
	go b.acceptLoop()
	return b, nil
}

// Addr returns the balancer's address, 127.0.0.1:PORT.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends replaces the backend list; connections already relayed are
// left alone, as kube-proxy leaves established connections alone.
func (b *Balancer) SetBackends(backends ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append([]string(nil), backends...)
	b.next = 0
}

// Connections returns, per backend address, how many client connections
// were handed to it (refused dials included).
func (b *Balancer) Connections() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.conns)
}

// Refused returns, per backend address, how many dials to it failed.
func (b *Balancer) Refused() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.refused)
}

// Total returns the number of client connections accepted.
func (b *Balancer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, v := range b.conns {
		n += v
	}
	return n
}

// Close stops accepting, closes every relayed connection and waits for the
// relays to end. It is idempotent.
func (b *Balancer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	err := b.ln.Close()
	for c := range b.open {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *Balancer) acceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed, or the listener broke: no new connections either way
		}
		backend, ok := b.pick(c)
		if !ok {
			_ = c.Close()
			continue
		}
		b.wg.Add(1)
		go b.relay(c, backend)
	}
}

// pick chooses the next backend for c and registers c, or reports false
// when there is no backend or the balancer is closed.
func (b *Balancer) pick(c net.Conn) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(b.backends) == 0 {
		return "", false
	}
	backend := b.backends[b.next%len(b.backends)]
	b.next++
	b.conns[backend]++
	b.open[c] = struct{}{}
	return backend, true
}

// track registers c for Close, or closes it if the balancer is closed.
func (b *Balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = c.Close()
		return false
	}
	b.open[c] = struct{}{}
	return true
}

func (b *Balancer) forget(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.open, c)
		_ = c.Close()
	}
}

// relay dials backend and copies bytes both ways; when either direction
// ends, both connections are closed.
func (b *Balancer) relay(client net.Conn, backend string) {
	defer b.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", backend)
	cancel()
	if err != nil {
		b.mu.Lock()
		b.refused[backend]++
		b.mu.Unlock()
		b.forget(client)
		return
	}
	if !b.track(server) {
		b.forget(client)
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	b.forget(client, server) // unblocks the other direction
	<-done
}
