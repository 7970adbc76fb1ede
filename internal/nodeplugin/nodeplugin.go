// Package nodeplugin runs the plugin server of tsplugin/ — a cpex external
// plugin server written on the official MCP TypeScript SDK (npm, pinned by
// tsplugin/package-lock.json) — as a real Node.js process on loopback,
// serving Streamable HTTP or the legacy HTTP+SSE transport, for the tests
// and the demo. A restart is the process killed and started again
// on the same port, with an empty session store.
package nodeplugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Check's errors: node is not on the PATH, or the server's npm
// dependencies are not installed.
var (
	ErrNoNode       = errors.New("node not on PATH: skipping the TypeScript SDK plugin server")
	ErrNotInstalled = errors.New("TypeScript SDK plugin server not installed")
)

// Options configure a [Server].
type Options struct {
	// Policy is what the server serves, as its POLICY JSON
	// ({"plugins":[{name, deny, redact, hooks, mode, priority}]}, patterns
	// in RE2 syntax); empty: one plugin "TSGuard" that allows everything.
	Policy string
	// KeepAlive is the server's idle keep-alive timeout (Node's timer
	// ticks in whole seconds); 0: Node's default, 5 s.
	KeepAlive time.Duration
	// Port is the loopback port; 0: a free one.
	Port int
	// SSE serves the legacy HTTP+SSE transport (the SDK's
	// SSEServerTransport: a GET of /sse opens a session, its messages are
	// POSTed to /messages) instead of Streamable HTTP on /mcp.
	SSE bool
}

// Stats is what a server process counted.
type Stats struct {
	Initializes int `json:"initializes"`
	Invokes     int `json:"invokes"`
	Connections int `json:"connections"`
	Sessions    int `json:"sessions"`
}

func (s *Stats) add(o Stats) {
	s.Initializes += o.Initializes
	s.Invokes += o.Invokes
	s.Connections += o.Connections
}

// startTimeout bounds how long a Node process may take to listen.
const startTimeout = 20 * time.Second

// Dir returns the folder of the server (package.json, server.mjs): beside
// this file's source when the build knows where that is, else found from the
// working directory up (a test runs in its package's folder; binaries built
// with -trimpath, as make test builds them, know only the module path).
func Dir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "tsplugin")
	}
	rel := filepath.Join("internal", "nodeplugin", "tsplugin")
	dir, err := os.Getwd()
	if err != nil {
		return rel
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, rel, "package.json")); err == nil {
			return filepath.Join(dir, rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return rel
		}
		dir = parent
	}
}

// Check reports whether the server can run here: node on the PATH and the
// npm dependencies installed (`make test` runs npm ci in Dir).
func Check() error {
	if _, err := exec.LookPath("node"); err != nil {
		return ErrNoNode
	}
	if _, err := os.Stat(filepath.Join(Dir(), "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		return fmt.Errorf("%w: run npm ci in %s (make test does)", ErrNotInstalled, Dir())
	}
	return nil
}

// Server is the Node.js plugin server process, restartable on its port.
type Server struct {
	opts Options

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited
	ended Stats         // totals of the processes that ended
}

// Start starts the server and waits until it listens.
func Start(opts Options) (*Server, error) {
	if err := Check(); err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		opts.Port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
	}
	s := &Server{opts: opts}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// URL returns the endpoint URL a client is configured with:
// http://127.0.0.1:PORT/mcp, or with Options.SSE the event stream's
// http://127.0.0.1:PORT/sse.
func (s *Server) URL() string {
	if s.opts.SSE {
		return "http://" + s.Addr() + "/sse"
	}
	return "http://" + s.Addr() + "/mcp"
}

// Addr returns 127.0.0.1:PORT.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.Port))
}

// env returns the process environment.
func (s *Server) env() []string {
	env := append(os.Environ(), "PORT="+strconv.Itoa(s.opts.Port))
	if s.opts.Policy != "" {
		env = append(env, "POLICY="+s.opts.Policy)
	}
	if s.opts.KeepAlive > 0 {
		env = append(env, "KEEPALIVE_MS="+strconv.FormatInt(s.opts.KeepAlive.Milliseconds(), 10))
	}
	if s.opts.SSE {
		env = append(env, "TRANSPORT=sse")
	}
	return env
}

// start runs a new process and waits until it listens.
func (s *Server) start() error {
	cmd := exec.Command("node", "server.mjs")
	cmd.Dir, cmd.Env = Dir(), s.env()
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	done, listening := make(chan struct{}), make(chan bool, 1)
	go func() { // owned by the process: ends when it exits
		defer close(done)
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if !ok && strings.HasPrefix(sc.Text(), "listening ") {
				ok = true
				listening <- true
			}
		}
		_ = cmd.Wait()
		if !ok {
			listening <- false
		}
	}()
	select {
	case ok := <-listening:
		if !ok {
			<-done
			return fmt.Errorf("node exited before listening: %s", strings.TrimSpace(stderr.String()))
		}
	case <-time.After(startTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("node did not listen within %v: %s", startTimeout, stderr.String())
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// Stop kills the process, as a pod killed: its connections reset. Stopping
// a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if st, err := s.Stats(); err == nil {
		s.mu.Lock()
		s.ended.add(st)
		s.mu.Unlock()
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	s.mu.Lock()
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
}

// rebindTimeout bounds how long Restart retries the port.
const rebindTimeout = 10 * time.Second

// Restart kills the process and starts a new one on the same port.
func (s *Server) Restart() error {
	s.Stop()
	deadline := time.Now().Add(rebindTimeout)
	for {
		err := s.start()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stats returns what the current process counted (its /stats endpoint,
// whose own connections are not counted).
func (s *Server) Stats() (Stats, error) {
	var st Stats
	if err := s.get("/stats", &st); err != nil {
		return Stats{}, fmt.Errorf("node stats: %w", err)
	}
	return st, nil
}

// TraceContext is a W3C trace context as one carrier brought it ("" when
// absent).
type TraceContext struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
}

// Trace is the trace context one invoke_hook call carried: in the MCP
// request's params._meta (SEP-414) and in its HTTP headers.
type Trace struct {
	Plugin string       `json:"plugin_name"`
	Hook   string       `json:"hook_type"`
	Meta   TraceContext `json:"meta"`
	Header TraceContext `json:"header"`
}

// Traces returns the trace context of each invoke_hook the current process
// served (the last 1024), oldest first (its /traces endpoint).
func (s *Server) Traces() ([]Trace, error) {
	var tr []Trace
	if err := s.get("/traces", &tr); err != nil {
		return nil, fmt.Errorf("node traces: %w", err)
	}
	return tr, nil
}

// get decodes the JSON answer of a GET of path on the current process, on
// a connection of its own (not one of those under test).
func (s *Server) get(path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr()+path, nil)
	if err != nil {
		return err
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Totals returns the counts over every process so far, the running one
// included.
func (s *Server) Totals() (Stats, error) {
	st, err := s.Stats()
	if err != nil {
		return Stats{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.add(s.ended)
	return st, nil
}
