package plugintest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Header limits of common plugin server stacks, for [HeaderLimit]. A request
// whose request line and headers exceed the limit is refused with 431
// Request Header Fields Too Large and its connection closed.
const (
	// NodeHeaderLimit is Node.js's default (--max-http-header-size):
	// TypeScript plugin servers refuse headers over 16 KiB.
	NodeHeaderLimit = 16 << 10
	// GoHeaderLimit is Go's default (http.DefaultMaxHeaderBytes, 1 MiB).
	GoHeaderLimit = http.DefaultMaxHeaderBytes
)

// goHeaderSlack is what net/http reads beyond Server.MaxHeaderBytes before
// it refuses a request (its bufio slack).
const goHeaderSlack = 4096

// Option configures a [Server] at Start.
type Option func(*Server)

// HeaderLimit makes the server's HTTP layer refuse requests whose request
// line and headers exceed n bytes (about: net/http counts in 4 KiB steps)
// with 431, as real servers do; see [NodeHeaderLimit] and [GoHeaderLimit].
func HeaderLimit(n int) Option {
	return func(s *Server) { s.maxHeaderBytes = max(n-goHeaderSlack, 1) }
}

// Fault is how the server answers one invoke_hook call instead of running
// the plugin. The zero value runs the plugin.
type Fault int

// The faults a test can inject, each answered on the wire as a real server
// would (the call reached the server and was counted).
const (
	// NoFault runs the plugin.
	NoFault Fault = iota
	// ToolError answers a CallToolResult with isError set.
	ToolError
	// TextGarbage answers a CallToolResult whose text is not JSON.
	TextGarbage
	// NoResult answers an invoke_hook envelope with neither result nor error.
	NoResult
	// BodyGarbage answers HTTP 200 application/json with a body that is not
	// JSON-RPC.
	BodyGarbage
	// Status413, Status431, Status400 and Status500 answer that HTTP status
	// with a plain text body that does not mention a session.
	Status413
	Status431
	Status400
	Status500
	// Status503 answers 503, as a Kubernetes Service with no ready
	// endpoint does (which a client takes for a lost session).
	Status503
)

// String implements fmt.Stringer.
func (f Fault) String() string {
	names := [...]string{"NoFault", "ToolError", "TextGarbage", "NoResult", "BodyGarbage",
		"Status413", "Status431", "Status400", "Status500", "Status503"}
	if int(f) >= 0 && int(f) < len(names) {
		return names[f]
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// SetFault makes the server answer every following invoke_hook with f
// (NoFault: run the plugin again).
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultOnce = f, false
}

// SetFaultOnce makes the server answer the next invoke_hook only with f.
func (s *Server) SetFaultOnce(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault, s.faultOnce = f, true
}

// takeFault returns the fault for the invoke_hook being served.
func (s *Server) takeFault() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.fault
	if s.faultOnce {
		s.fault, s.faultOnce = NoFault, false
	}
	return f
}

// InvokeHooks returns the number of invoke_hook calls received over the
// server's whole life, faulty answers included.
func (s *Server) InvokeHooks() int64 { return s.invokes.Load() }

// answerFault writes fault f as the answer to the JSON-RPC call id.
func answerFault(w http.ResponseWriter, f Fault, id json.RawMessage) {
	result := func(v any) {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": v})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
	text := func(s string, isError bool) map[string]any {
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isError}
	}
	switch f {
	case ToolError:
		result(text("plugin exploded", true))
	case TextGarbage:
		result(text("this is not json", false))
	case NoResult:
		b, _ := json.Marshal(cpex.InvokeHookReply{PluginName: "x"})
		result(text(string(b), false))
	case BodyGarbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{garbage"))
	case Status413:
		http.Error(w, "payload too large", http.StatusRequestEntityTooLarge)
	case Status431:
		http.Error(w, "header fields too large", http.StatusRequestHeaderFieldsTooLarge)
	case Status400:
		http.Error(w, "Bad Request: malformed payload", http.StatusBadRequest)
	case Status503:
		http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
	case Status500:
		http.Error(w, strings.Repeat("internal error ", 4), http.StatusInternalServerError)
	}
}
