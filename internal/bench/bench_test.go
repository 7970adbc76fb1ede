package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/ruleset"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// TestRunQuick runs every scenario for a handful of operations: the
// harness works end to end and each scenario's own checks (bodies intact,
// plugins called or not called as expected) hold. It measures nothing.
func TestRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dozen sidecars and plugin servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	rep, err := Run(ctx, Options{Quick: true, Progress: &progress})
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	if got, want := len(rep.Tables), len(Scenarios()); got != want {
		t.Fatalf("%d tables, want one per scenario (%d)", got, want)
	}
	for _, tb := range rep.Tables {
		if len(tb.Rows) == 0 {
			t.Errorf("table %q has no rows", tb.Title)
		}
		for _, row := range tb.Rows {
			if len(row) != len(tb.Header) {
				t.Errorf("table %q: row %q has %d cells, header %d", tb.Title, row[0], len(row), len(tb.Header))
			}
		}
	}
	if len(rep.Checks) == 0 {
		t.Error("no target checks")
	}
	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Passthrough", "Targets"} {
		if !strings.Contains(text.String(), want) || !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRunUnknownScenario(t *testing.T) {
	if _, err := Run(context.Background(), Options{Only: []string{"nope"}}); err == nil {
		t.Fatal("Run accepted an unknown scenario")
	}
}

// TestDriver checks the lean driver against the minimal server in the
// modes the scenarios use, over gRPC and in memory: the messages sent, and
// bodies reaching both ends unchanged.
func TestDriver(t *testing.T) {
	call, err := ToolsCall()
	if err != nil {
		t.Fatal(err)
	}
	sse, _, err := StreamedToolsCall(ManyEvents, 40<<10, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		req      filterv3.ProcessingMode_BodySendMode
		resp     filterv3.ProcessingMode_BodySendMode
		x        *Exchange
		messages int
	}{
		{"request buffered, response none", filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE, call, 3},
		{"request none, response buffered", filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_BUFFERED, call, 3},
		{"request buffered, response streamed", filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED, sse, 3 + len(sse.ResponseBody)},
	}
	for _, tt := range tests {
		m := NewMinimal(tt.req, tt.resp)
		ep, err := Serve("minimal", m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ep.Close() })
		for _, c := range []struct {
			via    string
			client extprocv3.ExternalProcessorClient
		}{{"grpc", ep.Client}, {"pipe", Pipe(m)}} {
			t.Run(tt.name+"/"+c.via, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				p := Prepare(tt.x)
				d := &Driver{Record: true}
				o, err := d.Do(ctx, c.client, p)
				if err != nil {
					t.Fatal(err)
				}
				if o.Messages != tt.messages {
					t.Errorf("%d messages, want %d", o.Messages, tt.messages)
				}
				if tt.req != filterv3.ProcessingMode_NONE && !bytes.Equal(o.RequestBody, tt.x.RequestBody) {
					t.Errorf("request body %q, want %q", o.RequestBody, tt.x.RequestBody)
				}
				if want := bytes.Join(tt.x.ResponseBody, nil); !bytes.Equal(o.ResponseBody, want) || o.Delivered != len(want) {
					t.Errorf("client got %d bytes (delivered %d), want %d", len(o.ResponseBody), o.Delivered, len(want))
				}
				if o.BodyMutated || o.HeadersMutated || o.Immediate != nil {
					t.Errorf("mutations from a do-nothing server: %+v", o)
				}
				if o.TTFB <= 0 || o.Total < o.TTFB {
					t.Errorf("TTFB %v, total %v", o.TTFB, o.Total)
				}
			})
		}
	}
}

// The do-nothing baseline takes Envoy's default two messages whatever the
// exchange: no body, however the request looks.
func TestNothingTakesTwoMessages(t *testing.T) {
	list26, err := ToolsList2026()
	if err != nil {
		t.Fatal(err)
	}
	if got := headerValue(list26.RequestHeaders, "mcp-method"); got != "tools/list" {
		t.Errorf("mcp-method = %q", got)
	}
	if got := headerValue(list26.RequestHeaders, "mcp-protocol-version"); got != "2026-07-28" {
		t.Errorf("mcp-protocol-version = %q", got)
	}
	get := GetSSE(3)
	if get.RequestBody != nil || headerValue(get.RequestHeaders, ":method") != "GET" || headerValue(get.RequestHeaders, "last-event-id") != "" {
		t.Errorf("GetSSE is not a plain GET: %+v", get.RequestHeaders)
	}
	for _, x := range []*Exchange{list26, get} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		p := Prepare(x)
		o, err := (&Driver{}).Do(ctx, Pipe(NewNothing()), p)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if o.Messages != 2 || o.Delivered != p.ResponseLen() {
			t.Errorf("%d messages, %d of %d bytes delivered; want 2 and all", o.Messages, o.Delivered, p.ResponseLen())
		}
	}
}

func headerValue(hs []Header, k string) string {
	for _, h := range hs {
		if h.Key == k {
			return h.Value
		}
	}
	return ""
}

// scripted answers each message with what reply returns for it.
type scripted struct {
	extprocv3.UnimplementedExternalProcessorServer
	reply func(n int, req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse
}

func (s *scripted) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	for n := 0; ; n++ {
		req, err := srv.Recv()
		if err != nil {
			return nil
		}
		for _, r := range s.reply(n, req) {
			if err := srv.Send(r); err != nil {
				return err
			}
		}
	}
}

// TestDriverRejects checks that the driver fails on what Envoy fails on.
func TestDriverRejects(t *testing.T) {
	headersReply := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
	bodyReply := &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	tests := []struct {
		name  string
		reply func(int, *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse
	}{
		{"wrong oneof", func(int, *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return []*extprocv3.ProcessingResponse{bodyReply}
		}},
		{"extra reply", func(n int, _ *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if n == 0 {
				return []*extprocv3.ProcessingResponse{headersReply, headersReply}
			}
			return []*extprocv3.ProcessingResponse{{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}}
		}},
	}
	call, err := ToolsCall()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			d := &Driver{}
			_, err := d.Do(ctx, Pipe(&scripted{reply: tt.reply}), Prepare(call))
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("err = %v, want ErrProtocol", err)
			}
		})
	}
}

// TestSidecarKeepsBytes drives the real sidecar: a request no plugin
// applies to, an SSE response through a post hook and a GET stream read
// event by event reach both ends byte for byte.
func TestSidecarKeepsBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps := answeringPlugin(t, "Post", cpex.ToolPostInvoke)
	sc, err := StartSidecar(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Post", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPostInvoke}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	list, err := ToolsList()
	if err != nil {
		t.Fatal(err)
	}
	sse, _, err := StreamedToolsCall(ManyEvents, 50<<10, 7<<10)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Exchange{list, sse, GetSSE(8)} {
		d := &Driver{Record: true}
		before := ps.Calls()
		o, err := d.Do(ctx, sc.Client, Prepare(x))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(o.RequestBody, x.RequestBody) {
			t.Errorf("upstream got %q, want %q", o.RequestBody, x.RequestBody)
		}
		if want := bytes.Join(x.ResponseBody, nil); !bytes.Equal(o.ResponseBody, want) {
			t.Errorf("client got %d bytes, want the %d the server sent", len(o.ResponseBody), len(want))
		}
		wantCalls := int64(0)
		if x == sse {
			wantCalls = 1
		}
		if got := ps.Calls() - before; got != wantCalls {
			t.Errorf("plugin called %d times, want %d", got, wantCalls)
		}
	}
}

func TestPercentileAndMedian(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if got := percentile(ds, 0.5); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := percentile(ds, 0.99); got != 5 {
		t.Errorf("p99 = %v, want 5", got)
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}

// TestCompareRotates checks that every target runs in every round and that
// the order changes from round to round.
func TestCompareRotates(t *testing.T) {
	var order []int
	op := func(i int) Op {
		return func(context.Context) (Timing, error) {
			if len(order) == 0 || order[len(order)-1] != i {
				order = append(order, i)
			}
			return Timing{Total: time.Duration(i+1) * time.Millisecond, TTFB: time.Millisecond}, nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Compare(ctx, Config{Rounds: 2, MinOps: 2}, op(0), op(1))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[0 1 0]" { // round 0: 0 1; round 1: 1 0
		t.Errorf("run order %v, want [0 1 0]", order)
	}
	if got := c.Ratio(1, 0, MetricP50); got != 2 {
		t.Errorf("ratio = %v, want 2", got)
	}
}

// benchTargets builds the processor for the pre-cond config (the plugin
// applies to tool_pre_invoke of another tool only) and the minimal server.
func benchTargets(b *testing.B) (proc *Processor, mini *Minimal) {
	b.Helper()
	yaml := SidecarConfig(0, PluginSpec{Name: "Guard", URL: "http://127.0.0.1:9/mcp",
		Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}})
	proc, err := NewProcessor(context.Background(), yaml, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proc.Close() })
	return proc, NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE)
}

func benchExchanges(b *testing.B) map[string]*Exchange {
	b.Helper()
	list, err := ToolsList()
	if err != nil {
		b.Fatal(err)
	}
	call, err := ToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	big, err := ToolsCallWithArgs(64 << 10)
	if err != nil {
		b.Fatal(err)
	}
	return map[string]*Exchange{"tools-list": list, "tools-call": call, "tools-call-64k": big}
}

// BenchmarkPassthroughInMemory measures one passthrough stream through the
// processor (pool not started, executor, processor.Server) and through the
// minimal server, over the in-memory stream: allocs/op of processor −
// minimal are the processor's own.
//
//	go test -run '^$' -bench PassthroughInMemory -benchmem ./internal/bench
func BenchmarkPassthroughInMemory(b *testing.B) {
	proc, mini := benchTargets(b)
	for _, name := range []string{"tools-list", "tools-call", "tools-call-64k"} {
		p := Prepare(benchExchanges(b)[name])
		for _, tg := range []struct {
			name string
			srv  extprocv3.ExternalProcessorServer
		}{{"processor", proc}, {"minimal", mini}} {
			b.Run(name+"/"+tg.name, func(b *testing.B) {
				benchDo(b, Pipe(tg.srv), p)
			})
		}
	}
}

// BenchmarkPassthroughGRPC is BenchmarkPassthroughInMemory over real gRPC
// on loopback (both servers with grpc.NewServer defaults).
func BenchmarkPassthroughGRPC(b *testing.B) {
	proc, mini := benchTargets(b)
	for _, name := range []string{"tools-list", "tools-call", "tools-call-64k"} {
		p := Prepare(benchExchanges(b)[name])
		for _, tg := range []struct {
			name string
			srv  extprocv3.ExternalProcessorServer
		}{{"processor", proc}, {"minimal", mini}} {
			b.Run(name+"/"+tg.name, func(b *testing.B) {
				ep, err := Serve(tg.name, tg.srv)
				if err != nil {
					b.Fatal(err)
				}
				defer ep.Close()
				benchDo(b, ep.Client, p)
			})
		}
	}
}

func benchDo(b *testing.B, c extprocv3.ExternalProcessorClient, p *Prepared) {
	ctx := context.Background()
	d := &Driver{}
	ok := untouched(p)
	b.ReportAllocs()
	for b.Loop() {
		o, err := d.Do(ctx, c, p)
		if err == nil {
			err = ok(o)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSSEInMemory measures a 1 MiB SSE tools/call result through the
// processor with a post hook (plugin server on loopback, answering at once)
// and through the minimal server in STREAMED mode, over the in-memory
// stream. The plugin call is included in the processor's figures.
//
//	go test -run '^$' -bench SSEInMemory -benchmem ./internal/bench
func BenchmarkSSEInMemory(b *testing.B) {
	ps := answeringPlugin(b, "Post", cpex.ToolPostInvoke)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc, err := NewProcessor(ctx, SidecarConfig(4<<20, PluginSpec{Name: "Post", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPostInvoke}}), true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proc.Close() })
	mini := NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED)
	for _, shape := range []string{ManyEvents, OneEvent} {
		x, _, err := StreamedToolsCall(shape, 1<<20, 16<<10)
		if err != nil {
			b.Fatal(err)
		}
		p := Prepare(x)
		for _, tg := range []struct {
			name string
			srv  extprocv3.ExternalProcessorServer
		}{{"processor", proc}, {"minimal", mini}} {
			b.Run(shape+"/"+tg.name, func(b *testing.B) {
				b.SetBytes(int64(p.ResponseLen()))
				d := &Driver{}
				ok := intact(p)
				c := Pipe(tg.srv)
				b.ReportAllocs()
				for b.Loop() {
					o, err := d.Do(ctx, c, p)
					if err == nil {
						err = ok(o)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDrivers compares the lean driver with the strict fake Envoy of
// internal/envoytest (Filter.Do) on the same exchange against the minimal
// server over gRPC: the reason the figures use the lean driver.
//
//	go test -run '^$' -bench Drivers -benchmem ./internal/bench
func BenchmarkDrivers(b *testing.B) {
	mini := NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE)
	ep, err := Serve("minimal", mini)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ep.Close() })
	x, err := ToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.Run("lean", func(b *testing.B) {
		benchDo(b, ep.Client, Prepare(x))
	})
	b.Run("envoytest", func(b *testing.B) {
		f := &envoytest.Filter{Client: ep.Client, AllowModeOverride: true, MessageTimeout: 5 * time.Second}
		req := &envoytest.Request{Method: "POST", Path: "/mcp", Authority: "mcp.example.com",
			Headers: http.Header{}, Body: [][]byte{x.RequestBody}}
		for _, h := range x.RequestHeaders {
			if !strings.HasPrefix(h.Key, ":") {
				req.Headers.Add(h.Key, h.Value)
			}
		}
		resp := &envoytest.UpstreamResponse{Status: 200, Headers: http.Header{}, Body: x.ResponseBody}
		for _, h := range x.ResponseHeaders {
			if !strings.HasPrefix(h.Key, ":") {
				resp.Headers.Add(h.Key, h.Value)
			}
		}
		up := func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
			return resp, nil
		}
		b.ReportAllocs()
		for b.Loop() {
			res, err := f.Do(ctx, req, up)
			if err != nil {
				b.Fatal(err)
			}
			if res.LocalError != "" || res.Status != 200 {
				b.Fatalf("status %d, local error %q", res.Status, res.LocalError)
			}
		}
	})
}

// BenchmarkOnePluginInMemory measures tools/call through the processor with
// one plugin on tool_pre_invoke (a plugin server on loopback that answers
// at once), against the minimal server plus the same invoke_hook made
// directly: the difference is the sidecar's own cost around a plugin call.
//
//	go test -run '^$' -bench OnePluginInMemory -benchmem ./internal/bench
func BenchmarkOnePluginInMemory(b *testing.B) {
	ps := answeringPlugin(b, "Guard", cpex.ToolPreInvoke)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc, err := NewProcessor(ctx, SidecarConfig(0, PluginSpec{Name: "Guard", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}), true)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proc.Close() })
	direct, err := DialDirect(ctx, ps.URL, "Guard")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { direct.Close() })
	x, err := ToolsCall()
	if err != nil {
		b.Fatal(err)
	}
	p := Prepare(x)
	ok := untouched(p)
	d := &Driver{}
	ops := map[string]Op{
		"processor": exchangeOp(d, &Endpoint{Name: "processor", Client: Pipe(proc)}, p, ok),
		"minimal+direct": baselineOp(d, &Endpoint{Name: "minimal", Client: Pipe(NewMinimal(filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_NONE))}, p, ok, false, false,
			hookCall{d: direct, hook: cpex.ToolPreInvoke, payload: toolPrePayload(), pctx: pluginContext()}),
	}
	for _, name := range []string{"processor", "minimal+direct"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ops[name](ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIdentityInMemory isolates the sidecar's own identity work: a
// tools/call whose request headers carry the 12-claim JWT payload of table
// 10, through a processor without extproc.identity ("today"), one with the
// table's jwt_metadata source ("identity") and one reading the same caller
// from headers Envoy set ("envoy-headers"), in memory (no gRPC), the
// request messages as the sidecar's codec decodes them (so the metadata is
// read as in the sidecar). No plugin is called.
//
//	go test -run '^$' -bench IdentityInMemory -benchmem ./internal/bench
func BenchmarkIdentityInMemory(b *testing.B) {
	yaml := SidecarConfig(0, PluginSpec{Name: "Guard", URL: "http://127.0.0.1:9/mcp",
		Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}})
	calls, err := identityCalls()
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []*Prepared{calls.today, calls.jwt, calls.envoyHeaders} {
		for _, m := range []**extprocv3.ProcessingRequest{&p.reqHeaders, &p.reqBody} {
			*m = throughCodec(b, *m)
		}
	}
	for _, tg := range []struct {
		name, yaml string
		p          *Prepared
	}{{"today", yaml, calls.today}, {"envoy-headers", yaml + envoyHeadersConfig, calls.envoyHeaders}, {"identity", yaml + identityConfig, calls.jwt}} {
		proc, err := NewProcessor(context.Background(), tg.yaml, false)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { proc.Close() })
		b.Run(tg.name, func(b *testing.B) { benchDo(b, Pipe(proc), tg.p) })
	}
}

// throughCodec is m as the sidecar's gRPC codec hands it to the processor.
func throughCodec(b testing.TB, m *extprocv3.ProcessingRequest) *extprocv3.ProcessingRequest {
	enc, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	out := &extprocv3.ProcessingRequest{}
	if err := processor.NewCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(enc)}, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkRulesInMemory isolates what the 20 rules of table 11 cost the
// processor on a tools/call, in memory (no gRPC, no plugin called: the
// plugin's conditions leave echo out): "today" without rules, "rules"
// with them, for a 2025-11-25 request behind Envoy's MCP filter and a
// 2026-07-28 one. Both ask Envoy for the same two messages.
//
//	go test -run '^$' -bench RulesInMemory -benchmem ./internal/bench
func BenchmarkRulesInMemory(b *testing.B) {
	yaml := SidecarConfig(0, PluginSpec{Name: "Guard", URL: "http://127.0.0.1:9/mcp",
		Hooks: []cpex.HookType{cpex.ToolPreInvoke}, Tools: []string{"other"}})
	x25 := benchExchanges(b)["tools-call"]
	p25 := Prepare(x25)
	if err := forwardMCPFilterMetadata(p25); err != nil {
		b.Fatal(err)
	}
	x26, err := toolsCall2026()
	if err != nil {
		b.Fatal(err)
	}
	p26 := Prepare(x26)
	for _, tg := range []struct{ name, yaml string }{{"today", yaml}, {"rules", yaml + ruleset.Twenty()}} {
		proc, err := NewProcessor(context.Background(), tg.yaml, false)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { proc.Close() })
		b.Run(tg.name+"/2025-behind-mcp-filter", func(b *testing.B) { benchDo(b, Pipe(proc), p25) })
		b.Run(tg.name+"/2026-07-28", func(b *testing.B) { benchDo(b, Pipe(proc), p26) })
	}
}

// serveCodec serves srv over gRPC on loopback with the sidecar's codec.
func serveCodec(b *testing.B, srv extprocv3.ExternalProcessorServer) extprocv3.ExternalProcessorClient {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(processor.NewCodec()))
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis) // returns when gs stops
	}()
	b.Cleanup(func() {
		gs.Stop()
		<-served
	})
	c, conn, err := dial(lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return c
}

// BenchmarkIdentityGRPC is table 10's comparison, one processor at a time:
// a tools/call with the policy plugin called, over gRPC on loopback with the
// sidecar's codec (so the forwarded JWT payload is read as in the
// sidecar), for "none" (no identity, no metadata), "headers" (the legacy
// user_header/tenant_header, believed), "envoy-headers" (the JWT's caller
// from headers Envoy set) and "jwt" (extproc.identity from the 12-claim
// payload Envoy forwards on every message), the last three under the
// plugin condition tenant_ids [acme]. Run it with -count 6 and compare the
// medians: one process per target, no instance sharing the machine with
// another, unlike make bench.
//
//	go test -run '^$' -bench IdentityGRPC -benchmem -count 6 ./internal/bench
func BenchmarkIdentityGRPC(b *testing.B) {
	pol, err := policyPlugin()
	if err != nil {
		b.Fatal(err)
	}
	ps, err := StartPlugin(pol)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ps.Close() })
	base := SidecarConfig(0, PluginSpec{Name: "Policy", URL: ps.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}})
	withTenant := strings.Replace(base, "    mcp:", "    conditions: [{tenant_ids: [acme]}]\n    mcp:", 1)
	calls, err := identityCalls()
	if err != nil {
		b.Fatal(err)
	}
	for _, tg := range []struct {
		name, yaml string
		p          *Prepared
	}{
		{"none", base, calls.today},
		{"headers", withTenant + "  user_header: x-user\n  tenant_header: x-tenant-id\n", calls.legacy},
		{"envoy-headers", withTenant + envoyHeadersConfig, calls.envoyHeaders},
		{"jwt", withTenant + identityConfig, calls.jwt},
	} {
		proc, err := NewProcessor(context.Background(), tg.yaml, true)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { proc.Close() })
		c := serveCodec(b, proc)
		b.Run(tg.name, func(b *testing.B) { benchDo(b, c, tg.p) })
	}
}

// BenchmarkHookCall is one invoke_hook on a Go SDK plugin server on
// loopback, made by the sidecar's plugin session (mcpconn: the go-sdk
// makes the session, the call is one POST read by mcpconn) and by the
// go-sdk client alone (the direct call of table 2's baselines).
//
//	go test -run '^$' -bench HookCall -benchmem ./internal/bench
func BenchmarkHookCall(b *testing.B) {
	ps := answeringPlugin(b, "Guard", cpex.ToolPreInvoke)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, err := DialDirect(ctx, ps.URL, "Guard")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { direct.Close() })
	own, err := DialSession(ctx, ps.URL, "Guard")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { own.Close() })
	payload, pctx := toolPrePayload(), pluginContext()
	for _, c := range []struct {
		name string
		d    *Direct
	}{{"go-sdk", direct}, {"mcpconn", own}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				reply, err := c.d.Invoke(ctx, cpex.ToolPreInvoke, payload, pctx)
				if err != nil {
					b.Fatal(err)
				}
				if !reply.Result.Continue() {
					b.Fatal("the plugin did not continue")
				}
			}
		})
	}
}

// answeringPlugin serves DelayPlugin(name, 0, hook), a plugin that lets
// every message through at once, on loopback until tb ends.
func answeringPlugin(tb testing.TB, name string, hook cpex.HookType) *PluginServer {
	tb.Helper()
	ps, err := StartPlugin(DelayPlugin(name, 0, hook))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ps.Close() })
	return ps
}
