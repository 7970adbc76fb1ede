package wireconn_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/grpcconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/unixconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// transport starts a real plugin server on loopback and dials it.
type transport struct {
	name string
	// listen starts srv on addr ("" picks one) and returns the address and
	// a function that kills the server (connections cut, no drain).
	listen func(t testing.TB, srv *pluginserver.Server, addr string) (string, func())
	// dial connects to addr; patient gives a reconnect budget that covers
	// a restart on a loaded machine, else the defaults (fail fast).
	dial func(t testing.TB, addr string, patient bool) wireconn.Conn
}

func transports(t testing.TB) []transport {
	dir := t.TempDir()
	grpcListen := func(network string) func(testing.TB, *pluginserver.Server, string) (string, func()) {
		return func(t testing.TB, srv *pluginserver.Server, addr string) (string, func()) {
			var l net.Listener
			var err error
			switch {
			case network == "unix":
				if addr == "" {
					addr = filepath.Join(dir, "grpc.sock")
				}
				l, err = pluginserver.ListenUnix(addr)
			case addr == "":
				l, err = net.Listen("tcp", "127.0.0.1:0")
			default:
				l, err = net.Listen("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer()
			srv.RegisterGRPC(g)
			done := make(chan struct{})
			go func() { defer close(done); _ = g.Serve(l) }()
			return l.Addr().String(), func() { g.Stop(); <-done }
		}
	}
	grpcDial := func(unix bool) func(testing.TB, string, bool) wireconn.Conn {
		return func(t testing.TB, addr string, patient bool) wireconn.Conn {
			target := grpcconn.Target(addr, "")
			if unix {
				target = grpcconn.Target("", addr)
			}
			c, err := grpcconn.New(target, grpcconn.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	return []transport{
		{name: "grpc-tcp", listen: grpcListen("tcp"), dial: grpcDial(false)},
		{name: "grpc-uds", listen: grpcListen("unix"), dial: grpcDial(true)},
		{name: "unix-socket",
			listen: func(t testing.TB, srv *pluginserver.Server, addr string) (string, func()) {
				if addr == "" {
					addr = filepath.Join(dir, "plugin.sock")
				}
				l, err := pluginserver.ListenUnix(addr)
				if err != nil {
					t.Fatal(err)
				}
				u := srv.NewSocketServer(0)
				done := make(chan struct{})
				go func() { defer close(done); _ = u.Serve(l) }()
				return addr, func() { _ = u.Close(); <-done }
			},
			dial: func(t testing.TB, addr string, patient bool) wireconn.Conn {
				if patient { // 8 attempts over 2.5 s
					return unixconn.New(addr, unixconn.Options{ReconnectAttempts: 8, ReconnectDelay: 20 * time.Millisecond})
				}
				return unixconn.New(addr, unixconn.Options{})
			}},
	}
}

func testPlugins() *pluginserver.Server {
	code := -32602
	return pluginserver.New(
		pluginserver.Func(pluginserver.Config{Name: "allow", Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
			func(_ context.Context, _ cpex.HookType, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				r := pluginserver.Continue("allow")
				pctx.State["seen"] = true
				r.Context = pctx
				return r, nil
			}),
		pluginserver.Func(pluginserver.Config{Name: "deny"}, func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			return pluginserver.Block("deny", cpex.PluginViolation{Reason: "denied", Description: "d", Code: "DENY", MCPErrorCode: &code}), nil
		}),
		pluginserver.Func(pluginserver.Config{Name: "redact"}, func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			var p cpex.ToolPreInvokePayload
			if err := json.Unmarshal(payload, &p); err != nil {
				return nil, err
			}
			p.Args = json.RawMessage(`{"text":"[REDACTED]","n":3}`)
			return pluginserver.Modify("redact", p)
		}),
		pluginserver.Func(pluginserver.Config{Name: "broken"}, func(context.Context, cpex.HookType, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			return nil, &pluginserver.Error{Model: cpex.PluginErrorModel{Message: "boom", Code: "BOOM"}}
		}),
		pluginserver.Func(pluginserver.Config{Name: "slow"}, func(ctx context.Context, _ cpex.HookType, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}),
	)
}

var payload = json.RawMessage(`{"name":"echo","args":{"text":"secret","n":3}}`)

func pctx() *cpex.PluginContext { return cpex.NewContext(cpex.GlobalContext{RequestID: "r1"}) }

func TestTransports(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			addr, stop := tr.listen(t, testPlugins(), "")
			defer stop()
			c := tr.dial(t, addr, false)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			checkCalls(ctx, t, c)
		})
	}
}

func checkCalls(ctx context.Context, t *testing.T, c wireconn.Conn) {
	t.Helper()
	if err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	raw, found, err := c.PluginConfig(ctx, "ALLOW")
	var cfg map[string]any
	if err != nil || !found || json.Unmarshal(raw, &cfg) != nil || cfg["name"] != "allow" || cfg["priority"] != 100.0 {
		t.Errorf("config of ALLOW = %s, %v, %v", raw, found, err)
	}
	if raw, found, err := c.PluginConfig(ctx, "nope"); err != nil || found || raw != nil {
		t.Errorf("config of an unknown plugin = %s, %v, %v", raw, found, err)
	}

	r := invoke(ctx, t, c, "allow")
	if r.Result == nil || !r.Result.Continue() || r.Error != nil || r.Context == nil || r.Context.State["seen"] != true || r.Context.GlobalContext.RequestID != "r1" {
		t.Errorf("allow: %+v", r)
	}
	r = invoke(ctx, t, c, "deny")
	if v := r.Result.Violation; r.Result.Continue() || v == nil || v.Reason != "denied" || v.Code != "DENY" || v.MCPErrorCode == nil || *v.MCPErrorCode != -32602 || v.PluginName != "deny" {
		t.Errorf("deny: %+v / %+v", r.Result, r.Result.Violation)
	}
	r = invoke(ctx, t, c, "redact")
	var mod cpex.ToolPreInvokePayload
	if !r.Result.Modified() || json.Unmarshal(r.Result.ModifiedPayload, &mod) != nil || string(mod.Args) != `{"n":3,"text":"[REDACTED]"}` && string(mod.Args) != `{"text":"[REDACTED]","n":3}` {
		t.Errorf("redact: modified payload %s", r.Result.ModifiedPayload)
	}
	r = invoke(ctx, t, c, "broken")
	if r.Result != nil || r.Error == nil || r.Error.Code != "BOOM" || r.Error.Message != "boom" || r.Error.PluginName != "broken" {
		t.Errorf("broken: %+v", r.Error)
	}
	r = invoke(ctx, t, c, "ghost")
	if r.Error == nil || r.Error.Code != pluginserver.CodeUnknownPlugin {
		t.Errorf("unknown plugin: %+v", r)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.InvokeHook(short, cpex.ToolPreInvoke, "slow", payload, pctx()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow plugin: %v, want a deadline error", err)
	}
	// The timed-out call's connection must not carry another call (its late
	// reply would answer it): the next calls go round every pooled
	// connection of the Unix socket, the one of that call included.
	for range unixconn.DefaultPoolSize {
		if r := invoke(ctx, t, c, "allow"); !r.Result.Continue() {
			t.Errorf("after a timeout: %+v", r)
		}
	}
}

func invoke(ctx context.Context, t *testing.T, c wireconn.Conn, plugin string) *cpex.InvokeHookReply {
	t.Helper()
	r, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, plugin, payload, pctx())
	if err != nil {
		t.Fatalf("invoke %s: %v", plugin, err)
	}
	if r.PluginName != plugin {
		t.Errorf("reply names plugin %q, want %q", r.PluginName, plugin)
	}
	return r
}

// TestRestart kills the plugin server under 20 concurrent callers and
// starts a new one on the same address: a transport never retries, so a
// call across the restart either succeeds or fails as unanswered (the
// plugin client's to retry, once); none fails otherwise, and calls on the
// same Conn succeed again once the new server is up.
func TestRestart(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			addr, stop := tr.listen(t, testPlugins(), "")
			c := tr.dial(t, addr, true)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			var ok, failed, noAnswer atomic.Int64
			var firstErr atomic.Value
			quit := make(chan struct{})
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-quit:
							return
						default:
						}
						_, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "allow", payload, pctx())
						switch {
						case unanswered(err):
							noAnswer.Add(1) // the client's to retry, once
						case err != nil:
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err)
						default:
							ok.Add(1)
						}
					}
				}()
			}
			waitFor(t, func() bool { return ok.Load() >= 200 })
			stop()
			_, stop = tr.listen(t, testPlugins(), addr)
			before := ok.Load()
			waitFor(t, func() bool { return ok.Load() >= before+200 })
			close(quit)
			wg.Wait()
			stop()
			t.Logf("%s: %d calls ok, %d unanswered, %d failed otherwise across the restart", tr.name, ok.Load(), noAnswer.Load(), failed.Load())
			if n := failed.Load(); n != 0 {
				t.Errorf("%d calls failed across the restart with an error the client does not retry; first: %v", n, firstErr.Load())
			}
		})
	}
}

// TestServerGone: with no server at all, calls and the health probe fail
// as unanswered (ErrNoAnswer or ErrConnLost, which the client retries
// once) before their deadline (not with a deadline error).
func TestServerGone(t *testing.T) {
	for _, tr := range transports(t) {
		t.Run(tr.name, func(t *testing.T) {
			addr, stop := tr.listen(t, testPlugins(), "")
			c := tr.dial(t, addr, false)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			invoke(ctx, t, c, "allow")
			stop()
			_, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "allow", payload, pctx())
			if !unanswered(err) {
				t.Fatalf("server gone: %v, want ErrNoAnswer or ErrConnLost", err)
			}
			if err := c.Health(ctx); !unanswered(err) {
				t.Errorf("health with the server gone: %v", err)
			}
			c.Close()
			if _, err := c.InvokeHook(ctx, cpex.ToolPreInvoke, "allow", payload, pctx()); !errors.Is(err, wireconn.ErrClosed) {
				t.Errorf("after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 15 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unanswered reports whether err is one the plugin client retries: the
// call got no answer, or the connection is gone.
func unanswered(err error) bool {
	return errors.Is(err, wireconn.ErrNoAnswer) || errors.Is(err, wireconn.ErrConnLost)
}
