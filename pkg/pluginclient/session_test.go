package pluginclient

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// Acceptance 1: a plugin server restarted with an empty session store is
// recovered transparently, whatever way it answers the stale session
// (plugin-protocol.md §5).
func TestRestartRecoversSession(t *testing.T) {
	type tc struct {
		flavour plugintest.Flavour
		json    bool // application/json answers instead of SSE
	}
	var cases []tc
	for _, f := range plugintest.Flavours() {
		cases = append(cases, tc{flavour: f})
	}
	cases = append(cases, tc{flavour: plugintest.GoSDK, json: true}, tc{flavour: plugintest.NotFoundJSON32600, json: true})
	for _, c := range cases {
		name := c.flavour.String()
		if c.json {
			name += "/json"
		}
		t.Run(name, func(t *testing.T) {
			plug := plugintest.NewScripted("guard")
			srv := plugintest.StartPlugins(t, c.flavour, &pluginserver.Options{JSONResponse: c.json}, plug)
			rec := &recorder{}
			// Shared transport: the call finds the dead session (a pinned
			// one notices the closed connection first; see pin_test.go).
			pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{Observer: rec, HTTPClient: shared(t)})
			for range 3 {
				mustInvoke(t, pool, "guard")
			}
			if n := srv.Initializes(); n != 1 {
				t.Fatalf("initializes before restart = %d, want 1 (one shared session)", n)
			}

			srv.Restart()
			mustInvoke(t, pool, "guard") // the founding bug: this call used to fail

			if n := srv.Initializes(); n != 2 {
				t.Errorf("initializes = %d, want 2", n)
			}
			st := pool.Stats("guard")
			if st.Rebuilds != 1 || st.Retries != 1 || st.RetryFailures != 0 || st.Connects != 2 || st.State != Ready {
				t.Errorf("stats = %+v, want 1 rebuild, 1 retry, 0 retry failures, 2 connects, ready", st)
			}
			if rec.rebuilds.Load() != 1 || rec.retriesOK.Load() != 1 {
				t.Errorf("observer saw %d rebuilds, %d good retries; want 1, 1", rec.rebuilds.Load(), rec.retriesOK.Load())
			}
			// The new session started with a full initialize without the
			// stale id, and the dead session got no DELETE.
			var sawInit bool
			for _, r := range srv.Requests() {
				if r.Method == http.MethodDelete {
					t.Errorf("DELETE sent for session %q", r.SessionID)
				}
				if slices.Contains(r.RPCMethods, "initialize") {
					if r.SessionID != "" {
						t.Errorf("initialize carried stale session id %q", r.SessionID)
					}
					sawInit = true
				}
			}
			if !sawInit {
				t.Error("no initialize recorded after restart")
			}
			if got := plug.CallCount(); got < 4 {
				t.Errorf("plugin saw %d calls, want ≥ 4", got)
			}
		})
	}
}

// Acceptance 2: many callers, repeated restarts: no call fails, and each
// restart costs exactly one initialize.
func TestRestartUnderLoad(t *testing.T) {
	const (
		callers  = 50
		restarts = 5
	)
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.NotFoundJSON32600, nil, plug)
	pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{})
	mustInvoke(t, pool, "guard")

	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		calls    atomic.Int64
		failures atomic.Int64
		firstErr atomic.Pointer[error]
		// started[i] is when caller i's last completed call started.
		started [callers]atomic.Int64
	)
	for i := range callers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now().UnixNano()
				if _, err := invoke(pool, "guard"); err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
				started[i].Store(t0)
				calls.Add(1)
			}
		})
	}
	stopCallers := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopCallers() // also on t.Fatal
	// settle waits until every caller finished a call started on the
	// current session, so that no call spans two restarts (a call is
	// retried once, not once per restart) and the load hits every session.
	settle := func() {
		mark := time.Now().UnixNano()
		eventually(t, "a call by every caller on the current session", func() bool {
			for i := range started {
				if started[i].Load() <= mark {
					return false
				}
			}
			return true
		})
	}
	for i := range restarts {
		settle()
		srv.Restart()
		eventually(t, "rebuild after restart", func() bool { return pool.Stats("guard").Connects == uint64(i+2) })
	}
	settle()
	stopCallers()

	if n := failures.Load(); n != 0 {
		t.Errorf("%d of %d calls failed; first: %v", n, calls.Load(), *firstErr.Load())
	}
	if n := srv.Initializes(); n != 1+restarts {
		t.Errorf("initializes = %d, want %d (one per restart)", n, 1+restarts)
	}
	st := pool.Stats("guard")
	if st.Rebuilds != restarts || st.CircuitOpens != 0 {
		t.Errorf("stats = %+v, want %d rebuilds, no circuit opening", st, restarts)
	}
	t.Logf("%d calls, stats %+v", calls.Load(), st)
}

// Acceptance 3: a plugin gone for good opens the circuit; calls then fail at
// once with ErrPluginDown; when it comes back, the same pool recovers.
func TestOutageOpensCircuitAndRecovers(t *testing.T) {
	const timeout = 2 * time.Second
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	pl := external("guard", srv.URL())
	pl.MCP.ReconnectAttempts = ptr(2)
	rec := &recorder{}
	pool := newPool(t, []config.Plugin{pl}, Options{PluginTimeout: timeout, MaxReconnectDelay: 50 * time.Millisecond, Observer: rec})
	mustInvoke(t, pool, "guard")

	srv.Stop()
	if _, err := invoke(pool, "guard"); !errors.Is(err, ErrPluginDown) {
		t.Fatalf("call after kill = %v, want ErrPluginDown", err)
	}
	if s := pool.State("guard"); s != Down {
		t.Fatalf("State = %v, want down", s)
	}
	for range 20 {
		start := time.Now()
		_, err := pool.Invoke(context.Background(), "guard", cpex.ToolPreInvoke, testPayload, testContext("r"))
		if el := time.Since(start); el >= timeout/10 {
			t.Fatalf("call with open circuit took %v, want < %v", el, timeout/10)
		}
		if !errors.Is(err, ErrPluginDown) {
			t.Fatalf("call with open circuit = %v, want ErrPluginDown", err)
		}
	}

	srv.Restart()
	eventually(t, "plugin back", func() bool {
		_, err := invoke(pool, "guard")
		return err == nil
	})
	st := pool.Stats("guard")
	if st.State != Ready || st.CircuitOpens != 1 {
		t.Errorf("stats = %+v, want ready after one circuit opening", st)
	}
	want := [][2]State{{Connecting, Ready}, {Ready, Down}, {Down, Ready}}
	if got := rec.transitions(); !slices.Equal(got, want) {
		t.Errorf("transitions = %v, want %v", got, want)
	}
}

// Acceptance 4: a plugin that accepts and never answers ends the call at the
// plugin timeout, and Close leaves no goroutine behind.
func TestHangingPluginTimesOut(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	const timeout = 300 * time.Millisecond
	pool, err := NewPool([]config.Plugin{external("guard", srv.URL())}, config.PluginSettings{PluginTimeout: secs(timeout)},
		Options{HealthCheckInterval: -1, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool.Start(context.Background())
	mustInvoke(t, pool, "guard")

	srv.SetHang(true)
	start := time.Now()
	_, err = pool.Invoke(context.Background(), "guard", cpex.ToolPreInvoke, testPayload, testContext("r"))
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging call = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if elapsed < timeout || elapsed > timeout+5*time.Second {
		t.Errorf("hanging call ended after %v, want about %v", elapsed, timeout)
	}
	// A caller deadline shorter than the plugin timeout wins.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = pool.Invoke(ctx, "guard", cpex.ToolPreInvoke, testPayload, testContext("r"))
	cancel()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("call with short deadline = %v, want ErrTimeout", err)
	}
	// A slow plugin is not a lost session: no retry, no circuit. (HTTP/1.1
	// cannot abandon a request but by closing its connection, so the
	// pinned session is replaced in the background.)
	if st := pool.Stats("guard"); st.Retries != 0 || st.CircuitOpens != 0 {
		t.Errorf("stats = %+v: a slow plugin is not a lost session", st)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := invoke(pool, "guard"); !errors.Is(err, ErrClosed) {
		t.Errorf("Invoke after Close = %v, want ErrClosed", err)
	}
	srv.Stop()
	goleak.VerifyNone(t, ignore)
}

// Acceptance 5: a plugin that is down when the pool starts does not block
// Start; it is used as soon as it comes up.
func TestStartWhilePluginDown(t *testing.T) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	srv.Stop()
	pl := external("guard", srv.URL())
	pl.MCP.ReconnectAttempts = ptr(1)

	start := time.Now()
	pool := newPool(t, []config.Plugin{pl}, Options{})
	if el := time.Since(start); el > time.Second {
		t.Errorf("Start took %v with the plugin down", el)
	}
	if s := pool.State("guard"); s == Ready {
		t.Fatalf("State = %v with the plugin down", s)
	}
	eventually(t, "circuit open", func() bool { return pool.State("guard") == Down })
	if _, err := invoke(pool, "guard"); !errors.Is(err, ErrPluginDown) {
		t.Fatalf("call while down = %v, want ErrPluginDown", err)
	}
	if got := pool.States(); got["guard"] != Down {
		t.Errorf("States = %v", got)
	}

	srv.Restart()
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	mustInvoke(t, pool, "guard")
}

// Acceptance 6: health checks find a dead session before any request does.
func TestHealthCheckRebuildsDeadSession(t *testing.T) {
	plug := plugintest.NewScripted("guard")
	srv := plugintest.StartPlugins(t, plugintest.NotFoundJSON32001, nil, plug)
	rec := &recorder{}
	pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{HealthCheckInterval: 20 * time.Millisecond, Observer: rec, HTTPClient: shared(t)})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	eventually(t, "a good health check", func() bool { return pool.Stats("guard").HealthChecksOK > 0 })

	srv.Restart()
	eventually(t, "rebuild by health check", func() bool {
		st := pool.Stats("guard")
		return st.Rebuilds == 1 && st.Connects == 2 && st.State == Ready
	})
	st := pool.Stats("guard")
	if st.HealthChecksFailed == 0 || rec.healthFailed.Load() == 0 {
		t.Errorf("stats = %+v: the failed ping was not counted", st)
	}
	if plug.CallCount() != 0 {
		t.Fatalf("plugin saw %d calls, want none", plug.CallCount())
	}
	mustInvoke(t, pool, "guard")
	if st := pool.Stats("guard"); st.Retries != 0 {
		t.Errorf("Retries = %d: the request found the dead session", st.Retries)
	}
	if n := srv.Initializes(); n != 2 {
		t.Errorf("initializes = %d, want 2", n)
	}
}
