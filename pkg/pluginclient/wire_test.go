package pluginclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// wireServer is a plugin server of pkg/pluginserver on loopback over one of
// the protobuf transports; kill cuts it off (no drain) and start brings a
// new one up on the same address or socket.
type wireServer struct {
	t         *testing.T
	transport string // grpc-tcp, grpc-uds, unix-socket
	srv       *pluginserver.Server
	addr      string
	md        atomic.Pointer[metadata.MD] // of the last gRPC call

	mu   sync.Mutex
	stop func()
}

func startWire(t *testing.T, transport string, plugins ...pluginserver.Plugin) *wireServer {
	t.Helper()
	w := &wireServer{t: t, transport: transport, srv: pluginserver.New(plugins...), addr: "127.0.0.1:0"}
	if transport != "grpc-tcp" {
		w.addr = filepath.Join(t.TempDir(), "p.sock")
	}
	w.start()
	t.Cleanup(func() { w.kill(); w.srv.Close() })
	return w
}

func (w *wireServer) start() {
	w.t.Helper()
	var lis net.Listener
	var err error
	for range 100 { // a TCP port just released may take a moment
		if w.transport == "grpc-tcp" {
			lis, err = net.Listen("tcp", w.addr)
		} else {
			lis, err = pluginserver.ListenUnix(w.addr)
		}
		if err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		w.t.Fatal(err)
	}
	w.addr = lis.Addr().String()
	done := make(chan struct{})
	var stop func()
	if w.transport == "unix-socket" {
		u := w.srv.NewSocketServer(0)
		go func() { defer close(done); _ = u.Serve(lis) }()
		stop = func() { _ = u.Close() }
	} else {
		g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			w.md.Store(&md)
			return h(ctx, req)
		}))
		w.srv.RegisterGRPC(g)
		go func() { defer close(done); _ = g.Serve(lis) }()
		stop = g.Stop
	}
	w.mu.Lock()
	w.stop = func() { stop(); <-done }
	w.mu.Unlock()
}

func (w *wireServer) kill() {
	w.mu.Lock()
	stop := w.stop
	w.stop = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (w *wireServer) restart() { w.kill(); w.start() }

// plugin returns the plugin config that reaches w, with a rebuild budget of
// attempts.
func (w *wireServer) plugin(name string, attempts int) config.Plugin {
	pl := config.Plugin{Name: name, Kind: config.KindExternal}
	switch w.transport {
	case "grpc-tcp":
		pl.GRPC = &config.GRPC{Target: w.addr}
	case "grpc-uds":
		pl.GRPC = &config.GRPC{UDS: w.addr}
	default:
		pl.UnixSocket = &config.UnixSocket{Path: w.addr, ReconnectAttempts: ptr(attempts), ReconnectDelay: secs(20 * time.Millisecond)}
	}
	return pl
}

var wireTransports = []string{"grpc-tcp", "grpc-uds", "unix-socket"}

// The sentinels are one: a transport's lost connection is the client's.
func TestWireErrConnLostIsClients(t *testing.T) {
	err := errors.Join(errors.New("x"), wireconn.ErrConnLost)
	if !errors.Is(err, ErrConnLost) {
		t.Fatal("wireconn.ErrConnLost does not match pluginclient.ErrConnLost")
	}
}

// Over each protobuf transport: the remote config is fetched and merged
// (local keys win), a hook runs, and a hook's modified payload comes back.
func TestWireConfigAndInvoke(t *testing.T) {
	for _, tr := range wireTransports {
		t.Run(tr, func(t *testing.T) {
			plug := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
			plug.SetConfig(pluginserver.Config{Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke}, Mode: "enforce", Priority: ptr(7)})
			w := startWire(t, tr, plug)
			local := w.plugin("guard", 3)
			local.OnError = config.OnErrorIgnore
			local.Hooks = []cpex.HookType{cpex.ToolPreInvoke}
			pool := newPool(t, []config.Plugin{local}, Options{})
			eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
			_, plugins := pool.Effective()
			g := plugins[0]
			if len(g.Hooks) != 1 || g.Hooks[0] != cpex.ToolPreInvoke || g.Mode != config.ModeSequential ||
				g.Priority == nil || *g.Priority != 7 || g.OnError != config.OnErrorIgnore {
				t.Errorf("merged = %+v", g)
			}
			if g.GRPC != local.GRPC || g.UnixSocket != local.UnixSocket {
				t.Errorf("merged transport = %+v / %+v, want the local one", g.GRPC, g.UnixSocket)
			}
			plug.SetFunc(func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return pluginserver.Modify("guard", map[string]any{"name": "echo", "args": map[string]any{"text": "[x]"}})
			})
			reply := mustInvoke(t, pool, "guard")
			var got struct {
				Name string            `json:"name"`
				Args map[string]string `json:"args"`
			}
			if err := json.Unmarshal(reply.Result.ModifiedPayload, &got); err != nil || got.Name != "echo" || got.Args["text"] != "[x]" {
				t.Errorf("modified payload %s (%v)", reply.Result.ModifiedPayload, err)
			}
			if n := len(plug.Calls()); n != 1 {
				t.Errorf("plugin ran %d times, want 1", n)
			}
		})
	}
}

// The restart scenario: the plugin server is killed and started again on
// the same address or socket, several times, under 20 concurrent callers;
// no call fails.
func TestWireRestartUnderLoad(t *testing.T) {
	const callers, restarts = 20, 3
	for _, tr := range wireTransports {
		t.Run(tr, func(t *testing.T) {
			w := startWire(t, tr, plugintest.NewScripted("guard", cpex.ToolPreInvoke))
			pool := newPool(t, []config.Plugin{w.plugin("guard", 10)}, Options{MaxReconnectDelay: 50 * time.Millisecond})
			mustInvoke(t, pool, "guard")
			var calls, failed atomic.Int64
			var firstErr atomic.Pointer[error]
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						calls.Add(1)
						if _, err := invoke(pool, "guard"); err != nil {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, &err)
						}
					}
				})
			}
			for range restarts {
				// At least 50 calls and 100 ms between restarts: a call is
				// attempted at most twice (one retry point), so two restarts
				// a few milliseconds apart, faster than any real process
				// restarts, could take both attempts of one call.
				before, since := calls.Load(), time.Now()
				eventually(t, "calls between restarts", func() bool { return calls.Load() > before+50 && time.Since(since) > 100*time.Millisecond })
				w.restart()
			}
			before := calls.Load()
			eventually(t, "calls after the last restart", func() bool { return calls.Load() > before+50 })
			close(stop)
			wg.Wait()
			if n := failed.Load(); n > 0 {
				t.Fatalf("%d of %d calls failed; first: %v", n, calls.Load(), *firstErr.Load())
			}
			t.Logf("%d calls, 0 failed, stats %+v", calls.Load(), pool.Stats("guard"))
		})
	}
}

// A plugin server gone for good: the client's circuit opens after its
// reconnect attempts and calls fail with ErrPluginDown (the executor then
// applies on_error); when the server comes back, the client recovers.
func TestWireDownForGood(t *testing.T) {
	for _, tr := range wireTransports {
		t.Run(tr, func(t *testing.T) {
			w := startWire(t, tr, plugintest.NewScripted("guard", cpex.ToolPreInvoke))
			pool := newPool(t, []config.Plugin{w.plugin("guard", 2)}, Options{PluginTimeout: 2 * time.Second, MaxReconnectDelay: 50 * time.Millisecond})
			mustInvoke(t, pool, "guard")
			w.kill()
			var err error
			for range 5 { // at most: the call that finds it gone, the rebuild attempts
				if _, err = invoke(pool, "guard"); errors.Is(err, ErrPluginDown) {
					break
				}
			}
			if !errors.Is(err, ErrPluginDown) {
				t.Fatalf("calls after kill end with %v, want ErrPluginDown", err)
			}
			eventually(t, "state down", func() bool { return pool.State("guard") == Down })
			w.start()
			eventually(t, "plugin back", func() bool {
				_, err := invoke(pool, "guard")
				return err == nil
			})
		})
	}
}

// Options.Slots (extproc.plugin_sessions) is the number of framed
// connections to a Unix-socket plugin, hence of its calls in flight.
func TestWireSocketConnectionsFollowSlots(t *testing.T) {
	const slots, callers = 2, 6
	plug := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	var inflight, peak atomic.Int64
	plug.SetFunc(func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // let the other callers pile up
		return pluginserver.Continue("guard"), nil
	})
	w := startWire(t, "unix-socket", plug)
	pool := newPool(t, []config.Plugin{w.plugin("guard", 3)}, Options{Slots: slots})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range 5 {
				if _, err := invoke(pool, "guard"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > slots {
		t.Errorf("peak calls in flight = %d, want at most %d (one per connection)", p, slots)
	}
}

// Health checks run over the protobuf transports (cpex.Health/Check on
// gRPC, a config listing on the Unix socket): they pass while the server
// is up, fail while it is gone, and pass again once it is back.
func TestWireHealthCheck(t *testing.T) {
	for _, tr := range wireTransports {
		t.Run(tr, func(t *testing.T) {
			w := startWire(t, tr, plugintest.NewScripted("guard", cpex.ToolPreInvoke))
			rec := &recorder{}
			pool := newPool(t, []config.Plugin{w.plugin("guard", 10)}, Options{HealthCheckInterval: 20 * time.Millisecond, Observer: rec})
			eventually(t, "a passing health check", func() bool { return rec.healthOK.Load() > 0 })
			w.kill()
			eventually(t, "a failing health check", func() bool { return rec.healthFailed.Load() > 0 })
			w.start()
			ok := rec.healthOK.Load()
			eventually(t, "health checks passing again", func() bool { return rec.healthOK.Load() > ok })
			mustInvoke(t, pool, "guard")
		})
	}
}

// The headers the processor attaches to plugin calls (trace context,
// request id) travel as gRPC metadata; gRPC's own names are left alone.
func TestWireHeadersAsMetadata(t *testing.T) {
	for _, tr := range []string{"grpc-tcp", "grpc-uds"} {
		t.Run(tr, func(t *testing.T) {
			w := startWire(t, tr, plugintest.NewScripted("guard", cpex.ToolPreInvoke))
			pool := newPool(t, []config.Plugin{w.plugin("guard", 3)}, Options{})
			ctx := WithHeaders(context.Background(), http.Header{"Traceparent": {"00-abc-def-01"}, "X-Request-Id": {"r-7"}, "Content-Type": {"text/plain"}})
			if _, err := pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, testContext("r-7")); err != nil {
				t.Fatal(err)
			}
			md := *w.md.Load()
			if got := md.Get("traceparent"); len(got) != 1 || got[0] != "00-abc-def-01" {
				t.Errorf("traceparent = %v", got)
			}
			if got := md.Get("x-request-id"); len(got) != 1 || got[0] != "r-7" {
				t.Errorf("x-request-id = %v", got)
			}
			if got := md.Get("content-type"); len(got) != 1 || got[0] != "application/grpc" {
				t.Errorf("content-type = %v, want gRPC's own", got)
			}
		})
	}
}
