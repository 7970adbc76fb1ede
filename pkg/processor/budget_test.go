package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/ruleset"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/identity"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
	"github.com/mcp-extproc/mcp-extproc/pkg/rules"
)

// The cost that can be counted is guarded here, without timing anything:
// the ext_proc messages each shape of exchange costs (a round trip through
// Envoy each) and the allocations the processor makes per exchange, from
// the codec's decoding of each message to the reply. The exchanges run in
// memory through the production pieces (config, executor, identity,
// rules, codec, processor); only the plugin is faked, at the executor's
// client seam (executor.Plugins), so its transport is not counted.
//
// A budget is what the exchange costs today: one allocation or one
// message more per exchange fails. When a change lowers a figure, lower
// the budget with it; when a change must raise one, say why in the commit.

// budgetShape is one shape of exchange users deploy.
type budgetShape struct {
	name   string
	config string
	x      budgetExchange
	// messages is the ext_proc messages Envoy sends for the exchange;
	// allocs the processor's allocations per exchange (testing.AllocsPerRun).
	messages int
	allocs   float64
	// calls is the plugin invocations per exchange; check checks the
	// answer the client gets.
	calls int
	check func(*budgetResult) error
	// newSession: the exchange is the first of a session no server has
	// accepted yet (its ids are recorded once the answer says it does);
	// every other shape is of a session a server accepted.
	newSession bool
	// inProcess: every plugin runs in the sidecar's process
	// (Snapshot.InProcessOnly), as with built-in plugins only.
	inProcess bool
}

// budgetExchange is what Envoy would send: the request headers (with the
// metadata it forwards), the request body, the response headers and body
// chunks.
type budgetExchange struct {
	reqHeaders  []string
	metadata    map[string]*structpb.Struct
	reqBody     string
	respHeaders []string
	respBody    []string
}

// budgetShapes are the shapes of issue 28.
func budgetShapes(t testing.TB) []budgetShape {
	list := budgetExchange{
		reqHeaders:  mcpHeaders(toolsListBody),
		reqBody:     toolsListBody,
		respHeaders: []string{":status", "200", "content-type", "application/json"},
		respBody:    []string{`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`},
	}
	listMCPFilter := list
	listMCPFilter.metadata = map[string]*structpb.Struct{config.MCPFilterNamespace: mcpFilterMeta(t, "tools/list", "2", "")}
	call := budgetExchange{
		reqHeaders:  mcpHeaders(echoCallBody),
		reqBody:     echoCallBody,
		respHeaders: []string{":status", "200", "content-type", "application/json"},
		respBody:    []string{`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}]}}`},
	}
	callMCPFilter := call
	callMCPFilter.metadata = map[string]*structpb.Struct{config.MCPFilterNamespace: mcpFilterMeta(t, "tools/call", "3", "echo")}
	callJWT := call
	callJWT.metadata = map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": jwtPayload(t)}
	sse := call
	sse.respHeaders = []string{":status", "200", "content-type", "text/event-stream"}
	sse.respBody = []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n",
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",",
		"\"text\":\"hi\"}]}}\n\n",
	}
	big := list
	big.respBody = []string{toolsListOf(t, budgetListTools, budgetHiddenTools)}
	// A server whose list is new bytes in each answer: the memo of list
	// answers misses every time (each answer is parsed, and remembered).
	bigCold := list
	bigCold.respBody = []string{strings.Replace(big.respBody[0], `"result":{`, `"result":{"nextCursor":"`+budgetSerial+`",`, 1)}

	const pre = "hooks: [tool_pre_invoke]"
	return []budgetShape{
		{name: "passthrough tools/list, no MCP-filter metadata", config: pluginConfig(pre, ""), x: list,
			messages: 2, allocs: 60, check: untouchedAnswer},
		{name: "passthrough tools/list, MCP-filter metadata", config: pluginConfig(pre, ""), x: listMCPFilter,
			messages: 2, allocs: 63, check: untouchedAnswer},
		{name: "one plugin tools/call, no MCP-filter metadata", config: pluginConfig(pre, ""), x: call,
			messages: 2, allocs: 92, calls: 1, check: untouchedAnswer},
		{name: "one plugin tools/call, MCP-filter metadata", config: pluginConfig(pre, ""), x: callMCPFilter,
			messages: 2, allocs: 95, calls: 1, check: untouchedAnswer},
		{name: "one in-process plugin tools/call, no MCP-filter metadata", config: pluginConfig(pre, ""), x: call,
			messages: 2, allocs: 82, calls: 1, check: untouchedAnswer, inProcess: true},
		// The same answer every time, as a server lists the same tools
		// to every client: after the first exchange the Server's memo of
		// list answers serves its parse (listmemo.go).
		{name: "tools/list of 200 tools filtered by 20 rules", config: "plugins: []\nextproc:\n  mcp_paths: [/mcp]\n" + ruleset.Twenty(), x: big,
			messages: 4, allocs: 148, check: listed(budgetListTools - budgetHiddenTools)},
		// The same list, its answer other bytes every time: each is parsed
		// and remembered (one allocation more than before the memo: its
		// key, a copy of the answer).
		{name: "tools/list of 200 tools filtered by 20 rules, new bytes each time", config: "plugins: []\nextproc:\n  mcp_paths: [/mcp]\n" + ruleset.Twenty(), x: bigCold,
			messages: 4, allocs: 151, check: listed(budgetListTools - budgetHiddenTools)},
		{name: "identity from JWT metadata, one plugin", config: pluginConfig(pre+"\n    conditions: [{tenant_ids: [acme]}]", budgetIdentity), x: callJWT,
			messages: 2, allocs: 108, calls: 1, check: untouchedAnswer},
		{name: "SSE answer, post hook", config: pluginConfig("hooks: [tool_pre_invoke, tool_post_invoke]", ""), x: sse,
			messages: 6, allocs: 165, calls: 2, check: untouchedAnswer},
		// Rules read every body and record its ids for replays; Envoy's
		// MCP filter says a tools/call has no list to filter, so its
		// answer is not read, once a server accepted the session.
		{name: "tools/call under rules, MCP-filter metadata", config: rulesCallConfig, x: callMCPFilter,
			messages: 2, allocs: 84, check: untouchedAnswer},
		{name: "tools/call under rules, MCP-filter metadata, a new session", config: rulesCallConfig, x: callMCPFilter,
			messages: 3, allocs: 84, check: untouchedAnswer, newSession: true},
	}
}

// TestBudgetMessages: the ext_proc messages of each shape, so that an
// extra round trip through Envoy fails a test. It runs under -race too.
func TestBudgetMessages(t *testing.T) {
	for _, sh := range budgetShapes(t) {
		t.Run(sh.name, func(t *testing.T) {
			rig := newBudgetRig(t, sh.config)
			rig.snap.InProcessOnly = sh.inProcess
			if sh.newSession {
				rig.accepted.Forget(budgetSession)
			}
			ex := rig.prepare(t, sh.x)
			res, err := rig.exchange(ex)
			if err != nil {
				t.Fatal(err)
			}
			if res.messages != sh.messages {
				t.Errorf("%d ext_proc messages (%v), want %d", res.messages, res.kinds, sh.messages)
			}
			if rig.plugins.calls != sh.calls {
				t.Errorf("%d plugin calls, want %d", rig.plugins.calls, sh.calls)
			}
			if err := sh.check(res); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestBudgetAllocs: the processor's allocations per exchange of each
// shape (testing.AllocsPerRun, the codec's decoding included). Skipped
// under -race, which allocates on its own; `make test` runs it without.
func TestBudgetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts; `make unit` runs this without -race")
	}
	for _, sh := range budgetShapes(t) {
		t.Run(sh.name, func(t *testing.T) {
			rig := newBudgetRig(t, sh.config)
			rig.snap.InProcessOnly = sh.inProcess
			ex := rig.prepare(t, sh.x)
			res, err := rig.exchange(ex) // warm: first-use allocations are not per exchange
			if err != nil {
				t.Fatal(err)
			}
			res.sent()
			got := testing.AllocsPerRun(200, func() {
				res, e := rig.exchange(ex)
				if e != nil && err == nil {
					err = e
				}
				res.sent()
			})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case got > sh.allocs:
				t.Errorf("%.0f allocations per exchange, budget %.0f: find the new one (go test -bench Budget -memprofile)", got, sh.allocs)
			case got < sh.allocs:
				t.Logf("%.0f allocations per exchange, under the budget of %.0f: lower the budget", got, sh.allocs)
			}
		})
	}
}

// BenchmarkBudget is TestBudgetAllocs as benchmarks, for profiles:
//
//	go test -run '^$' -bench Budget -benchmem -memprofile mem.out ./pkg/processor
func BenchmarkBudget(b *testing.B) {
	for _, sh := range budgetShapes(b) {
		b.Run(sh.name, func(b *testing.B) {
			rig := newBudgetRig(b, sh.config)
			rig.snap.InProcessOnly = sh.inProcess
			ex := rig.prepare(b, sh.x)
			b.ReportAllocs()
			for b.Loop() {
				res, err := rig.exchange(ex)
				if err != nil {
					b.Fatal(err)
				}
				res.sent()
			}
		})
	}
}

// budgetRig is the processor of one configuration, with its plugins faked.
type budgetRig struct {
	snap    *Snapshot
	opts    *Options
	canned  *canned
	plugins *budgetPlugins
	// accepted are the sessions a server accepted: the exchanges' session
	// is one after its first 2xx answer, as in a sidecar that runs.
	accepted *attribution.Accepted
	// bufs lends the buffers of edited bodies, as the Server's.
	bufs bodyBuffers
	// lists remembers the list answers parsed, as the Server's.
	lists *listMemo
	// facts keeps what the plugins answer, as the Server's.
	facts factsCache
	// record keeps what the client gets of a STREAMED answer
	// (budgetResult.streamed), which the budgets do not count.
	record bool
}

func newBudgetRig(t testing.TB, yaml string) *budgetRig {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	plugins := &budgetPlugins{configs: cfg.Plugins}
	exec := executor.New(plugins, executor.Options{Settings: cfg.PluginSettings, HookTimeout: cfg.HookTimeout(), Logger: zerolog.Nop()})
	t.Cleanup(func() { _ = exec.Close(context.Background()) })
	ident, err := identity.New(cfg.Extproc.Identity)
	if err != nil {
		t.Fatal(err)
	}
	set, issues := rules.Compile(cfg.Extproc.Rules, rules.Options{})
	if len(issues) > 0 {
		t.Fatal(issues)
	}
	return &budgetRig{
		snap: &Snapshot{Settings: &cfg.Extproc, Hooks: exec, Identity: ident, Rules: set},
		// WithHeaders as the sidecar sets it: a hooked request's headers
		// follow its plugin calls, unless all of them run in process.
		opts:     &Options{Logger: zerolog.Nop(), Observer: nopObserver{}, Attribution: attribution.New(attribution.Options{}), WithHeaders: wireconn.WithHeaders},
		canned:   newCanned(),
		plugins:  plugins,
		accepted: acceptedBudgetSession(),
		lists:    newListMemo(listMemoBytes),
	}
}

// budgetPlugins answers every invoke_hook with "continue" (two
// allocations a call, counted in the budgets): the plugin's transport is
// not the processor's cost.
type budgetPlugins struct {
	configs []config.Plugin
	calls   int
}

var _ executor.Plugins = (*budgetPlugins)(nil)

func (p *budgetPlugins) Invoke(_ context.Context, plugin string, _ cpex.HookType, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	p.calls++
	return &cpex.InvokeHookReply{PluginName: plugin, Result: &cpex.PluginResult{}}, nil
}

func (p *budgetPlugins) Effective() (uint64, []config.Plugin) { return 1, p.configs }

// encodedExchange is a budgetExchange encoded as Envoy sends it.
type encodedExchange struct {
	reqHeaders, reqBody, respHeaders []byte
	respChunks                       [][]byte
	respBuffered                     []byte // the chunks as one BUFFERED message
	// chunkText are the chunks as the server sent them.
	chunkText [][]byte
	// serialAt is where respBuffered holds budgetSerial (0: nowhere), which
	// each exchange overwrites with a number of its own: the answer is new
	// bytes every time.
	serialAt int
	serial   uint32
}

// budgetSerial is the place in an answer that the exchanges number; it is
// as long as the 8 hex digits that replace it.
const budgetSerial = "serial00"

// nextSerial numbers e's buffered answer anew, in place (the codec copies
// the body it decodes).
func (e *encodedExchange) nextSerial() {
	if e.serialAt == 0 {
		return
	}
	e.serial++
	b := e.respBuffered[e.serialAt : e.serialAt+len(budgetSerial)]
	for i, n := len(b)-1, e.serial; i >= 0; i, n = i-1, n>>4 {
		b[i] = "0123456789abcdef"[n&15]
	}
}

func (r *budgetRig) prepare(t testing.TB, x budgetExchange) *encodedExchange {
	t.Helper()
	enc := func(m *extprocv3.ProcessingRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hdr := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: headerMap(x.reqHeaders...)}}}
	if x.metadata != nil {
		hdr.MetadataContext = &corev3.Metadata{FilterMetadata: x.metadata}
	}
	e := &encodedExchange{
		reqHeaders:  enc(hdr),
		reqBody:     enc(requestBody(x.reqBody)),
		respHeaders: enc(responseHeaders(0, x.respHeaders[2:]...)),
		respBuffered: enc(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte(strings.Join(x.respBody, "")), EndOfStream: true}}}),
	}
	status, _ := strconv.Atoi(x.respHeaders[1])
	e.respHeaders = enc(responseHeaders(status, x.respHeaders[2:]...))
	for i, c := range x.respBody {
		e.respChunks = append(e.respChunks, enc(responseBody(c, i == len(x.respBody)-1)))
		e.chunkText = append(e.chunkText, []byte(c))
	}
	e.serialAt = max(bytes.Index(e.respBuffered, []byte(budgetSerial)), 0)
	return e
}

// budgetResult is what one exchange cost and what the client got.
type budgetResult struct {
	messages  int
	kinds     []string
	immediate *extprocv3.ImmediateResponse
	// answer is the response body the client gets, when Envoy sent it.
	answer []byte
	// streamed is what the client gets of a STREAMED answer, when the
	// rig records it (budgetRig.record).
	streamed []byte
	st       *stream
}

// sent is what Process does once the last reply is sent: a buffer the
// answer was built in goes back to the pool, and answer is no longer
// valid.
func (r *budgetResult) sent() {
	if r != nil {
		r.st.x.body.sent()
		r.answer = nil
	}
}

// exchange plays Envoy's ext_proc filter for one HTTP request (default
// processing mode, allow_mode_override: both body modes of an override
// taken literally, docs/extproc-contract.md §3.1): it decodes each message
// with the sidecar's codec, hands it to a new stream and follows the
// replies, counting the messages.
func (r *budgetRig) exchange(e *encodedExchange) (*budgetResult, error) {
	e.nextSerial()
	st := newStream(context.Background(), r.snap, r.facts.of(r.snap), r.opts, r.canned, r.accepted)
	st.x.body.pool = &r.bufs
	st.x.results.lists = r.lists
	res := &budgetResult{st: st}
	reqHeaders, respHeaders := true, true
	reqBody, respBody := filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_NONE
	send := func(kind string, b []byte) (*extprocv3.ProcessingResponse, error) {
		var m extprocv3.ProcessingRequest
		if err := unmarshalRequest(b, &m); err != nil {
			return nil, err
		}
		res.messages++
		res.kinds = append(res.kinds, kind)
		resp := st.handle(&m)
		if resp == nil {
			return nil, fmt.Errorf("no reply to %s", kind)
		}
		if im := resp.GetImmediateResponse(); im != nil {
			res.immediate = im
			return nil, nil
		}
		if o := resp.GetModeOverride(); o != nil {
			reqBody, respBody = o.GetRequestBodyMode(), o.GetResponseBodyMode()
			if o.GetResponseHeaderMode() == filterv3.ProcessingMode_SKIP {
				respHeaders = false
			} else if o.GetResponseHeaderMode() == filterv3.ProcessingMode_SEND {
				respHeaders = true
			}
		}
		return resp, nil
	}
	var steps []func() (bool, error)
	if reqHeaders {
		steps = append(steps, func() (bool, error) { r, err := send("request_headers", e.reqHeaders); return r != nil, err })
	}
	steps = append(steps,
		func() (bool, error) {
			if reqBody == filterv3.ProcessingMode_NONE {
				return true, nil
			}
			r, err := send("request_body", e.reqBody)
			return r != nil, err
		},
		func() (bool, error) {
			if !respHeaders {
				return false, nil
			}
			r, err := send("response_headers", e.respHeaders)
			return r != nil, err
		},
		func() (bool, error) {
			switch respBody {
			case filterv3.ProcessingMode_BUFFERED:
				r, err := send("response_body", e.respBuffered)
				if r != nil {
					res.answer = mutatedBody(r, e.respBuffered)
				}
				return r != nil, err
			case filterv3.ProcessingMode_STREAMED:
				for i, c := range e.respChunks {
					resp, err := send("response_body", c)
					if resp != nil && r.record {
						if m := mutatedBody(resp, c); m != nil {
							res.streamed = append(res.streamed, m...)
						} else {
							res.streamed = append(res.streamed, e.chunkText[i]...)
						}
					}
					st.x.body.sent()
					if resp == nil || err != nil {
						return false, err
					}
				}
			}
			return true, nil
		})
	for _, step := range steps {
		more, err := step()
		if err != nil {
			return nil, err
		}
		if !more {
			break
		}
	}
	return res, nil
}

// mutatedBody is the body the client gets for the BUFFERED message enc
// and its reply r.
func mutatedBody(r *extprocv3.ProcessingResponse, enc []byte) []byte {
	if m := r.GetResponseBody().GetResponse().GetBodyMutation(); m != nil {
		return m.GetBody()
	}
	return nil
}

func untouchedAnswer(r *budgetResult) error {
	if r.immediate != nil {
		return fmt.Errorf("refused: %s", r.immediate.GetBody())
	}
	if r.answer != nil {
		return errors.New("the answer was rewritten")
	}
	return nil
}

func listed(n int) func(*budgetResult) error {
	return func(r *budgetResult) error {
		if r.immediate != nil {
			return fmt.Errorf("refused: %s", r.immediate.GetBody())
		}
		var m struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.answer, &m); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		if len(m.Result.Tools) != n {
			return fmt.Errorf("%d tools listed, want %d", len(m.Result.Tools), n)
		}
		return nil
	}
}

const (
	toolsListBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	echoCallBody  = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`
	// budgetIdentity reads the caller from a verified JWT's payload.
	budgetIdentity = `  identity:
    sources:
      - jwt_metadata: {key: jwt_payload, claims: {tenant: tenant, roles: roles}}
`
	budgetListTools   = 200
	budgetHiddenTools = 50
)

// mcpHeaders are the request headers of an MCP 2025-11-25 POST of body.
func mcpHeaders(body string) []string {
	return []string{":method", "POST", ":path", "/mcp", ":authority", "mcp.example", ":scheme", "https",
		"content-type", "application/json", "accept", "application/json, text/event-stream",
		"content-length", strconv.Itoa(len(body)), "mcp-protocol-version", "2025-11-25",
		"mcp-session-id", budgetSession, "x-request-id", "5b5e1f0e-8f8c-4f5e-9a51-0c9c1f1b7a10",
		"user-agent", "budget-test/1.0"}
}

// pluginConfig is one plugin Guard with the given hook lines, and extra
// extproc settings.
func pluginConfig(hooks, extproc string) string {
	return `plugins:
  - name: Guard
    kind: external
    mode: sequential
    on_error: fail
    ` + hooks + `
    mcp: {proto: STREAMABLEHTTP, url: "http://127.0.0.1:9/mcp"}
plugin_settings:
  plugin_timeout: 5
extproc:
  mcp_paths: [/mcp]
` + extproc
}

// toolsListOf is a tools/list answer of n tools, the first hidden of them
// named admin_<i>.
func toolsListOf(t testing.TB, n, hidden int) string {
	t.Helper()
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	}
	tools := make([]tool, n)
	for i := range tools {
		name := fmt.Sprintf("tool_%d", i)
		if i < hidden {
			name = fmt.Sprintf("admin_%d", i)
		}
		tools[i] = tool{Name: name, Description: "Does " + name + " to the target and reports what changed.",
			InputSchema: map[string]any{"type": "object", "required": []string{"target"}, "properties": map[string]any{
				"target": map[string]any{"type": "string", "description": "What to act on."},
			}}}
	}
	result, err := json.Marshal(map[string]any{"tools": tools})
	if err != nil {
		t.Fatal(err)
	}
	return `{"jsonrpc":"2.0","id":2,"result":` + string(result) + `}`
}

// mcpFilterMeta is what Envoy's MCP filter writes for a request.
func mcpFilterMeta(t testing.TB, method, id, name string) *structpb.Struct {
	t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": method, "id": id, "is_mcp_request": true}
	if name != "" {
		m["params"] = map[string]any{"name": name}
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwtPayload is what jwt_authn leaves for a verified token (payload_in_metadata:
// jwt_payload): 12 claims, as the bench sends.
func jwtPayload(t testing.TB) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{
		"iss": "https://idp.example", "sub": "alice", "aud": "mcp", "exp": 4102444800.0, "iat": 1767225600.0,
		"nbf": 1767225600.0, "jti": "7f0c", "email": "alice@example.com", "name": "Alice",
		"tenant": "acme", "roles": []any{"dev", "ops"}, "scope": "tools:call tools:list",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// budgetSession is the MCP session of every budget exchange.
const budgetSession = "3b241101-e2bb-4255-8caf-4136c566a962"

// acceptedBudgetSession is a sidecar's memory of accepted sessions, with
// budgetSession in it.
func acceptedBudgetSession() *attribution.Accepted {
	a := attribution.NewAccepted(0, 0, nil)
	a.Add(budgetSession)
	return a
}

// rulesCallConfig is 20 rules and the MCP filter's metadata read.
var rulesCallConfig = "plugins: []\nextproc:\n  mcp_paths: [/mcp]\n" + ruleset.Twenty()

// TestInProcessOnlyBuildsNoPluginHeaders: a snapshot whose plugins all run
// in the sidecar's process (and export no span) builds no headers for its
// plugin calls; any other hands them to Options.WithHeaders once per
// exchange. The plugin is called either way.
func TestInProcessOnlyBuildsNoPluginHeaders(t *testing.T) {
	for _, inProcess := range []bool{false, true} {
		t.Run(fmt.Sprintf("InProcessOnly=%v", inProcess), func(t *testing.T) {
			rig := newBudgetRig(t, pluginConfig("hooks: [tool_pre_invoke]", ""))
			rig.snap.InProcessOnly = inProcess
			var got []http.Header
			rig.opts.WithHeaders = func(ctx context.Context, h http.Header) context.Context {
				got = append(got, h)
				return ctx
			}
			i := slices.IndexFunc(budgetShapes(t), func(sh budgetShape) bool {
				return sh.name == "one plugin tools/call, no MCP-filter metadata"
			})
			if i < 0 {
				t.Fatal("no one-plugin budget shape")
			}
			shape := budgetShapes(t)[i]
			if _, err := rig.exchange(rig.prepare(t, shape.x)); err != nil {
				t.Fatal(err)
			}
			if rig.plugins.calls != 1 {
				t.Fatalf("plugin called %d times, want 1", rig.plugins.calls)
			}
			switch {
			case inProcess && len(got) != 0:
				t.Errorf("headers built for in-process plugins: %v", got)
			case !inProcess && (len(got) != 1 || got[0].Get("X-Request-Id") == ""):
				t.Errorf("headers handed to plugin calls: %v, want one set with x-request-id", got)
			}
		})
	}
}
