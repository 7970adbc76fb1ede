package pluginclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The per-plugin Client on its own: no plugin name passed twice, the merged
// config and its generation, state and stats, Close.
func TestClient(t *testing.T) {
	plug := plugintest.NewScripted("guard")
	plug.SetConfig(pluginserver.Config{Priority: ptr(7)})
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, plug)
	rec := &recorder{}
	c, err := New(external("guard", srv.URL()), config.PluginSettings{}, Options{HealthCheckInterval: -1, Observer: rec, Slots: 1, HTTPClient: shared(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "guard" || c.Generation() != 0 || c.Effective().Priority != nil {
		t.Fatalf("before Start: name %q, generation %d, effective %+v", c.Name(), c.Generation(), c.Effective())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Invoke(ctx, cpex.ToolPreInvoke, testPayload, nil); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Invoke before Start = %v, want ErrNotStarted", err)
	}
	c.Start(context.Background())
	reply, err := c.Invoke(ctx, cpex.ToolPreInvoke, testPayload, testContext("r"))
	if err != nil || reply.Result == nil {
		t.Fatalf("Invoke = %+v, %v", reply, err)
	}
	if c.State() != Ready || c.Generation() != 1 || c.Effective().Priority == nil || *c.Effective().Priority != 7 {
		t.Errorf("after connect: state %v, generation %d, effective priority %v", c.State(), c.Generation(), c.Effective().Priority)
	}
	srv.Restart()
	if _, err := c.Invoke(ctx, cpex.ToolPreInvoke, testPayload, nil); err != nil {
		t.Fatal(err)
	}
	// The same remote config after a rebuild: the generation stays.
	st := c.Stats()
	if c.Generation() != 1 || st.Connects != 2 || st.Rebuilds != 1 || st.Retries != 1 || st.RetryFailures != 0 {
		t.Errorf("generation %d, stats %+v", c.Generation(), st)
	}
	// Each event reached the observer once, as the counters saw it.
	if rec.rebuilds.Load() != 1 || rec.retriesOK.Load() != 1 {
		t.Errorf("observer: %d rebuilds, %d good retries; want 1, 1", rec.rebuilds.Load(), rec.retriesOK.Load())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Invoke(ctx, cpex.ToolPreInvoke, testPayload, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Invoke after Close = %v, want ErrClosed", err)
	}
}
