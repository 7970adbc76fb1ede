package pluginclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// One retry point: whatever goes wrong with a call, on whatever transport,
// the plugin server sees it at most twice: the transports only classify an
// attempt, and the client alone retries, once, and only a call that got
// no answer (or whose session the server said is gone). A call the
// server answered, whatever it said, is never repeated.

// faultCounter counts, on the server side, the attempts of calls whose
// payload holds one of the fault markers, and answers them as the marker
// says.
type faultCounter struct {
	attempts atomic.Int32
}

// The markers a test call's payload carries, one per failure class.
const (
	markDrop    = "fault-drop"    // the connection closes after the request is read: no answer
	markGone    = "fault-gone"    // MCP: 404 to the session (the server restarted)
	markBusy    = "fault-busy"    // MCP 503, gRPC UNAVAILABLE: nothing behind a balancer
	markRefuse  = "fault-refuse"  // MCP 500, gRPC INTERNAL: the server refused this call
	markBlock   = "fault-block"   // the plugin answered with a violation
	markInvalid = "fault-invalid" // the server answered something that is no reply
)

// dropListener closes a connection as soon as it reads a request holding
// markDrop, before any answer: the call got none.
type dropListener struct {
	net.Listener
	fc *faultCounter
}

func (l dropListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, fc: l.fc}, nil
}

type dropConn struct {
	net.Conn
	fc *faultCounter
}

func (c *dropConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if bytes.Contains(b[:n], []byte(markDrop)) {
		c.fc.attempts.Add(1)
		c.Conn.Close()
		return 0, io.EOF
	}
	return n, err
}

// faultPlugin answers markBlock with a violation and counts every call
// holding a marker it can see (the transports' faults never reach it).
func faultPlugin(fc *faultCounter) *plugintest.Scripted {
	p := plugintest.NewScripted("faulty", cpex.ToolPreInvoke)
	p.SetFunc(func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if bytes.Contains(payload, []byte(markBlock)) {
			fc.attempts.Add(1)
			return pluginserver.Block("faulty", cpex.PluginViolation{Reason: "blocked", Description: "d", Code: "X"}), nil
		}
		return pluginserver.Continue("faulty"), nil
	})
	return p
}

// mcpFaults is the plugin server's MCP handler with the HTTP faults.
func mcpFaults(fc *faultCounter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		switch {
		case bytes.Contains(body, []byte(markGone)) && (r.Header.Get("Mcp-Session-Id") != "" || r.URL.Query().Get("sessionid") != ""):
			fc.attempts.Add(1)
			http.Error(w, "session not found", http.StatusNotFound)
		case bytes.Contains(body, []byte(markBusy)):
			fc.attempts.Add(1)
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
		case bytes.Contains(body, []byte(markRefuse)):
			fc.attempts.Add(1)
			http.Error(w, "internal error", http.StatusInternalServerError)
		case bytes.Contains(body, []byte(markInvalid)):
			fc.attempts.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+jsonID(body)+`,"result":{"content":[{"type":"text","text":"not a reply"}],"isError":false}}`)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// jsonID is the id of the JSON-RPC request body.
func jsonID(body []byte) string {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	return string(m.ID)
}

// grpcFaults answers the gRPC faults from an interceptor.
func grpcFaults(fc *faultCounter) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s := prototext(req)
		switch {
		case strings.Contains(s, markBusy):
			fc.attempts.Add(1)
			return nil, status.Error(codes.Unavailable, "no healthy upstream")
		case strings.Contains(s, markRefuse):
			fc.attempts.Add(1)
			return nil, status.Error(codes.Internal, "internal error")
		}
		return h(ctx, req)
	}
}

// faultServer serves fc's faults over transport and returns the plugin
// config that reaches it.
func faultServer(t *testing.T, transport string, fc *faultCounter) config.Plugin {
	t.Helper()
	srv := pluginserver.NewWithOptions(nil, faultPlugin(fc))
	t.Cleanup(func() { srv.Close() })
	var lis net.Listener
	var err error
	if transport == "unix-socket" {
		lis, err = pluginserver.ListenUnix(filepath.Join(t.TempDir(), "p.sock"))
	} else {
		lis, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	lis = dropListener{Listener: lis, fc: fc}
	pl := config.Plugin{Name: "faulty", Kind: config.KindExternal}
	done := make(chan struct{})
	var stop func()
	switch transport {
	case "mcp":
		hs := &http.Server{Handler: mcpFaults(fc, srv.Handler())}
		go func() { defer close(done); _ = hs.Serve(lis) }()
		stop = func() { hs.Close() }
		pl = external("faulty", "http://"+lis.Addr().String()+"/mcp")
	case "sse":
		hs := &http.Server{Handler: mcpFaults(fc, srv.SSEHandler())}
		go func() { defer close(done); _ = hs.Serve(lis) }()
		stop = func() { hs.Close() }
		pl = external("faulty", "http://"+lis.Addr().String()+"/sse")
		pl.MCP.Proto = config.ProtoSSE
	case "grpc-tcp":
		g := grpc.NewServer(grpc.UnaryInterceptor(grpcFaults(fc)))
		srv.RegisterGRPC(g)
		go func() { defer close(done); _ = g.Serve(lis) }()
		stop = g.Stop
		pl.GRPC = &config.GRPC{Target: lis.Addr().String()}
	case "unix-socket":
		u := srv.NewSocketServer(0)
		go func() { defer close(done); _ = u.Serve(lis) }()
		stop = func() { _ = u.Close() }
		pl.UnixSocket = &config.UnixSocket{Path: lis.Addr().String(), ReconnectAttempts: ptr(3), ReconnectDelay: secs(20 * time.Millisecond)}
	}
	t.Cleanup(func() { stop(); <-done })
	return pl
}

// TestAttemptsPerFailureClass: for every failure class of every
// transport, the plugin server sees a call at most twice, and a call it
// answered exactly once.
func TestAttemptsPerFailureClass(t *testing.T) {
	classes := map[string][]string{
		"mcp":         {markDrop, markGone, markBusy, markRefuse, markBlock, markInvalid},
		"grpc-tcp":    {markDrop, markBusy, markRefuse, markBlock},
		"unix-socket": {markDrop, markBlock},
		"stdio":       {markDrop, markBlock}, // drop: the child exits mid-call
		"sse":         {markDrop, markGone, markBusy, markRefuse, markBlock},
	}
	answered := map[string]bool{markRefuse: true, markBlock: true, markInvalid: true}
	for _, transport := range []string{"mcp", "grpc-tcp", "unix-socket", "stdio", "sse"} {
		for _, mark := range classes[transport] {
			t.Run(transport+"/"+mark, func(t *testing.T) {
				fc := &faultCounter{}
				var pl config.Plugin
				count := fc.attempts.Load
				if transport == "stdio" {
					var rig stdioRig
					pl, rig = newStdioRig(t, "faulty", nil)
					count = func() int32 { return int32(len(readLines(t, rig.count))) }
				} else {
					pl = faultServer(t, transport, fc)
				}
				pool := newPool(t, []config.Plugin{pl}, Options{})
				eventually(t, "ready", func() bool { return pool.State("faulty") == Ready })
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				payload := json.RawMessage(`{"name":"echo","args":{"text":"` + mark + `"}}`)
				_, err := pool.Invoke(ctx, "faulty", cpex.ToolPreInvoke, payload, testContext("req-1"))
				n := count()
				switch {
				case answered[mark] && n != 1:
					t.Errorf("an answered call (%v) reached the server %d times, want once", err, n)
				case n < 1 || n > 2:
					t.Errorf("a call that got no usable answer (%v) reached the server %d times, want 1 or 2", err, n)
				}
				if mark != markBlock && err == nil {
					t.Errorf("the call succeeded: the fault was not injected")
				}
			})
		}
	}
}

// prototext is a request message as text, where a payload's markers show.
func prototext(m any) string {
	if s, ok := m.(interface{ String() string }); ok {
		return s.String()
	}
	return ""
}
