package bench

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// roundRobin is a TCP proxy on loopback that hands each new connection to
// the next of its backends and then copies bytes both ways: a Kubernetes
// ClusterIP Service without session affinity, as kube-proxy balances it
// (per connection, not per request). The benchmark puts plugin replicas
// behind it.
type roundRobin struct {
	lis      net.Listener
	backends []string

	mu     sync.Mutex
	next   int
	handed []int                 // connections handed to each backend
	conns  map[net.Conn]struct{} // open, both sides; nil once closed
	wg     sync.WaitGroup        // the accept loop and the relays
}

// balance starts a roundRobin over backends (host:port) on 127.0.0.1.
func balance(backends ...string) (*roundRobin, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &roundRobin{lis: lis, backends: backends, handed: make([]int, len(backends)), conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// Addr is the balancer's host:port.
func (b *roundRobin) Addr() string { return b.lis.Addr().String() }

// Handed returns how many connections each backend was handed, in the
// order of the backends.
func (b *roundRobin) Handed() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.handed...)
}

// Close stops accepting, cuts every relayed connection and waits for the
// relays to end.
func (b *roundRobin) Close() error {
	err := b.lis.Close()
	b.mu.Lock()
	for c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *roundRobin) accept() {
	defer b.wg.Done()
	for {
		c, err := b.lis.Accept()
		if err != nil {
			return // closed
		}
		b.mu.Lock()
		i := b.next % len(b.backends)
		b.next++
		b.handed[i]++
		backend := b.backends[i]
		b.mu.Unlock()
		if !b.hold(c) {
			return
		}
		b.wg.Add(1)
		go b.relay(c, backend)
	}
}

// hold registers c so that Close can cut it; false (c closed) once the
// balancer is closed.
func (b *roundRobin) hold(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		_ = c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *roundRobin) release(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		if b.conns != nil {
			delete(b.conns, c)
		}
	}
}

// relay connects client to backend until either side ends.
func (b *roundRobin) relay(client net.Conn, backend string) {
	defer b.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", backend)
	cancel()
	if err != nil || !b.hold(server) {
		b.release(client)
		return
	}
	var both sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)  // ends with either side, or Close
		b.release(client, server) // either direction ending ends both
	}
	both.Go(func() { pipe(server, client) })
	both.Go(func() { pipe(client, server) })
	both.Wait()
}
