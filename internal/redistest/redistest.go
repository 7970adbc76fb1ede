// Package redistest runs a real redis-server (the Debian package) for tests
// and benchmarks: on a free loopback port, in a given directory, without
// persistence. Tests skip when the binary is absent.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// IgnoreDialProbe is the goleak option for go-redis's dial probe: after
// PoolSize failed dials a client starts one goroutine that dials once a
// second until it connects, and that a Close ends only at its next wake.
// It is go-redis's, ends by itself, and is not a leak of ours.
func IgnoreDialProbe() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
}

// ErrNotInstalled is returned by Run when redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server not installed (apt-get install redis-server)")

// Server is one redis-server process. Kill and Restart may be called in any
// order; the port stays the same across restarts.
type Server struct {
	bin  string
	dir  string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
}

// Start runs redis-server in the test's temporary directory for the
// duration of the test, or skips the test with one line when the binary is
// not installed.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Run(t.TempDir())
	if errors.Is(err, ErrNotInstalled) {
		t.Skip("redis-server not installed (apt-get install redis-server): skipping")
	}
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Run starts redis-server with its working directory dir on a free
// loopback port and waits until it answers. Close (or Kill) stops it.
func Run(dir string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("free port: %w", err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	s := &Server{bin: bin, dir: dir, port: port}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Restart starts the server again on the same port (empty: no persistence)
// and waits until it answers PING. A running server is killed first.
func (s *Server) Restart() error {
	s.Kill()
	s.mu.Lock()
	cmd := exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	s.cmd, s.exit = cmd, exit
	s.mu.Unlock()
	return s.waitPing(10*time.Second, exit)
}

// Kill stops the server at once (SIGKILL) and waits for it to exit.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}

// Close implements io.Closer: Kill.
func (s *Server) Close() error {
	s.Kill()
	return nil
}

// Client returns a client of the server, closed at the end of the test.
func (s *Server) Client(tb testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DisableIdentity: true})
	tb.Cleanup(func() { c.Close() })
	return c
}

func (s *Server) waitPing(limit time.Duration, exit <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not answering: %w", s.Addr(), err)
		}
		select {
		case <-exit:
			return fmt.Errorf("redis-server on %s exited at start (port taken?)", s.Addr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
