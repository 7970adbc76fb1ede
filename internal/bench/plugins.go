package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/mcpconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// PluginServer is a plugin server (pkg/pluginserver, Streamable HTTP,
// answering over SSE like Python servers) on loopback.
type PluginServer struct {
	// URL is the MCP endpoint.
	URL string

	calls atomic.Int64
	ps    *pluginserver.Server
	srv   *http.Server
	done  chan struct{}
}

// Calls returns how many invoke_hook calls reached the plugin.
func (s *PluginServer) Calls() int64 { return s.calls.Load() }

// StartPlugin serves p at http://127.0.0.1:PORT/mcp.
func StartPlugin(p pluginserver.Plugin) (*PluginServer, error) {
	s := &PluginServer{done: make(chan struct{})}
	s.ps = pluginserver.New(&counting{Plugin: p, calls: &s.calls})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.ps.Handler())
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.URL = "http://" + lis.Addr().String() + "/mcp"
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(lis) // returns ErrServerClosed on Close
	}()
	return s, nil
}

// Close stops the server and its sessions.
func (s *PluginServer) Close() error {
	err := s.ps.Close()
	err = errors.Join(err, s.srv.Close())
	<-s.done
	return err
}

// counting counts the invocations of a plugin.
type counting struct {
	pluginserver.Plugin
	calls *atomic.Int64
}

func (c *counting) InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	c.calls.Add(1)
	return c.Plugin.InvokeHook(ctx, hook, payload, pctx)
}

// DelayPlugin is a plugin that waits delay (0: not at all) on every hook and
// then lets the message continue unchanged, without reading the payload.
func DelayPlugin(name string, delay time.Duration, hooks ...cpex.HookType) pluginserver.Plugin {
	return pluginserver.Func(pluginserver.Config{Name: name, Hooks: hooks}, func(ctx context.Context, _ cpex.HookType, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return pluginserver.Continue(name), nil
	})
}

// Direct calls invoke_hook on one plugin with the go-sdk client (one
// Streamable HTTP session, pinned protocol version, no standalone SSE
// stream, keep-alive connections), without any of the sidecar: the
// baselines' plugin time. DialSession makes one that calls through the
// sidecar's own plugin session (mcpconn) instead.
type Direct struct {
	name string
	cs   *mcp.ClientSession
	tr   *http.Transport
	sess *mcpconn.Session // non-nil: calls go through it
}

// DialSession opens an mcpconn session (the sidecar's MCP plugin session,
// whose invoke_hook is one POST it reads itself) to the plugin server at
// url for plugin name.
func DialSession(ctx context.Context, url, name string) (*Direct, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := mcpconn.Dial(ctx, mcpconn.Config{URL: url, Client: benchClient(), Template: http.DefaultTransport.(*http.Transport).Clone()})
	if err != nil {
		return nil, err
	}
	return &Direct{name: name, sess: sess}, nil
}

// DialDirect opens a session to the plugin server at url for plugin name.
func DialDirect(ctx context.Context, url, name string) (*Direct, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	client := benchClient()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: tr},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("connect %s: %w", url, err)
	}
	return &Direct{name: name, cs: cs, tr: tr}, nil
}

// benchClient is the MCP client the direct calls are made with.
func benchClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "mcp-extproc-bench", Version: "0.1.0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
}

// Invoke calls invoke_hook and decodes the reply; a reply without a result
// is an error.
func (d *Direct) Invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if d.sess != nil {
		reply, err := d.sess.InvokeHook(ctx, hook, d.name, payload, pctx)
		if err != nil {
			return nil, fmt.Errorf("invoke_hook %s: %w", d.name, err)
		}
		if reply.Result == nil {
			return nil, fmt.Errorf("invoke_hook %s: reply without result", d.name)
		}
		return reply, nil
	}
	res, err := d.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      cpex.ToolInvokeHook,
		Arguments: cpex.InvokeHookArgs{HookType: hook, PluginName: d.name, Payload: payload, Context: pctx},
	})
	if err != nil {
		return nil, fmt.Errorf("invoke_hook %s: %w", d.name, err)
	}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && !res.IsError {
			var reply cpex.InvokeHookReply
			if err := json.Unmarshal([]byte(tc.Text), &reply); err != nil {
				return nil, fmt.Errorf("invoke_hook %s: decode reply: %w", d.name, err)
			}
			if reply.Result == nil {
				return nil, fmt.Errorf("invoke_hook %s: reply without result", d.name)
			}
			return &reply, nil
		}
	}
	return nil, fmt.Errorf("invoke_hook %s: no text reply", d.name)
}

// Close ends the session.
func (d *Direct) Close() error {
	if d.sess != nil {
		return d.sess.Close()
	}
	err := d.cs.Close()
	d.tr.CloseIdleConnections()
	return err
}
