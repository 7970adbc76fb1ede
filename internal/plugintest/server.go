// Package plugintest runs real plugin servers on loopback for tests: a
// listener that can be stopped, restarted on the same address with an empty
// session store, made to hang, and made to answer unknown sessions the way
// Python or TypeScript MCP servers do (docs/plugin-protocol.md §5). It
// also offers [Scripted], a plugin whose behaviour a test sets per call.
package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// Path is where the plugin endpoint is served.
const Path = "/mcp"

const (
	// stopTimeout bounds how long Stop waits for handlers to return.
	stopTimeout = 10 * time.Second
	// rebindTimeout bounds how long Restart retries binding the old address.
	rebindTimeout = 5 * time.Second
	// maxInspect is how much of a request body is read to record it.
	maxInspect = 16 << 20
	// maxRequests is how many requests Requests remembers.
	maxRequests = 1024
)

// Request is what the server saw of one HTTP request.
type Request struct {
	Method     string      // HTTP method
	SessionID  string      // Mcp-Session-Id header
	RPCMethods []string    // JSON-RPC methods in the body, one per batch element
	Tool       string      // params.name of the first tools/call, if any
	Header     http.Header // a copy of the request headers
}

// Server is a plugin server on a loopback listener, owned by a test.
type Server struct {
	t          testing.TB
	newHandler func() http.Handler
	flavour    Flavour
	addr       string // host:port, fixed for the whole life

	initializes atomic.Int64
	invokes     atomic.Int64 // invoke_hook calls

	maxHeaderBytes int    // http.Server.MaxHeaderBytes; 0: Go's default
	habits         Habits // framing and idle timeout
	connections    atomic.Int64

	lifecycle sync.Mutex // serialises Stop and Restart

	mu        sync.Mutex
	cur       *instance     // nil while stopped
	hang      chan struct{} // non-nil while hanging; closed to release
	fault     Fault
	faultOnce bool
	reqs      []Request
}

// instance is one http.Server generation.
type instance struct {
	srv       *http.Server
	handler   http.Handler // as returned by newHandler
	stopped   chan struct{}
	serveDone chan struct{}

	mu       sync.Mutex
	closing  bool
	handlers sync.WaitGroup
}

// Start serves newHandler() at http://127.0.0.1:PORT/mcp, answering unknown
// sessions as flavour f does, and stops it in t.Cleanup. newHandler is called
// again on every Restart; it must return a handler with an empty session
// store (e.g. a [pluginserver.Server]'s Handler method). If the handler
// implements io.Closer, Stop closes it. Options (e.g. [HeaderLimit]) apply
// to every instance.
func Start(t testing.TB, newHandler func() http.Handler, f Flavour, opts ...Option) *Server {
	t.Helper()
	ln := listenLoopback(t, "listen")
	s := &Server{t: t, newHandler: newHandler, flavour: f, addr: ln.Addr().String()}
	for _, o := range opts {
		o(s)
	}
	s.serve(ln)
	t.Cleanup(s.Stop)
	return s
}

// StartPlugins is Start for a [pluginserver.Server] serving plugins with
// opts (nil: defaults). Every Restart serves a fresh Handler of the same
// pluginserver.Server, so the plugins keep their state and only the
// sessions are lost.
func StartPlugins(t testing.TB, f Flavour, opts *pluginserver.Options, plugins ...pluginserver.Plugin) *Server {
	t.Helper()
	ps := pluginserver.NewWithOptions(opts, plugins...)
	return Start(t, ps.Handler, f)
}

// URL returns the endpoint URL, http://127.0.0.1:PORT/mcp. It does not
// change across restarts.
func (s *Server) URL() string { return "http://" + s.addr + Path }

// Addr returns the listener address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return s.addr }

// Flavour returns the flavour the server answers unknown sessions with.
func (s *Server) Flavour() Flavour { return s.flavour }

// Running reports whether the server is listening.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != nil
}

// Connections returns the TCP connections accepted over the server's whole
// life, across restarts.
func (s *Server) Connections() int64 { return s.connections.Load() }

// Initializes returns the number of JSON-RPC initialize requests received
// over the server's whole life, across restarts (hung ones included).
func (s *Server) Initializes() int64 { return s.initializes.Load() }

// SetHang makes the server accept requests and never answer them (true),
// or answer normally again (false). Requests hung when hanging ends are then
// served; requests still hung at Stop are dropped with their connection.
func (s *Server) SetHang(hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case hang && s.hang == nil:
		s.hang = make(chan struct{})
	case !hang && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// Requests returns the requests received (the last 1024), oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.RPCMethods = append([]string(nil), r.RPCMethods...)
		out[i] = r
	}
	return out
}

// LastToolCall returns the most recent tools/call request for tool.
func (s *Server) LastToolCall(tool string) (Request, bool) {
	reqs := s.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Tool == tool {
			return reqs[i], true
		}
	}
	return Request{}, false
}

// Stop makes the server go away like a killed process: the listener closes
// and every open connection is closed, so clients see connection refused or
// reset. Hung requests are dropped. Stop waits for the handlers to return
// (closing the handler if it is an io.Closer) and reports a handler that does
// not return in time as a test error. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.stop()
}

func (s *Server) stop() {
	s.mu.Lock()
	inst := s.cur
	s.cur = nil
	s.mu.Unlock()
	if inst == nil {
		return
	}
	inst.mu.Lock()
	inst.closing = true
	inst.mu.Unlock()
	// Close the connections first, so that nothing a handler does from
	// now on reaches a client.
	_ = inst.srv.Close()
	close(inst.stopped)
	if c, ok := inst.handler.(io.Closer); ok {
		if err := c.Close(); err != nil {
			s.t.Logf("plugintest: close handler: %v", err)
		}
	}
	handlersDone := make(chan struct{})
	go func() {
		inst.handlers.Wait()
		close(handlersDone)
	}()
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	for _, ch := range []chan struct{}{inst.serveDone, handlersDone} {
		select {
		case <-ch:
		case <-timer.C:
			s.t.Errorf("plugintest: server %s: handlers still running %v after Stop", s.addr, stopTimeout)
			return
		}
	}
}

// Restart stops the server (if running) and serves a new http.Server with a
// fresh handler from newHandler, hence an empty session store, on the same
// address. It retries the bind briefly; a failure is reported with t.Errorf
// and leaves the server stopped.
func (s *Server) Restart() {
	s.lifecycle.Lock()
	defer s.lifecycle.Unlock()
	s.stop()
	ctx, cancel := context.WithTimeout(context.Background(), rebindTimeout)
	defer cancel()
	var lc net.ListenConfig
	for {
		ln, err := lc.Listen(ctx, "tcp", s.addr)
		if err == nil {
			s.serve(ln)
			return
		}
		select {
		case <-ctx.Done():
			s.t.Errorf("plugintest: restart on %s: %v", s.addr, err)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serve starts a new instance on ln.
func (s *Server) serve(ln net.Listener) {
	h := s.newHandler()
	inst := &instance{
		handler:   h,
		stopped:   make(chan struct{}),
		serveDone: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.Handle(Path, s.habits.wrap(WrapFlavour(h, s.flavour)))
	inst.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.handle(inst, mux, w, r) }),
		ReadHeaderTimeout: stopTimeout,
		IdleTimeout:       s.habits.IdleTimeout,
		MaxHeaderBytes:    s.maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.connections.Add(1)
			}
		},
	}
	s.mu.Lock()
	s.cur = inst
	s.mu.Unlock()
	go func() {
		defer close(inst.serveDone)
		_ = inst.srv.Serve(ln) // returns http.ErrServerClosed on Stop
	}()
}

// handle records the request, hangs if asked to, and serves it.
func (s *Server) handle(inst *instance, next http.Handler, w http.ResponseWriter, r *http.Request) {
	inst.mu.Lock()
	if inst.closing {
		inst.mu.Unlock()
		// A killed server never answers: drop the connection, as a real
		// process going away would, instead of an empty 200.
		panic(http.ErrAbortHandler)
	}
	inst.handlers.Add(1)
	inst.mu.Unlock()
	defer inst.handlers.Done()

	invokeID, err := s.record(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if invokeID != nil {
		if f := s.takeFault(); f != NoFault {
			answerFault(w, f, invokeID)
			return
		}
	}
	s.mu.Lock()
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-inst.stopped:
			return
		case <-r.Context().Done():
			return
		}
	}
	next.ServeHTTP(w, r)
}

// rpcMessage is the part of a JSON-RPC message the server records.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name string `json:"name"`
	} `json:"params"`
}

// record reads (and restores) the body, counts initialize and invoke_hook
// requests and remembers the request. It returns the JSON-RPC id of an
// invoke_hook call, if the request is one.
func (s *Server) record(r *http.Request) (invokeID json.RawMessage, err error) {
	rec := Request{Method: r.Method, SessionID: r.Header.Get(sessionHeader), Header: r.Header.Clone()}
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxInspect))
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		for _, m := range parseMessages(body) {
			rec.RPCMethods = append(rec.RPCMethods, m.Method)
			if m.Method == "initialize" {
				s.initializes.Add(1)
			}
			if m.Method == "tools/call" && rec.Tool == "" {
				rec.Tool = m.Params.Name
			}
			if m.Method == "tools/call" && m.Params.Name == cpex.ToolInvokeHook {
				s.invokes.Add(1)
				invokeID = m.ID
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == maxRequests {
		s.reqs = append(s.reqs[:0:0], s.reqs[1:]...)
	}
	s.reqs = append(s.reqs, rec)
	return invokeID, nil
}

// parseMessages decodes a JSON-RPC message or batch; garbage yields none.
func parseMessages(body []byte) []rpcMessage {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if body[0] == '[' {
		var batch []rpcMessage
		if err := json.Unmarshal(body, &batch); err != nil {
			return nil
		}
		return batch
	}
	var m rpcMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil
	}
	return []rpcMessage{m}
}

// listenLoopback listens on a free port of 127.0.0.1, failing t with what
// when it cannot.
func listenLoopback(t testing.TB, what string) net.Listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rebindTimeout)
	defer cancel()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("plugintest: %s: %v", what, err)
	}
	return ln
}
