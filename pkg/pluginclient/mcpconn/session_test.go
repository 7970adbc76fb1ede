package mcpconn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func testClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "mcpconn-test", Version: "0"},
		&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
}

// burst makes calls invoke_hook calls and two pings on s, failing t on any
// error.
func burst(t *testing.T, s *Session, plugin string, calls int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payload := json.RawMessage(`{"name":"echo","args":{"text":"hello"}}`)
	for i := range calls {
		reply, err := s.InvokeHook(ctx, cpex.ToolPreInvoke, plugin, payload, cpex.NewContext(cpex.GlobalContext{RequestID: "r"}))
		if err != nil || reply.Result == nil {
			t.Fatalf("call %d: reply %+v, error %v", i, reply, err)
		}
		if i%3 == 0 {
			if err := s.Health(ctx); err != nil {
				t.Fatalf("ping after call %d: %v", i, err)
			}
		}
	}
}

// A session keeps one connection for a burst of calls whatever the Go
// server's framing, and survives Connection: close on every answer.
func TestSessionAcrossFramings(t *testing.T) {
	for _, tc := range plugintest.HabitMatrix() {
		t.Run(tc.Name, func(t *testing.T) {
			plug := plugintest.NewScripted("guard")
			srv := plugintest.Start(t, pluginserver.NewWithOptions(&pluginserver.Options{}, plug).Handler,
				plugintest.GoSDK, plugintest.WithHabits(tc.Habits))
			s := dialTest(t, srv.URL())
			burst(t, s, "guard", 10)
			if n := srv.Initializes(); n != 1 {
				t.Errorf("%d initializes, want 1", n)
			}
			if n := srv.Connections(); tc.Reused && n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
			if n := srv.Connections(); !tc.Reused && n < 10 {
				t.Errorf("%d connections with Connection: close, want one per request", n)
			}
		})
	}
}

// The real Node.js server (TypeScript SDK): its empty chunked 202 to
// notifications/initialized does not cost the session its connection.
func TestSessionNodeOneConnection(t *testing.T) {
	srv := plugintest.StartNode(t, nodeplugin.Options{})
	s := dialTest(t, srv.URL())
	burst(t, s, "TSGuard", 10)
	st := srv.Totals()
	if st.Initializes != 1 || st.Invokes != 10 || st.Connections != 1 {
		t.Errorf("node saw %+v, want 1 initialize, 10 invokes, 1 connection", st)
	}
}

// When the server closes the idle connection (keep-alive timeout), the
// session goes on over a new one: no error, no initialize.
func TestSessionOutlivesIdleConnection(t *testing.T) {
	const keepAlive = 150 * time.Millisecond
	t.Run("go", func(t *testing.T) {
		plug := plugintest.NewScripted("guard")
		srv := plugintest.Start(t, pluginserver.NewWithOptions(&pluginserver.Options{}, plug).Handler,
			plugintest.GoSDK, plugintest.WithHabits(plugintest.Habits{ChunkedEmpty202: true, IdleTimeout: keepAlive}))
		s := dialTest(t, srv.URL())
		for range 3 {
			burst(t, s, "guard", 3)
			time.Sleep(4 * keepAlive)
		}
		if n, c := srv.Initializes(), srv.Connections(); n != 1 || c != 3 {
			t.Errorf("%d initializes and %d connections, want 1 and one per burst (3)", n, c)
		}
	})
	t.Run("node", func(t *testing.T) {
		// Node's idle timer ticks in whole seconds: 1 s is its shortest.
		const nodeKeepAlive = time.Second
		srv := plugintest.StartNode(t, nodeplugin.Options{KeepAlive: nodeKeepAlive})
		s := dialTest(t, srv.URL())
		for range 2 {
			burst(t, s, "TSGuard", 3)
			time.Sleep(5 * nodeKeepAlive / 2)
		}
		if st := srv.Totals(); st.Initializes != 1 || st.Connections != 2 {
			t.Errorf("node saw %+v, want 1 initialize and one connection per burst (2)", st)
		}
	})
}
