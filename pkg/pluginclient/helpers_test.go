package pluginclient

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func ptr[T any](v T) *T { return &v }

func secs(d time.Duration) *config.Seconds { return &config.Seconds{Duration: d} }

// external returns a plugin config for url with a generous rebuild budget:
// 10 attempts, 20 ms base delay (a restarted test server is back within
// milliseconds).
func external(name, url string) config.Plugin {
	return config.Plugin{
		Name: name,
		Kind: "external",
		MCP: &config.MCP{
			Proto:             "STREAMABLEHTTP",
			URL:               url,
			ReconnectAttempts: ptr(10),
			ReconnectDelay:    secs(20 * time.Millisecond),
		},
	}
}

// newPool builds and starts a pool closed at the end of the test. Health
// checks are off unless opts sets them; logs go to the test log.
func newPool(t *testing.T, plugins []config.Plugin, opts Options) *Pool {
	t.Helper()
	if opts.HealthCheckInterval == 0 {
		opts.HealthCheckInterval = -1
	}
	if opts.Slots == 0 {
		opts.Slots = 1 // the counts of one session; the slot tests set more
	}
	if opts.MaxReconnectDelay == 0 {
		opts.MaxReconnectDelay = 100 * time.Millisecond
	}
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	p, err := NewPool(plugins, config.PluginSettings{}, opts)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	p.Start(context.Background())
	return p
}

// shared returns an HTTP client whose transport all sessions share: no
// pinning, so a call (or a ping) is what finds a dead session, and one
// session carries many calls at once. Its idle connections are closed at
// the end of the test.
func shared(t testing.TB) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

var testPayload = json.RawMessage(`{"name":"echo","args":{"text":"hi"}}`)

func testContext(id string) *cpex.PluginContext {
	return cpex.NewContext(cpex.GlobalContext{RequestID: id})
}

// invoke calls tool_pre_invoke on plugin with a 10 s deadline.
func invoke(p *Pool, plugin string) (*cpex.InvokeHookReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Invoke(ctx, plugin, cpex.ToolPreInvoke, testPayload, testContext("req-1"))
}

// mustInvoke fails the test unless the call succeeds with a result.
func mustInvoke(t *testing.T, p *Pool, plugin string) *cpex.InvokeHookReply {
	t.Helper()
	reply, err := invoke(p, plugin)
	if err != nil {
		t.Fatalf("Invoke(%s): %v", plugin, err)
	}
	if reply.Result == nil {
		t.Fatalf("Invoke(%s): reply without result: %+v", plugin, reply)
	}
	return reply
}

// eventually polls cond every 5 ms until it holds, failing after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recorder is an Observer that counts events.
type recorder struct {
	rebuilds, retriesOK, retriesFailed, healthOK, healthFailed atomic.Int64

	mu     sync.Mutex
	states [][2]State
}

func (r *recorder) OnRebuild(string) { r.rebuilds.Add(1) }

func (r *recorder) OnRetry(_ string, ok bool) {
	if ok {
		r.retriesOK.Add(1)
	} else {
		r.retriesFailed.Add(1)
	}
}

func (r *recorder) OnStateChange(_ string, from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, [2]State{from, to})
}

func (r *recorder) OnHealthCheck(_ string, ok bool) {
	if ok {
		r.healthOK.Add(1)
	} else {
		r.healthFailed.Add(1)
	}
}

func (r *recorder) transitions() [][2]State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][2]State(nil), r.states...)
}
