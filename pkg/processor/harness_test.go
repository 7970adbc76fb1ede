package processor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.IgnoreDialProbe()) }

// The acceptance tests run the real pipeline: the strict fake Envoy
// (internal/envoytest) over gRPC → processor → executor → plugin pool →
// real plugin servers on loopback (internal/plugintest).

// messageTimeout is Envoy's message_timeout in the tests: far above every
// hook deadline the tests configure, so a processor that waits too long shows
// up as the fake's 504, never as a slow pass.
const messageTimeout = 20 * time.Second

// harness is one sidecar (pool, executor, processor) wired to plugin servers
// on loopback and driven by a fake Envoy.
type harness struct {
	t      *testing.T
	cfg    *config.Config
	filter envoytest.Filter
	server *plugintest.Server
	pool   *pluginclient.Pool
}

// newHarness serves plugins on a loopback plugin server, loads yaml (a cpex
// config; ${PLUGIN_URL} is that server's URL), starts the plugin pool,
// waits until every plugin is Ready, and serves the processor to a fake
// Envoy with allow_mode_override. Everything stops in t.Cleanup.
func newHarness(t *testing.T, yaml string, plugins ...pluginserver.Plugin) *harness {
	t.Helper()
	return newHarnessWith(t, yaml, harnessOptions{}, plugins...)
}

// harnessOptions change the harness: the plugin server's options and the
// processor's.
type harnessOptions struct {
	server []plugintest.Option
	proc   func(*processor.Options)
	// url, if set, is ${PLUGIN_URL}: a plugin server the test started
	// itself (the TypeScript SDK one); no Go plugin server is started.
	url string
	// pinStore holds the tool pins (extproc.tool_pinning); nil: one in
	// memory for this harness.
	pinStore toolpin.Store
}

// harnessPins is extproc.tool_pinning of a test's config, as the sidecar
// builds it.
func harnessPins(cfg *config.ToolPinning, store toolpin.Store) (*toolpin.Pinner, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	if store == nil {
		store = toolpin.NewMemory(0, 0, nil)
	}
	var snap *toolpin.Snapshot
	if cfg.Mode == config.PinningApproved {
		var err error
		if snap, err = toolpin.LoadSnapshot(cfg.Snapshot); err != nil {
			return nil, err
		}
	}
	return toolpin.New(toolpin.Mode(cfg.Mode), toolpin.OnChange(cfg.OnChange), snap, store)
}

func newHarnessWith(t *testing.T, yaml string, ho harnessOptions, plugins ...pluginserver.Plugin) *harness {
	t.Helper()
	url := ho.url
	var srv *plugintest.Server
	if url == "" {
		ps := pluginserver.NewWithOptions(nil, plugins...)
		srv = plugintest.Start(t, ps.Handler, plugintest.GoSDK, ho.server...)
		url = srv.URL()
	}
	cfg, err := config.Parse([]byte(yaml), func(k string) (string, bool) {
		if k == "PLUGIN_URL" {
			return url, true
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	pool, err := pluginclient.NewPool(cfg.Plugins, cfg.PluginSettings, pluginclient.Options{
		HealthCheckInterval: -1,
		PluginTimeout:       cfg.PluginSettings.Timeout(),
		Slots:               cfg.Extproc.PluginSessions, // as the sidecar builds its clients
	})
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	poolCtx, stopPool := context.WithCancel(context.Background())
	pool.Start(poolCtx)
	exec := executor.New(pool, executor.Options{
		Settings:    cfg.PluginSettings,
		HookTimeout: cfg.HookTimeout(),
		IsDown:      func(err error) bool { return errors.Is(err, pluginclient.ErrPluginDown) },
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := exec.Close(ctx); err != nil {
			t.Errorf("executor close: %v", err)
		}
		if err := pool.Close(ctx); err != nil {
			t.Errorf("pool close: %v", err)
		}
		stopPool()
	})
	waitReady(t, pool, cfg)
	ident, err := identity.New(cfg.Extproc.Identity)
	if err != nil {
		t.Fatalf("identity: %v", err)
	}
	ruleSet, issues := rules.Compile(cfg.Extproc.Rules, rules.Options{})
	if len(issues) > 0 {
		t.Fatalf("rules: %v", issues)
	}
	pins, err := harnessPins(&cfg.Extproc.ToolPinning, ho.pinStore)
	if err != nil {
		t.Fatalf("tool pinning: %v", err)
	}
	snap := &processor.Snapshot{Settings: &cfg.Extproc, Hooks: exec, Identity: ident, Rules: ruleSet, Pins: pins}
	popts := processor.Options{Snapshot: func() *processor.Snapshot { return snap }, WithHeaders: pluginclient.WithHeaders}
	if ho.proc != nil {
		ho.proc(&popts)
	}
	proc := processor.New(popts)
	return &harness{
		t:      t,
		cfg:    cfg,
		server: srv,
		pool:   pool,
		filter: envoytest.Filter{
			Client:            serve(t, proc),
			AllowModeOverride: true,
			MessageTimeout:    messageTimeout,
			// As the shipped Envoy config (envoy/envoy.yaml): a mutation
			// Envoy refuses is a 500, never silently dropped.
			DisallowIsError: true,
		},
	}
}

func waitReady(t *testing.T, pool *pluginclient.Pool, cfg *config.Config) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range cfg.Plugins {
		for pool.State(p.Name) != pluginclient.Ready {
			if time.Now().After(deadline) {
				t.Fatalf("plugin %s not ready: %v", p.Name, pool.State(p.Name))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// do runs one exchange and fails the test on anything the fake Envoy (as
// Envoy) would report as an error: every message must get exactly one reply
// of the right kind, mutations must be valid, content-length must match.
func (h *harness) do(req *envoytest.Request, up envoytest.Upstream) *envoytest.Result {
	h.t.Helper()
	return doWith(h.t, &h.filter, req, up)
}

func doWith(t *testing.T, f *envoytest.Filter, req *envoytest.Request, up envoytest.Upstream) *envoytest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*messageTimeout)
	defer cancel()
	res, err := f.Do(ctx, req, up)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if res.LocalError != "" || res.Reset || res.StreamErr != nil {
		t.Fatalf("exchange failed as Envoy would fail it: %s (%s), reset %v, stream error %v; notes %q",
			res.LocalError, res.Details, res.Reset, res.StreamErr, res.Notes)
	}
	if len(res.Received) != len(res.Sent) {
		t.Fatalf("%d messages sent, %d replies", len(res.Sent), len(res.Received))
	}
	return res
}

// mcpPost is a POST of body to /mcp as an MCP client sends it, with its
// content-length (so the fake checks the length of a rewritten body) and
// extra headers given as name, value pairs.
func mcpPost(body string, kv ...string) *envoytest.Request {
	h := http.Header{
		"Content-Type":   {"application/json"},
		"Accept":         {"application/json, text/event-stream"},
		"Content-Length": {strconv.Itoa(len(body))},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &envoytest.Request{Method: http.MethodPost, Path: "/mcp", Authority: "mcp.example", Headers: h, Body: [][]byte{[]byte(body)}}
}

// jsonUpstream answers with a JSON body and its content-length.
func jsonUpstream(status int, body string) envoytest.Upstream {
	return func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		return &envoytest.UpstreamResponse{
			Status: status,
			Headers: http.Header{
				"Content-Type":   {"application/json"},
				"Content-Length": {strconv.Itoa(len(body))},
			},
			Body: [][]byte{[]byte(body)},
		}, nil
	}
}

// sseUpstream answers 200 text/event-stream with the given chunks.
func sseUpstream(chunks ...[]byte) envoytest.Upstream {
	return func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		return &envoytest.UpstreamResponse{
			Status:  http.StatusOK,
			Headers: http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}},
			Body:    chunks,
		}, nil
	}
}

// noUpstream fails the test if the request reaches the upstream.
func noUpstream(t *testing.T) envoytest.Upstream {
	return func(_ context.Context, r *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		t.Errorf("request reached the upstream: %s", r.Body)
		return &envoytest.UpstreamResponse{Status: http.StatusTeapot}, nil
	}
}

// recorded is a response recorded from a real MCP server (testdata/*.http,
// recorded from a real server, see testdata/README.md).
type recorded struct {
	status int
	header http.Header
	body   []byte
}

func loadHTTP(t *testing.T, name string) recorded {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	tp := textproto.NewReader(r)
	line, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	_, code, _ := strings.Cut(line, " ")
	status, err := strconv.Atoi(code[:3])
	if err != nil {
		t.Fatalf("%s: status line %q", name, line)
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("%s: headers: %v", name, err)
	}
	h := http.Header(mh)
	// Hop-by-hop headers do not reach Envoy's filter chain as such.
	h.Del("Transfer-Encoding")
	h.Del("Connection")
	var body bytes.Buffer
	if _, err := body.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return recorded{status: status, header: h, body: body.Bytes()}
}

// upstream answers with the recording, body cut into chunks.
func (rec recorded) upstream(chunks ...[]byte) envoytest.Upstream {
	return func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		return &envoytest.UpstreamResponse{Status: rec.status, Headers: rec.header.Clone(), Body: chunks}, nil
	}
}

// scripts for the Scripted plugins.

// onHook runs f for hook and continues every other hook.
func onHook(hook cpex.HookType, f pluginserver.HookFunc) pluginserver.HookFunc {
	return func(ctx context.Context, h cpex.HookType, p json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if h != hook {
			return nil, nil
		}
		return f(ctx, h, p, pctx)
	}
}

// replaceResult is a post hook script that replaces the result with result
// (raw JSON), keeping the rest of the payload.
func replaceResult(field, result string) pluginserver.HookFunc {
	return func(_ context.Context, _ cpex.HookType, p json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(p, &m); err != nil {
			return nil, err
		}
		m[field] = json.RawMessage(result)
		return pluginserver.Modify("", m)
	}
}

// bodyOf returns the body the processor put in a reply, or nil.
func bodyMutation(r *extprocv3.ProcessingResponse) *extprocv3.BodyMutation {
	switch v := r.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestBody:
		return v.RequestBody.GetResponse().GetBodyMutation()
	case *extprocv3.ProcessingResponse_ResponseBody:
		return v.ResponseBody.GetResponse().GetBodyMutation()
	}
	return nil
}

// kinds lists the oneof names of the messages Envoy sent.
func kinds(msgs []*extprocv3.ProcessingRequest) []string {
	var out []string
	for _, m := range msgs {
		switch m.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			out = append(out, "request_headers")
		case *extprocv3.ProcessingRequest_RequestBody:
			out = append(out, "request_body")
		case *extprocv3.ProcessingRequest_RequestTrailers:
			out = append(out, "request_trailers")
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			out = append(out, "response_headers")
		case *extprocv3.ProcessingRequest_ResponseBody:
			out = append(out, "response_body")
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			out = append(out, "response_trailers")
		}
	}
	return out
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Errorf("not JSON: %v: %s", err, a)
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad expectation: %v: %s", err, b)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// serve runs srv over gRPC as the sidecar does: with its codec, which
// leaves the forwarded metadata encoded for the processor.
func serve(t testing.TB, srv extprocv3.ExternalProcessorServer) extprocv3.ExternalProcessorClient {
	t.Helper()
	return envoytest.Serve(t, srv, grpc.ForceServerCodecV2(processor.NewCodec()))
}
