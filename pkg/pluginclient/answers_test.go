package pluginclient

import (
	"errors"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// A plugin's answer about one call — a tool error, an unparsable reply, an
// HTTP refusal of that request — reaches the plugin exactly once: it is the
// call's error, never a reason to retry or to rebuild the session. The next
// call works, on the same session where the answer left it usable.
func TestAnswerIsNotRetried(t *testing.T) {
	cases := []struct {
		fault   plugintest.Fault
		invalid bool // the error wraps ErrInvalidReply
		// sameSession: the next call reuses the session (no initialize). A
		// JSON body that is not JSON-RPC breaks the go-sdk connection, so
		// the next call must connect anew (without calling the plugin
		// twice).
		sameSession bool
	}{
		{plugintest.ToolError, true, true},
		{plugintest.TextGarbage, true, true},
		{plugintest.NoResult, true, true},
		{plugintest.BodyGarbage, true, false},
		{plugintest.Status413, false, true},
		{plugintest.Status431, false, true},
		{plugintest.Status400, false, true},
		{plugintest.Status500, false, true},
	}
	for _, c := range cases {
		t.Run(c.fault.String(), func(t *testing.T) {
			srv := plugintest.Start(t, pluginserver.New(plugintest.NewScripted("guard")).Handler, plugintest.NotFoundJSON32600)
			pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{})
			mustInvoke(t, pool, "guard")
			before := srv.InvokeHooks()

			srv.SetFault(c.fault)
			_, err := invoke(pool, "guard")
			if err == nil {
				t.Fatal("faulty answer gave no error")
			}
			if got := srv.InvokeHooks() - before; got != 1 {
				t.Errorf("plugin called %d times for one hook, want 1 (err: %v)", got, err)
			}
			if errors.Is(err, ErrInvalidReply) != c.invalid {
				t.Errorf("errors.Is(%v, ErrInvalidReply) = %v, want %v", err, !c.invalid, c.invalid)
			}
			if errors.Is(err, ErrPluginDown) {
				t.Errorf("err = %v: an answer is not a plugin outage", err)
			}

			srv.SetFault(plugintest.NoFault)
			mustInvoke(t, pool, "guard")
			if got := srv.InvokeHooks() - before; got != 2 {
				t.Errorf("plugin called %d times for two hooks, want 2", got)
			}
			if c.sameSession {
				if n := srv.Initializes(); n != 1 {
					t.Errorf("initializes = %d, want 1 (same session)", n)
				}
				if st := pool.Stats("guard"); st.Rebuilds != 0 || st.Retries != 0 {
					t.Errorf("stats = %+v, want no rebuild and no retry", st)
				}
			}
		})
	}
}

// A session that really died (the listener went away and came back with an
// empty session store) is still rebuilt and the call retried once.
func TestDeadSessionStillRetriedOnce(t *testing.T) {
	for _, f := range plugintest.Flavours() {
		t.Run(f.String(), func(t *testing.T) {
			plug := plugintest.NewScripted("guard")
			srv := plugintest.Start(t, pluginserver.New(plug).Handler, f)
			// Shared transport: the call finds the dead session (a pinned
			// one notices the closed connection first; see pin_test.go).
			pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{HTTPClient: shared(t)})
			mustInvoke(t, pool, "guard")
			srv.Restart()
			mustInvoke(t, pool, "guard")
			// The stale session was refused by the server's HTTP layer (or
			// the request died with its connection): the plugin ran once,
			// on the new session.
			if got := plug.CallCount(); got != 2 {
				t.Errorf("plugin ran %d times for two hooks, want 2", got)
			}
			st := pool.Stats("guard")
			if st.Rebuilds != 1 || st.Retries != 1 || st.RetryFailures != 0 {
				t.Errorf("stats = %+v, want 1 rebuild, 1 good retry", st)
			}
			if n := srv.Initializes(); n != 2 {
				t.Errorf("initializes = %d, want 2", n)
			}
		})
	}
}

// A rebuild never fails the calls in flight on the replaced session because
// of the rebuild itself: they finish there, and the plugin runs once each.
func TestRebuildLetsCallsInFlightFinish(t *testing.T) {
	const slow = 10
	plug := plugintest.NewScripted("guard")
	srv := plugintest.Start(t, pluginserver.New(plug).Handler, plugintest.GoSDK)
	// One shared-transport session carrying all the slow calls at once.
	pool := newPool(t, []config.Plugin{external("guard", srv.URL())}, Options{HTTPClient: shared(t)})
	mustInvoke(t, pool, "guard")

	release := make(chan struct{})
	plug.SetFunc(plugintest.WaitFor(release, nil))
	plug.Reset()
	errs := make(chan error, slow)
	for range slow {
		go func() {
			_, err := invoke(pool, "guard")
			errs <- err
		}()
	}
	eventually(t, "slow calls in flight", func() bool { return plug.CallCount() == slow })

	// A 503 says the session is gone: rebuild while the slow calls run.
	plug.SetFunc(nil)
	srv.SetFaultOnce(plugintest.Status503)
	mustInvoke(t, pool, "guard")
	if st := pool.Stats("guard"); st.Rebuilds != 1 || st.Connects != 2 {
		t.Fatalf("stats = %+v, want one rebuild", st)
	}

	close(release)
	for range slow {
		if err := <-errs; err != nil {
			t.Errorf("call in flight during the rebuild failed: %v", err)
		}
	}
	// slow calls once each, plus the retried call on the new session.
	if got := plug.CallCount(); got != slow+1 {
		t.Errorf("plugin ran %d times, want %d (no call ran twice)", got, slow+1)
	}
}
