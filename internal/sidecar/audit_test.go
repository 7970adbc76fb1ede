package sidecar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// auditScene is a sidecar with audit events to a file: the plugin Guard
// blocks the tool "block", the rule no-danger denies the tool "danger", and
// callers are named by a JWT jwt_authn verified.
type auditScene struct {
	sc   *running
	path string
}

func startAuditScene(t *testing.T, format string) *auditScene {
	t.Helper()
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	guard.SetFunc(byTool(map[string]pluginserver.HookFunc{
		"block": plugintest.Block(cpex.PluginViolation{Reason: "denied", Description: "block is denied", Code: "GUARD_DENY"}),
	}))
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := configYAML(pluginEntry("Guard", srv.URL(), "fail", "")) + fmt.Sprintf(`  identity:
    sources:
      - jwt_metadata: {key: jwt_payload}
  rules:
    - name: no-danger
      deny: 'mcp.name == "danger"'
  audit:
    enabled: true
    sink: file
    path: %s
    format: %s
`, path, format)
	sc := startSidecar(t, writeConfig(t, cfg), nil)
	sc.waitReady("Guard")
	sc.filter.Forwarding = envoytest.Forwarding{MetadataNamespaces: []string{"envoy.filters.http.jwt_authn"}}
	return &auditScene{sc: sc, path: path}
}

// as sends body as the JWT subject sub, with an x-request-id.
func (a *auditScene) as(sub, requestID string, body []byte) *envoytest.Result {
	a.sc.t.Helper()
	req := mcpPost(body)
	req.Headers.Set("X-Request-Id", requestID)
	payload, err := structpb.NewStruct(map[string]any{"jwt_payload": map[string]any{"sub": sub}})
	if err != nil {
		a.sc.t.Fatal(err)
	}
	req.Info.DynamicMetadata = map[string]*structpb.Struct{"envoy.filters.http.jwt_authn": payload}
	return a.sc.exchange(req, upstream(nil, nil, nil))
}

// lines stops the sidecar (which writes what the audit logger holds) and
// returns the file's lines, each decoded.
func (a *auditScene) lines() []map[string]any {
	t := a.sc.t
	t.Helper()
	if err := a.sc.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	data, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[len(line)-1] != '\n' {
			t.Fatalf("audit line not ended by a newline: %q", line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// at returns the value at a dotted path of a decoded JSON object, or nil.
func at(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

// TestAuditFileJSON: through the strict fake Envoy, an allowed call, a call
// blocked by a plugin and one blocked by a rule each write exactly one JSON
// line to the audit file, in request order, with the verified caller, the
// decision and who made it; a tools/list writes none (include.lists off).
func TestAuditFileJSON(t *testing.T) {
	a := startAuditScene(t, "json")
	passed(t, a.as("alice", "req-allow", toolCall("safe", map[string]any{"q": 1})))
	passed(t, a.as("alice", "req-list", []byte(toolsList)))
	blockedBy(t, a.as("alice", "req-plugin", toolCall("block", nil)), "Guard")
	deniedByRule(t, a.as("bob", "req-rule", toolCall("danger", nil)), "no-danger")

	lines := a.lines()
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3 (allow, plugin block, rule deny; no tools/list): %v", len(lines), lines)
	}
	for i, want := range []struct {
		requestID, subject, target, decision, kind, name, code string
	}{
		{"req-allow", "alice", "safe", "allow", "", "", ""},
		{"req-plugin", "alice", "block", "deny", "plugin", "Guard", "GUARD_DENY"},
		{"req-rule", "bob", "danger", "deny", "rule", "no-danger", ""},
	} {
		e := lines[i]
		if id, ok := e["request_id"]; !ok {
			t.Logf("%s: %s: no request_id", want.requestID, processorSpanGap)
		} else if id != want.requestID {
			t.Errorf("request_id %v, want %s", id, want.requestID)
		}
		for _, f := range []struct {
			path []string
			want any
		}{
			{[]string{"jsonrpc_id"}, "1"},
			{[]string{"method"}, "tools/call"},
			{[]string{"target"}, want.target},
			{[]string{"phase"}, "request"},
			{[]string{"decision"}, want.decision},
			{[]string{"mode"}, "enforce"},
			{[]string{"caller", "subject"}, want.subject},
			{[]string{"caller", "source"}, "jwt_metadata"},
			{[]string{"caller", "verified"}, true},
		} {
			if got := at(e, f.path...); got != f.want {
				t.Errorf("%s: %v = %#v, want %#v", want.requestID, f.path, got, f.want)
			}
		}
		if want.kind != "" {
			if k, n := at(e, "decided_by", "kind"), at(e, "decided_by", "name"); k != want.kind || n != want.name {
				t.Errorf("%s: decided_by %v/%v, want %s/%s", want.requestID, k, n, want.kind, want.name)
			}
			if at(e, "error_code") == nil || at(e, "violation", "reason") == nil {
				t.Errorf("%s: a deny without error_code or violation.reason: %v", want.requestID, e)
			}
		} else if at(e, "decided_by") != nil || at(e, "violation") != nil {
			t.Errorf("%s: an allow names a decider or a violation: %v", want.requestID, e)
		}
		if want.code != "" && at(e, "violation", "code") != want.code {
			t.Errorf("%s: violation.code %v, want %s", want.requestID, at(e, "violation", "code"), want.code)
		}
		if ts, _ := e["time"].(string); ts == "" {
			t.Errorf("%s: no time", want.requestID)
		}
		if d, _ := e["duration_ns"].(float64); d <= 0 {
			t.Errorf("%s: duration_ns %v, want > 0", want.requestID, e["duration_ns"])
		}
		if h, _ := e["arguments_hash"].(string); len(h) != len("sha256:")+64 {
			t.Errorf("%s: arguments_hash %q, want sha256:<64 hex>", want.requestID, h)
		}
		if _, ok := e["arguments"]; ok {
			t.Errorf("%s: the event holds the arguments, want only their hash", want.requestID)
		}
	}
	// The plugin ran for the allowed call and the plugin's block (the rule
	// refused "danger" before any plugin was called).
	for i, want := range []string{"allow", "deny"} {
		ps, _ := lines[i]["plugins"].([]any)
		if len(ps) != 1 {
			t.Errorf("%s: plugins %v, want Guard's verdict", lines[i]["request_id"], lines[i]["plugins"])
			continue
		}
		p := ps[0].(map[string]any)
		if p["hook"] != string(cpex.ToolPreInvoke) || p["verdict"] != want {
			t.Errorf("%s: plugin verdict %v, want %s on %s", lines[i]["request_id"], p, want, cpex.ToolPreInvoke)
		}
	}
	if rs, _ := lines[2]["rules"].([]any); len(rs) != 1 || at(rs[0].(map[string]any), "name") != "no-danger" {
		t.Errorf("rule deny: rules %v, want no-danger", lines[2]["rules"])
	}
}

// TestAuditFileOCSF: with format ocsf each line is an OCSF API Activity
// (class 6003) carrying the caller, the operation and the outcome.
func TestAuditFileOCSF(t *testing.T) {
	a := startAuditScene(t, "ocsf")
	passed(t, a.as("alice", "req-allow", toolCall("safe", nil)))
	blockedBy(t, a.as("alice", "req-plugin", toolCall("block", nil)), "Guard")

	lines := a.lines()
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2: %v", len(lines), lines)
	}
	for i, want := range []struct {
		statusID, actionID float64
	}{{1, 1}, {2, 2}} {
		e := lines[i]
		for _, f := range []struct {
			path []string
			want any
		}{
			{[]string{"class_uid"}, 6003.0},
			{[]string{"category_uid"}, 6.0},
			{[]string{"activity_id"}, 99.0},
			{[]string{"type_uid"}, 600399.0},
			{[]string{"status_id"}, want.statusID},
			{[]string{"action_id"}, want.actionID},
			{[]string{"api", "operation"}, "tools/call"},
			{[]string{"actor", "user", "uid"}, "alice"},
			{[]string{"metadata", "product", "name"}, "mcp-extproc"},
			{[]string{"metadata", "correlation_uid"}, e["metadata"].(map[string]any)["correlation_uid"]},
		} {
			if got := at(e, f.path...); got != f.want {
				t.Errorf("line %d: %v = %#v, want %#v", i, f.path, got, f.want)
			}
		}
		if ts, _ := e["time"].(float64); ts <= 0 {
			t.Errorf("line %d: time %v, want milliseconds since the epoch", i, e["time"])
		}
		if v, _ := at(e, "metadata", "product", "version").(string); v == "" {
			t.Errorf("line %d: no metadata.product.version (the build's)", i)
		}
	}
	if got := at(lines[1], "policy", "name"); got != "Guard" {
		t.Errorf("blocked call: policy.name %v, want Guard", got)
	}
}

// stuckCollector is an OTLP logs collector whose first Export blocks until
// the test releases it: a sink provably stuck in a write.
type stuckCollector struct {
	collogs.UnimplementedLogsServiceServer
	addr    string
	entered chan struct{} // closed when the first Export has begun
	release chan struct{} // closed by the test: Exports return
	once    sync.Once

	mu       sync.Mutex
	exports  int // Exports begun
	returned int // Exports returned
	records  []*logspb.LogRecord
}

func startStuckCollector(t *testing.T) *stuckCollector {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &stuckCollector{addr: lis.Addr().String(), entered: make(chan struct{}), release: make(chan struct{})}
	gs := grpc.NewServer()
	collogs.RegisterLogsServiceServer(gs, c)
	done := make(chan struct{})
	go func() { defer close(done); gs.Serve(lis) }()
	t.Cleanup(func() { c.unblock(); gs.Stop(); <-done })
	return c
}

// unblock lets every Export return, now and later.
func (c *stuckCollector) unblock() { c.once.Do(func() { close(c.release) }) }

// Export implements collogs.LogsServiceServer: it records the request's
// log records once released.
func (c *stuckCollector) Export(ctx context.Context, req *collogs.ExportLogsServiceRequest) (*collogs.ExportLogsServiceResponse, error) {
	c.mu.Lock()
	c.exports++
	if c.exports == 1 {
		close(c.entered)
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.returned++
		c.mu.Unlock()
	}()
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			c.records = append(c.records, sl.GetLogRecords()...)
		}
	}
	return &collogs.ExportLogsServiceResponse{}, nil
}

// state is (Exports begun, Exports returned, records received).
func (c *stuckCollector) state() (int, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exports, c.returned, len(c.records)
}

// TestAuditSinkStuckNeverDelaysRequests: with the OTLP sink stuck in its
// first export (the collector holds it) and a queue of one, every call
// still completes, and its ext_proc stream ends, while the export is
// provably still in progress; the event after the stuck one waits in the
// queue, the rest are dropped and counted as queue_full, and once the
// collector answers the queued event goes out. Nothing here measures time:
// the proof is the order of events.
func TestAuditSinkStuckNeverDelaysRequests(t *testing.T) {
	col := startStuckCollector(t)
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	cfg := configYAML(pluginEntry("Guard", srv.URL(), "fail", "")) + fmt.Sprintf(`  audit:
    enabled: true
    sink: otlp
    otlp_endpoint: %s
    queue_size: 1
    write_timeout: 60
`, col.addr)
	sc := startSidecar(t, writeConfig(t, cfg), func(o *sidecar.Options) { o.OTLPInsecure = true })
	sc.waitReady("Guard")

	passed(t, sc.call("first", nil))
	select {
	case <-col.entered: // the sink is in its first write, held by the collector
	case <-time.After(waitTimeout):
		t.Fatal("the audit sink never exported the first event")
	}
	const more = 5
	for i := range more {
		passed(t, sc.call(fmt.Sprintf("call-%d", i), nil))
	}
	// Every call has completed, and the sink has not come back from its
	// first write: the requests did not wait for it.
	if exports, returned, _ := col.state(); exports != 1 || returned != 0 {
		t.Fatalf("collector: %d exports begun, %d returned; want the first still held", exports, returned)
	}
	// Every stream has ended too (an event is emitted as its stream ends,
	// after the answer went out: a sink that held the stream would keep it
	// open), one event waits in the queue, and the others were dropped,
	// each counted.
	sc.waitMetric(0, "mcp_extproc_streams_open")
	sc.waitMetric(more-1, "mcp_extproc_audit_dropped_total", "reason", "queue_full")
	if exports, returned, _ := col.state(); exports != 1 || returned != 0 {
		t.Fatalf("collector: %d exports begun, %d returned; want the first still held", exports, returned)
	}

	col.unblock()
	eventually(t, "the stuck event and the queued one exported", func() (bool, string) {
		exports, returned, records := col.state()
		return records == 2, fmt.Sprintf("%d exports, %d returned, %d records", exports, returned, records)
	})
	if got := sc.scrape().value("mcp_extproc_audit_dropped_total"); got != more-1 {
		t.Errorf("mcp_extproc_audit_dropped_total = %v, want %d (queue_full only)", got, more-1)
	}
	if err := sc.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, _, records := col.state(); records != 2 {
		t.Errorf("collector received %d records after shutdown, want 2", records)
	}
}

// TestAuditReload: a reload that changes extproc.audit applies and says
// that the sink needs a restart: the logger opened at start goes on as it
// was (the file, the json format); extproc.audit.include applies at once.
func TestAuditReload(t *testing.T) {
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	section := func(format string, lists bool) string {
		return configYAML(pluginEntry("Guard", srv.URL(), "fail", "")) + fmt.Sprintf(`  audit:
    enabled: true
    sink: file
    path: %s
    format: %s
    include: {lists: %v}
`, path, format, lists)
	}
	dir := newConfigMapDir(t, section("json", false))
	logs := &syncbuf.Buffer{}
	sc := startSidecar(t, dir.path(), func(o *sidecar.Options) {
		o.Logger = zerolog.New(zerolog.MultiLevelWriter(logs, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
	})
	sc.waitReady("Guard")
	passed(t, sc.exchange(mcpPost([]byte(toolsList)), upstream(nil, nil, nil))) // not audited

	dir.swap(section("ocsf", true))
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	if !strings.Contains(logs.String(), "extproc.audit changed: restart the sidecar to apply it") {
		t.Errorf("no log line says the audit change needs a restart:\n%s", logs.String())
	}
	passed(t, sc.exchange(mcpPost([]byte(toolsList)), upstream(nil, nil, nil))) // audited now
	a := &auditScene{sc: sc, path: path}
	lines := a.lines()
	if len(lines) != 1 || lines[0]["method"] != "tools/list" {
		t.Fatalf("audit lines %v, want one native json event of the second tools/list", lines)
	}
}

// TestShadowThroughTheSidecar: a rule in mode shadow, and extproc.shadow
// for a plugin's block, let the call through; the audit event and
// mcp_extproc_shadow_decisions_total say it would have been refused.
func TestShadowThroughTheSidecar(t *testing.T) {
	for _, tc := range []struct {
		name, extra, tool, by, who, mode string
	}{
		{"rule mode shadow", "    - name: no-search\n      deny: 'mcp.name == \"search\"'\n      mode: shadow\n", "search", "rule", "no-search", "enforce"},
		{"extproc.shadow", "  shadow: true\n", "block", "plugin", "Guard", "shadow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
			guard.SetFunc(byTool(map[string]pluginserver.HookFunc{
				"block": plugintest.Block(cpex.PluginViolation{Reason: "denied", Code: "GUARD_DENY"}),
			}))
			srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			cfg := configYAML(pluginEntry("Guard", srv.URL(), "fail", "")) + fmt.Sprintf("  audit: {enabled: true, sink: file, path: %s}\n", path)
			if strings.HasPrefix(tc.extra, "    - ") {
				cfg += "  rules:\n" + tc.extra
			} else {
				cfg += tc.extra
			}
			sc := startSidecar(t, writeConfig(t, cfg), nil)
			sc.waitReady("Guard")
			passed(t, sc.call(tc.tool, nil))
			sc.waitMetric(1, "mcp_extproc_shadow_decisions_total", "by", tc.by, "name", tc.who, "decision", "would_deny")
			lines := (&auditScene{sc: sc, path: path}).lines()
			if len(lines) != 1 {
				t.Fatalf("%d audit lines, want 1: %v", len(lines), lines)
			}
			e := lines[0]
			if e["decision"] != "would_deny" || e["mode"] != tc.mode || at(e, "decided_by", "name") != tc.who || e["error_code"] != nil {
				t.Errorf("event %v: want would_deny by %s in mode %s, no error code", e, tc.who, tc.mode)
			}
		})
	}
}
