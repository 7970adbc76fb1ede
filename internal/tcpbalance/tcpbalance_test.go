package tcpbalance_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/tcpbalance"
	"go.uber.org/goleak"
)

const testTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start starts a balancer over backends, closed in t.Cleanup.
func start(t *testing.T, backends ...string) *tcpbalance.Balancer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	lb, err := tcpbalance.Start(ctx, backends...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	return lb
}

// echoServer answers each line with its own address, so a client can tell
// which backend its connection reached.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte(ln.Addr().String() + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// whoAnswers sends n lines on one connection and returns who answered each.
func whoAnswers(t *testing.T, addr string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	r := bufio.NewReader(c)
	var out []string
	for range n {
		if _, err := c.Write([]byte("who\n")); err != nil {
			t.Fatal(err)
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return append(out, "closed")
		}
		out = append(out, line[:len(line)-1])
	}
	return out
}

func TestHandsEachConnectionToTheNextBackend(t *testing.T) {
	a, b := echoServer(t), echoServer(t)
	lb := start(t, a, b)
	var got []string
	for range 4 {
		answers := whoAnswers(t, lb.Addr(), 3)
		for _, who := range answers[1:] {
			if who != answers[0] {
				t.Fatalf("one connection reached %q and %q", answers[0], who)
			}
		}
		got = append(got, answers[0])
	}
	want := []string{a, b, a, b}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("connections reached %v, want %v", got, want)
		}
	}
	if c := lb.Connections(); c[a] != 2 || c[b] != 2 || lb.Total() != 4 {
		t.Errorf("Connections() = %v, Total() = %d; want 2 each, 4", c, lb.Total())
	}

	// A new backend list applies to new connections; a dead backend gets
	// its turn and the connection is closed.
	dead := "127.0.0.1:1"
	lb.SetBackends(dead, b)
	if got := whoAnswers(t, lb.Addr(), 1); got[0] != "closed" {
		t.Errorf("connection to a dead backend answered %q", got[0])
	}
	if got := whoAnswers(t, lb.Addr(), 1); got[0] != b {
		t.Errorf("next connection reached %q, want %q", got[0], b)
	}
	if r := lb.Refused(); r[dead] != 1 {
		t.Errorf("Refused() = %v, want 1 for %s", r, dead)
	}
}

func TestCloseEndsOpenRelays(t *testing.T) {
	lb := start(t, echoServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", lb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("who\n")); err != nil {
		t.Fatal(err)
	}
	deadline, _ := ctx.Deadline()
	_ = c.SetDeadline(deadline)
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Error("relayed connection still open after Close")
	}
	// goleak (TestMain) checks that no relay goroutine is left.
}
