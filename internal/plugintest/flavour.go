package plugintest

import (
	"fmt"
	"net/http"
	"sync"
)

// Flavour is how a plugin server answers a request carrying an Mcp-Session-Id
// it does not know (docs/plugin-protocol.md §5).
type Flavour int

// The flavours of plugin servers seen in the wild.
const (
	// GoSDK is the go-sdk's native answer: 404, plain text "session not found".
	GoSDK Flavour = iota
	// NotFoundJSON32600 is the Python mcp SDK (FastMCP, cpex): 404,
	// JSON-RPC error -32600 "Session not found", id "server-error".
	NotFoundJSON32600
	// NotFoundJSON32001 is the TypeScript SDK transport: 404, JSON-RPC error
	// -32001 "Session not found", id null.
	NotFoundJSON32001
	// BadRequest400 is the TypeScript SDK example apps (server-everything):
	// 400, JSON-RPC error -32000 "Bad Request: No valid session ID provided"
	// (recorded: pkg/mcpmsg/testdata/responses/stale-session.1.json).
	BadRequest400
)

// Flavours returns every Flavour, for table tests.
func Flavours() []Flavour {
	return []Flavour{GoSDK, NotFoundJSON32600, NotFoundJSON32001, BadRequest400}
}

// String implements fmt.Stringer.
func (f Flavour) String() string {
	switch f {
	case GoSDK:
		return "GoSDK"
	case NotFoundJSON32600:
		return "NotFoundJSON32600"
	case NotFoundJSON32001:
		return "NotFoundJSON32001"
	case BadRequest400:
		return "BadRequest400"
	}
	return fmt.Sprintf("Flavour(%d)", int(f))
}

// UnknownSessionAnswer returns the status, Content-Type and body with which
// flavour f answers an unknown session. For GoSDK it is what the go-sdk
// handler writes itself (http.Error adds the trailing newline).
func (f Flavour) UnknownSessionAnswer() (status int, contentType, body string) {
	switch f {
	case NotFoundJSON32600:
		return http.StatusNotFound, "application/json",
			`{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not found"}}`
	case NotFoundJSON32001:
		return http.StatusNotFound, "application/json",
			`{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`
	case BadRequest400:
		return http.StatusBadRequest, "application/json; charset=utf-8",
			`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`
	}
	return http.StatusNotFound, "text/plain; charset=utf-8", "session not found\n"
}

// sessionHeader is the MCP session header (canonical form).
const sessionHeader = "Mcp-Session-Id"

// WrapFlavour returns h answering unknown sessions the way flavour f does.
// For GoSDK it returns h itself. Otherwise the wrapper remembers the session
// ids h issued (from the Mcp-Session-Id response header of successful
// answers), forgets an id after a successful DELETE, and answers a request
// that carries any other id directly, without calling h. Each call returns a
// wrapper with an empty memory, so wrap a fresh handler per server instance.
func WrapFlavour(h http.Handler, f Flavour) http.Handler {
	if f == GoSDK {
		return h
	}
	return &flavourHandler{next: h, flavour: f, issued: make(map[string]struct{})}
}

type flavourHandler struct {
	next    http.Handler
	flavour Flavour

	mu     sync.Mutex
	issued map[string]struct{}
}

func (h *flavourHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(sessionHeader)
	if sid != "" && !h.known(sid) {
		status, ct, body := h.flavour.UnknownSessionAnswer()
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return
	}
	rec := &headerRecorder{ResponseWriter: w, onHeader: func(status int) {
		if id := w.Header().Get(sessionHeader); id != "" && status >= 200 && status < 300 {
			h.mu.Lock()
			h.issued[id] = struct{}{}
			h.mu.Unlock()
		}
	}}
	h.next.ServeHTTP(rec, r)
	if r.Method == http.MethodDelete && sid != "" && rec.status >= 200 && rec.status < 300 {
		h.mu.Lock()
		delete(h.issued, sid)
		h.mu.Unlock()
	}
}

func (h *flavourHandler) known(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.issued[sid]
	return ok
}

// headerRecorder calls onHeader once, when the response header is written.
// It keeps Flush and Unwrap working so SSE streaming is unaffected.
type headerRecorder struct {
	http.ResponseWriter
	onHeader func(status int)
	status   int
}

func (r *headerRecorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
		r.onHeader(code)
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *headerRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (r *headerRecorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *headerRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
