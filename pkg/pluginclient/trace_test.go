package pluginclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// traceCarriers says which carriers of the trace context a transport has.
type traceCarriers struct{ meta, header, metadata bool }

// traceServer is a real plugin server serving plugin "tracer", which
// records the trace context each call brought.
type traceServer struct {
	name     string
	carriers traceCarriers
	// goHook says received reports the span context the Go hook ran under.
	goHook bool
	// start starts the server; received returns what each call carried,
	// oldest first, and, where the server is Go, the span context the
	// hook ran under (else invalid).
	start func(t *testing.T) (pl config.Plugin, received func() []receivedTrace)
}

type receivedTrace struct {
	pluginserver.CallTrace
	parent trace.SpanContext
}

// fromScripted reads what a plugintest.Scripted recorded.
func fromScripted(p *plugintest.Scripted) func() []receivedTrace {
	return func() []receivedTrace {
		var out []receivedTrace
		for _, c := range p.Calls() {
			out = append(out, receivedTrace{c.Trace, c.Parent})
		}
		return out
	}
}

// postHeaders records the trace headers of the POSTs of invoke_hook calls,
// for a server whose tools do not see HTTP headers (the go-sdk's legacy
// SSE handler).
type postHeaders struct {
	mu  sync.Mutex
	got []pluginserver.TraceContext
}

func (p *postHeaders) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(cpex.ToolInvokeHook)) {
				p.mu.Lock()
				p.got = append(p.got, pluginserver.TraceContext{Traceparent: r.Header.Get("Traceparent"), Tracestate: r.Header.Get("Tracestate")})
				p.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (p *postHeaders) all() []pluginserver.TraceContext {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pluginserver.TraceContext(nil), p.got...)
}

func traceServers() []traceServer {
	return []traceServer{
		{"streamable-http", traceCarriers{meta: true, header: true}, true, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
			srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, p)
			return external("tracer", srv.URL()), fromScripted(p)
		}},
		{"stateless-2026-07-28", traceCarriers{meta: true, header: true}, true, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
			srv := plugintest.StartPlugins(t, plugintest.GoSDK, &pluginserver.Options{Stateless: true}, p)
			t.Cleanup(func() {
				if n := srv.Initializes(); n != 0 {
					t.Errorf("%d initializes: the stateless server was not used statelessly", n)
				}
			})
			return external("tracer", srv.URL()), fromScripted(p)
		}},
		{"sse", traceCarriers{meta: true, header: true}, true, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
			ps := pluginserver.New(p)
			var headers postHeaders
			ts := httptest.NewServer(headers.wrap(ps.SSEHandler()))
			t.Cleanup(func() { ps.Close(); ts.CloseClientConnections(); ts.Close() })
			pl := config.Plugin{Name: "tracer", Kind: config.KindExternal, MCP: &config.MCP{Proto: config.ProtoSSE, URL: ts.URL + "/sse"}}
			return pl, func() []receivedTrace {
				// The go-sdk's SSE handler does not hand headers to
				// tools: take them from the POSTs.
				out, hs := fromScripted(p)(), headers.all()
				for i := range out {
					if i < len(hs) {
						out[i].Header = hs[i]
					}
				}
				return out
			}
		}},
		{"stdio", traceCarriers{meta: true}, false, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			file := filepath.Join(t.TempDir(), "traces")
			pl, _ := newStdioRig(t, "tracer", map[string]string{stdioTracesEnv: file})
			return pl, func() []receivedTrace {
				var out []receivedTrace
				for _, line := range readLines(t, file) {
					var ct pluginserver.CallTrace
					if err := json.Unmarshal([]byte(line), &ct); err != nil {
						t.Fatalf("trace line %q: %v", line, err)
					}
					out = append(out, receivedTrace{CallTrace: ct})
				}
				return out
			}
		}},
		{"typescript-sdk", traceCarriers{meta: true, header: true}, false, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			srv := plugintest.StartNode(t, nodeplugin.Options{Policy: `{"plugins":[{"name":"tracer","hooks":["tool_pre_invoke"]}]}`})
			return external("tracer", srv.URL()), func() []receivedTrace {
				var out []receivedTrace
				for _, tr := range srv.Traces() {
					out = append(out, receivedTrace{CallTrace: pluginserver.CallTrace{
						Meta:   pluginserver.TraceContext(tr.Meta),
						Header: pluginserver.TraceContext(tr.Header),
					}})
				}
				return out
			}
		}},
		{"grpc", traceCarriers{metadata: true}, true, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
			w := startWire(t, "grpc-tcp", p)
			return w.plugin("tracer", 3), fromScripted(p)
		}},
		// cpex's Unix-socket frames hold the request message alone: no
		// carrier for a trace context (see unixconn).
		{"unix-socket", traceCarriers{}, true, func(t *testing.T) (config.Plugin, func() []receivedTrace) {
			p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
			w := startWire(t, "unix-socket", p)
			return w.plugin("tracer", 3), fromScripted(p)
		}},
	}
}

// traceCall is a context a plugin call is made under and the trace context
// the plugin must receive.
type traceCall struct {
	name                string
	ctx                 context.Context
	traceparent, state  string
	parentSpan, traceID string // of the span context the Go hook must run under
}

// traceCalls are: no trace context; a remote parent with no span recording
// (a sidecar without a tracer provider), under headers whose traceparent
// is stale; a recording client span, whose id must be the parent.
func traceCalls(t *testing.T) []traceCall {
	const (
		remoteTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		remoteSpan  = "00f067aa0ba902b7"
		spanTrace   = "0af7651916cd43dd8448eb211c80319c"
	)
	remote := func(traceID, spanID, state string) context.Context {
		tid, _ := trace.TraceIDFromHex(traceID)
		sid, _ := trace.SpanIDFromHex(spanID)
		ts, err := trace.ParseTraceState(state)
		if err != nil {
			t.Fatal(err)
		}
		return trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
		}))
	}
	stale := WithHeaders(remote(remoteTrace, remoteSpan, "vendor=opaque"), http.Header{
		"Traceparent":  {"00-11111111111111111111111111111111-2222222222222222-01"},
		"Tracestate":   {"stale=1"},
		"X-Request-Id": {"req-1"},
	})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	spanCtx, span := tp.Tracer("test").Start(remote(spanTrace, "b7ad6b7169203331", ""), "invoke", trace.WithSpanKind(trace.SpanKindClient))
	t.Cleanup(func() { span.End() })
	if !span.IsRecording() {
		t.Fatal("the client span does not record")
	}
	sid := span.SpanContext().SpanID().String()
	return []traceCall{
		{name: "none", ctx: context.Background()},
		{"remote parent, no span recording", stale, fmt.Sprintf("00-%s-%s-01", remoteTrace, remoteSpan), "vendor=opaque", remoteSpan, remoteTrace},
		{"client span", spanCtx, fmt.Sprintf("00-%s-%s-01", spanTrace, sid), "", sid, spanTrace},
	}
}

// TestTraceContextReachesPlugin: on every transport, a call made under a
// context carrying a span context reaches the real plugin server with that
// trace context — the current span's id as the parent — in each carrier the
// transport has (MCP: params._meta and, over HTTP, the headers; gRPC:
// metadata), and nothing in those it has not. The Go server runs the hook
// under that parent.
func TestTraceContextReachesPlugin(t *testing.T) {
	for _, srv := range traceServers() {
		t.Run(srv.name, func(t *testing.T) {
			pl, received := srv.start(t)
			pool := newPool(t, []config.Plugin{pl}, Options{PluginTimeout: 20 * time.Second})
			eventually(t, "ready", func() bool { return pool.State("tracer") == Ready })
			for i, call := range traceCalls(t) {
				ctx, cancel := context.WithTimeout(call.ctx, 10*time.Second)
				reply, err := pool.Invoke(ctx, "tracer", cpex.ToolPreInvoke, testPayload, testContext("req-1"))
				cancel()
				if err != nil || reply.Result == nil {
					t.Fatalf("%s: Invoke = %+v, %v", call.name, reply, err)
				}
				got := received()
				if len(got) != i+1 {
					t.Fatalf("%s: server recorded %d calls, want %d", call.name, len(got), i+1)
				}
				last := got[i]
				want := pluginserver.TraceContext{Traceparent: call.traceparent, Tracestate: call.state}
				for _, c := range []struct {
					carrier string
					has     bool
					got     pluginserver.TraceContext
				}{
					{"_meta", srv.carriers.meta, last.Meta},
					{"HTTP header", srv.carriers.header, last.Header},
					{"gRPC metadata", srv.carriers.metadata, last.Metadata},
				} {
					w := want
					if !c.has {
						w = pluginserver.TraceContext{}
					}
					if c.got != w {
						t.Errorf("%s: %s carried %+v, want %+v", call.name, c.carrier, c.got, w)
					}
				}
				if !srv.goHook {
					continue
				}
				if call.traceID == "" || srv.carriers == (traceCarriers{}) {
					if last.parent.IsValid() {
						t.Errorf("%s: hook ran under %v, want no span context (none carried)", call.name, last.parent)
					}
					continue
				}
				if last.parent.TraceID().String() != call.traceID || last.parent.SpanID().String() != call.parentSpan || !last.parent.IsRemote() {
					t.Errorf("%s: hook ran under %s/%s (remote %v), want remote parent %s/%s", call.name,
						last.parent.TraceID(), last.parent.SpanID(), last.parent.IsRemote(), call.traceID, call.parentSpan)
				}
			}
		})
	}
}

// Over HTTP the trace headers are the current span's, not the caller's
// stale ones, and the caller's other headers go on.
func TestTraceHeadersReplaceStaleOnes(t *testing.T) {
	p := plugintest.NewScripted("tracer", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, p)
	pool := newPool(t, []config.Plugin{external("tracer", srv.URL())}, Options{})
	eventually(t, "ready", func() bool { return pool.State("tracer") == Ready })
	calls := traceCalls(t)
	ctx, cancel := context.WithTimeout(calls[1].ctx, 10*time.Second)
	defer cancel()
	if _, err := pool.Invoke(ctx, "tracer", cpex.ToolPreInvoke, testPayload, testContext("req-1")); err != nil {
		t.Fatal(err)
	}
	r, ok := srv.LastToolCall(cpex.ToolInvokeHook)
	if !ok {
		t.Fatal("no invoke_hook reached the server")
	}
	if r.Header.Values("Traceparent")[0] != calls[1].traceparent || len(r.Header.Values("Traceparent")) != 1 ||
		r.Header.Get("Tracestate") != calls[1].state || r.Header.Get("X-Request-Id") != "req-1" {
		t.Errorf("headers traceparent %q tracestate %q x-request-id %q; want %q, %q, req-1",
			r.Header.Values("Traceparent"), r.Header.Get("Tracestate"), r.Header.Get("X-Request-Id"), calls[1].traceparent, calls[1].state)
	}
	if strings.Contains(fmt.Sprint(r.Header), "stale") {
		t.Errorf("a stale trace header reached the plugin: %v", r.Header)
	}
}
