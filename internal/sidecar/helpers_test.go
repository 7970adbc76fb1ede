package sidecar_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

func TestMain(m *testing.M) {
	if os.Getenv(stdioChildEnv) != "" { // a STDIO plugin child (stdio_test.go)
		os.Exit(stdioChild())
	}
	goleak.VerifyTestMain(m)
}

// The tests run the production wiring (sidecar.Run) in-process: real plugin
// servers on loopback (internal/plugintest), the strict fake Envoy over real
// gRPC (internal/envoytest), and the admin server over real HTTP.

// waitTimeout bounds every wait for something that must happen; a test that
// reaches it fails. It is a deadline, never a measurement.
const waitTimeout = 15 * time.Second

// messageTimeout is Envoy's message_timeout in the tests: far above every
// plugin deadline, so a processor that waits too long fails as a 504.
const messageTimeout = 10 * time.Second

// upstreamResult is what the fake MCP server answers to every tools/call.
const upstreamResult = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`

// pluginEntry renders one cpex plugin entry; extra is appended verbatim
// (indented keys such as conditions).
func pluginEntry(name, url, onError, extra string) string {
	return fmt.Sprintf(`  - name: %s
    kind: external
    hooks: [tool_pre_invoke]
    mode: sequential
    on_error: %s
    mcp:
      proto: STREAMABLEHTTP
      url: %s
      reconnect_attempts: 1
      reconnect_delay: 0.05
%s`, name, onError, url, extra)
}

// configYAML renders a whole config file with the given plugin entries.
func configYAML(entries ...string) string {
	return "plugins:\n" + strings.Join(entries, "") + `plugin_settings:
  plugin_timeout: 2
  plugin_health_check_interval: 3600
extproc:
  plugin_sessions: 1
`
}

// writeConfig writes a plain config file into a temporary directory.
func writeConfig(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// configMapDir lays a config file out the way the kubelet mounts a
// ConfigMap volume: dir/..<timestamp>/plugins.yaml holds the data,
// dir/..data links to the current timestamped directory, and
// dir/plugins.yaml links to ..data/plugins.yaml.
type configMapDir struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	t.Helper()
	d := &configMapDir{t: t, dir: t.TempDir()}
	ts := d.writeVersion(content)
	if err := os.Symlink(ts, filepath.Join(d.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "plugins.yaml"), d.path()); err != nil {
		t.Fatal(err)
	}
	return d
}

// path is the file the sidecar is given.
func (d *configMapDir) path() string { return filepath.Join(d.dir, "plugins.yaml") }

// writeVersion writes content into a new timestamped directory and returns
// its name (relative to dir).
func (d *configMapDir) writeVersion(content string) string {
	d.t.Helper()
	d.n++
	ts := fmt.Sprintf("..2026_01_02_15_04_05.%09d_%d", time.Now().Nanosecond(), d.n)
	if err := os.Mkdir(filepath.Join(d.dir, ts), 0o700); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, ts, "plugins.yaml"), []byte(content), 0o600); err != nil {
		d.t.Fatal(err)
	}
	return ts
}

// swap publishes content as the kubelet does: a new timestamped directory,
// then a temporary symlink renamed atomically over ..data.
func (d *configMapDir) swap(content string) {
	d.t.Helper()
	ts := d.writeVersion(content)
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

// running is one sidecar.Run in a goroutine, with clients of its servers.
type running struct {
	t        testing.TB
	grpcAddr string
	adminURL string
	filter   envoytest.Filter
	http     *http.Client
	cancel   context.CancelFunc
	done     chan error
	closeExt io.Closer
}

// startSidecar loads the config at path and runs the sidecar on loopback
// with short poll intervals; mod may change the options. The sidecar is
// stopped in t.Cleanup, which fails the test if Run does not return nil.
func startSidecar(t testing.TB, path string, mod func(*sidecar.Options)) *running {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	started := make(chan [2]net.Addr, 1)
	opts := sidecar.Options{
		Config:             cfg,
		ConfigPath:         path,
		GRPCAddr:           "127.0.0.1:0",
		AdminAddr:          "127.0.0.1:0",
		Logger:             zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel),
		GracePeriod:        10 * time.Second,
		ReadyCheckInterval: 20 * time.Millisecond,
		ReloadInterval:     50 * time.Millisecond,
		Started:            func(g, a net.Addr) { started <- [2]net.Addr{g, a} },
	}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- sidecar.Run(ctx, opts) }()
	var addrs [2]net.Addr
	select {
	case addrs = <-started:
	case err := <-r.done:
		cancel()
		t.Fatalf("Run returned before starting: %v", err)
	case <-time.After(waitTimeout):
		cancel()
		t.Fatal("sidecar did not start")
	}
	tr := &http.Transport{}
	r.http = &http.Client{Transport: tr, Timeout: waitTimeout}
	r.grpcAddr = addrs[0].String()
	r.adminURL = "http://" + addrs[1].String()
	client, closer, err := envoytest.Dial(r.grpcAddr)
	if err != nil {
		cancel()
		<-r.done
		t.Fatalf("dial: %v", err)
	}
	r.closeExt = closer
	r.filter = envoytest.Filter{Client: client, AllowModeOverride: true, MessageTimeout: messageTimeout}
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
		closer.Close()
		tr.CloseIdleConnections()
	})
	return r
}

// stop cancels Run's context and waits for Run to return; it may be called
// more than once.
func (r *running) stop() error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(waitTimeout):
		return fmt.Errorf("Run did not return within %v of its context ending", waitTimeout)
	}
}

// toolCall is a tools/call request body.
func toolCall(tool string, args map[string]any) []byte {
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// mcpPost is an MCP POST to /mcp carrying body.
func mcpPost(body []byte) *envoytest.Request {
	return &envoytest.Request{
		Method: http.MethodPost,
		Path:   "/mcp",
		Headers: http.Header{
			"Content-Type": {"application/json"},
			"Accept":       {"application/json, text/event-stream"},
		},
		Body: [][]byte{body},
	}
}

// upstream answers every request with upstreamResult and reports what it
// received on seen (if not nil). When hold is not nil, it first signals
// arrived (if not nil) and waits for hold to close.
func upstream(seen chan<- *envoytest.UpstreamRequest, arrived chan<- struct{}, hold <-chan struct{}) envoytest.Upstream {
	return func(ctx context.Context, req *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		if seen != nil {
			seen <- req
		}
		if hold != nil {
			if arrived != nil {
				close(arrived)
			}
			select {
			case <-hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &envoytest.UpstreamResponse{
			Status:  http.StatusOK,
			Headers: http.Header{"Content-Type": {"application/json"}},
			Body:    [][]byte{[]byte(upstreamResult)},
		}, nil
	}
}

// exchange runs one HTTP exchange through the fake Envoy and fails the test
// on anything Envoy would report as an error.
func (r *running) exchange(req *envoytest.Request, up envoytest.Upstream) *envoytest.Result {
	r.t.Helper()
	res, err := r.do(req, up)
	if err != nil {
		r.t.Fatalf("Do: %v", err)
	}
	if res.LocalError != "" || res.Reset || res.StreamErr != nil {
		r.t.Fatalf("exchange failed as Envoy would fail it: %s (%s), reset %v, stream error %v; notes %q",
			res.LocalError, res.Details, res.Reset, res.StreamErr, res.Notes)
	}
	return res
}

func (r *running) do(req *envoytest.Request, up envoytest.Upstream) (*envoytest.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*messageTimeout)
	defer cancel()
	return r.filter.Do(ctx, req, up)
}

// call sends a tools/call for tool and returns the result.
func (r *running) call(tool string, args map[string]any) *envoytest.Result {
	r.t.Helper()
	return r.exchange(mcpPost(toolCall(tool, args)), upstream(nil, nil, nil))
}

// rpcError is the JSON-RPC error of a response body, if any.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// refusal returns the JSON-RPC error the client received; it fails the test
// when the answer is not an HTTP 200 carrying a JSON-RPC error with id 1.
func refusal(t *testing.T, res *envoytest.Result) rpcError {
	t.Helper()
	var body struct {
		ID    json.RawMessage `json:"id"`
		Error *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(res.Body, &body); err != nil || body.Error == nil {
		t.Fatalf("want a JSON-RPC error, got status %d body %q (upstream called: %v)", res.Status, res.Body, res.UpstreamRequest != nil)
	}
	if res.Status != http.StatusOK || string(body.ID) != "1" {
		t.Fatalf("want HTTP 200 with id 1, got status %d body %s", res.Status, res.Body)
	}
	if res.UpstreamRequest != nil {
		t.Fatalf("refused request reached the upstream")
	}
	return *body.Error
}

// passed fails the test unless the exchange reached the upstream and the
// client got its answer unchanged.
func passed(t *testing.T, res *envoytest.Result) {
	t.Helper()
	if res.UpstreamRequest == nil || res.Status != http.StatusOK || string(res.Body) != upstreamResult {
		t.Fatalf("want the upstream's answer, got status %d body %q (upstream called: %v)", res.Status, res.Body, res.UpstreamRequest != nil)
	}
}

// get fetches an admin URL path and returns the status and body.
func (r *running) get(path string) (int, []byte, error) {
	resp, err := r.http.Get(r.adminURL + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// readyz is the decoded /readyz answer.
type readyz struct {
	Ready   bool `json:"ready"`
	Plugins map[string]struct {
		State      string `json:"state"`
		Started    bool   `json:"started"`
		GatesReady bool   `json:"gates_readiness"`
	} `json:"plugins"`
}

func (r *running) readyz() (int, readyz) {
	r.t.Helper()
	code, body, err := r.get("/readyz")
	if err != nil {
		r.t.Fatalf("GET /readyz: %v", err)
	}
	var rz readyz
	if err := json.Unmarshal(body, &rz); err != nil {
		r.t.Fatalf("GET /readyz: status %d, body %q: %v", code, body, err)
	}
	if rz.Ready != (code == http.StatusOK) {
		r.t.Fatalf("GET /readyz: status %d but body says ready=%v", code, rz.Ready)
	}
	return code, rz
}

// waitReady waits until /readyz answers 200 and every named plugin is
// in state "ready".
func (r *running) waitReady(plugins ...string) {
	r.t.Helper()
	eventually(r.t, "sidecar ready with plugins "+strings.Join(plugins, ", "), func() (bool, string) {
		code, rz := r.readyz()
		if code != http.StatusOK {
			return false, fmt.Sprintf("status %d: %+v", code, rz)
		}
		for _, p := range plugins {
			if rz.Plugins[p].State != "ready" {
				return false, fmt.Sprintf("%s: %+v", p, rz.Plugins[p])
			}
		}
		return true, ""
	})
}

// metrics is one scrape of /metrics.
type metrics map[string]*dto.MetricFamily

func (r *running) scrape() metrics {
	r.t.Helper()
	resp, err := r.http.Get(r.adminURL + "/metrics")
	if err != nil {
		r.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET /metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		r.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the series of name whose labels include the
// given name/value pairs, summed over the matching series (counters,
// gauges, untyped; the sample count of histograms). Absent series are 0.
func (m metrics) value(name string, labels ...string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, mt := range f.GetMetric() {
		if !hasLabels(mt, labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			sum += mt.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			sum += mt.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			sum += float64(mt.GetHistogram().GetSampleCount())
		default:
			sum += mt.GetUntyped().GetValue()
		}
	}
	return sum
}

// has reports whether a series of name with the given labels exists.
func (m metrics) has(name string, labels ...string) bool {
	f, ok := m[name]
	if !ok {
		return false
	}
	for _, mt := range f.GetMetric() {
		if hasLabels(mt, labels) {
			return true
		}
	}
	return false
}

func hasLabels(mt *dto.Metric, labels []string) bool {
	if len(labels)%2 != 0 {
		panic("labels must be name/value pairs")
	}
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, lp := range mt.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitMetric waits until the series reaches want.
func (r *running) waitMetric(want float64, name string, labels ...string) {
	r.t.Helper()
	eventually(r.t, fmt.Sprintf("%s%v = %v", name, labels, want), func() (bool, string) {
		got := r.scrape().value(name, labels...)
		return got == want, fmt.Sprintf("got %v", got)
	})
}

// health asks the gRPC health service about service on a fresh connection.
func (r *running) health(service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	conn, err := grpc.NewClient(r.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return 0, err
	}
	return resp.GetStatus(), nil
}

// eventually polls cond until it holds, failing the test with cond's last
// explanation after waitTimeout.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// byTool is a plugin script that dispatches on the tool name of a
// tool_pre_invoke payload; tools not in the map continue unchanged.
func byTool(scripts map[string]pluginserver.HookFunc) pluginserver.HookFunc {
	return func(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		var p cpex.ToolPreInvokePayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		if fn, ok := scripts[p.Name]; ok {
			return fn(ctx, hook, payload, pctx)
		}
		return nil, nil
	}
}
